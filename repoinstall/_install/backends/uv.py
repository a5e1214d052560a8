"""The uv backend: ``uv pip install --target <staging> --python <interpreter>``, meaning what pip would.

uv reads neither pip.conf nor ``PIP_*``, and has its own configuration. So that an index option means the
same under both installers, uv gets pip's effective settings (as the resolver reads them) on its command
line and in its environment, with ``--no-config`` and without the user's own ``UV_*`` variables that choose
indexes or destinations:

* indexes are searched like pip does, best version across all of them (``--index-strategy unsafe-best-match``);
* index URLs and find-links go in ``UV_INDEX_URL``, ``UV_EXTRA_INDEX_URL`` and ``UV_FIND_LINKS``, never in
  argv, since they may carry credentials;
* constraints, ``--no-index``, trusted hosts, ``pre``, ``only-binary``/``no-binary`` carry over;
  pip's ``cert``, ``client-cert``, ``proxy``, ``timeout`` and ``retries`` become uv's environment;
* hashes go in the same requirements file with ``--require-hashes``;
* files are copied from uv's cache (``--link-mode copy``): a tree never shares an inode with a cache that may
  be pruned or live on another filesystem;
* no bytecode (repoinstall compiles it after the run, see :mod:`repoinstall._store.bytecode`); a pyc uv wrote
  anyway is listed in RECORD by :meth:`_Uv.settle`, as pip lists its own.

uv has no installation report, so the closure is locked first: ``uv pip compile --format pylock.toml`` (same
options) names every file with its sha256 (from the index, or hashed by uv), and the install is then of exactly
those pins, each with its lock's hashes, in ``--require-hashes`` mode: what uv installs is what the lock says,
verified by uv. Where a package's lock entry lists several files (wheels for several tags), the installed
dist-info's ``WHEEL`` tags say which one it was. A lock this cannot pin (a directory or VCS dependency, a file
without a hash) installs as before, and the record then has no hashes or URLs.
"""

from __future__ import annotations

import csv
import functools
import io
import os
import re
import shutil
import subprocess
import threading
from typing import Any

from ..._disk.manifest import Artifact
from ..._errors import InstallError
from ..._options import InstallOptions
from ..._requirements import Requested, hashed_requirements

#: uv settings that would change where files go or which indexes are asked: pip's configuration decides.
_OVERRIDDEN = frozenset(
    {
        "UV_BREAK_SYSTEM_PACKAGES",
        "UV_COMPILE_BYTECODE",
        "UV_CONFIG_FILE",
        "UV_CONSTRAINT",
        "UV_DEFAULT_INDEX",
        "UV_EXCLUDE_NEWER",
        "UV_EXTRA_INDEX_URL",
        "UV_FIND_LINKS",
        "UV_INDEX",
        "UV_INDEX_STRATEGY",
        "UV_INDEX_URL",
        "UV_LINK_MODE",
        "UV_NO_BINARY",
        "UV_NO_BUILD",
        "UV_NO_CACHE",
        "UV_NO_CONFIG",
        "UV_NO_INDEX",
        "UV_ONLY_BINARY",
        "UV_OVERRIDE",
        "UV_PRERELEASE",
        "UV_PREFIX",
        "UV_PYTHON",
        "UV_REQUIRE_HASHES",
        "UV_RESOLUTION",
        "UV_SYSTEM_PYTHON",
        "UV_TARGET",
        "UV_TORCH_BACKEND",
    }
)
#: ``<stem>.<implementation tag>[.opt-N].pyc`` in a ``__pycache__`` directory.
_PYC = re.compile(r"^(?P<stem>[^.]+)\.[^.]+(?:\.opt-\d+)?\.pyc$")
#: In the scratch dir: the locked closure (uv insists on this name), its input, and the pins installed from it.
LOCK = "pylock.toml"
_LOCK_INPUT = "closure.in"
PINNED = "closure.txt"
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})


def _binary() -> str:
    """The uv executable: the one the ``uv`` package (``repoinstall[uv]``) ships, else ``uv`` on PATH."""
    # One lookup per process, under a lock: --jobs threads ask at once, and sysconfig (which find_uv_bin reads)
    # is not safe to initialise from several threads.
    with _lookup_guard:
        return _find_binary()


@functools.cache
def _find_binary() -> str:
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found, unused-ignore]

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv")
    if found is None:
        raise InstallError("the uv installer is not available: pip install 'repoinstall[uv]', or put uv on PATH")
    return found


_lookup_guard = threading.Lock()


@functools.cache
def _version(binary: str) -> str:
    try:
        shown = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    parts = shown.split()
    return parts[1] if len(parts) > 1 else "unknown"


