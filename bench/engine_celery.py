"""Celery workers starting at once with the same packages: repoinstall's ``preload`` beside what Celery users do
without it, ``pip install --target`` in every pool process at ``worker_process_init``.

    python bench/engine_celery.py [--quick] [--rounds N]

Real parts: Debian's redis-server on 127.0.0.1 (broker and results), ``celery worker`` processes, the wheels
bench/common.py builds (3 of its adaptors, 7 distributions with their libraries) served by pypiserver. Two shapes,
N = 2 and 4: N workers (pods, prefork concurrency 1 each, one queue each) and one worker of prefork concurrency N.
Before the workers start, one small task per pool process that imports the 3 adaptors is queued; from their
start: seconds to the first result and until the last. Trees installed: for repoinstall, downloads of the
adaptors' wheels (a tree's installer run fetches its adaptor; every worker has its own empty cache); for the
baseline, 3 per pool process that ran pip. Downloads: every wheel the index served.
Celery has no mechanism of its own for this; the baseline raises ``worker_proc_alive_timeout`` (4 s by default,
less than a cold pip run of 3 packages), as its users must.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import redis
from common import PACKAGES, ROOT, machine, pod_env
from common import build as build_wheels
from servers import PypiServer, _bin, _wait_up, free_port

SPECS = [f"{name}==1.0" for name in PACKAGES[:3]]
REDIS = "/usr/bin/redis-server"
TIMEOUT = 600

TASKS = """
import os, subprocess, sys
from celery import Celery, signals

app = Celery("benchtasks", broker={broker!r}, backend={broker!r})
app.conf.worker_proc_alive_timeout = {timeout}  # the baseline's pip runs inside the pool process's start-up
SPECS = {specs!r}

if {ours!r}:
    from repoinstall.celery import preload

    preload(app, *SPECS, repo={repo!r}, install={{"index_url": {index!r}}})
else:
    @signals.worker_process_init.connect
    def install(**_):
        target = os.path.join({targets!r}, str(os.getpid()))
        subprocess.run([sys.executable, "-m", "pip", "install", "--target", target, "--index-url", {index!r},
                        "--no-input", "--disable-pip-version-check", "--no-warn-script-location", "--compile",
                        "-q", *SPECS], check=True)
        sys.path.insert(0, target)


@app.task
def probe():
    import fleet_a, fleet_b, fleet_c
    return os.getpid(), fleet_a.__file__
"""


class LoggingPypiServer(PypiServer):
    """pypiserver as bench/servers.py starts it, logging each request to a file (to count wheel downloads)."""

    def __init__(self, packages: Path, workdir: Path) -> None:
        self.packages = packages
        self.log = workdir / "pypiserver.log"
        self.requests = workdir / "requests.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.simple = self.url + "/simple"
        command = [_bin("pypi-server"), "run", "-p", str(self.port), "-i", "127.0.0.1", "-a", ".", "-P", ".",
                   "-v", "--log-file", str(self.requests), "--log-stream", "none", str(packages)]  # fmt: skip
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        _wait_up(self.url + "/", self.proc, self.log)

    def downloads(self) -> list[str]:
        """Every wheel served so far, one name per download."""
        lines = self.requests.read_text().splitlines() if self.requests.exists() else []
        return [line.split("/packages/")[1].rstrip(">") for line in lines if "GET" in line and "/packages/" in line]


class Broker:
    """A Redis of the benchmark's own on 127.0.0.1, no persistence."""

    def __init__(self, workdir: Path) -> None:
        port = free_port()
        command = [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                   "--dir", str(workdir)]  # fmt: skip
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{port}/0"
        self.client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("redis-server did not answer PING") from None
                time.sleep(0.05)

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


class Start(NamedTuple):
    first: float  # seconds from the workers' start to the first task result
    last: float  # ... to the last (every pool process answered, or every worker)
    trees: int  # trees installed, summed over the workers
    downloads: int  # wheels the index served


