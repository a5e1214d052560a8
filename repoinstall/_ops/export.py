"""``export``: installed trees as a PEP 751 lock file (``pylock.toml``), from what their records say was installed.

Every tree's record names each distribution it holds with the sha256 of the artifact installed and the URL it
came from. Exported, that is a lock another cluster (or pip, or uv) installs byte for byte: the same versions
from the same artifacts, nothing resolved. The metapackage of a set or a lock's tree is repoinstall's own and is
left out. Trees that disagree (two versions of one distribution, or one version from two different artifacts)
cannot be one lock: one line naming both.
"""

from __future__ import annotations

import json
import posixpath
import urllib.parse
from collections.abc import Sequence
from typing import NamedTuple

from .._disk import manifest as _manifest
from .._disk.identity import TreeId, canonical_name
from .._disk.layout import Layout
from .._disk.manifest import recorded_dists
from .._errors import InvalidInput, NotInstalled

#: The lock format written.
LOCK_VERSION = "1.0"


class Exported(NamedTuple):
    """One distribution of the lock: where it was installed from and its artifact's sha256."""

    name: str
    version: str
    url: str
    sha256: str
    #: The tree it was taken from (for the message when two trees disagree).
    tree: str


def closure(layout: Layout, tids: Sequence[TreeId]) -> list[Exported]:
    """The distributions the trees hold, one per project, sorted by name; :class:`NotInstalled` for a tree that
    is not recorded, :class:`InvalidInput` for a tree whose record lacks an artifact's hash or URL, or two trees
    that disagree."""
    found: dict[str, Exported] = {}
    for tid in tids:
        record = _manifest.read(layout, tid)
        if record is None:
            raise NotInstalled(f"{tid}: not installed in {layout.root}")
        for row in recorded_dists(record):
            name = canonical_name(row.get("name", ""))
            if tid.kind.own_metapackage and name == tid.name:
                continue  # the set's or lock's own metapackage: repoinstall's, never on an index
            one = Exported(name, row.get("version", ""), row.get("url", ""), row.get("sha256", ""), str(tid))
            if not (one.url and one.sha256 and one.version):
                raise InvalidInput(
                    f"{tid}: its record does not say which artifact {row.get('name')} {one.version} was installed "
                    "from (installed before records held hashes, by a uv that could not lock it, or re-recorded "
                    f"after a crash with no closure kept); install it again to export it: `repoinstall remove {tid}` "
                    f"then `repoinstall ensure {tid}`"
                )
            seen = found.setdefault(name, one)
            if (seen.version, seen.sha256) != (one.version, one.sha256):
                raise InvalidInput(
                    f"{seen.tree} holds {name} {seen.version} (sha256:{seen.sha256[:12]}...) but {one.tree} holds "
                    f"{name} {one.version} (sha256:{one.sha256[:12]}...): one lock cannot hold both; export them apart"
                )
    return sorted(found.values())


def pylock(dists: Sequence[Exported]) -> str:
    """The PEP 751 lock file of ``dists``: each package with its one artifact (a wheel, or the sdist it was built
    from), its URL and sha256."""
    lines = [f"lock-version = {_string(LOCK_VERSION)}", f"created-by = {_string('repoinstall')}", ""]
    for dist in dists:
        filename = urllib.parse.unquote(posixpath.basename(urllib.parse.urlsplit(dist.url).path))
        hashes = f"{{ sha256 = {_string(dist.sha256)} }}"
        artifact = f"{{ name = {_string(filename)}, url = {_string(dist.url)}, hashes = {hashes} }}"
        kind = f"wheels = [{artifact}]" if filename.endswith(".whl") else f"sdist = {artifact}"
        lines += ["[[packages]]", f"name = {_string(dist.name)}", f"version = {_string(dist.version)}", kind, ""]
    return "\n".join(lines)


def _string(text: str) -> str:
    # A TOML basic string: JSON's escapes (ASCII only, \uXXXX for the rest) are all valid TOML escapes.
    return json.dumps(text, ensure_ascii=True)
