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
* bytecode is compiled (``--compile-bytecode``) and, as pip does, listed in RECORD by :meth:`_Uv.settle`.
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

    def command(self, options: InstallOptions, target: str, requested: Requested, pin: str, scratch: str) -> list[str]:
        from ..._pipconfig import index_config, pip_settings

        config = index_config(options)
        pip = pip_settings(options.python)
        args = [
            _binary(),
            "pip",
            "install",
            "--target",
            target,
            "--python",
            options.python,
            "--no-config",
            "--color",
            "never",
            "--no-progress",
            "--compile-bytecode",
            "--link-mode",
            "copy",
            "--index-strategy",
            "unsafe-best-match",
        ]
        if not config.index_urls:
            args.append("--no-index")  # the index URLs themselves travel in the environment (see environment())
        if not _find_links_in_environment(config.find_links):
            for location in config.find_links:
                args += ["--find-links", location]
        for path in config.constraints:
            args += ["--constraint", os.path.abspath(path)]
        for host in config.trusted_hosts:
            args += ["--allow-insecure-host", host]
        if config.pre:
            args += ["--prerelease", "allow"]
        for flag in ("only-binary", "no-binary"):
            for value in _values(pip.get(flag)):
                args += [f"--{flag}", value]
        if options.cache_dir:
            args += ["--cache-dir", os.path.join(os.path.abspath(options.cache_dir), "uv")]
        if requested.locked:  # a lock file's tree: ``pin`` is its requirements file, every line hashed
            return [*args, "--no-deps", "--require-hashes", "-r", pin]
        if not requested.hashes:
            return [*args, "--", pin]
        return [*args, "--require-hashes", "-r", hashed_requirements(scratch, requested, pin)]

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

    def settle(self, target: str) -> None:
        """Make uv's tree look like pip's: no uv lock file, and compiled bytecode listed in its dist's RECORD.

        Walked by descriptor like every other tree walk (no symlink followed, no recursion)."""
        from ..._store import fs as _fs
        from ..._store import walk as _walk
        from ..._store.dists import RECORD_LIMIT, opened, record_rows, scan, tree_relative

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


UV = _Uv()
