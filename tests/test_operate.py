"""Operating a repo: verify (and repair), gc, locks, doctor, and garbage that must heal or be named."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import (
    Pod,
    actions,
    document,
    ensure_args,
    find_links,
    finish,
    installed_paths,
    isolated_env,
    run,
    signal_group,
    snapshot,
    start,
    wait_until,
)
from indexserver import IndexServer

LOCK = ["--stale-after", "2", "--heartbeat", "0.4"]


def test_verify_finds_changed_missing_and_extra_files_and_repair_fixes_only_those(
    repo: Path, index: IndexServer
) -> None:
    a, b, d, e = installed_paths(
        repo, index.url, "adaptor-a==1.0", "adaptor-b==1.0", "adaptor-d==1.0", "adaptor-e==1.0"
    )
    clean = run("verify", "--repo", repo, "--json")
    assert clean.returncode == 0, clean.stdout
    assert [t["status"] for t in json.loads(clean.stdout)["trees"]] == ["ok"] * 4

    (a / "adaptor_a" / "__init__.py").write_text("VERSION = 'tampered'\n")
    (b / "dep_c" / "__init__.py").unlink()
    (d / "adaptor_d" / "planted.py").write_text("print('hi')\n")
    healthy = snapshot(e)
    found = run("verify", "--repo", repo, "--json")
    assert found.returncode == 1
    trees = {t["tree"]: t for t in json.loads(found.stdout)["trees"]}
    assert trees["adaptor-a==1.0"]["changed"] == ["adaptor_a/__init__.py"]
    assert trees["adaptor-b==1.0"]["missing"] == ["dep_c/__init__.py"]
    assert trees["adaptor-d==1.0"]["extra"] == ["adaptor_d/planted.py"]
    assert trees["adaptor-e==1.0"]["status"] == "ok"
    # The tree's file is a link of the stored distribution's: changed in place, the store's copy changed too.
    (stored,) = [d for d in json.loads(found.stdout)["store"] if d["status"] != "ok"]
    assert stored["dist"] == "adaptor-a==1.0" and stored["changed"] == ["adaptor_a/__init__.py"]

    fixed = run("verify", "--repo", repo, "--repair", "--json", *LOCK, *find_links(index.url))
    assert fixed.returncode == 0, fixed.stderr
    repaired = json.loads(fixed.stdout)["repaired"]
    assert [r["action"] for r in repaired if "dist" in r] == ["set aside"]  # first, so it is installed afresh
    assert sorted(r["action"] for r in repaired if "tree" in r) == ["reinstalled"] * 3
    assert run("verify", "--repo", repo).returncode == 0
    assert snapshot(e) == healthy
    assert index.downloads("adaptor_e") == 1


def test_repair_rerecords_a_whole_tree_without_pip(repo: Path, index: IndexServer) -> None:
    installed_paths(repo, index.url, "adaptor-a==1.0")
    next((repo / "records").rglob("1.json")).unlink()
    found = run("verify", "adaptor-a==1.0", "--repo", repo, "--json")
    assert found.returncode == 1
    assert json.loads(found.stdout)["trees"][0]["status"] == "unrecorded"
    fixed = run("verify", "adaptor-a==1.0", "--repo", repo, "--repair", "--json", *LOCK, *find_links(index.url))
    assert json.loads(fixed.stdout)["repaired"][0]["action"] == "re-recorded"
    assert index.downloads("adaptor_a") == 1
    missing = run("verify", "adaptor-h==1.0", "--repo", repo)
    assert missing.returncode == 1 and "missing" in missing.stdout


def test_gc_removes_a_dead_installers_staging_and_keeps_a_live_ones(repo: Path, index: IndexServer) -> None:
    index.delays["slow_pkg"] = 30.0
    index.delays["adaptor_d"] = 30.0
    dead = start(*ensure_args(repo, index.url, "slow-pkg==1.0"))
    live = start(*ensure_args(repo, index.url, "adaptor-d==1.0"))
    index.wait_for_download("slow_pkg")
    index.wait_for_download("adaptor_d")
    signal_group(dead, signal.SIGKILL)
    dead.wait()
    # Past the dead installer's stale threshold (its heartbeat stopped with it); the live one keeps beating.
    dead_note = next(p for p in (repo / "staging").rglob("owner.json") if f".{dead.pid}." in p.parent.name)
    wait_until(lambda: time.time() - dead_note.stat().st_mtime > 2.5, what="the dead installer's heartbeat to age")
    staging = sorted(p.name for p in (repo / "staging").glob("*/*"))
    assert len(staging) == 2
    dry = run("gc", "--repo", repo, "--older-than", "0", "--dry-run", *LOCK)
    assert dry.returncode == 0 and "would remove" in dry.stdout
    assert sorted(p.name for p in (repo / "staging").glob("*/*")) == staging
    done = run("gc", "--repo", repo, "--older-than", "0", "--json", *LOCK)
    assert done.returncode == 0, done.stderr
    removed = [r for r in json.loads(done.stdout)["removed"] if r["kind"] == "staging"]
    assert len(removed) == 1 and f"pid {dead.pid}" in removed[0]["reason"]
    left = [p.name for p in (repo / "staging").glob("*/*")]
    assert left == [n for n in staging if f".{live.pid}." in n]
    signal_group(live, signal.SIGKILL)
    live.wait()


def test_gc_unused_for_unpublishes_record_first_and_keeps_used_trees(repo: Path, index: IndexServer) -> None:
    a, d = installed_paths(repo, index.url, "adaptor-a==1.0", "adaptor-d==1.0")
    assert not list((repo / "records").rglob("*.used"))
    installed_paths(repo, index.url, "adaptor-a==1.0", "adaptor-d==1.0")  # a warm ensure notes "last ensured"
    used = next((repo / "records").rglob("adaptor-a/1.used"))
    old = time.time() - 10 * 86400
    os.utime(used, (old, old))
    kept = snapshot(d)
    done = run("gc", "--repo", repo, "--unused-for", "7d", "--json", *LOCK)
    assert done.returncode == 0, done.stderr
    assert [r["kind"] for r in json.loads(done.stdout)["removed"] if r["path"] == str(a)] == ["tree"]
    assert not a.exists() and not list((repo / "records").rglob("adaptor-a/1.json"))
    assert snapshot(d) == kept
    again = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    assert actions(again.stdout) == ["installed"]


def test_gc_unused_for_keeps_a_tree_a_process_on_this_host_uses(repo: Path, index: IndexServer) -> None:
    a, d = installed_paths(repo, index.url, "adaptor-a==1.0", "adaptor-d==1.0")
    installed_paths(repo, index.url, "adaptor-a==1.0", "adaptor-d==1.0")  # a warm ensure notes "last ensured"
    kept = snapshot(a)
    # The workers that import from a: one started as `repoinstall run` starts it (PYTHONPATH), one running a
    # file of the tree (its command line names it).
    env = {**isolated_env(), "PYTHONPATH": str(a)}
    worker = Pod([sys.executable, "-c", "import adaptor_a, time; print('ready', flush=True); time.sleep(60)"], env)
    script = Pod([sys.executable, "-c", "import time; time.sleep(60)", str(a / "adaptor_a" / "__init__.py")], env)
    try:
        wait_until(lambda: worker.out == ["ready\n"] or worker.poll() is not None, what="the worker to start")
        done = run("gc", "--repo", repo, "--unused-for", "0", "--json", *LOCK)
        assert done.returncode == 0, done.stderr  # in use is not unused: nothing failed
        assert [r["path"] for r in json.loads(done.stdout)["removed"] if r["kind"] == "tree"] == [str(d)]
        assert f"kept adaptor-a==1: in use: pid {worker.pid} (" in done.stderr, done.stderr
        assert "PYTHONPATH (and 1 other process)" in done.stderr, done.stderr
        assert snapshot(a) == kept and not d.exists()
        assert list((repo / "records").rglob("adaptor-a/1.json")), "its record stays: still installed"
        signal_group(worker, signal.SIGKILL)
        worker.wait()
        by_script = run("gc", "--repo", repo, "--unused-for", "0", *LOCK)
        assert by_script.returncode == 0 and a.is_dir(), by_script.stderr
        assert (
            f"kept adaptor-a==1: in use: pid {script.pid} (" in by_script.stderr and "command line" in by_script.stderr
        )
    finally:
        for pod in (worker, script):
            if pod.poll() is None:
                signal_group(pod, signal.SIGKILL)
            pod.wait()
    gone = run("gc", "--repo", repo, "--unused-for", "0", "--json", *LOCK)
    assert gone.returncode == 0, gone.stderr
    assert [r["path"] for r in json.loads(gone.stdout)["removed"] if r["kind"] == "tree"] == [str(a)]
    assert not a.exists() and not list((repo / "records").rglob("*.json"))


def test_gc_removes_idle_lock_state_and_trash(repo: Path, index: IndexServer) -> None:
    installed_paths(repo, index.url, "adaptor-a==1.0")
    (repo / "trash").mkdir(exist_ok=True)
    (repo / "trash" / "leftover").mkdir()
    assert list((repo / "locks").rglob("*.lock.rw"))
    done = run("gc", "--repo", repo, "--older-than", "0", *LOCK)
    assert done.returncode == 0, done.stderr
    assert not list((repo / "locks").rglob("*.lock.rw")) and not any((repo / "trash").iterdir())
    for args in ([], ["--dry-run"]):  # clean now: a sentence, not silence
        again = run("gc", "--repo", repo, "--older-than", "0", *LOCK, *args)
        assert (again.returncode, again.stdout) == (0, "nothing to do\n"), again
    assert actions(run(*ensure_args(repo, index.url, "adaptor-a==1.0")).stdout) == ["present"]
    assert actions(run(*ensure_args(repo, index.url, "adaptor-d==1.0")).stdout) == ["installed"]
    bad = run("gc", "--repo", repo, "--older-than", "soon")
    assert bad.returncode == 2 and bad.stderr.startswith("repoinstall: error: 'soon' is not a duration")


def test_gc_and_verify_of_an_empty_repo_say_there_is_nothing_to_do(repo: Path) -> None:
    repo.mkdir()
    for command, said in (
        (["gc", "--dry-run"], "nothing to do"),
        (["gc"], "nothing to do"),
        (["verify"], "nothing to verify"),
    ):
        shown = run(*command, "--repo", repo, *LOCK)
        assert (shown.returncode, shown.stdout, shown.stderr) == (0, f"{said}\n", ""), shown
        assert run(*command, "--repo", repo, *LOCK, "-q").stdout == ""
        as_json = json.loads(run(*command, "--repo", repo, *LOCK, "--json").stdout)  # the same document as before
        assert as_json.get("removed", []) == as_json.get("trees", []) == as_json.get("store", []) == [], as_json
    assert sorted(p.name for p in repo.iterdir()) == ["format", "trash"]


def test_locks_shows_the_holder_and_when_it_goes_stale(repo: Path, index: IndexServer) -> None:
    index.delays["slow_pkg"] = 8.0
    holder = start(*ensure_args(repo, index.url, "slow-pkg==1.0"))
    index.wait_for_download("slow_pkg")
    wait_until(lambda: any((repo / "locks").rglob("*.owner")), what="the holder's owner note")
    [lock] = json.loads(run("locks", "--repo", repo, "--json", "--stale-after", "2").stdout)["locks"]
    assert lock["held"] and lock["pid"] == holder.pid and lock["host"] == os.uname().nodename
    assert not lock["stale"] and lock["heartbeat_age"] is not None
    signal_group(holder, signal.SIGSTOP)
    [record] = (repo / "locks").rglob("*.lock.rw/holders/*")
    wait_until(lambda: time.time() - record.stat().st_mtime > 2.5, what="the paused holder's heartbeat to go stale")
    [lock] = json.loads(run("locks", "--repo", repo, "--json", "--stale-after", "2").stdout)["locks"]
    assert lock["held"] and lock["stale"]
    human = run("locks", "--repo", repo, "--stale-after", "2")
    assert f"held by {os.uname().nodename} pid {holder.pid}" in human.stdout and "STALE" in human.stdout
    signal_group(holder, signal.SIGCONT)
    assert finish(holder)[0] == 0
    [lock] = json.loads(run("locks", "--repo", repo, "--json").stdout)["locks"]
    assert not lock["held"]


def test_doctor_on_a_local_disk(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    done = run("doctor", "--repo", tmp_path / "repo", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    findings = {f["check"]: f for f in json.loads(done.stdout)["findings"]}
    assert findings["O_EXCL create"]["result"] == "exclusive"
    assert findings["hard links"]["result"] == "yes"
    assert findings["rename dir onto a taken name"]["result"].startswith("refused with ")
    assert not [p for p in (tmp_path / "repo").iterdir() if p.name.startswith(".doctor")]


def test_garbage_heals_or_is_named(repo: Path, index: IndexServer) -> None:
    a, b = installed_paths(repo, index.url, "adaptor-a==1.0", "adaptor-b==1.0")
    env = a.parent.parent.name
    healthy = snapshot(b)
    record_a = repo / "records" / env / "adaptor-a" / "1.json"
    record_b = repo / "records" / env / "adaptor-b" / "1.json"
    for garbage in (b"", b"{truncated", record_b.read_bytes(), b"\x00\xff binary"):
        record_a.write_bytes(garbage)  # empty, truncated, foreign, binary: a record that says nothing usable
        healed = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
        assert actions(healed.stdout) == ["repaired"], healed.stderr
        assert json.loads(record_a.read_text())["name"] == "adaptor-a"
    # Junk in a lock's holder records and a stray lock file: the lock still works.
    holders = next((repo / "locks").rglob("adaptor-a/1.lock.rw")) / "holders"
    holders.mkdir(exist_ok=True)
    (holders / ("0" * 32)).write_bytes(b"")
    (holders / "not-a-token").write_bytes(b"foreign")
    (holders.parent.parent / "1.lock").write_bytes(b"")
    record_a.unlink()
    assert actions(run(*ensure_args(repo, index.url, "adaptor-a==1.0")).stdout) == ["repaired"]
    # A file where a tree should be is set aside and the tree installed.
    tree_d = repo / "trees" / env / "adaptor-d" / "1"
    tree_d.parent.mkdir(parents=True)
    tree_d.write_text("not a tree")
    assert actions(run(*ensure_args(repo, index.url, "adaptor-d==1.0")).stdout) == ["installed"]
    # A file where a project's directory should be: a clear error naming it.
    (repo / "trees" / env / "adaptor-e").write_text("in the way")
    blocked = run(*ensure_args(repo, index.url, "adaptor-e==1.0"))
    assert blocked.returncode == 2
    assert blocked.stderr.strip() == (
        f"repoinstall: error: {repo / 'trees' / env / 'adaptor-e'} is not a directory (a regular file is in the way)"
    )
    assert snapshot(b) == healthy


# ---- lock debris: specs that never install leave no lock, and gc removes what dead holders left --------------------


def _below_locks(repo: Path) -> set[str]:
    """The projects with anything in locks/<env>/ (their directories, lock states and notes)."""
    return {p.relative_to(repo / "locks").parts[1] for p in (repo / "locks").glob("*/*")}


def _last_sign_of_life(lock_dir: Path) -> float:
    """The newest mtime in a project's lock directory: its lock state (log, holder records) and owner note."""
    return max(p.lstat().st_mtime for p in [lock_dir, *lock_dir.rglob("*")])


