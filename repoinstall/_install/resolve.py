"""One resolution for a batch of trees, before anything is installed: every artifact the batch needs, each named by
its sha256, so that only the distributions the store lacks are installed (``--no-deps``, hash-checked).

The installer resolves, as it would for ``pip install a b c``: pip with ``install --dry-run --report`` (which
downloads into its cache what the install then takes from there), uv with ``pip compile --format pylock.toml``
(read here as any lock file is, for this interpreter's markers and tags, so each package is the one file it
would install). What comes back are pins (:class:`~repoinstall._disk.pin.Pin`), one artifact each, by its URL
(none where the installer named none) and sha256; ``None`` where the resolution failed or some artifact has no
hash: the trees are then installed one by one, as before the store, each by its own installer run.

Which of the batch's distributions each tree holds is told afterwards, from the stored distributions' own
``Requires-Dist`` (:mod:`repoinstall._store.requires`): the batch's resolution is one consistent set, so each
tree's part of it satisfies that tree, as ``pip install a b c`` satisfies each of a, b and c.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from .. import _log
from .._disk.pin import Pin
from .._errors import InstallError, RepoinstallError
from .._options import InstallOptions

_RESOLUTION = "resolution.json"
_INPUT = "batch.in"


def resolve(options: InstallOptions, pins: Sequence[str], scratch: str, what: str) -> list[Pin] | None:
    """The pin of every artifact that installing ``pins`` (``name==version`` specs) together takes, or ``None``
    (see above)."""
    from .backends.run import backend, run

    chosen = backend(options.installer)
    source = os.path.join(scratch, _INPUT)
    with open(source, "w", encoding="utf-8") as handle:
        handle.write("".join(pin + "\n" for pin in pins))  # validated pins, nothing user-shaped
    env = chosen.environment(options)
    env.update(TMPDIR=scratch, TEMP=scratch, TMP=scratch)
    command = _uv_command(options, source, scratch) if chosen.name == "uv" else _pip_command(options, source, scratch)
    try:
        run(command, env, options.timeout, what, chosen.name, announce=False, doing="resolve")
    except InstallError as error:
        # Trees that cannot be resolved together (conflicting pins, say) are each resolved by their own install,
        # whose error, if any, is the one to show.
        _log.logger().debug("%s: no resolution together (%s); installing one by one", what, str(error).splitlines()[0])
        return None
    found = _uv_pins(scratch) if chosen.name == "uv" else _pip_pins(scratch)
    if found is None:
        _log.logger().debug("%s: some artifact of the resolution has no hash; installing one by one", what)
    return found


def _pip_command(options: InstallOptions, source: str, scratch: str) -> list[str]:
    from .backends.pip import index_lines, options_args

    return [
        options.python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--target",
        os.path.join(scratch, "unused"), "--no-input", "--disable-pip-version-check", *options_args(options),
        *index_lines(options, scratch), "--report", os.path.join(scratch, _RESOLUTION), "-r", source,
    ]  # fmt: skip


def _pip_pins(scratch: str) -> list[Pin] | None:
    from .._disk.identity import canonical_name
    from .backends.pip import artifacts

    try:
        with open(os.path.join(scratch, _RESOLUTION), "rb") as handle:
            found = artifacts(json.load(handle))
    except (OSError, ValueError):
        return None
    if any(not artifact.sha256 for artifact in found):
        return None
    return [Pin(canonical_name(a.name), a.version, a.url, (f"sha256:{a.sha256}",)) for a in found] or None


def _uv_command(options: InstallOptions, source: str, scratch: str) -> list[str]:
    from .backends.uv import LOCK, UV, _binary

    return [_binary(), "pip", "compile", *UV._common(options, scratch), "--quiet", "--format", LOCK, "-o",
            os.path.join(scratch, LOCK), source]  # fmt: skip


def _uv_pins(scratch: str) -> list[Pin] | None:
    from .._lockfile.read import read_lock
    from .backends.uv import LOCK

    try:
        # uv's own lock of the operator's sources (its file: URLs are in their find-links): not an input to police.
        lock = read_lock(os.path.join(scratch, LOCK), roots=None)
    except RepoinstallError:
        return None
    if any(not package.hashes for package in lock.packages):
        return None
    return [Pin(p.name, p.version, p.url or "", p.hashes) for p in lock.packages] or None
