"""The pip backend: ``python -m pip install --target <staging>`` with the user's index options and pip config."""

from __future__ import annotations

import functools
import os
import subprocess

from ..._disk.manifest import Artifact
from ..._options import InstallOptions
from ..._requirements import Requested, hashed_requirements
from ..._urls import file_path

#: pip settings that would send files somewhere other than --target; everything else in PIP_* and pip.conf
#: (indexes, certificates, proxies, find-links) stays in force, since that is how users reach private indexes.
_DESTINATION_VARIABLES = ("PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_USER", "PIP_EDITABLE", "PIP_UPGRADE")
#: pip's installation report (``--report``, pip >= 22.2), in the scratch dir: which files it installed.
REPORT = "pip-report.json"
_REPORT_SINCE = (22, 2)


@functools.cache
def _reports(python: str) -> bool:
    """Whether the pip of ``python`` writes ``--report`` (asked once per interpreter: ``import pip`` is light)."""
    try:
        shown = subprocess.run(
            [python, "-c", "import pip; print(pip.__version__)"], capture_output=True, text=True, timeout=60, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False  # no pip: the install itself says so
    try:
        return tuple(int(part) for part in shown.strip().split(".")[:2]) >= _REPORT_SINCE
    except ValueError:
        return True  # a development version: recent


def artifacts(report: object) -> tuple[Artifact, ...]:
    """The files a pip report says it installed: each one's sha256 (verified by pip against the index's hash, or
    computed by pip from the file it downloaded) and URL, credentials removed. A local file pip gave no hash of
    (pip < 23.1) is hashed here; any other file without one is recorded without a hash."""
    found: list[Artifact] = []
    items = report.get("install") if isinstance(report, dict) else None
    for item in items if isinstance(items, list) else []:
        metadata = item.get("metadata") if isinstance(item, dict) else None
        info = item.get("download_info") if isinstance(item, dict) else None
        if not isinstance(metadata, dict) or not isinstance(info, dict):
            continue
        name, version, url = metadata.get("name"), metadata.get("version"), info.get("url")
        if not isinstance(name, str) or not isinstance(version, str):
            continue
        url = url if isinstance(url, str) else ""
        archive = info.get("archive_info")
        found.append(Artifact(name, version, _sha256(archive, url) if isinstance(archive, dict) else "", _shown(url)))
    return tuple(found)


def _sha256(archive: dict[str, object], url: str) -> str:
    hashes = archive.get("hashes")
    if isinstance(hashes, dict) and isinstance(hashes.get("sha256"), str):
        return str(hashes["sha256"]).lower()
    legacy = archive.get("hash")
    if isinstance(legacy, str) and legacy.startswith("sha256="):
        return legacy.removeprefix("sha256=").lower()
    if url.startswith("file:"):
        return _hash_local(url)
    return ""


def _hash_local(url: str) -> str:
    import hashlib

    path = file_path(url)
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return ""
    return digest.hexdigest()


def _shown(url: str) -> str:
    """A URL as a record keeps it: no user, password or token, no fragment (the hash is recorded apart)."""
    from ..._urls import without_credentials

    return without_credentials(url)


def options_args(options: InstallOptions) -> list[str]:
    """The resolution options as pip arguments; index URLs are in :meth:`_Pip.environment`."""
    args: list[str] = []
    for location in options.find_links:
        args += ["--find-links", location]
    if options.no_index:
        args.append("--no-index")
    for path in options.constraints:
        args += ["--constraint", os.path.abspath(path)]
    if options.cache_dir:
        args += ["--cache-dir", os.path.join(os.path.abspath(options.cache_dir), "pip")]
    for flag, values in (("--no-binary", options.no_binary), ("--only-binary", options.only_binary)):
        for value in values:
            args += [flag, value]
    return args


#: The index lines pip is given for a tree asked in a requirements file with index lines, in the scratch dir.
INDEX_LINES = "index-lines.txt"


def index_lines(options: InstallOptions, scratch: str) -> list[str]:
    """``-r FILE`` of the index lines repoinstall merged (pip's configuration, the options, then the tree's file's
    lines, or ``--trusted-host``), for a tree that has such lines; else nothing. As lines of a requirements file,
    pip reads them as it reads the user's file: its ``--index-url`` replaces every index pip's configuration names
    (a variable cannot: an empty one is ignored), and the URLs' credentials stay off pip's command line."""
    if options.file_index is None and not options.trusted_hosts:
        return []
    from ..._pipconfig import index_config

    config = index_config(options)
    lines = [f"--index-url {config.index_urls[0]}"] if config.index_urls else ["--no-index"]
    lines += [f"--extra-index-url {url}" for url in config.index_urls[1:]]
    lines += [f"--find-links {location}" for location in config.find_links]
    lines += [f"--trusted-host {host}" for host in config.trusted_hosts]
    path = os.path.join(scratch, INDEX_LINES)
    # 0600: a URL in it may carry a password, and a killed run leaves it until gc (staging/ is shared).
    with open(path, "w", encoding="utf-8", opener=lambda name, flags: os.open(name, flags, 0o600)) as handle:
        handle.write("".join(line + "\n" for line in lines))
    return ["-r", path]


class _Pip:
    name = "pip"

    def version(self) -> str:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("pip")
        except PackageNotFoundError:
            return "unknown"

    def command(self, options: InstallOptions, target: str, requested: Requested, pin: str, scratch: str) -> list[str]:
        """The pip command line. ``--`` ends pip's options, so the requirement can never be read as one."""
        base = [
            options.python,
            "-m",
            "pip",
            "install",
            "--target",
            target,
            "--no-input",
            "--disable-pip-version-check",
            "--no-warn-script-location",
            # No bytecode from pip (one core, timestamp pycs): repoinstall compiles it once, on every core, after
            # this run (repoinstall._store.bytecode). Beats pip.conf's compile setting.
            "--no-compile",
            *options_args(options),
        ]
        if _reports(options.python):
            # Which files it installed, with their hashes: the tree's closure, for its record.
            base += ["--report", os.path.join(scratch, REPORT)]
        base += index_lines(options, scratch)
        if requested.locked:  # a lock file's tree: ``pin`` is its requirements file, every line hashed
            return [*base, "--no-deps", "--require-hashes", "-r", pin]
        if not requested.hashes:
            return [*base, "--", pin]
        return [*base, "--require-hashes", "-r", hashed_requirements(scratch, requested, pin)]

    def environment(self, options: InstallOptions) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _DESTINATION_VARIABLES}
        # Index URLs may carry credentials: in pip's environment, never on its command line (/proc/<pid>/cmdline).
        # A variable beats pip.conf as the option would; the extra indexes are the merged list pip would build
        # from its configuration plus ours, since a variable replaces where an option adds.
        if options.index_url:
            env["PIP_INDEX_URL"] = options.index_url
        if options.extra_index_urls:
            from ..._pipconfig import index_config

            env["PIP_EXTRA_INDEX_URL"] = " ".join(index_config(options._replace(no_index=False)).index_urls[1:])
        return env

    def prepare(self, options: InstallOptions, requested: Requested, pin: str, scratch: str) -> list[str] | None:
        """pip resolves and installs in one run."""
        return None

    def settle(self, target: str) -> None:
        """pip's tree needs nothing: it records its bytecode in RECORD itself."""

    def closure(self, target: str, requested: Requested, scratch: str) -> tuple[Artifact, ...]:
        """What pip's report says it installed; nothing without one (an older pip)."""
        import json

        try:
            with open(os.path.join(scratch, REPORT), "rb") as handle:
                return artifacts(json.load(handle))
        except (OSError, ValueError):
            return ()


PIP = _Pip()
