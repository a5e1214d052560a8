"""``repoinstall remove`` (and ``Repo.remove``): named trees go as gc's unused ones do, under their lock, record
first, through trash/; a tree in use stays whole; a spec that names nothing is skipped. And ``-U``/``--upgrade``
mean ``--refresh``. Real processes, real wheels, an index on 127.0.0.1, pip isolated (see conftest)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from helpers import (
    Pod,
    actions,
    document,
    ensure_args,
    isolated_env,
    run,
    signal_group,
    snapshot,
    start,
    wait_until,
)
from indexserver import IndexServer

from repoinstall import Removed, Repo

LOCK = ["--stale-after", "2", "--heartbeat", "0.4"]


def _ensure(repo: Path, index: IndexServer, *specs: str) -> dict[str, Path]:
    done = run(*ensure_args(repo, index.url, *specs))
    assert done.returncode == 0, done.stderr
    return {f"{p['name']}=={p['version']}": Path(p["path"]) for p in document(done.stdout)["packages"]}


def _remove(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run("remove", *args, "--repo", repo, *LOCK)


def _records(repo: Path) -> list[str]:
    return sorted(str(p.relative_to(repo / "records")) for p in (repo / "records").rglob("*.json"))


def _lock_debris(repo: Path, project: str) -> list[Path]:
    """What is left of a project's locks: its lock directory and anything in it."""
    return [p for p in (repo / "locks").glob(f"*/{project}")] + list((repo / "locks").glob(f"*/{project}/*"))


def test_remove_unpublishes_record_and_tree_through_trash_and_leaves_no_lock(repo: Path, index: IndexServer) -> None:
    trees = _ensure(repo, index, "adaptor-a==1.0", "adaptor-a==1.1", "adaptor-d==1.0")
    assert _lock_debris(repo, "adaptor-a"), "ensure leaves an installed tree's lock state (gc's to remove when idle)"
    others = {name: snapshot(trees[name]) for name in ("adaptor-a==1.1", "adaptor-d==1.0")}

    done = _remove(repo, "adaptor-a==1.0", "--json")
    assert done.returncode == 0, done.stderr
    [outcome] = document(done.stdout)["trees"]
    assert (outcome["tree"], outcome["action"]) == ("adaptor-a==1.0", "removed")
    assert outcome["path"] == str(trees["adaptor-a==1.0"]) and not trees["adaptor-a==1.0"].exists()
    assert [r for r in _records(repo) if "/adaptor-a/" in r] == [r for r in _records(repo) if r.endswith("a/1.1.json")]
    assert not list((repo / "records").rglob("adaptor-a/1.used"))
    assert not any((repo / "trash").iterdir()), "deleted in trash/, nothing left there"
    # Its lock state went with it (nobody else was in it); the other version's lock is untouched.
    assert not [p for p in _lock_debris(repo, "adaptor-a") if p.name.startswith("1.") and not p.name.startswith("1.1")]
    assert {name: snapshot(trees[name]) for name in others} == others
    listed = run("list", "--repo", repo, "--json")
    assert sorted(t["name"] + "==" + t["version"] for t in document(listed.stdout)["trees"]) == [
        "adaptor-a==1.1",
        "adaptor-d==1.0",
    ]
    # Removed means not installed: the next ensure installs it again.
    assert actions(run(*ensure_args(repo, index.url, "adaptor-a==1.0")).stdout) == ["installed"]


def test_a_bare_name_or_range_removes_every_installed_tree_it_admits(repo: Path, index: IndexServer) -> None:
    trees = _ensure(repo, index, "adaptor-a==1.0", "adaptor-a==1.1", "adaptor-a==2.0", "adaptor-x[fast]==1.0")
    ranged = _remove(repo, "adaptor-a>=1.1")
    assert ranged.returncode == 0, ranged.stderr
    assert [line.split()[:2] for line in ranged.stdout.splitlines()] == [
        ["removed", "adaptor-a==1.1"],
        ["removed", "adaptor-a==2.0"],
    ]
    assert trees["adaptor-a==1.0"].exists() and not trees["adaptor-a==2.0"].exists()
    # Extras are part of a tree's name: adaptor-x names no tree; adaptor-x[fast] does.
    plain = _remove(repo, "adaptor-x", "adaptor-a")
    assert plain.returncode == 0 and plain.stdout.split()[:2] == ["removed", "adaptor-a==1.0"], plain
    assert "skipping adaptor-x: not installed" in plain.stderr and trees["adaptor-x==1.0"].exists()
    extras = _remove(repo, "adaptor-x[fast]")
    assert extras.returncode == 0 and "adaptor-x[fast]==1.0" in extras.stdout and not trees["adaptor-x==1.0"].exists()
    assert _records(repo) == [] and not any((repo / "trash").iterdir())


