"""The benchmarks still run (short mode) and the warm CLI path imports nothing heavy. No timing asserted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
#: Read at import: the tests' autouse fixture clears REPOINSTALL_* from the environment of each test.
REQUIRED = os.environ.get("REPOINSTALL_REQUIRE_FUSE") == "1"  # CI: a skip here would hide a missing install step


def bench(script: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """A benchmark in its short mode; it must exit 0."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--quick"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_warm_benchmark_runs_and_warm_cli_imports_nothing_heavy() -> None:
    done = bench("warm.py")
    assert "us/package" in done.stdout
    # The warm CLI beside the typer import: ms, its ratio, the goal, the ratio before, modules (all, ours).
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("warm CLI, 10 packages ")]
    ms, ratio, goal, before, modules, ours = row.removeprefix("warm CLI, 10 packages ").split()
    assert float(ms) > 0 and float(ratio) > 0 and goal == "1.30" and float(before) > 0, row
    assert 0 < int(ours) < int(modules), row
    assert "heavy modules imported on the warm CLI path: none" in done.stdout, done.stdout
    # The warm ensure -r of a pylock.toml and of a hashed requirements file, in pairs beside the typer import.
    for label in ("-r pylock.toml ", "-r requirements.txt ", "10 specs "):
        (row,) = [line for line in done.stdout.splitlines() if line.startswith(label)]
        ms, typer_ms, ratio, spread, goal, before, ours = row.removeprefix(label).split()
        assert float(ms) > 0 and float(typer_ms) > 0 and float(ratio) > 0 and "-" in spread and goal == "1.30", row
        assert float(before) > 1 and int(ours) > 0, row
    assert "lock file parsers imported on these warm runs: none" in done.stdout, done.stdout


def test_resolution_benchmark_runs_and_the_fleet_asks_once_per_package() -> None:
    done = bench("resolve.py")
    assert "pypiserver (HTML)" in done.stdout
    assert "at most 1 request(s) per package (target <= 1): ok" in done.stdout, done.stdout
    assert "installer downloads: 5 for 5 trees" in done.stdout, done.stdout


def test_fleet_benchmark_runs_each_tree_once_and_each_distribution_once() -> None:
    done = bench("fleet.py")
    assert "pip install --target" in done.stdout and "baseline broken results in 2 fleet starts:" in done.stdout
    assert "trees installed = 5 for every N, none broken: ok" in done.stdout, done.stdout
    assert "distributions installed = 9 (the distinct ones; 15 before the store) for every N: N=1: 9, N=4: 9" in (
        done.stdout
    ), done.stdout
    assert "its libraries stored: 1 distribution(s) installed (target 1): ok" in done.stdout, done.stdout


def test_installers_benchmark_compares_pip_and_uv() -> None:
    done = bench("installers.py")
    rows = [line.split() for line in done.stdout.splitlines()]
    rows = [row for row in rows if row[:1] in (["pip"], ["uv"]) and row[1].isdigit()]
    assert sorted((row[0], row[1]) for row in rows) == [("pip", "1"), ("pip", "4"), ("uv", "1"), ("uv", "4")]
    assert "uv speed-up, --jobs 1: cold" in done.stdout


def test_takeover_benchmark_measures_a_real_takeover() -> None:
    done = bench("takeover.py")  # it exits non-zero unless the waiter installed the tree after the SIGKILL
    assert "every takeover within stale + heartbeat + install:" in done.stdout, done.stdout


def test_gc_race_benchmark_runs_and_gc_takes_only_dead_staging_dirs() -> None:
    done = bench("gcrace.py")
    header, row = (line.split(" | ") for line in done.stdout.splitlines()[-2:])
    figures = dict(zip(header, row, strict=True))
    assert figures["failed"] == figures["trees not ok"] == figures["deleted outside"] == "0", done.stdout
    assert figures["dead left"] == "0" != figures["killed"], done.stdout
    assert int(figures["staging removed"]) <= int(figures["killed"]), done.stdout


def test_nfs_benchmark_counts_operations_on_kernel_nfs() -> None:
    import pytest
    from vm import unavailable

    reason = unavailable()
    if reason is not None:
        if REQUIRED:
            pytest.fail(f"the NFS benchmark is required here but cannot run: {reason}")
        pytest.skip(reason)
    done = bench("nfsops.py", timeout=1800)  # it boots the guest; it exits non-zero if a waiter failed
    assert "NFS ops per waiting pod per second:" in done.stdout, done.stdout
    assert "publish to waiter done (s):" in done.stdout and "warm ensure of 4 packages again:" in done.stdout


def test_store_benchmark_installs_each_distribution_once() -> None:
    done = bench("store.py")
    assert "4 adaptors x 3 versions over 6 shared libraries: 12 trees" in done.stdout, done.stdout
    assert "distributions installed: 18 (distinct: 18; naive: 48)" in done.stdout, done.stdout


