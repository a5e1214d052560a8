"""Running repoinstall as real processes, with pip isolated from this machine's configuration."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

T = TypeVar("T")

#: The installer the ``installer`` fixture chose for this test (``None``: repoinstall's default).
INSTALLER: str | None = None


def isolated_env(**extra: str) -> dict[str, str]:
    """The environment minus every PIP_* and UV_* setting, with pip's config files switched off (and no pip or
    uv cache, so the test server sees every download)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "REPOINSTALL_"))}
    if INSTALLER is not None:
        env["REPOINSTALL_INSTALLER"] = INSTALLER
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_CACHE_DIR="1",
        UV_NO_CACHE="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONUNBUFFERED="1",
        NETRC=os.devnull,
    )
    env.update(extra)
    return env


def cli(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "repoinstall", *map(str, args)]


def run(
    *args: str | Path, env: dict[str, str] | None = None, timeout: float = 180, cwd: str | Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli(*args),
        env=env or isolated_env(),
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


class Pod(subprocess.Popen[str]):
    """A "pod": its own process group, so a test can SIGKILL or SIGSTOP it together with its pip. Its output is
    read as it comes, so a test can wait for a line it logs (:func:`wait_for_stderr`) instead of sleeping."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        super().__init__(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=_drain, args=(stream, lines), daemon=True)
            for stream, lines in ((self.stdout, self.out), (self.stderr, self.err))
        ]
        for reader in self._readers:
            reader.start()

    def finish(self, timeout: float) -> tuple[int, str, str]:
        self.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout)
        return self.returncode, "".join(self.out), "".join(self.err)


def _drain(stream: IO[str] | None, lines: list[str]) -> None:
    assert stream is not None
    for line in stream:
        lines.append(line)


def start(*args: str | Path, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> Pod:
    return Pod([*prefix, *cli(*args)], env or isolated_env())


def finish(proc: Pod, timeout: float = 180) -> tuple[int, str, str]:
    return proc.finish(timeout)


def wait_for_stderr(proc: Pod, text: str, timeout: float = 60.0) -> None:
    """Wait until ``proc`` has written ``text`` on stderr (e.g. the "waiting for" line of a waiter)."""

    def seen() -> bool:
        if text in "".join(proc.err):
            return True
        if proc.poll() is not None and not any(r.is_alive() for r in proc._readers):
            raise AssertionError(
                f"pid {proc.pid} exited ({proc.returncode}) before saying {text!r}: {''.join(proc.err)}"
            )
        return False

    wait_until(seen, timeout, what=f"{text!r} on the stderr of pid {proc.pid}")


def signal_group(proc: subprocess.Popen[str], sig: signal.Signals) -> None:
    os.killpg(proc.pid, sig)


def ensure_args(repo: Path, index_url: str, *specs: str, fast: bool = True) -> list[str]:
    args = ["ensure", *specs, "--repo", str(repo), "--no-index", "--find-links", index_url, "--json"]
    if fast:
        args += ["--stale-after", "2", "--heartbeat", "0.4"]
    return args


def document(stdout: str) -> dict[str, Any]:
    return json.loads(stdout)


def actions(stdout: str) -> list[str]:
    return [p["action"] for p in document(stdout)["packages"]]


def import_version(tree: str | Path, module: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}; print({module}.VERSION)"],
        env={**isolated_env(), "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def wait_until(predicate: Any, timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``predicate`` until it is true. A predicate that scans a repo other processes are changing may meet a
    directory removed mid-scan (FileNotFoundError): that poll counts as not yet, and the next one looks again."""
    deadline = time.monotonic() + timeout
    while not _holds(predicate):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _holds(predicate: Any) -> bool:
    try:
        return bool(predicate())
    except FileNotFoundError:
        return False


def snapshot(repo: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``repo`` with (size, mtime_ns): to prove a run changed nothing."""
    found = {}
    if repo.exists():
        for path in sorted(repo.rglob("*")):
            st = path.lstat()
            found[str(path.relative_to(repo))] = (st.st_size, st.st_mtime_ns)
    return found


async def while_ticking(awaitable: Awaitable[T], during: Callable[[], bool]) -> tuple[T, int]:
    """Await ``awaitable`` while a task ticks every 10 ms; returns how many ticks came while ``during()`` was
    true (e.g. a slow request in flight): any at all shows the loop stayed free while it was awaited."""
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += during()
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    try:
        return await awaitable, ticks
    finally:
        done.set()
        await task


@contextlib.contextmanager
def tmpfs(mountpoint: Path, size: str) -> Iterator[Path]:
    """A fresh tmpfs of ``size`` at ``mountpoint`` (a filesystem of its own), unmounted afterwards; needs root."""
    import pytest

    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount a tmpfs")
    mountpoint.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mountpoint)], check=True)
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def find_links(index_url: str) -> list[str]:
    """The index options of a command that installs from the tests' find-links page only."""
    return ["--no-index", "--find-links", index_url]


def installed_paths(repo: Path, index_url: str, *specs: str) -> list[Path]:
    """Ensure ``specs`` into ``repo``; the path of each tree, in order."""
    done = run(*ensure_args(repo, index_url, *specs))
    assert done.returncode == 0, done.stderr
    return [Path(p["path"]) for p in document(done.stdout)["packages"]]


def pip_target(target: Path, *wheels: Path, compile: bool = True) -> None:
    """``pip install --target`` of local wheel files, no index, no dependencies; bytecode compiled or not."""
    command = [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--target", str(target)]
    command.append("--compile" if compile else "--no-compile")
    done = subprocess.run([*command, *map(str, wheels)], env=isolated_env(), capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
