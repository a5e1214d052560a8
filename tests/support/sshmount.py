"""An sshfs mount over 127.0.0.1, served by an sshd of our own on a free port: a harsh network filesystem.

sshfs shows a hard link as a separate file (its own inode), reports a rename onto a taken directory as EPERM
and caches attributes for about 20 s.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

from helpers import wait_until

SSHD = "/usr/sbin/sshd"


def sshfs_missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if not shutil.which("sshfs") or not os.path.exists(SSHD) or not shutil.which("ssh-keygen"):
        return "needs sshfs and openssh-server"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def sshfs_mounted(base: Path, backing: Path, mountpoint: Path) -> Iterator[Path]:
    keys = base / "ssh"
    keys.mkdir()
    for name in ("client", "host"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name)], check=True)
    shutil.copy(keys / "client.pub", keys / "authorized_keys")
    port = _free_port()
    config = keys / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host'}\n"
        f"AuthorizedKeysFile {keys / 'authorized_keys'}\n"
        f"PidFile {keys / 'sshd.pid'}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nSubsystem sftp internal-sftp\n"
    )
    os.makedirs("/run/sshd", exist_ok=True)
    sshd = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=subprocess.DEVNULL)
    mountpoint.mkdir(exist_ok=True)
    try:
        options = f"IdentityFile={keys / 'client'},StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes"

        def mount() -> bool:
            done = subprocess.run(
                ["sshfs", "-p", str(port), "-o", options, f"root@127.0.0.1:{backing}", str(mountpoint)],
                capture_output=True,
                check=False,
            )
            return done.returncode == 0

        wait_until(mount, timeout=20, what="sshfs mount")
        yield mountpoint
    finally:
        subprocess.run(["fusermount", "-u", "-z", str(mountpoint)], capture_output=True, check=False)
        sshd.terminate()
        sshd.wait(timeout=10)