def test_dask_benchmark_installs_each_tree_once_for_every_worker_count() -> None:
    done = bench("engine_dask.py")
    assert "PipInstall --target: 3 pip runs, 21 wheel downloads" in done.stdout, done.stdout  # N=2: scheduler + 2
    assert "none for the worker added later: ok" in done.stdout, done.stdout


def test_ray_benchmark_installs_each_tree_once_for_every_n() -> None:
    done = bench("engine_ray.py")
    assert "N=2 repoinstall plugin" in done.stdout and "N=4 repoinstall plugin" in done.stdout, done.stdout
    assert "N=2 ray pip runtime_env" in done.stdout and "N=4 ray pip runtime_env" in done.stdout, done.stdout
    assert "repoinstall: 3 trees and 7 wheel downloads for every N (" in done.stdout, done.stdout
    assert "): ok" in done.stdout, done.stdout


def test_oci_benchmark_pushes_only_new_layers_and_one_digest_per_distribution() -> None:
    import shutil

    import pytest

    if not all(shutil.which(tool) for tool in ("docker-registry", "skopeo", "umoci", "strace")):
        pytest.skip("needs docker-registry, skopeo, umoci and strace (bash .ci/run installs them)")
    done = bench("oci.py")
    out = done.stdout
    assert "second tree: 1 of 4 layers uploaded" in out, out  # only the app; its three libraries were there
    assert "uploaded 0 of 4 layers; manifest the same" in out, out
    assert "repoinstall --from" in out and "pip / --from:" in out and "uv / --from:" in out, out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(("the unpacked image", "the tree"))]
    assert len(rows) == 2 and all(row[-2:] == ["0", "0"] for row in rows), out  # no source read, nothing written
    assert "5. hydrating 1 trees, 4 layers" in out and "each pair's ratio: median" in out, out
    assert "target at most 1.5x" in out, out


def test_bytecode_benchmark_prints_each_installer_beside_its_bare_run_and_target() -> None:
    done = bench("bytecode.py")  # it exits non-zero unless every repoinstall tree verified
    for installer, target in (("pip", "1.0"), ("uv", "1.2")):
        assert f"repoinstall with {installer} / bare {installer}: " in done.stdout, done.stdout
        assert f"(target <= {target}: " in done.stdout, done.stdout
    assert "bare uv pip install --target --compile-bytecode" in done.stdout, done.stdout


def test_nocompile_benchmark_prints_its_ratio_beside_the_target_and_the_imports() -> None:
    done = bench("nocompile.py")
    out = done.stdout
    assert "bare uv pip install --target (no bytecode)" in out and "(target <= 3.0: " in out, out
    rows = {line.split("|")[0].strip(): line.split("|")[-1].split() for line in out.splitlines() if "|" in line}
    # What one import opens and writes: opens, sources, pycs, writes. Without bytecode, sources are read and
    # nothing written (read-only); with a cache prefix, the first import writes and the next ones read pycs.
    if rows["with bytecode, read-only"] != ["0", "0", "0", "0"]:  # all zero: no strace here
        assert rows["with bytecode, read-only"][2:] != ["0", "0"] and rows["with bytecode, read-only"][1] == "0", out
        assert rows["--no-compile, read-only"][1] != "0" and rows["--no-compile, read-only"][2:] == ["0", "0"], out
        assert rows["--no-compile, PYTHONPYCACHEPREFIX: first import"][3] != "0", out
        assert rows["--no-compile, PYTHONPYCACHEPREFIX: later imports"][1::2] == ["0", "0"], out


def test_cold_benchmark_prints_each_ratio_beside_its_target_and_the_figure_before() -> None:
    done = bench("cold.py")  # it exits non-zero unless each side succeeded and the warm-up's trees verified
    for installer, bare, target in (
        ("uv", "uv pip install --target --compile-bytecode", "1.2"),
        ("pip", "pip install --target", "1.0"),
    ):
        (row,) = [
            line for line in done.stdout.splitlines() if line.startswith(f"repoinstall --installer {installer} / ")
        ]
        assert f" / {bare}: " in row and f"target <= {target}: " in row and "; before: " in row, row
        assert re.search(r": \d+\.\d\dx \(rounds \d+\.\d\d-\d+\.\d\d; CPU \d+\.\d\dx\)", row), row


def test_lockkinds_benchmark_lands_every_kind_of_one_resolution_in_one_tree() -> None:
    done = bench("lockkinds.py")  # it exits non-zero if a kind failed, landed in a second tree, or its export failed
    for installer in ("pip", "uv"):
        assert f"\nwith {installer}, each set's kinds in turn into one new repo\n" in done.stdout, done.stdout
    summaries = re.findall(r"1 distinct tree\(s\); (\d) of (\d) kinds in the first tree", done.stdout)
    assert len(summaries) == 2 and all(a == b and int(a) >= 5 for a, b in summaries), done.stdout
    assert done.stdout.count("export T1 (fleet-b + fleet-c): ok") == 2, done.stdout
    rows = [line for line in done.stdout.splitlines() if line.count(" | ") == 6 and not line.startswith("set ")]
    assert len(rows) >= 10 and all(line.split(" | ")[-1].startswith("composed ") for line in rows), done.stdout