def test_dry_run_says_what_would_go_and_changes_nothing(repo: Path, index: IndexServer) -> None:
    trees = _ensure(repo, index, "adaptor-a==1.0", "adaptor-a==1.1")
    before = snapshot(repo)
    dry = _remove(repo, "adaptor-a", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert [line.split()[:3] for line in dry.stdout.splitlines()] == [
        ["would", "remove", "adaptor-a==1.0"],
        ["would", "remove", "adaptor-a==1.1"],
    ]
    as_json = _remove(repo, "adaptor-a==1.1", "--dry-run", "--json")
    assert document(as_json.stdout)["dry_run"] is True
    assert [t["action"] for t in document(as_json.stdout)["trees"]] == ["would-remove"]
    assert snapshot(repo) == before and all(tree.exists() for tree in trees.values())


def test_a_spec_that_names_no_installed_tree_is_skipped_with_one_warning(repo: Path, index: IndexServer) -> None:
    trees = _ensure(repo, index, "adaptor-a==1.0")
    done = _remove(repo, "adaptor-h==1.0", "adaptor-a==1.0", "adaptor-a==2.0")
    assert done.returncode == 0, done.stderr  # as pip uninstall: a warning, exit 0; the others still go
    warnings = done.stderr.splitlines()
    assert len(warnings) == 2 and all("not installed in" in line for line in warnings), done.stderr
    assert warnings[0].startswith("repoinstall: skipping adaptor-h==1.0: not installed")
    assert not trees["adaptor-a==1.0"].exists()
    for args in ([], ["--dry-run"]):  # nothing named is installed: a sentence on stdout after the warning
        nothing = _remove(repo, "adaptor-a==1.0", *args)
        assert (nothing.returncode, nothing.stdout) == (0, "nothing to remove\n"), nothing
    as_json = _remove(repo, "adaptor-a==1.0", "--dry-run", "--json")  # the same document as before
    assert [t["action"] for t in document(as_json.stdout)["trees"]] == ["skipped"], as_json.stdout
    assert run("remove", "adaptor-a==1.0", "--repo", repo, "-q").stdout == ""
    assert run("remove", "adaptor-a==1.0", "--repo", repo, "-q").stderr.count("\n") == 1
    assert run("remove", "adaptor-a==1.0", "--repo", repo, "-qq").stderr == ""
    # No repo at all, no spec, a bad spec: one line, exit 2, nothing made.
    missing = run("remove", "adaptor-a==1.0", "--repo", repo / "nowhere")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and not (repo / "nowhere").exists()
    for args in ([], ["not a spec!"]):
        bad = run("remove", *args, "--repo", repo)
        assert bad.returncode == 2 and bad.stderr.startswith("repoinstall: error:"), bad
        assert bad.stderr.count("\n") == 1, bad.stderr


_HOLD = textwrap.dedent(
    """
    import sys, time
    from packaging.version import Version
    from repoinstall._options import LockSettings
    from repoinstall._disk.identity import TreeId, environment_tag
    from repoinstall._disk.layout import Layout
    from repoinstall._lock.key import tree_key
    from repoinstall._lock.locks import TreeLocks

    tid = TreeId(environment_tag(), sys.argv[2], Version(sys.argv[3]))
    with TreeLocks(Layout(sys.argv[1]), LockSettings(2, 0.4, 30)).hold(tree_key(tid)) as held:
        assert held.without is None and not held.peer_finished
        print("held", flush=True)
        time.sleep(600)
    """
)


def _holder(repo: Path, name: str, version: str) -> Pod:
    """A process that holds the tree's lock, heartbeat running: as an install or a repair of it would."""
    holder = Pod([sys.executable, "-c", _HOLD, str(repo), name, version], isolated_env())
    wait_until(lambda: holder.out == ["held\n"] or holder.poll() is not None, what="the holder to take the lock")
    assert holder.poll() is None, holder.err
    return holder


def test_a_tree_in_use_is_left_whole_exit_1_naming_it_and_the_others_go(repo: Path, index: IndexServer) -> None:
    trees = _ensure(repo, index, "adaptor-a==1.0", "adaptor-d==1.0")
    whole = snapshot(trees["adaptor-a==1.0"])
    holder = _holder(repo, "adaptor-a", "1.0")
    try:
        refused = _remove(repo, "adaptor-a==1.0", "adaptor-d==1.0", "--json")
        assert refused.returncode == 1
        [error] = refused.stderr.splitlines()  # one line, naming the tree and who uses it
        assert error.startswith("repoinstall: error: adaptor-a==1.0: not removed: in use: its lock is held by")
        assert f"pid {holder.pid}" in error
        outcomes = {t["tree"]: t["action"] for t in document(refused.stdout)["trees"]}
        assert outcomes == {"adaptor-a==1.0": "kept", "adaptor-d==1.0": "removed"}
        assert snapshot(trees["adaptor-a==1.0"]) == whole and not trees["adaptor-d==1.0"].exists()
        assert any(r.endswith("adaptor-a/1.json") for r in _records(repo)), "its record stays: still installed"
        assert actions(run(*ensure_args(repo, index.url, "adaptor-a==1.0")).stdout) == ["present"]
        # As gc: no waiting for the lock; a dead holder's lock is taken over once stale (here after 2 s).
        signal_group(holder, signal.SIGKILL)
        holder.wait()
        lock_dir = next((repo / "locks").glob("*/adaptor-a"))
        newest = max(p.lstat().st_mtime for p in [lock_dir, *lock_dir.rglob("*")])
        wait_until(lambda: time.time() - newest > 2.5, what="the dead holder's lock to go stale")
        taken_over = _remove(repo, "adaptor-a==1.0")
        assert taken_over.returncode == 0, taken_over.stderr
        assert not trees["adaptor-a==1.0"].exists() and _records(repo) == []
        assert not any((repo / "trash").iterdir()) and not list((repo / "locks").glob("*/adaptor-a"))
    finally:
        if holder.poll() is None:
            signal_group(holder, signal.SIGKILL)
            holder.wait()


def test_the_api_returns_what_was_removed(repo: Path, index: IndexServer) -> None:
    trees = _ensure(repo, index, "adaptor-a==1.0", "adaptor-a==1.1")
    with Repo(repo, stale_after=2, heartbeat=0.4) as store:
        planned = store.remove(["adaptor-a==1", "adaptor-a"], dry_run=True)  # one tree, however spelled: once
        assert [(r.requirement, r.tree, r.action) for r in planned] == [
            ("adaptor-a==1", "adaptor-a==1.0", "would-remove"),
            ("adaptor-a", "adaptor-a==1.1", "would-remove"),
        ]
        done = store.remove(["adaptor-a", "adaptor-h"])
    assert all(isinstance(r, Removed) for r in done)
    assert [(r.requirement, r.tree, r.action, r.reason) for r in done] == [
        ("adaptor-a", "adaptor-a==1.0", "removed", ""),
        ("adaptor-a", "adaptor-a==1.1", "removed", ""),
        ("adaptor-h", "", "skipped", "not installed"),
    ]
    assert all(r.ok for r in done) and [r.path for r in done[:2]] == [str(trees[n]) for n in sorted(trees)]
    assert json.loads(json.dumps(done[0].as_dict()))["action"] == "removed"


def test_dash_u_and_upgrade_mean_refresh(repo: Path, index: IndexServer) -> None:
    _ensure(repo, index, "adaptor-a==1.0")
    # Offline first: the installed 1.0 satisfies the range; -U asks the index and installs the newest match.
    assert _ensure(repo, index, "adaptor-a<2").keys() == {"adaptor-a==1.0"}
    for flag, expect in (("-U", "1.1"), ("--upgrade", "1.1"), ("--refresh", "1.1")):
        done = run(*ensure_args(repo, index.url, "adaptor-a<2"), flag)
        assert done.returncode == 0, done.stderr
        [package] = document(done.stdout)["packages"]
        assert package["version"] == expect, (flag, package)
    assert index.downloads("adaptor_a") == 2  # 1.0, then 1.1 once: the later flags found it installed
    help_text = run("ensure", "--help").stdout
    assert "-U, --refresh, --upgrade" in help_text
    assert "-U, --refresh, --upgrade" in run("run", "--help").stdout


def test_a_symlink_at_a_tree_path_is_left_alone_and_named(repo: Path, index: IndexServer, tmp_path: Path) -> None:
    trees = _ensure(repo, index, "adaptor-a==1.0")
    outside = tmp_path / "outside"
    trees["adaptor-a==1.0"].rename(outside)
    trees["adaptor-a==1.0"].symlink_to(outside)
    kept = _remove(repo, "adaptor-a==1.0")
    assert kept.returncode == 1 and kept.stderr.splitlines() == [
        "repoinstall: error: adaptor-a==1.0: not removed: a symlink on its path: left alone"
    ], kept.stderr
    assert trees["adaptor-a==1.0"].is_symlink() and (outside / "adaptor_a" / "__init__.py").is_file()
    assert any(r.endswith("adaptor-a/1.json") for r in _records(repo)), "its record stays with it, as gc leaves it"


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _kill(*pods: Pod) -> None:
    for pod in pods:
        if pod.poll() is None:
            signal_group(pod, signal.SIGKILL)
        pod.wait()


def test_a_tree_a_process_on_this_host_uses_is_left_whole_exit_1_naming_the_process(
    repo: Path, index: IndexServer
) -> None:
    trees = _ensure(repo, index, "adaptor-a==1.0", "adaptor-d==1.0", "adaptor-e==1.0")
    whole = {name: snapshot(trees[name]) for name in ("adaptor-a==1.0", "adaptor-d==1.0")}
    pods: list[Pod] = []
    try:
        # A worker that imported a pure-Python module from the tree keeps no file of it open: its PYTHONPATH
        # names the tree. Another only stands in the tree (its working directory).
        worker = Pod(
            [sys.executable, "-c", "import adaptor_a, time; print('ready', flush=True); time.sleep(60)"],
            isolated_env(PYTHONPATH=str(trees["adaptor-a==1.0"])),
        )
        pods.append(worker)
        inside = Pod(
            ["sh", "-c", 'cd "$1" && exec sleep 60', "sh", str(trees["adaptor-d==1.0"] / "adaptor_d")], isolated_env()
        )
        pods.append(inside)
        wait_until(lambda: worker.out == ["ready\n"] and _comm(inside.pid) == "sleep", what="the workers to start")

        refused = _remove(repo, "adaptor-a==1.0", "adaptor-d==1.0", "adaptor-e==1.0", "--json")
        assert refused.returncode == 1, refused.stderr
        errors = refused.stderr.splitlines()  # one line per tree, naming it and the process that uses it
        assert errors == [
            f"repoinstall: error: adaptor-a==1.0: not removed: in use: pid {worker.pid} ({_comm(worker.pid)}): "
            "PYTHONPATH",
            f"repoinstall: error: adaptor-d==1.0: not removed: in use: pid {inside.pid} (sleep): cwd",
        ], refused.stderr
        outcomes = {t["tree"]: t["action"] for t in document(refused.stdout)["trees"]}
        assert outcomes == {"adaptor-a==1.0": "kept", "adaptor-d==1.0": "kept", "adaptor-e==1.0": "removed"}
        assert {name: snapshot(trees[name]) for name in whole} == whole and not trees["adaptor-e==1.0"].exists()
        assert [r for r in _records(repo) if r.endswith("/1.json")] == [
            r for r in _records(repo) if "/adaptor-a/" in r or "/adaptor-d/" in r
        ]
        dry = _remove(repo, "adaptor-a==1.0", "--dry-run")  # what would happen: the same answer, nothing done
        assert dry.returncode == 1 and f"in use: pid {worker.pid}" in dry.stderr and dry.stdout == ""

        # `repoinstall run` starts its command with the trees on PYTHONPATH (exec: the same pid).
        runner = start(
            "run", "adaptor-a==1.0", "--repo", repo, "--no-index", "--find-links", index.url, "--", "sleep", "60"
        )
        pods.append(runner)
        wait_until(lambda: _comm(runner.pid) == "sleep" or runner.poll() is not None, what="run to exec sleep")
        _kill(worker)
        still = _remove(repo, "adaptor-a==1.0")
        assert still.returncode == 1 and still.stderr.splitlines() == [
            f"repoinstall: error: adaptor-a==1.0: not removed: in use: pid {runner.pid} (sleep): PYTHONPATH"
        ], still.stderr
        assert snapshot(trees["adaptor-a==1.0"]) == whole["adaptor-a==1.0"]

        # Once nothing uses them, they go.
        _kill(runner, inside)
        done = _remove(repo, "adaptor-a==1.0", "adaptor-d==1.0")
        assert done.returncode == 0, done.stderr
        assert not trees["adaptor-a==1.0"].exists() and not trees["adaptor-d==1.0"].exists()
        assert _records(repo) == [] and not any((repo / "trash").iterdir())
    finally:
        _kill(*pods)


def test_two_processes_using_a_tree_the_lowest_pid_is_named_with_how_many_more(repo: Path, index: IndexServer) -> None:
    trees = _ensure(repo, index, "adaptor-a==1.0")
    env = isolated_env(PYTHONPATH=str(trees["adaptor-a==1.0"]))
    pods = [Pod(["sleep", "60"], env) for _ in range(3)]
    try:
        with Repo(repo, stale_after=2, heartbeat=0.4) as store:
            [kept] = store.remove(["adaptor-a==1.0"])
        first = min(pod.pid for pod in pods)
        assert (kept.action, kept.reason) == (
            "kept",
            f"in use: pid {first} (sleep): PYTHONPATH (and 2 other processes)",
        )
        assert not kept.ok and trees["adaptor-a==1.0"].is_dir()
    finally:
        _kill(*pods)
