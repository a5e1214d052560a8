"""The uv backend: ``uv pip install --target <staging> --python <interpreter>``, meaning what pip would.

uv reads neither pip.conf nor ``PIP_*``, and has its own configuration. So that an index option means the
same under both installers, uv gets pip's effective settings (as the resolver reads them) on its command
line, with ``--no-config`` and without the ``UV_*`` variables that choose indexes or destinations:

* indexes are searched like pip does, best version across all of them (``--index-strategy unsafe-best-match``);
* constraints, find-links, ``--no-index``, trusted hosts, ``pre``, ``only-binary``/``no-binary`` carry over;
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

from ._errors import InstallError
from ._installer import hashed_requirements
from ._options import InstallOptions
from ._requirements import Requested

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


class _Uv:
    name = "uv"

    def version(self) -> str:
        return _version(_binary())

    def command(self, options: InstallOptions, target: str, requested: Requested, pin: str, scratch: str) -> list[str]:
        from ._pipconfig import index_config, pip_settings

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
        if config.index_urls:
            args += ["--index-url", config.index_urls[0]]
            for url in config.index_urls[1:]:
                args += ["--extra-index-url", url]
        else:
            args.append("--no-index")
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
        if not requested.hashes:
            return [*args, "--", pin]
        return [*args, "--require-hashes", "-r", hashed_requirements(scratch, requested, pin)]

    def environment(self, options: InstallOptions) -> dict[str, str]:
        from ._pipconfig import index_config, pip_settings

        config = index_config(options)
        pip = pip_settings(options.python)
        env = {k: v for k, v in os.environ.items() if k not in _OVERRIDDEN}
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
        """Make uv's tree look like pip's: no uv lock file, and compiled bytecode listed in its dist's RECORD."""
        from ._dists import record_rows, scan, tree_relative

        dists = scan(target)
        owner: dict[str, str] = {}  # recorded source file -> the dist-info whose RECORD lists it
        recorded: set[str] = set()
        for dist in dists:
            for row in record_rows(target, dist) or []:
                if row and (relative := tree_relative(row[0])) is not None:
                    recorded.add(relative)
                    if relative.endswith(".py"):
                        owner[relative] = dist.dist_info
        lock = os.path.join(target, ".lock")  # uv's lock on the target environment, not part of any dist
        if ".lock" not in recorded and os.path.isfile(lock) and not os.path.islink(lock):
            os.unlink(lock)
        added: dict[str, list[str]] = {}
        for directory, _, files in os.walk(target):
            if os.path.basename(directory) != "__pycache__":
                continue
            parent = os.path.relpath(os.path.dirname(directory), target)
            for name in sorted(files):
                match = _PYC.match(name)
                relative = os.path.relpath(os.path.join(directory, name), target)
                if match is None or relative in recorded:
                    continue
                source = os.path.normpath(os.path.join(parent, match["stem"] + ".py"))
                if source in owner:
                    # Like pip: bytecode is listed without a hash (it is only checked to exist).
                    added.setdefault(owner[source], []).append(relative)
        for dist_info, bytecode in added.items():
            record = os.path.join(target, dist_info, "RECORD")
            with open(record, encoding="utf-8", newline="") as handle:
                rows = handle.read()
            more = io.StringIO()
            csv.writer(more, lineterminator="\n").writerows([relative, "", ""] for relative in bytecode)
            with open(record, "w", encoding="utf-8", newline="") as handle:  # staging is private: no reader
                handle.write(rows if rows.endswith("\n") or not rows else rows + "\n")
                handle.write(more.getvalue())


UV = _Uv()