def start_workers(
    ours: bool, workers: int, concurrency: int, work: Path, broker: Broker, server: LoggingPypiServer
) -> Start:
    """Start ``workers`` workers of ``concurrency`` processes at once, each with a probe per process queued."""
    from celery import Celery

    work.mkdir(parents=True)
    (work / "targets").mkdir()
    module = TASKS.format(broker=broker.url, timeout=TIMEOUT, specs=SPECS, ours=ours, repo=str(work / "repo"),
                          index=server.simple, targets=str(work / "targets"))  # fmt: skip
    (work / "benchtasks.py").write_text(module)
    broker.client.flushdb()
    client = Celery("client", broker=broker.url, backend=broker.url)
    queues = [f"q{n}" for n in range(workers)]
    results = [client.send_task("benchtasks.probe", queue=q) for q in queues for _ in range(concurrency)]
    before = len(server.downloads())
    procs = []
    started = time.perf_counter()
    for n, queue in enumerate(queues):
        command = [sys.executable, "-m", "celery", "-A", "benchtasks", "worker", "-P", "prefork",
                   "-c", str(concurrency), "-Q", queue, "-n", f"w{n}@%h", "--without-gossip", "--without-mingle",
                   "--without-heartbeat", "-l", "warning"]  # fmt: skip
        env = pod_env(work / f"cache-{n}", PYTHONPATH=os.pathsep.join([str(ROOT), str(work)]))
        log = open(work / f"worker-{n}.log", "wb")  # noqa: SIM115 (closed with the worker)
        procs.append((subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=work), log))
    done: dict[int, float] = {}
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(done) < len(results):
            for index, result in enumerate(results):
                if index not in done and result.ready():
                    result.get()  # raises a failed probe's error
                    done[index] = time.perf_counter() - started
            if time.monotonic() > deadline:
                raise RuntimeError(f"probes not answered within {TIMEOUT}s; see {work}/worker-*.log")
            time.sleep(0.01)
    finally:
        for proc, _ in procs:
            proc.send_signal(signal.SIGTERM)
        for proc, log in procs:
            proc.wait(timeout=TIMEOUT)
            log.close()
        client.close()
    served = server.downloads()[before:]
    adaptors = tuple(f"{name.replace('-', '_')}-" for name in PACKAGES[:3])
    if ours:
        trees = sum(name.startswith(adaptors) for name in served)
    else:
        trees = len(SPECS) * sum(1 for target in (work / "targets").iterdir() if any(target.glob("fleet_a*")))
    return Start(min(done.values()), max(done.values()), trees, len(served))


def median(starts: list[Start]) -> Start:
    return Start(
        statistics.median(s.first for s in starts),
        statistics.median(s.last for s in starts),
        max(s.trees for s in starts),
        max(s.downloads for s in starts),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round (for CI)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per row (the median is shown)")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    if not os.access(REDIS, os.X_OK):
        sys.exit(f"{REDIS} is not installed (Debian: apt-get install redis-server)")
    import celery

    print(f"{machine()}; Celery {celery.__version__}; {rounds} round(s), medians; packages: {' '.join(SPECS)}")
    shapes = [(2, 1), (4, 1), (1, 2), (1, 4)]  # (workers, prefork concurrency)
    rows: dict[tuple[int, int], tuple[Start, Start]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp, "wheels")
        build_wheels(wheels)
        server = LoggingPypiServer(wheels, Path(tmp))
        broker = Broker(Path(tmp))
        try:
            for workers, concurrency in shapes:
                ours, baseline = [], []
                for round_ in range(rounds):
                    work = Path(tmp, f"{workers}x{concurrency}-{round_}")
                    ours.append(start_workers(True, workers, concurrency, work / "ours", broker, server))
                    baseline.append(start_workers(False, workers, concurrency, work / "pip", broker, server))
                rows[workers, concurrency] = median(ours), median(baseline)
        finally:
            broker.stop()
            server.stop()
    distinct = len(SPECS)
    print(
        f"\n{'':>14} | {'repoinstall.celery.preload':^36} | {'pip install --target per pool process':^38}\n"
        f"{'shape':>14} | {'first s':>7} {'last s':>7} {'trees':>6} {'wheels':>6} {'':>5} | "
        f"{'first s':>7} {'last s':>7} {'trees':>6} {'wheels':>6} {'':>7}"
    )
    for (workers, concurrency), (ours_row, pip_row) in rows.items():
        shape = f"{workers} worker{'s' if workers > 1 else ''} x c{concurrency}"
        print(
            f"{shape:>14} | {ours_row.first:>7.2f} {ours_row.last:>7.2f} {ours_row.trees:>6} {ours_row.downloads:>6} "
            f"{'':>5} | {pip_row.first:>7.2f} {pip_row.last:>7.2f} {pip_row.trees:>6} {pip_row.downloads:>6}"
        )
    once = all(row[0].trees == distinct for row in rows.values())
    print(
        f"repoinstall: trees installed = {distinct} (the distinct ones) for every shape: {'ok' if once else 'MISSED'}"
    )
    for (workers, concurrency), (ours_row, pip_row) in rows.items():
        print(
            f"{workers} x c{concurrency}: trees installed {ours_row.trees} vs {pip_row.trees}, wheels downloaded "
            f"{ours_row.downloads} vs {pip_row.downloads}, seconds to the last first result "
            f"{ours_row.last:.2f} vs {pip_row.last:.2f} (repoinstall vs pip --target per process)"
        )
    if not once:
        sys.exit(1)


if __name__ == "__main__":
    main()
