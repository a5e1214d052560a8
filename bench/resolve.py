"""Resolution benchmark: unpinned specs against real index servers on 127.0.0.1.

    python bench/resolve.py [--quick]

Prints (1) cold resolve time per package (no cache on the volume, nothing installed) against pypiserver
(HTML; Requires-Python read from each chosen wheel by range requests) and devpi-server (JSON), beside the
same with the volume cache warm; (2) how many index requests 8 pods starting at once make for the same
5 unpinned packages. Target for (2): at most one request per package per cache period.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from helpers import cli, isolated_env  # noqa: E402
from indexserver import IndexServer  # noqa: E402
from servers import DevpiServer, PypiServer  # noqa: E402
from wheels import make_wheel  # noqa: E402

from repoinstall import InstallOptions, Repo  # noqa: E402
from repoinstall._pipconfig import pip_settings  # noqa: E402

PACKAGES = [f"bench-{letter}" for letter in "abcde"]
VERSIONS = [f"1.{minor}" for minor in range(10)]


def build(directory: Path) -> None:
    for name in PACKAGES:
        for version in VERSIONS:
            make_wheel(directory, name, version, requires_python=">=3.8")


def resolve_ms(index_url: str, work: Path, rounds: int, *, warm: bool) -> float:
    """Median milliseconds per package to resolve the five, each round in a fresh repo (cold) or the same."""
    timings = []
    shared = work / "warm-repo"
    for round_ in range(rounds):
        root = shared if warm else work / f"cold-{round_}"
        with Repo(root, install=InstallOptions(index_url=index_url), index_ttl=3600) as repo:
            if warm:
                for name in PACKAGES:
                    repo.resolve(f"{name}>=1")
            started = time.perf_counter()
            for name in PACKAGES:
                tid = repo.resolve(f"{name}>=1")
                assert tid is not None and str(tid.version) == VERSIONS[-1], tid
            timings.append((time.perf_counter() - started) / len(PACKAGES) * 1000)
    return statistics.median(timings)


def fleet(wheels: Path, work: Path, pods: int) -> tuple[dict[str, int], float, int]:
    """``pods`` processes ensure the five unpinned at once: resolution requests per package, wall time, installs."""
    server = IndexServer(wheels).start()
    repo = work / "fleet-repo"
    try:
        started = time.perf_counter()
        procs = [
            subprocess.Popen(
                cli("ensure", *PACKAGES, "--repo", repo, "--index-url", server.simple, "-q"),
                env=isolated_env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(pods)
        ]
        for proc in procs:
            _, err = proc.communicate(timeout=600)
            if proc.returncode != 0:
                raise SystemExit(f"a pod failed: {err.decode()}")
        wall = time.perf_counter() - started
        installs = sum(1 for name in server.completed if name.endswith(".whl") and "-1.9-" in name)
        return {name: server.pages[name] for name in PACKAGES}, wall, installs
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, pypiserver only (for CI)")
    args = parser.parse_args()
    rounds = 3 if args.quick else 15
    # Only this process's configuration is isolated: the pods get isolated_env().
    for key in [k for k in os.environ if k.startswith("PIP_")]:
        del os.environ[key]
    os.environ["PIP_CONFIG_FILE"] = os.devnull
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        wheels = work / "wheels"
        wheels.mkdir()
        build(wheels)
        started = time.perf_counter()
        pip_settings(sys.executable)
        print(f"reading pip's configuration (once per process): {(time.perf_counter() - started) * 1000:.0f} ms")
        servers: list[tuple[str, str, object]] = []
        pypi = PypiServer(wheels, work)
        servers.append(("pypiserver (HTML)", pypi.simple, pypi))
        if not args.quick:
            devpi = DevpiServer(work)
            index = devpi.index("dev", type="stage", bases=[], volatile=True)
            for wheel in sorted(wheels.glob("*.whl")):
                devpi.upload("dev", wheel, ">=3.8")
            servers.append(("devpi-server (JSON)", index, devpi))
        print(f"\n{'server':<22}{'cold ms/package':>18}{'cache warm ms/package':>24}")
        try:
            for label, url, _ in servers:
                cold = resolve_ms(url, work / label.split()[0], rounds, warm=False)
                warm = resolve_ms(url, work / label.split()[0], rounds, warm=True)
                print(f"{label:<22}{cold:>18.1f}{warm:>24.2f}")
        finally:
            for _, _, server in servers:
                server.stop()  # type: ignore[attr-defined]
        counts, wall, installs = fleet(wheels, work, 8)
        print("\n8 pods ensure the same 5 unpinned packages at once (one cache period):")
        print(f"{'package':<12}{'index requests':>16}")
        for name, count in counts.items():
            print(f"{name:<12}{count:>16}")
        worst = max(counts.values())
        verdict = "ok" if worst <= 1 else "OVER TARGET"
        print(f"at most {worst} request(s) per package (target <= 1): {verdict}")
        print(f"installer downloads: {installs} for {len(PACKAGES)} trees; wall time {wall:.1f} s")


if __name__ == "__main__":
    main()