def test_specs_that_never_install_leave_no_lock_behind(repo: Path, index: IndexServer) -> None:
    never = [f"not-on-the-index-{n}==1.0" for n in range(4)]
    # Two pods at once, so a failing holder may have a peer waiting on it, or in its lock.
    pods = [start(*ensure_args(repo, index.url, *never, "adaptor-a==1.0"), "--jobs", "3") for _ in range(2)]
    for code, _, err in [finish(pod) for pod in pods]:
        assert code == 1, err
        assert len([line for line in err.splitlines() if line.startswith("repoinstall: error:")]) == 4, err
        assert "lost the lock" not in err and "Traceback" not in err, err
    # Only the installed tree's lock is left (gc's to remove once idle); nothing in staging/ or trash/.
    assert _below_locks(repo) == {"adaptor-a"}
    assert not list((repo / "staging").glob("*/*")) and not list((repo / "trash").iterdir())


def test_gc_removes_a_dead_holders_lock_of_a_tree_never_published_once_stale_and_never_a_live_ones(
    repo: Path, index: IndexServer
) -> None:
    lease = ["--stale-after", "8", "--heartbeat", "0.5"]
    index.delays["slow_pkg"] = 60.0
    index.delays["adaptor_d"] = 60.0
    dead = start(*ensure_args(repo, index.url, "slow-pkg==1.0", fast=False), *lease)
    live = start(*ensure_args(repo, index.url, "adaptor-d==1.0", fast=False), *lease)
    index.wait_for_download("slow_pkg")
    index.wait_for_download("adaptor_d")
    wait_until(lambda: len(list((repo / "locks").rglob("*.owner"))) == 2, what="both holders' owner notes")
    [env] = [p.name for p in (repo / "locks").iterdir()]
    dead_lock, live_lock = repo / "locks" / env / "slow-pkg", repo / "locks" / env / "adaptor-d"
    signal_group(dead, signal.SIGKILL)  # the holder and its pip, mid-install: the tree never appears
    dead.wait()
    gc = ["gc", "--repo", repo, "--older-than", "0", *lease, "--json"]

    def locks_removed(done: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
        assert done.returncode == 0, done.stderr
        return [r for r in json.loads(done.stdout)["removed"] if r["kind"] in ("lock", "note")]

    # Not yet proven gone: its last heartbeat is younger than the stale threshold.
    early = run(*gc)
    assert time.time() - _last_sign_of_life(dead_lock) < 8, "gc ran too late to show it keeps a young lock"
    assert locks_removed(early) == [] and (dead_lock / "1.lock.rw").is_dir()
    wait_until(lambda: time.time() - _last_sign_of_life(dead_lock) > 8.5, what="the dead holder's lock to age")
    # --dry-run lists it and removes nothing.
    listed = locks_removed(run(*gc, "--dry-run"))
    assert [(r["path"], r["done"]) for r in listed if r["kind"] == "lock"] == [(str(dead_lock / "1.lock.rw"), False)]
    assert "never installed" in str(listed[0]["reason"]) and (dead_lock / "1.lock.rw").is_dir()
    # Proven gone: its state, its owner note and its directory go; the live holder's lock stays, whole.
    removed = locks_removed(run(*gc))
    assert {(r["path"], r["done"]) for r in removed} == {
        (str(dead_lock / "1.lock.rw"), True),
        (str(dead_lock / "1.owner"), True),
        (str(dead_lock), True),
    }
    assert not dead_lock.exists() and (live_lock / "1.lock.rw" / "holders").is_dir()
    assert (live_lock / "1.owner").is_file() and live.poll() is None
    assert "lost the lock" not in "".join(live.err)
    signal_group(live, signal.SIGKILL)
    live.wait()
    index.delays.clear()
    assert actions(run(*ensure_args(repo, index.url, "slow-pkg==1.0")).stdout) == ["installed"]


def test_locks_spells_the_version_as_ensure_and_list_do(repo: Path, index: IndexServer) -> None:
    index.delays["adaptor_a-1.0"] = 8.0
    holder = start(*ensure_args(repo, index.url, "adaptor-a==1.0"))  # "1.0": its tree and lock are named "1"
    index.wait_for_download("adaptor_a-1.0")
    wait_until(lambda: any((repo / "locks").rglob("*.owner")), what="the holder's owner note")
    [held] = json.loads(run("locks", "--repo", repo, "--json").stdout)["locks"]
    assert held["held"] and held["tree"] == "adaptor-a==1.0" and held["path"].endswith("/adaptor-a/1.lock.rw")
    assert run("locks", "--repo", repo).stdout.startswith("adaptor-a==1.0  ")
    code, out, err = finish(holder)
    assert code == 0, err
    [package] = document(out)["packages"]
    assert (package["name"], package["version"]) == ("adaptor-a", "1.0")
    assert run("list", "--repo", repo).stdout.splitlines()[1].startswith("  adaptor-a==1.0  ")
    # Free now: named as its record spells it.
    [free] = json.loads(run("locks", "--repo", repo, "--json").stdout)["locks"]
    assert not free["held"] and free["tree"] == "adaptor-a==1.0"
    assert run("locks", "--repo", repo).stdout.startswith("adaptor-a==1.0  ")