def _values(setting: str | None) -> list[str]:
    """pip's list-valued settings (``only-binary``, ``no-binary``): separated by commas or whitespace."""
    return [value for value in re.split(r"[,\s]+", setting or "") if value]


def _find_links_in_environment(locations: tuple[str, ...]) -> bool:
    """uv reads ``UV_FIND_LINKS`` as a comma-separated list: a location with a comma stays on the command line."""
    return bool(locations) and not any("," in location for location in locations)


class _Uv:
    name = "uv"

    def version(self) -> str:
        return _version(_binary())

    def _common(self, options: InstallOptions, scratch: str, *, constraints: bool = True) -> list[str]:
        """The options the lock and the install share: interpreter, indexes, constraints, cache."""
        from ..._pipconfig import index_config, pip_settings

        config = index_config(options)
        pip = pip_settings(options.python)
        args = [
            "--python",
            options.python,
            "--no-config",
            "--color",
            "never",
            "--no-progress",
            "--index-strategy",
            "unsafe-best-match",
        ]
        if not config.index_urls:
            args.append("--no-index")  # the index URLs themselves travel in the environment (see environment())
        if not _find_links_in_environment(config.find_links):
            for location in config.find_links:
                args += ["--find-links", location]
        for path in config.constraints if constraints else ():
            args += ["--constraint", os.path.abspath(path)]
        for host in config.trusted_hosts:
            args += ["--allow-insecure-host", host]
        if config.pre:
            args += ["--prerelease", "allow"]
        for flag in ("only-binary", "no-binary"):
            for value in _values(pip.get(flag)):
                args += [f"--{flag}", value]
        # The command line's, after pip's configuration's, as pip takes them (see InstallOptions).
        for flag, values in (("--no-binary", options.no_binary), ("--only-binary", options.only_binary)):
            for value in values:
                args += [flag, value]
        if options.cache_dir:
            args += ["--cache-dir", os.path.join(os.path.abspath(options.cache_dir), "uv")]
        elif os.environ.get("UV_NO_CACHE", "").strip().lower() in _TRUE:
            # No cache wanted, but the lock and the install share one, so a file is downloaded once: the scratch
            # dir's, gone with it.
            args += ["--cache-dir", os.path.join(scratch, "uv-cache")]
        return args

    def prepare(self, options: InstallOptions, requested: Requested, pin: str, scratch: str) -> list[str] | None:
        """Lock the closure first (``uv pip compile --format pylock.toml``): every file and its sha256. Not for
        what is pinned already (a lock file's tree, a kept closure): its lines name each file and its hash."""
        if requested.locked:
            return None
        if requested.hashes:
            source = hashed_requirements(scratch, requested, pin)
        else:
            source = os.path.join(scratch, _LOCK_INPUT)
            with open(source, "w", encoding="utf-8") as handle:
                handle.write(pin + "\n")  # the validated pin, nothing user-shaped
        lock = os.path.join(scratch, LOCK)
        return [_binary(), "pip", "compile", *self._common(options, scratch), "--quiet", "--format", LOCK,
                "-o", lock, source]  # fmt: skip

    def command(self, options: InstallOptions, target: str, requested: Requested, pin: str, scratch: str) -> list[str]:
        lines = None if requested.hashes or requested.locked else _pins(_lock(scratch), requested, pin, scratch)
        args = [
            _binary(),
            "pip",
            "install",
            "--target",
            target,
            # The lock obeyed the constraints; its exact pins need none (and --require-hashes refuses loose ones).
            *self._common(options, scratch, constraints=lines is None and not requested.locked),
            "--link-mode",
            "copy",
        ]
        if requested.locked:  # pinned already: ``pin`` is its requirements file, every line hashed
            return [*args, "--no-deps", "--require-hashes", "-r", pin]
        if requested.hashes:
            return [*args, "--require-hashes", "-r", hashed_requirements(scratch, requested, pin)]
        if lines is None:
            return [*args, "--", pin]
        pinned = os.path.join(scratch, PINNED)
        # 0600: the lines may name a URL with its password (see Staging.scratch_file).
        with open(pinned, "w", encoding="utf-8", opener=lambda path, flags: os.open(path, flags, 0o600)) as handle:
            handle.write("".join(line + "\n" for line in lines))
        return [*args, "--require-hashes", "-r", pinned]

    def environment(self, options: InstallOptions) -> dict[str, str]:
        from ..._pipconfig import index_config, pip_settings

        config = index_config(options)
        pip = pip_settings(options.python)
        env = {k: v for k, v in os.environ.items() if k not in _OVERRIDDEN}
        # Index URLs may carry credentials (the chart passes its Secret in PIP_INDEX_URL): they go to uv in its
        # environment, which only its own user can read, never on its command line (/proc/<pid>/cmdline).
        if config.index_urls:
            env["UV_INDEX_URL"] = config.index_urls[0]
            if config.index_urls[1:]:
                env["UV_EXTRA_INDEX_URL"] = " ".join(config.index_urls[1:])
        if _find_links_in_environment(config.find_links):
            env["UV_FIND_LINKS"] = ",".join(config.find_links)
        env["UV_HTTP_TIMEOUT"] = str(max(1, round(config.timeout)))
        env["UV_HTTP_RETRIES"] = str(config.retries)
        if config.cert:
            env["SSL_CERT_FILE"] = config.cert
        if pip.get("client-cert"):
            env["SSL_CLIENT_CERT"] = pip["client-cert"]
        if pip.get("proxy"):
            env["HTTP_PROXY"] = env["HTTPS_PROXY"] = pip["proxy"]
        return env

    def closure(self, target: str, requested: Requested, scratch: str) -> tuple[Artifact, ...]:
        """The locked files uv installed: only those whose hash uv was made to check (the lock's pins, or the
        spec's own ``--hash``), each identified among its package's files by the tags of the wheel installed."""
        from packaging.utils import canonicalize_name

        lock = _lock(scratch)
        if lock is None:
            return ()
        own = canonicalize_name(requested.name)
        if requested.hashes:
            checked: dict[str, set[str]] | None = {
                own: {h.partition(":")[2].lower() for h in requested.hashes if h.lower().startswith("sha256:")}
            }
        elif os.path.exists(os.path.join(scratch, PINNED)):
            checked = None  # every locked file was pinned by its hash
        else:
            return ()  # installed without the lock: nothing here is known to be what uv installed
        tags = _installed_tags(target)
        found: list[Artifact] = []
        for package in _packages(lock):
            name = canonicalize_name(package["name"])
            chosen = _installed_file(_files(package, scratch), tags.get(name))
            if chosen is None:
                continue
            sha256, url = chosen
            if checked is not None and sha256 not in checked.get(name, ()):
                continue
            found.append(Artifact(package["name"], str(package.get("version", "")), sha256, _shown(url)))
        return tuple(found)

    def settle(self, target: str) -> None:
        """Make uv's tree look like pip's: no uv lock file, and compiled bytecode listed in its dist's RECORD.

        Walked by descriptor like every other tree walk (no symlink followed, no recursion)."""
        from ..._disk import fs as _fs
        from ..._disk import walk as _walk
        from ..._disk.dists import RECORD_LIMIT, opened, record_rows, scan, tree_relative

        with opened(target) as tree:
            owner: dict[str, str] = {}  # recorded source file -> the dist-info whose RECORD lists it
            recorded: set[str] = set()
            for dist in scan(tree):
                for row in record_rows(tree, dist) or []:
                    if row and (relative := tree_relative(row[0])) is not None:
                        recorded.add(relative)
                        if relative.endswith(".py"):
                            owner[relative] = dist.dist_info
            # uv's lock on the target environment is not part of any dist.
            if ".lock" not in recorded and (".lock", _walk.FILE) in _walk.entries(tree):
                os.unlink(".lock", dir_fd=tree)
            added: dict[str, list[str]] = {}
            for entry in _walk.walk(tree):
                parent, _, name = entry.path.rpartition("/")
                directory, _, cache = parent.rpartition("/")
                match = _PYC.match(name)
                if entry.kind != _walk.FILE or cache != "__pycache__" or match is None or entry.path in recorded:
                    continue
                source = f"{directory}/{match['stem']}.py" if directory else f"{match['stem']}.py"
                if source in owner:
                    # Like pip: bytecode is listed without a hash (it is only checked to exist).
                    added.setdefault(owner[source], []).append(entry.path)
            for dist_info, bytecode in added.items():
                raw = _fs.read_file(tree, (dist_info, "RECORD"), RECORD_LIMIT)
                if raw is None:
                    continue  # read a moment ago by record_rows: only a racing writer could make it go
                rows = raw.decode("utf-8")
                more = io.StringIO()
                more.write(rows if rows.endswith("\n") or not rows else rows + "\n")
                csv.writer(more, lineterminator="\n").writerows([relative, "", ""] for relative in bytecode)
                dist_fd = _fs.open_dir(tree, (dist_info,))
                if dist_fd is not None:
                    try:
                        _fs.write_atomic(dist_fd, "RECORD", more.getvalue().encode("utf-8"))  # staging: no reader
                    finally:
                        os.close(dist_fd)


