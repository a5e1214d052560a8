"""The installer: ``python -m pip install --target <staging>`` with the user's index options and pip config."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading

from ._errors import InstallError
from ._options import InstallOptions
from ._requirements import Requested

#: pip settings that would send files somewhere other than --target; everything else in PIP_* and pip.conf
#: (indexes, certificates, proxies, find-links) stays in force, since that is how users reach private indexes.
_DESTINATION_VARIABLES = ("PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_USER", "PIP_EDITABLE", "PIP_UPGRADE")
_TAIL_LINES = 12


def options_args(options: InstallOptions) -> list[str]:
    """The index and resolution options as pip arguments."""
    args: list[str] = []
    if options.index_url:
        args += ["--index-url", options.index_url]
    for url in options.extra_index_urls:
        args += ["--extra-index-url", url]
    for location in options.find_links:
        args += ["--find-links", location]
    if options.no_index:
        args.append("--no-index")
    for path in options.constraints:
        args += ["--constraint", os.path.abspath(path)]
    return args


def installer_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pip")
    except PackageNotFoundError:
        return "unknown"


def command(options: InstallOptions, target: str, requested: Requested, pin: str, scratch: str) -> list[str]:
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
        # Bytecode now, by the interpreter the tree is for (and recorded in RECORD): pods import from a shared,
        # maybe read-only volume and must never need to write __pycache__ there. Beats pip.conf's no-compile.
        "--compile",
        *options_args(options),
    ]
    if not requested.hashes:
        return [*base, "--", pin]
    # Hashes only travel in a requirements file; we write it from the validated pin, nothing user-shaped.
    path = os.path.join(scratch, "requirements.txt")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(pin + "".join(f" --hash={h}" for h in requested.hashes) + "\n")
    return [*base, "--require-hashes", "-r", path]


#: Installers running now, so a SIGTERM can stop all of them at once (worker threads included).
_running: set[subprocess.Popen[bytes]] = set()
_running_guard = threading.Lock()


def stop_all() -> None:
    """Kill every running installer: their ensures then fail, remove their staging dirs and release locks."""
    with _running_guard:
        for proc in _running:
            with contextlib.suppress(OSError):
                proc.kill()


def run(cmd: list[str], timeout: float, what: str) -> None:
    """Run the installer, bounded by ``timeout``; an :class:`InstallError` with the tail of its output on failure."""
    env = {k: v for k, v in os.environ.items() if k not in _DESTINATION_VARIABLES}
    try:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
        )
    except OSError as error:
        raise InstallError(f"{what}: cannot run {cmd[0]}: {error.strerror}") from None
    with _running_guard:
        _running.add(proc)
    try:
        with proc:
            try:
                output_bytes, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise InstallError(f"{what}: pip did not finish within {timeout:g}s (see --install-timeout)") from None
            except BaseException:
                proc.kill()  # interrupted (SIGTERM, Ctrl-C): pip must not outlive us writing into staging
                raise
    finally:
        with _running_guard:
            _running.discard(proc)
    if proc.returncode != 0:
        output = output_bytes.decode("utf-8", "replace")
        lines = [line for line in output.splitlines() if line.strip()]
        tail = "\n".join("  " + line for line in lines[-_TAIL_LINES:])
        reason = "the repo's filesystem is full" if "No space left on device" in output else "pip failed"
        raise InstallError(f"{what}: {reason} (exit {proc.returncode}):\n{tail}")
