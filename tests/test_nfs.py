"""The protocol on the real Linux kernel NFS client: tests/nfs runs inside one guest whose kernel serves one export
(knfsd) and mounts it twice (NFSv4.2 and NFSv3). The guest's root is the host's / (9p or hostfs), so this venv
and these tests run in it unchanged.

The guest is a User-Mode-Linux kernel where one boots here (an ordinary process, several times faster than
emulation), else a qemu guest (TCG emulation: any x86-64 host, no KVM). UML 6.1 panics at init on a CPU with AMX
or AVX-512 state; a trial boot decides, once per run. Needs root and a prepared QEMU_DIR
(tests/support/qemu/setup.sh; UML_DIR with tests/support/uml/setup.sh), which .ci/run prepares. Two guests as two
machines, and the faults only they can show, are in tests/test_nfs_cluster.py (always qemu)."""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from vm import QEMU_DIR, note, unavailable

ROOT = Path(__file__).parent.parent
GUEST = ROOT / "tests" / "support" / "qemu.sh"
UML = ROOT / "tests" / "support" / "uml.sh"
UML_DIR = Path(os.environ.get("UML_DIR", "/var/tmp/repoinstall-uml"))
#: ``qemu`` or ``uml`` runs the suite in that guest only (``uml`` fails where it does not boot); unset, a trial boot
#: chooses User-Mode-Linux where it boots, else qemu.
CHOICE = os.environ.get("REPOINSTALL_NFS_GUEST", "")
REQUIRED = os.environ.get("REPOINSTALL_REQUIRE_FUSE") == "1"  # CI: a skip here would hide a missing install step
#: The whole guest run, boot to power-off; the guest is killed after it.
TIMEOUT = 1800


@functools.cache
def _uml_boots() -> bool:
    """Whether a User-Mode-Linux guest boots here and runs a job (a trial boot of a few seconds), and is chosen."""
    if CHOICE == "qemu":
        return False
    if CHOICE not in ("", "uml"):
        pytest.fail(f"REPOINSTALL_NFS_GUEST={CHOICE!r}: use qemu or uml")
    if os.geteuid() != 0 or not (UML_DIR / "ready").exists():
        return False
    with tempfile.TemporaryDirectory(prefix="umltry-") as scratch:
        job = Path(scratch, "job.sh")
        job.write_text("exit 0\n")
        env = {**os.environ, "UML_DIR": str(UML_DIR)}
        try:
            done = subprocess.run([str(UML), str(job)], env=env, capture_output=True, timeout=120, check=False)
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0


def _guest(tmp_path: Path, command: str, **env: str) -> tuple[int, str, float, float | None]:
    """Run ``command`` (shell) in the guest from the project root, as root with a plain environment; its exit
    status, its output, the wall time of the whole guest run (power-on to power-off) and the seconds from
    power-on to the job's start (None if it never started)."""
    uml = _uml_boots()
    reason = None if uml else unavailable()
    if CHOICE == "uml" and not uml:
        pytest.fail("REPOINSTALL_NFS_GUEST=uml, but a User-Mode-Linux guest does not boot here")
    if reason is not None:
        if REQUIRED:
            pytest.fail(f"the kernel NFS tests are required here but cannot run: {reason}")
        pytest.skip(reason)
    log = tmp_path / "guest.log"
    job = tmp_path / "job.sh"
    exports = "".join(f"export {key}='{value}'\n" for key, value in env.items())
    job.write_text(
        f"cd '{ROOT}'\nexport HOME=/root LANG=C.UTF-8 PYTHONUNBUFFERED=1\n{exports}{command} > '{log}' 2>&1\n"
    )
    started = time.monotonic()
    booted: float | None = None
    console: list[str] = []
    guest = subprocess.Popen(
        [str(UML if uml else GUEST), str(job)],
        env={**os.environ, "QEMU_DIR": str(QEMU_DIR), "QEMU_TIMEOUT": str(TIMEOUT), "UML_DIR": str(UML_DIR)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,  # a timeout ends the guest too, not only its runner
    )
    watchdog = threading.Timer(TIMEOUT + 60, lambda: os.killpg(guest.pid, signal.SIGKILL))
    watchdog.start()
    try:
        assert guest.stdout is not None
        for line in guest.stdout:
            console.append(line)
            if booted is None and "] job start" in line:
                booted = time.monotonic() - started
        code = guest.wait()
    finally:
        watchdog.cancel()
    seconds = time.monotonic() - started
    output = log.read_text() if log.exists() else "".join(console)[-3000:]
    return code, output, seconds, booted


def test_the_protocol_on_kernel_nfs(tmp_path: Path) -> None:
    where = UML_DIR if _uml_boots() else QEMU_DIR
    mounts = f"{where}/mnt/a:{where}/mnt/b:{where}/mnt/export"
    report = tmp_path / "report.txt"
    report.touch()
    pytest_cmd = (
        f"'{sys.executable}' -m pytest -q -p no:cacheprovider -rfE --durations=0 --basetemp='{tmp_path / 'guest'}' "
        "tests/nfs"
    )
    code, output, seconds, booted = _guest(
        tmp_path,
        pytest_cmd,
        REPOINSTALL_NFS=mounts,
        REPOINSTALL_NFS_REPORT=str(report),
        REPOINSTALL_NFS_GUEST_KIND="uml" if _uml_boots() else "qemu",
    )
    summary = re.findall(r"^=*\s*(\d+ (?:passed|failed).*?)\s*=*$", output, re.M)
    boot = f"{booted:.0f} s" if booted is not None else "never"
    note(
        f"kernel NFS guest ({'User-Mode-Linux' if _uml_boots() else 'qemu, TCG'}): job started {boot} after "
        f"power-on; exit {code} in {seconds:.0f} s: " + (summary[-1] if summary else "?")
    )
    for line in report.read_text().splitlines():
        note(line)
    assert booted is not None, output[-6000:]
    assert code == 0, output[-6000:]
    assert summary and "failed" not in summary[-1] and "error" not in summary[-1], output[-6000:]
