"""The protocol on the real Linux kernel NFS client: tests/nfs runs inside a User-Mode-Linux guest whose kernel
serves one export (knfsd) and mounts it twice (NFSv4.2 and NFSv3). The guest is an ordinary process; its root is
the host's / (hostfs), so this venv and these tests run in it unchanged. Needs root and a prepared UML_DIR
(tests/support/uml/setup.sh, which .ci/run runs)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
UML = ROOT / "tests" / "support" / "uml.sh"
UML_DIR = Path(os.environ.get("UML_DIR", "/var/tmp/repoinstall-uml"))
REQUIRED = os.environ.get("REPOINSTALL_REQUIRE_FUSE") == "1"  # CI: a skip here would hide a missing install step


def _guest(tmp_path: Path, command: str, **env: str) -> tuple[int, str, float]:
    """Run ``command`` (shell) in the guest from the project root, as root with a plain environment; its exit
    status, its output and the wall time of the whole guest run (boot to power-off)."""
    if os.geteuid() != 0 or not (UML_DIR / "ready").exists():
        reason = f"needs root and a prepared {UML_DIR} (tests/support/uml/setup.sh {UML_DIR})"
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
    env = {**os.environ, "UML_DIR": str(UML_DIR)}
    done = subprocess.run([str(UML), str(job)], env=env, capture_output=True, text=True, timeout=1500, check=False)
    seconds = time.monotonic() - started
    output = log.read_text() if log.exists() else done.stdout[-3000:]
    return done.returncode, output, seconds


def test_the_protocol_on_kernel_nfs(tmp_path: Path) -> None:
    mounts = f"{UML_DIR}/mnt/a:{UML_DIR}/mnt/b:{UML_DIR}/mnt/export"
    report = tmp_path / "report.txt"
    report.touch()
    pytest_cmd = f"'{sys.executable}' -m pytest -q -p no:cacheprovider -rfE --basetemp='{tmp_path / 'guest'}' tests/nfs"
    code, output, seconds = _guest(tmp_path, pytest_cmd, REPOINSTALL_NFS=mounts, REPOINSTALL_NFS_REPORT=str(report))
    summary = re.findall(r"^=*\s*(\d+ (?:passed|failed).*?)\s*=*$", output, re.M)
    print(f"\nkernel NFS guest: exit {code} in {seconds:.0f} s: {summary[-1] if summary else '?'}")
    print(report.read_text(), end="")
    assert code == 0, output[-6000:]
    assert summary and "failed" not in summary[-1] and "error" not in summary[-1], output[-6000:]
