"""The installer interface: one backend (pip or uv) fills a private staging dir; this module runs it.

Both backends install the same thing the same way: ``<name>==<version>`` and its dependencies into an empty
``--target`` dir for the target interpreter, from the indexes, find-links and constraints pip's configuration
and the options name, with hashes required when the spec has them, and a tree whose every file is listed in some
RECORD; its bytecode is compiled here after the installer's run (:mod:`repoinstall._store.bytecode`). What they
differ in stays inside their module.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ... import _log, _stop
from ..._disk.manifest import Artifact
from ..._errors import ArtifactGone, InstallError, Interrupted
from ..._options import InstallOptions
from ..._requirements import Requested

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..._disk.dists import Hashed
    from ..._disk.layout import Layout
    from ..._disk.pin import Pin

_TAIL_LINES = 12
#: In the scratch dir: a pinned install's requirements file, one line per pin.
PINS = "pinned-requirements.txt"


class Backend(Protocol):
    name: str

    def version(self) -> str: ...

    def prepare(self, options: InstallOptions, requested: Requested, pin: str, scratch: str) -> list[str] | None:
        """A command to run before :meth:`command` (uv: lock the closure), or ``None``."""
        ...

    def command(
        self, options: InstallOptions, target: str, requested: Requested, pin: str, scratch: str
    ) -> list[str]: ...

    def environment(self, options: InstallOptions) -> dict[str, str]: ...

    def settle(self, target: str) -> None: ...

    def closure(self, target: str, requested: Requested, scratch: str) -> tuple[Artifact, ...]:
        """The artifacts installed (file hash and URL), as far as the installer said: only what it verified."""
        ...


class Built(NamedTuple):
    """Who built a staged tree, and from which files, for its record."""

    installer: str
    version: str
    artifacts: tuple[Artifact, ...] = ()


def backend(name: str) -> Backend:
    if name == "uv":
        from .uv import UV

        return UV
    from .pip import PIP

    return PIP


def install(
    options: InstallOptions,
    target: str,
    requested: Requested,
    pin: str | None,
    scratch: str,
    what: str,
    hashed: Hashed | None = None,
    kept: Layout | None = None,
) -> Built:
    """Install ``pin`` into the empty ``target``; :class:`InstallError` with the installer's last lines if it fails.
    A pinned install (``requested.locked``) installs its pins and takes no ``pin``: their requirements file is
    written here, the one place their lines are rendered.

    ``scratch`` is the staging dir's private temporary directory: the installer's builds and downloads go there
    (``TMPDIR``), on the repo's filesystem, removed with the staging dir and visible to gc if it is killed.
    ``kept``: the repo whose wheel cache may hold wheels this install takes, kept when resolution downloaded them
    whole (:mod:`repoinstall._disk.wheelcache`): the installer is given checked private copies of those."""
    from ..._pipconfig import index_config

    # Every index URL readable, or one line (exit 2) before an installer could show a password.
    config = index_config(options)
    sources = (*config.index_urls, *config.find_links)
    copies: dict[str, str] = {}
    chosen = backend(options.installer)
    if bool(requested.locked) != (pin is None):
        raise ValueError(f"{what}: a pinned install takes its pins and no requirement; any other, a requirement")
    handed: list[str] = []  # kept wheels handed to the installer by their paths, beside its requirement
    origins: dict[str, str] = {}  # where each came from, by sha256
    if kept is not None and pin is not None and not requested.hashes and chosen.name == "pip" and _this(options):
        pin, handed, origins = _hand_over(kept, sources, requested, pin, scratch)
    if pin is None:
        # What the installer reads is the lock's local file as checked, not whatever stands at its name now.
        from dataclasses import replace

        from ..localcopy import private_copies

        copies = private_copies(requested.locked, scratch)
        if kept is not None:
            copies.update(_kept_copies(kept, requested.locked, scratch))
        told = tuple(replace(one, url=copies.get(one.url, one.url)) for one in requested.locked)
        pin = os.path.join(scratch, PINS)
        # 0600: a URL in it may carry a password, and a killed run leaves it until gc (staging/ is shared).
        with open(pin, "w", encoding="utf-8", opener=lambda path, flags: os.open(path, flags, 0o600)) as handle:
            handle.write("".join(one.line() + "\n" for one in told))
    env = chosen.environment(options)
    env.update(TMPDIR=scratch, TEMP=scratch, TMP=scratch)
    # --install-timeout bounds the installer's whole work, however many runs it takes.
    deadline = time.monotonic() + options.timeout
    if (first := chosen.prepare(options, requested, pin, scratch)) is not None:
        run(first, env, options.timeout, what, chosen.name, sources=sources)
    # An explicit file for a project is the one the installer takes for it (the requirement's ``==`` pin is its
    # version): the wheel resolution already downloaded, not fetched again.
    command = [*chosen.command(options, target, requested, pin, scratch), *handed]
    left = deadline - time.monotonic()
    if left <= 0:
        raise InstallError(f"{what}: {chosen.name} did not finish within {options.timeout:g}s (see --install-timeout)")
    pinned = bool(requested.locked)
    run(
        command,
        env,
        left,
        what,
        chosen.name,
        limit=options.timeout,
        announce=first is None,
        pinned=pinned,
        sources=sources,
    )
    chosen.settle(target)
    # Bytecode, once, on every core: valid wherever its files land (a layer, a mount), the same from any repo.
    # None with --no-compile: its trees are another environment's (see repoinstall._disk.identity.NO_BYTECODE).
    if options.bytecode:
        from ..._disk.dists import hashing_meanwhile
        from ..._store.bytecode import hash_based

        with (
            hashing_meanwhile(target, hashed),  # what the store's check will hash, hashed while the compile runs
            _log.phase("compile.done", f"compiling {what}", "compiled %s", what, what=what) as compiling,
        ):
            compiling.figures["files"] = hash_based(target, options.python, hashed=hashed)
    artifacts = chosen.closure(target, requested, scratch)
    if requested.locked:
        # What a pinned install was told to take, for what the installer did not report itself.
        from ..._disk.identity import canonical_name
        from ..locked import artifacts_of

        reported = {canonical_name(a.name) for a in artifacts}
        artifacts += tuple(a for a in artifacts_of(requested.locked) if a.name not in reported)
    artifacts = _as_named(artifacts, copies, origins)
    if requested.members:
        # A set's metapackage is a wheel we wrote into the scratch dir, gone with it: its hash, and no URL.
        from packaging.utils import canonicalize_name

        own = canonicalize_name(requested.name)
        artifacts = tuple(a._replace(url="") if canonicalize_name(a.name) == own else a for a in artifacts)
    return Built(chosen.name, chosen.version(), artifacts)


def _as_named(artifacts: tuple[Artifact, ...], copies: dict[str, str], origins: dict[str, str]) -> tuple[Artifact, ...]:
    """The artifacts as the record names them: a lock's local file as the lock named it, not as its private copy
    (which goes with the scratch dir); a kept wheel as the file it was downloaded from (the same bytes: checked)."""
    named = {private: original for original, private in copies.items()}
    return tuple(
        a._replace(url=origins[a.sha256])
        if a.sha256 in origins and a.url.startswith("file:")
        else a._replace(url=named.get(a.url, a.url))
        for a in artifacts
    )


def install_pins(
    options: InstallOptions,
    target: str,
    pins: Sequence[Pin],
    scratch: str,
    what: str,
    hashed: Hashed | None = None,
    kept: Layout | None = None,
) -> Built:
    """Install exactly ``pins`` (each one artifact with its hashes, ``--no-deps``, hashes required) into the empty
    ``target``: the store's own run of what it lacks, no tree's request. ``kept``: see :func:`install`."""
    from packaging.version import Version

    request = Requested(what, "repoinstall-store", (), Version("1"), source="store", locked=tuple(pins))
    return install(options, target, request, None, scratch, what, hashed, kept)


#: In the scratch dir: the private, checked copies of kept wheels handed to the installer.
_KEPT = "kept-wheels"
_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;,]+)")


def _this(options: InstallOptions) -> bool:
    """Whether the install is for the interpreter resolution chose its wheels for (this one): a kept wheel fits it."""
    import sys

    return options.python == sys.executable or os.path.realpath(options.python) == os.path.realpath(sys.executable)


def _hand_over(
    layout: Layout, sources: Sequence[str], requested: Requested, pin: str, scratch: str
) -> tuple[str, list[str], dict[str, str]]:
    """pip's requirement and the kept wheels' paths it is given beside it, for the wheels resolution kept of what
    it installs by name (see :mod:`repoinstall._disk.wheelcache`); and where each came from, by sha256."""
    found = _kept_wheels(layout, sources, requested.members or (pin,), scratch)
    origins = {one.sha256: one.url for one in found}
    if requested.members:
        return pin, [one.path for one in found], origins  # beside the set's metapackage, which asks them by version
    if found:
        return found[0].direct, [], origins  # the tree's own pin as that very file: asked by name, pip fetches it
    return pin, [], origins


class _Handed(NamedTuple):
    """A kept wheel's private copy, the sha256 it was checked against, where it was downloaded from, and the
    requirement that names the copy (``name[extras] @ file:...``)."""

    path: str
    sha256: str
    url: str
    direct: str


def _kept_wheels(layout: Layout, sources: Sequence[str], pins: Sequence[str], scratch: str) -> list[_Handed]:
    """For each ``name==version`` of ``pins`` that resolution read whole from ``sources`` into the repo's wheel
    cache: a private copy, checked against its sha256 (see :mod:`repoinstall._disk.wheelcache`)."""
    from pathlib import Path

    from ..._disk.identity import canonical_name
    from ..._disk.wheelcache import copy_checked, recall

    handed = []
    for number, text in enumerate(pins):
        if (matched := _PIN.fullmatch(text.strip())) is None:
            continue
        name, extras, version = matched.groups()
        found = recall(layout, sources, canonical_name(name), version)
        directory = os.path.join(scratch, _KEPT, str(number))
        if found is not None and (path := copy_checked(layout, found, directory)) is not None:
            direct = f"{name}{extras or ''} @ {Path(path).as_uri()}"
            handed.append(_Handed(path, found.sha256, found.url, direct))
    return handed


def _kept_copies(layout: Layout, pins: Sequence[Pin], scratch: str) -> dict[str, str]:
    """For each pin naming a remote artifact by its sha256 that the repo's wheel cache holds: its URL -> the URL of
    a private copy, checked against that sha256 (see :mod:`repoinstall._disk.wheelcache`)."""
    from pathlib import Path
    from urllib.parse import unquote, urlsplit

    from ..._disk.wheelcache import Kept, copy_checked

    copies: dict[str, str] = {}
    for number, pin in enumerate(pins):
        parts = urlsplit(pin.url)
        filename = unquote(parts.path.rsplit("/", 1)[-1])
        if parts.scheme not in ("http", "https") or not pin.sha256 or not filename.endswith(".whl"):
            continue
        directory = os.path.join(scratch, _KEPT, f"pin-{number}")
        if (path := copy_checked(layout, Kept(pin.url, filename, pin.sha256), directory)) is not None:
            copies[pin.url] = Path(path).as_uri()
    return copies


def run(
    cmd: list[str],
    env: dict[str, str],
    timeout: float,
    what: str,
    installer: str,
    *,
    limit: float | None = None,
    announce: bool = True,
    pinned: bool = False,
    sources: tuple[str, ...] = (),
    doing: str = "installer",
) -> None:
    """Run the installer, bounded by ``timeout``; an :class:`InstallError` with the tail of its output on failure.
    With ``-v``, its command line and its whole output are logged (credentials in URLs hidden).

    Once this thread's batch or the process is stopping (see :mod:`repoinstall._stop`), no installer starts and a
    running one is killed: :class:`Interrupted`, and the caller's staging dir and lock are cleaned up as for any
    failure. ``sources``: the indexes and find-links the installer reads, named (credentials hidden) when it
    crashes on what one of them answered. ``doing``: the phase it is, for its event (``installer.done``, or
    ``resolve.done`` for a run that only resolves) and the live display."""
    import shlex

    from ..._redact import redact_all

    _stop.check()
    # The line that says an install started, once nothing but the installer itself can fail it.
    if announce:
        _log.logger().info("installing %s with %s", what, installer)
    _log.logger().debug("%s: running %s", what, redact_all(shlex.join(cmd)))
    try:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
        )
    except OSError as error:
        raise InstallError(f"{what}: cannot run {cmd[0]}: {error.strerror}") from None
    _stop.started(proc)  # from here a stop kills it (and if one came meanwhile, it is killed now)
    if doing == "resolve":  # with -v only: the install that follows says its own line
        running = _log.phase(
            "resolve.done", f"resolving {what}", "%s resolved %s", installer, what, level=10, what=what,
            installer=installer,
        )  # fmt: skip
    else:
        running = _log.phase(
            "installer.done", f"{installer}: {what}", "%s ran for %s", installer, what, what=what, installer=installer
        )
    try:
        with proc, running as ran:
            try:
                output_bytes, _ = proc.communicate(timeout=timeout)
                ran.succeeded = proc.returncode == 0  # a failed run's line is its error
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise InstallError(
                    f"{what}: {installer} did not finish within {limit or timeout:g}s (see --install-timeout)"
                ) from None
            except BaseException:
                proc.kill()  # interrupted (SIGTERM, Ctrl-C): the installer must not outlive us writing into staging
                raise
    finally:
        _stop.ended(proc)
    if proc.returncode < 0 and _stop.stopped():
        raise Interrupted(f"{what}: {installer} was stopped (SIGTERM or Ctrl-C)")
    # Hidden once, here: the log, the error's tail, the hash mismatch and the missing artifact all quote it.
    output = redact_all(output_bytes.decode("utf-8", "replace"))
    _log.logger().debug("%s: %s said:\n%s", what, installer, output.rstrip())
    if proc.returncode != 0:
        raise failure(output, proc.returncode, what, installer, pinned=pinned, sources=sources)


def failure(
    output: str, code: int, what: str, installer: str, *, pinned: bool, sources: tuple[str, ...]
) -> InstallError:
    """What a run of the installer that exited with ``code`` failed of, read off its (redacted) ``output``: one
    line where the cause is known, else the reason with the tail of its output."""
    if (mismatch := hash_mismatch(output)) is not None:
        return InstallError(f"{what}: {mismatch}")  # one line: which artifact, and both hashes
    if (down := unreachable(output, installer, sources)) is not None:
        return InstallError(f"{what}: {down}")  # one line: which index, and why (-v: the installer's log)
    if pinned and (gone := unavailable(output)) is not None:
        return ArtifactGone(f"{what}: {gone}")  # one line: which artifact of the pinned closure is gone
    if (crash := crashed(output, installer, sources)) is not None:
        return InstallError(f"{what}: {crash}")  # one line, not the tail of a traceback
    lines = [line for line in output.splitlines() if line.strip()]
    tail = "\n".join("  " + line for line in lines[-_TAIL_LINES:])
    if "No space left on device" in output:
        reason = f"the repo's filesystem is full ({installer} exited with {code})"
    else:
        reason = f"{installer} failed (it exited with {code})"
    return InstallError(f"{what}: {reason}:\n{tail}")


#: pip's connection failures, as urllib3 words them: the host and port it tried, and why (the last try's).
_PIP_HOST = re.compile(r"host='(?P<host>[^']+)', port=(?P<port>\d+)")
_PIP_BROKEN = re.compile(r"(?:after connection broken by|Max retries exceeded with url)")
_PIP_REASON = re.compile(
    r"\[Errno -?\d+\] (?P<reason>[^\"')\]]+)|ResponseError\('(?P<response>[^']+)'|(?P<timeout>timed out)", re.I
)
#: uv's: the URL it fetched, then its chain of causes, the last the reason.
_UV_URL = re.compile(r"error sending request for url \((?P<url>[^)\s]+)\)")
_UV_CAUSE = re.compile(r"^\s*cause: (?P<cause>.+?)(?: \(os error \d+\))?\s*$", re.M)


def unreachable(output: str, installer: str, sources: tuple[str, ...]) -> str | None:
    """The one line saying an index (or the host of a lock's URL) did not answer, naming it as configured,
    credentials hidden, and why (the installer's last try); ``None`` if the installer failed for another reason.
    pip and uv retry a host that does not answer and then fail: their log of retries is kept for ``-v``."""
    from urllib.parse import urlsplit

    from ..._redact import redact_all

    if installer == "uv":
        fetched = _UV_URL.search(output)
        if fetched is None:
            return None
        parts = urlsplit(fetched.group("url"))
        host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
        causes = [m.group("cause") for m in _UV_CAUSE.finditer(output, fetched.end())]
        reason = causes[-1] if causes else "no answer"
    else:
        if not _PIP_BROKEN.search(output) or (tried := list(_PIP_HOST.finditer(output))) == []:
            return None
        last = tried[-1]
        host, port = last.group("host"), int(last.group("port"))
        why = [
            m.group("reason") or m.group("response") or m.group("timeout")
            for m in _PIP_REASON.finditer(output, last.start())
        ]
        reason = why[0] if why else "no answer"
    for source in sources:
        parts = urlsplit(source)
        if parts.hostname == host and (parts.port or (443 if parts.scheme == "https" else 80)) == port:
            named = f"index {redact_all(source)}"
            break
    else:
        named = f"{host}:{port}"
    return f"{named} does not answer ({reason.strip().lower()[:200]}); {installer} gave up after its retries"


#: The last line of a Python traceback: the exception's name and message.
_EXCEPTION_LINE = re.compile(r"^\s*((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception)\b.*)$")


def crashed(output: str, installer: str, sources: tuple[str, ...]) -> str | None:
    """The one line saying the installer crashed (a Python traceback in its output), with its exception and, if
    it crashed reading an index's or find-links' answer (a page of junk bytes), the places it read, credentials
    hidden; ``None`` if it did not crash."""
    if "Traceback (most recent call last):" not in output:
        return None
    from ..._redact import redact_all

    lines = output.splitlines()
    start = max(i for i, line in enumerate(lines) if "Traceback (most recent call last):" in line)
    trace = lines[start:]
    exception = next((m.group(1) for line in reversed(trace) if (m := _EXCEPTION_LINE.match(line))), "an exception")
    reading = any("/_internal/index/" in line or "/_internal/network/" in line for line in trace)
    if reading and sources:
        named = ", ".join(redact_all(source) for source in sources)
        return f"{installer} crashed on what the index answered ({named}): {exception[:300]}"
    return f"{installer} crashed: {exception[:300]}"


_PIP_MISMATCH = "DO NOT MATCH THE HASHES"
_UV_MISMATCH = re.compile(r"Hash mismatch for `([^`]+)`")
_PIP_GOT = re.compile(r"^Got\s+([0-9a-f]{64,128})$")
_DIGEST = re.compile(r"\b(sha256|sha384|sha512)[: ]\s*([0-9a-f]{64,128})\b")


def hash_mismatch(output: str) -> str | None:
    """The one line that says which artifact did not match its hash, and what was expected and found, from pip's
    or uv's output; ``None`` if the installer failed for another reason."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if _PIP_MISMATCH in line and index + 1 < len(lines):
            # pip: "<req> from <url> (from -r <file> (line N)):", then "Expected sha256 X", "Got        Y".
            artifact = re.split(r" from | \(from ", lines[index + 1], maxsplit=1)[0].rstrip(":")
            return _mismatch_line(artifact, lines[index + 2 : index + 6])
        if (found := _UV_MISMATCH.search(line)) is not None:
            # uv: "Hash mismatch for `<req>`", then "Expected:" and "Computed:", each followed by its hashes.
            return _mismatch_line(found.group(1), lines[index + 1 : index + 7])
    return None


def _mismatch_line(artifact: str, following: list[str]) -> str:
    digests = [f"{m.group(1)}:{m.group(2)}" for line in following for m in _DIGEST.finditer(line)]
    got = next((m.group(1) for line in following if (m := _PIP_GOT.match(line)) is not None), None)
    if len(digests) == 1 and got is not None:  # pip names the algorithm only on its "Expected" line
        digests.append(f"{digests[0].split(':')[0]}:{got}")
    if len(digests) >= 2:
        return f"hash mismatch for {artifact}: expected {digests[0]}, downloaded {digests[-1]}"
    return f"hash mismatch for {artifact}"


#: How pip and uv say that a file they were sent to fetch is not there.
_GONE = (
    re.compile(r"HTTP error (?P<code>\d+) while getting (?P<where>\S+)"),  # pip
    re.compile(r"No such file or directory: '(?P<where>[^']+)'"),  # pip, a file:// URL
    re.compile(r"No matching distribution found for (?P<where>\S+)"),  # pip, a pin looked up on the index
    re.compile(r"Failed to fetch: (?P<where>\S+)(?:\s+cause: HTTP status client error \((?P<code>\d+))?", re.S),
    re.compile(r"(?:not found at|No such file or directory[^:]*): (?P<where>\S+)"),  # uv, a file
    re.compile(r"Because (?P<where>\S+) was not found in the provided package locations"),  # uv, on the index
)


def unavailable(output: str) -> str | None:
    """For an install of pinned artifacts (a lock, a kept closure): the one line naming the artifact that is no
    longer where it was, from pip's or uv's output; ``None`` if the installer failed for another reason."""
    for pattern in _GONE:
        if (found := pattern.search(output)) is not None:
            code = found.groupdict().get("code")
            where = found.group("where").rstrip(".,:")
            return f"artifact no longer available: {where}" + (f" (HTTP {code})" if code else "")
    return None
