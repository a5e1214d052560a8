"""Two qemu guests as two NFS client nodes (TCG emulation: any x86-64 host, no KVM), driven from the host.

Each node is a qemu process booting Debian's generic kernel with the host's ``/`` as its root over 9p (this venv
and these tests, at the same paths), set up by ``qemu/init.sh``. Node 1 serves: its knfsd exports a fresh ext4
disk, and it mounts that export over its own address like any client; node 2 mounts it over the cluster's
network. Both mount NFSv4.2 at ``$QEMU_DIR/mnt/a`` (only inside each guest), each kernel with its own caches, as
two machines of a cluster. Two NICs each: the cluster's network (qemu's ``dgram`` backend over two unix sockets,
point to point, ``10.0.9.0/24``) and qemu's user network, where the guest reaches the host's 127.0.0.1 as
``10.0.2.2`` (the test's index server).

The host drives a node over two channels: QMP (``set_link``, ``quit``: the faults) and the node's second serial
port, where ``qemu/agent.sh`` runs the shell commands the host sends and says when each is done. What a command
prints goes to a log on the host's disk (through 9p).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
HERE = Path(__file__).resolve().parent / "qemu"
QEMU_DIR = Path(os.environ.get("QEMU_DIR", "/var/tmp/repoinstall-qemu"))
#: Where the guests reach the host's 127.0.0.1 (qemu's user network).
HOST = "10.0.2.2"
SERVER_IP = "10.0.9.1"
#: Seconds a node lives at most: then it is killed, whatever it does.
LIFETIME = 1800


#: What the guests measured (boot times, wall times, what each fault left): the suite's closing summary prints
#: these (tests/conftest.py), so that a CI log shows them for passing tests too.
REPORTS: list[str] = []


def note(line: str) -> None:
    """Keep ``line`` for the closing summary (and print it, for ``-s``)."""
    REPORTS.append(line)
    print(line)


def unavailable() -> str | None:
    """Why no guest can run here (``None``: one can)."""
    if os.geteuid() != 0:
        return "needs root"
    if not shutil.which("qemu-system-x86_64"):
        return "needs qemu-system-x86_64"
    if not (QEMU_DIR / "ready").exists():
        return f"needs a prepared {QEMU_DIR} (tests/support/qemu/setup.sh {QEMU_DIR})"
    return None


class GuestError(AssertionError):
    """A node did not do what the test needs (did not boot, a command timed out)."""


class Node:
    """One qemu guest of the cluster: started by :meth:`start`, ready once its agent answered."""

    def __init__(self, work: Path, sockets: Path, name: str, ip: str, *, serves: bool, cpus: int = 2) -> None:
        self.work, self.name, self.ip, self.serves, self.cpus = work, name, ip, serves, cpus
        self.logs = work / f"{name}-logs"
        self.console = work / f"{name}-console.log"
        self.control = sockets / f"{name}.ctl"
        self.qmp_path = sockets / f"{name}.qmp"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        #: Seconds from power-on to the agent's first answer (the job's start).
        self.boot_seconds: float | None = None
        #: The guest's own uptime then, by its clock (a check that its clock runs as the host's does).
        self.guest_uptime: float | None = None
        self._ids = itertools.count(1)
        self._done: dict[str, int] = {}
        self._cond = threading.Condition()
        self._ctl: socket.socket | None = None
        self._qmp: socket.socket | None = None
        self._qmp_file: Any = None
        self._net: tuple[Path, Path] = (Path(), Path())
        self._disk: Path | None = None

    def command_line(self, net: tuple[Path, Path], disk: Path | None) -> list[str]:
        local, remote = net
        env = [
            f"QEMU_DIR={QEMU_DIR}",
            f"QEMU_INIT={HERE / 'init.sh'}",
            f"QEMUJOB={HERE / 'agent.sh'}",
            f"VM_LOGS={self.logs}",
            f"QEMU_NAME={self.name}",
            f"QEMU_IP={self.ip}/24",
            f"QEMU_SERVE={int(self.serves)}",
            f"QEMU_NFS_SERVER={SERVER_IP}",
            "QEMU_EXPORT_TO=*",
            "NFSVERS_B=none",
        ]
        line = [
            *("timeout", "-s", "KILL", str(LIFETIME)),  # a test killed before its teardown leaves no guest behind
            "qemu-system-x86_64",
            "-accel", "tcg,thread=multi",
            "-smp", str(self.cpus),
            "-m", "1536",
            "-display", "none",
            "-no-reboot",
            "-nodefaults",
            "-kernel", str(QEMU_DIR / "vmlinuz"),
            "-initrd", str(QEMU_DIR / "initrd.gz"),
            "-append", f"console=ttyS0 panic=-1 quiet mitigations=off tsc=reliable {_tsc_khz()}" + " ".join(env),
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,multidevs=remap",
            "-serial", f"file:{self.console}",
            "-chardev", f"socket,id=ctl,path={self.control},server=on,wait=off",
            "-serial", "chardev:ctl",
            "-qmp", f"unix:{self.qmp_path},server=on,wait=off",
            "-netdev", "user,id=host",
            "-device", "virtio-net-pci,netdev=host",
            "-netdev", f"dgram,id=cluster,local.type=unix,local.path={local},remote.type=unix,remote.path={remote}",
            "-device", f"virtio-net-pci,netdev=cluster,mac=52:54:00:00:09:{self.ip.rsplit('.', 1)[1]:0>2}",
        ]  # fmt: skip
        if disk is not None:
            line += ["-drive", f"file={disk},if=virtio,format=raw,cache=unsafe"]
        return line

    def start(self, net: tuple[Path, Path], disk: Path | None) -> None:
        """Power on; ``net``: this node's and its peer's end of the cluster's network; ``disk``: the export's."""
        self._net, self._disk = net, disk
        for stale in (self.control, self.qmp_path, net[0]):  # left by this node's previous run
            stale.unlink(missing_ok=True)
        self.boot_seconds = self.guest_uptime = None
        self.logs.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            self.command_line(net, disk),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.work / f"{self.name}-qemu.err", "wb"),  # noqa: SIM115 (the process keeps it)
            start_new_session=True,
        )
        self._ctl = _connect(self.control, self.proc)
        self._qmp = _connect(self.qmp_path, self.proc)
        self._qmp_file = self._qmp.makefile("rw", encoding="utf-8")
        self._qmp_file.readline()  # the greeting
        self.qmp("qmp_capabilities")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._ctl is not None
        buffer = b""
        while chunk := self._ctl.recv(4096):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                words = raw.decode(errors="replace").strip().split()
                with self._cond:
                    if words[:1] == ["@ready"] and self.boot_seconds is None:
                        self.boot_seconds = time.monotonic() - self.started
                        self.guest_uptime = float(words[1]) if len(words) > 1 else None
                    elif words[:1] == ["@done"] and len(words) == 3:
                        self._done[words[1]] = int(words[2])
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_ready(self, timeout: float = 300) -> float:
        with self._cond:
            if not self._cond.wait_for(lambda: self.boot_seconds is not None or not self.alive(), timeout):
                raise GuestError(f"{self.name} did not boot in {timeout:.0f} s: {self.console_tail()}")
        if self.boot_seconds is None:
            raise GuestError(f"{self.name} stopped before its job started: {self.console_tail()}")
        return self.boot_seconds

    def revive(self) -> None:
        """Power on again after :meth:`power_off`, with the same disk and network (a new boot of one machine)."""
        self.shut_down()
        self.start(self._net, self._disk)
        self.wait_ready()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self, command: str) -> str:
        """Start ``command`` (sh, from the project's root, HOME=/root) in the guest; its id for :meth:`wait`."""
        job = f"j{next(self._ids)}"
        line = f"{job} cd '{ROOT}' && export HOME=/root LANG=C.UTF-8 PYTHONUNBUFFERED=1 && {command}"
        assert "\n" not in line and self._ctl is not None
        self._ctl.sendall(line.encode() + b"\n")
        return job

    def wait(self, job: str, timeout: float = 600) -> tuple[int, str]:
        """``job``'s exit status and output, once it is done."""
        with self._cond:
            if not self._cond.wait_for(lambda: job in self._done or not self.alive(), timeout):
                raise GuestError(f"{self.name}: {job} not done in {timeout:.0f} s: {self.output(job)[-3000:]}")
            if job not in self._done:
                raise GuestError(f"{self.name} stopped while {job} ran: {self.console_tail()}")
            return self._done[job], self.output(job)

    def done(self, job: str) -> bool:
        with self._cond:
            return job in self._done

    def run(self, command: str, timeout: float = 600) -> tuple[int, str]:
        return self.wait(self.spawn(command), timeout)

    def output(self, job: str) -> str:
        with contextlib.suppress(OSError):
            return (self.logs / f"{job}.log").read_text(errors="replace")
        return ""

    def console_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.console.read_text(errors="replace")[-3000:]
        return ""

    def qmp(self, execute: str, **arguments: Any) -> Any:
        """One QMP command; its ``return`` (events that come first are skipped)."""
        request: dict[str, Any] = {"execute": execute}
        if arguments:
            request["arguments"] = arguments
        self._qmp_file.write(json.dumps(request) + "\n")
        self._qmp_file.flush()
        while line := self._qmp_file.readline():
            answer = json.loads(line)
            if "return" in answer:
                return answer["return"]
            if "error" in answer:
                raise GuestError(f"{self.name}: QMP {execute}: {answer['error']}")
        return None  # qemu is gone (after quit)

    def set_link(self, up: bool) -> None:
        """Plug or unplug the node's cable to the cluster's network (the host's network stays)."""
        self.qmp("set_link", name="cluster", up=up)

    def power_off(self) -> None:
        """Pull the plug: qemu stops at once, whatever the guest was doing."""
        with contextlib.suppress(OSError):
            self.qmp("quit")
        if self.proc is not None:
            self.proc.wait(30)

    def shut_down(self, timeout: float = 120) -> None:
        """Unmount and power off (the agent's ``poweroff``), or pull the plug if that does not happen in time."""
        if self.alive() and self._ctl is not None:
            with contextlib.suppress(OSError):
                self._ctl.sendall(b"poweroff\n")
            assert self.proc is not None
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        if self.alive():
            self.power_off()
        for channel in (self._ctl, self._qmp):
            if channel is not None:
                channel.close()


def _tsc_khz() -> str:
    """The host's TSC rate for the guest's kernel (``tsc_early_khz=``; emulated, its TSC is the host's): calibrated
    in the guest on a busy host, its clock would run at another speed than the host's (2.8 times, seen)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return f"tsc_early_khz={round(float(line.split(':')[1]) * 1000)} "
    return ""


def _connect(path: Path, proc: subprocess.Popen[bytes], timeout: float = 30) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(path))
            except OSError:
                sock.close()
                raise
            return sock
        if proc.poll() is not None or time.monotonic() > deadline:
            raise GuestError(f"qemu did not open {path} (exit {proc.poll()})")
        time.sleep(0.05)


class Cluster:
    """Node 1 (knfsd, and a client of its own export) and node 2 (a client over the network), booted together."""

    def __init__(self, work: Path) -> None:
        self.work = work
        #: The unix sockets (channels, network) in a short path: sun_path holds 107 bytes.
        self.sockets = Path(tempfile.mkdtemp(prefix="vm-"))
        self.server = Node(work, self.sockets, "node1", SERVER_IP, serves=True)
        self.client = Node(work, self.sockets, "node2", "10.0.9.2", serves=False)
        self.nodes = (self.server, self.client)

    def __enter__(self) -> Cluster:
        self.work.mkdir(parents=True, exist_ok=True)
        disk = self.work / "export.img"
        with open(disk, "wb") as image:
            image.truncate(1 << 30)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(disk)], check=True)
        one, two = self.sockets / "net1", self.sockets / "net2"
        self.server.start((one, two), disk)
        self.client.start((two, one), None)
        for node in self.nodes:
            node.wait_ready()
        return self

    def revive(self) -> None:
        """Power on again any client node a test powered off (its server's state for it has long expired)."""
        for node in self.nodes:
            if not node.alive():
                assert not node.serves, "the server's node is gone: its export with it"
                node.revive()

    def __exit__(self, *_: object) -> None:
        for node in reversed(self.nodes):  # the server last: a client's unmount waits for it
            node.shut_down()
        shutil.rmtree(self.sockets, ignore_errors=True)