def _lock(scratch: str) -> dict[str, Any] | None:
    """The lock ``uv pip compile`` wrote, or ``None`` if there is none or it cannot be read."""
    import tomllib

    try:
        with open(os.path.join(scratch, LOCK), "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None


def _packages(lock: dict[str, Any]) -> list[dict[str, Any]]:
    packages = lock.get("packages")
    return (
        [p for p in packages if isinstance(p, dict) and isinstance(p.get("name"), str)]
        if isinstance(packages, list)
        else []
    )


def _files(package: dict[str, Any], scratch: str) -> list[tuple[str | None, str, str]]:
    """A locked package's files: (wheel file name, or ``None`` for an sdist or archive; sha256; URL)."""
    entries: list[tuple[bool, Any]] = []
    wheels = package.get("wheels")
    entries += [(True, wheel) for wheel in wheels] if isinstance(wheels, list) else []
    entries += [(False, package[key]) for key in ("sdist", "archive") if key in package]
    files = []
    for is_wheel, entry in entries:
        if not isinstance(entry, dict):
            continue
        hashes = entry.get("hashes")
        sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
        url = entry.get("url")
        if not isinstance(url, str):
            path = entry.get("path")
            url = _file_url(os.path.join(scratch, path)) if isinstance(path, str) else ""
        if not isinstance(sha256, str) or not sha256:
            sha256 = ""
        name = entry.get("name")
        if not isinstance(name, str):
            name = _last_part(url)
        files.append((name if is_wheel else None, sha256.lower(), url))
    return files


def _last_part(url: str) -> str:
    import urllib.parse

    return urllib.parse.unquote(urllib.parse.urlsplit(url).path.rpartition("/")[2])


def _file_url(path: str) -> str:
    import pathlib

    return pathlib.Path(os.path.abspath(path)).as_uri()


def _pins(lock: dict[str, Any] | None, requested: Requested, pin: str, scratch: str) -> list[str] | None:
    """The locked closure as pins with hashes (the spec's own pin for its package), or ``None`` where it cannot
    be pinned so: no lock, a package without a version or with a file without a hash, or a directory or VCS one."""
    from packaging.utils import canonicalize_name

    if lock is None:
        return None
    own = canonicalize_name(requested.name)
    lines: list[str] = []
    for package in _packages(lock):
        files = _files(package, scratch)
        if not files or any(not sha256 for _, sha256, _ in files) or "directory" in package or "vcs" in package:
            return None
        hashes = "".join(f" --hash=sha256:{sha256}" for sha256 in sorted({sha256 for _, sha256, _ in files}))
        version = package.get("version")
        marker = package.get("marker")
        if canonicalize_name(package["name"]) == own:
            line = pin
        elif isinstance(version, str) and "archive" not in package:
            line = f"{package['name']}=={version}"
        else:
            return None
        if isinstance(marker, str) and marker:
            line += f" ; {marker}"
        lines.append(line + hashes)
    return lines if any(line.startswith(pin) for line in lines) else None


def _installed_tags(target: str) -> dict[str, frozenset[str]]:
    """Each distribution of the tree (canonical name) and the tags its ``WHEEL`` file names."""
    from packaging.utils import canonicalize_name

    from ..._disk import fs as _fs
    from ..._disk.dists import opened, scan

    found: dict[str, frozenset[str]] = {}
    with opened(target) as tree:
        for dist in scan(tree):
            data = _fs.read_file(tree, (dist.dist_info, "WHEEL")) or b""
            lines = data.decode("utf-8", "replace").splitlines()
            found[canonicalize_name(dist.name)] = frozenset(
                line.partition(":")[2].strip() for line in lines if line.lower().startswith("tag:")
            )
    return found


def _installed_file(files: list[tuple[str | None, str, str]], tags: frozenset[str] | None) -> tuple[str, str] | None:
    """Which of a package's locked files uv installed: the only one; else the wheel whose tags are the installed
    wheel's; else (the wheel was built) the only source file. ``None`` when that is not certain."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    if tags is None:
        return None  # not in the tree
    if len({sha256 for _, sha256, _ in files}) == 1:
        return files[0][1:]
    wheels = []
    for name, sha256, url in files:
        if name is None:
            continue
        try:
            if {str(tag) for tag in parse_wheel_filename(name)[3]} == tags:
                wheels.append((sha256, url))
        except InvalidWheelFilename:
            continue
    sources = [(sha256, url) for name, sha256, url in files if name is None]
    candidates = wheels or sources
    # One file listed twice (an index and a find-links page serving it, say) is one file: the same sha256.
    return candidates[0] if len({sha256 for sha256, _ in candidates}) == 1 else None


def _shown(url: str) -> str:
    from ..._urls import without_credentials

    return without_credentials(url)


UV = _Uv()
