"""Operating the store of distributions: gc removes a stored distribution only when no tree holds it (no record
names it, no tree links it, it is older than the stale threshold, its lock is free), and ``list --json`` and
``doctor`` show the store's figures. Real processes, real wheels, an index on 127.0.0.1 (see conftest)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fusemount import fuse_missing, mounted
from helpers import cli, document, ensure_args, import_version, isolated_env, run, wait_until
from indexserver import IndexServer

from repoinstall._disk.layout import Layout
from repoinstall._lock.key import LockKey
from repoinstall._lock.locks import open_lock
from repoinstall._lock.taken import Unusable
from repoinstall._options import LockSettings

LOCK = ["--stale-after", "2", "--heartbeat", "0.4"]


def _ensure(repo: Path, index: IndexServer, *specs: str, extra: tuple[str, ...] = ()) -> dict[str, Path]:
    done = run(*ensure_args(repo, index.url, *specs), *extra)
    assert done.returncode == 0, done.stderr
    return {f"{p['name']}=={p['version']}": Path(p["path"]) for p in document(done.stdout)["packages"]}


def _stored(repo: Path) -> dict[str, Path]:
    """Each stored distribution's dir by its project name."""
    return {p.parent.name: p for p in (repo / "store").glob("*/*/*")}


def _sizes(*tops: Path) -> int:
    """Sizes of the regular files below ``tops``, each counted (as if each were its own copy)."""
    return sum(p.lstat().st_size for top in tops for p in top.rglob("*") if p.is_file() and not p.is_symlink())


def _store_figures(repo: Path, *extra: str) -> dict[str, int]:
    done = run("list", "--repo", repo, "--json", *extra)
    assert done.returncode == 0, done.stderr
    figures: dict[str, int] = document(done.stdout)["store"]
    return figures


def _gc(repo: Path, *args: str) -> list[dict[str, object]]:
    done = run("gc", "--repo", repo, "--json", *LOCK, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    removed: list[dict[str, object]] = document(done.stdout)["removed"]
    return removed


def _age_past(paths: list[Path], seconds: float) -> None:
    """Wait until every path's directory (mtime and ctime: the rename that stored it sets the ctime) is older than
    ``seconds``: ctime cannot be set back, so this waits for real."""
    wait_until(
        lambda: all(time.time() - max(p.stat().st_mtime, p.stat().st_ctime) > seconds for p in paths),
        timeout=seconds + 30,
        what="the stored distributions to age",
    )


def test_gc_keeps_a_shared_distribution_and_removes_one_only_a_removed_tree_held(
    repo: Path, index: IndexServer
) -> None:
    trees = _ensure(repo, index, "adaptor-b==1.0", "adaptor-x[fast]==1.0")
    stored = _stored(repo)
    assert sorted(stored) == ["adaptor-b", "adaptor-x", "dep-c"]
    # Both trees hold dep-c: its bytes are on disk once, and the second tree's copy is what links save.
    figures = _store_figures(repo)
    assert figures["distributions"] == 3
    assert figures["bytes"] == _sizes(*stored.values())
    assert figures["tree_bytes"] == _sizes(*trees.values())
    assert figures["bytes_saved"] == _sizes(stored["dep-c"]) > 0
    doctor = run("doctor", "--repo", repo, "--json")
    findings = {f["check"]: f for f in document(doctor.stdout)["findings"]}
    assert findings["hard links"]["result"] == "yes" and findings["hard links"]["ok"]
    assert findings["store"]["result"].startswith("3 distributions, "), findings["store"]
    assert document(doctor.stdout)["store"] == figures
    human = run("doctor", "--repo", repo)
    assert "ok    hard links: yes" in human.stdout and "ok    store: 3 distributions, " in human.stdout

    removed = run("remove", "adaptor-b==1.0", "--repo", repo, *LOCK)
    assert removed.returncode == 0, removed.stderr
    # Nothing holds adaptor-b's distribution now, but it is young: a batch may have just stored it.
    assert not [r for r in _gc(repo, "--older-than", "1h") if r["kind"] == "dist"]
    assert stored["adaptor-b"].is_dir()

    _age_past(list(stored.values()), 2.5)  # past --stale-after: no batch between storing and composing is alive
    dry = [r for r in _gc(repo, "--older-than", "0", "--dry-run") if r["kind"] == "dist"]
    assert [(r["path"], r["done"]) for r in dry] == [(str(stored["adaptor-b"]), False)]
    assert stored["adaptor-b"].is_dir()
    gone = [r for r in _gc(repo, "--older-than", "0") if r["kind"] == "dist"]
    assert [(r["path"], r["done"]) for r in gone] == [(str(stored["adaptor-b"]), True)], gone
    assert "no tree holds it" in str(gone[0]["reason"])
    assert not stored["adaptor-b"].exists() and stored["dep-c"].is_dir() and stored["adaptor-x"].is_dir()
    assert not list((repo / "trash").iterdir()), "deleted in trash/, nothing left there"
    assert not list((repo / "store-locks").glob("*/*")), "the lock gc took leaves nothing behind (its env dir stays)"
    assert import_version(trees["adaptor-x==1.0"], "dep_c") == "1.0"
    # One tree left: nothing shared, nothing saved; the store holds what that tree does.
    figures = _store_figures(repo)
    assert figures == {
        "distributions": 2,
        "bytes": _sizes(stored["dep-c"], stored["adaptor-x"]),
        "tree_bytes": _sizes(trees["adaptor-x==1.0"]),
        "bytes_saved": 0,
    }

    # A tree whose record is lost still holds its distributions: its files are links of theirs.
    next((repo / "records").rglob("adaptor-x/*.json")).unlink()
    assert not [r for r in _gc(repo, "--older-than", "0") if r["kind"] == "dist"]
    assert stored["dep-c"].is_dir() and stored["adaptor-x"].is_dir()
    assert import_version(trees["adaptor-x==1.0"], "dep_c") == "1.0"


def test_gc_leaves_a_stored_distribution_whose_lock_is_held(repo: Path, index: IndexServer) -> None:
    _ensure(repo, index, "adaptor-d==1.0")
    assert run("remove", "adaptor-d==1.0", "--repo", repo, *LOCK).returncode == 0
    [stored] = _stored(repo).values()
    _age_past([stored], 2.5)
    env, name, leaf = stored.parts[-3:]
    # A peer holds the distribution's lock (an installer storing it, a repair rebuilding it): it stays.
    layout = Layout(repo)
    key = LockKey(("store-locks", env, name), leaf, "held by the test")
    lock = open_lock(layout, key, LockSettings(stale_after=2, heartbeat=0.4))
    assert not isinstance(lock, Unusable) and lock.take(announce=False).held
    try:
        assert not [r for r in _gc(repo, "--older-than", "0") if r["kind"] == "dist"]
        assert stored.is_dir()
    finally:
        lock.release(forget=True)
        layout.close()
    gone = [r for r in _gc(repo, "--older-than", "0") if r["kind"] == "dist"]
    assert [(r["path"], r["done"]) for r in gone] == [(str(stored), True)]


def test_gc_removes_debris_of_a_stored_distributions_lock(repo: Path, index: IndexServer) -> None:
    trees = _ensure(repo, index, "adaptor-e==1.0")
    [stored] = _stored(repo).values()
    env, name, leaf = stored.parts[-3:]
    # What a holder SIGKILLed while storing leaves: a lock state nobody renews, its owner note, a temporary file.
    locks = repo / "store-locks" / env / name
    (locks / f"{leaf}.lock.rw" / "holders").mkdir(parents=True)
    (locks / f"{leaf}.lock.rw" / "gen").mkdir()
    (locks / f"{leaf}.owner").write_text('{"host": "gone", "pid": 1}')
    (locks / f".{leaf}.owner.x1y2.tmp").write_text("")
    first = {(r["kind"], Path(str(r["path"])).name) for r in _gc(repo, "--older-than", "0") if r["done"]}
    assert ("temp", f".{leaf}.owner.x1y2.tmp") in first
    assert (locks / f"{leaf}.lock.rw").is_dir() and (locks / f"{leaf}.owner").is_file(), (
        "not proven gone yet: renewed within --stale-after"
    )
    old = time.time() - 10
    for path in [locks / f"{leaf}.lock.rw" / "gen", locks / f"{leaf}.lock.rw" / "holders", locks / f"{leaf}.lock.rw"]:
        os.utime(path, (old, old))
    os.utime(locks / f"{leaf}.owner", (old, old))
    removed = {(r["kind"], Path(str(r["path"])).name) for r in _gc(repo, "--older-than", "0") if r["done"]}
    assert {("lock", f"{leaf}.lock.rw"), ("note", f"{leaf}.owner"), ("lock", name)} <= removed, removed
    assert not locks.exists(), "the emptied lock directory goes too"
    assert stored.is_dir() and import_version(trees["adaptor-e==1.0"], "adaptor_e") == "1.0"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_gc_removes_a_stored_distribution_whose_directories_are_read_only(tmp_path: Path, index: IndexServer) -> None:
    # As a UID that owns the repo (root writes anywhere, so it would prove nothing): directories made read-only
    # (0555) are made writable by their owner when they go, else nothing in them could be unlinked, and the
    # distribution's own dir could not even be moved into trash/ (that rewrites its "..").
    repo = tmp_path / "repo"
    repo.mkdir()
    os.chown(tmp_path, 1001, 1001)
    os.chown(repo, 1001, 1001)

    def as_owner(*args: str | Path) -> subprocess.CompletedProcess[str]:
        prefix = ["setpriv", "--reuid=1001", "--regid=1001", "--clear-groups"]
        prefix += ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
        return subprocess.run(
            [*prefix, *cli(*args)], env=isolated_env(HOME="/tmp"), capture_output=True, text=True, check=False
        )

    done = as_owner(*ensure_args(repo, index.url, "adaptor-f==1.0"))
    assert done.returncode == 0, done.stderr
    assert as_owner("remove", "adaptor-f==1.0", "--repo", repo, *LOCK).returncode == 0
    [stored] = _stored(repo).values()
    for directory in [stored, *(p for p in stored.rglob("*") if p.is_dir())]:
        directory.chmod(0o555)
    assert all(not p.stat().st_mode & 0o222 for p in stored.rglob("*") if p.is_file()), "stored files are read-only"
    _age_past([stored], 2.5)
    done = as_owner("gc", "--repo", repo, "--json", "--older-than", "0", *LOCK)
    assert done.returncode == 0, done.stdout + done.stderr
    gone = [r for r in document(done.stdout)["removed"] if r["kind"] == "dist"]
    assert [(r["path"], r["done"]) for r in gone] == [(str(stored), True)], gone
    assert not stored.exists() and not list((repo / "trash").iterdir())


@pytest.fixture
def no_links(tmp_path: Path) -> Iterator[Path]:
    """A FUSE mount whose filesystem refuses hard links (EPERM), as many FUSE filesystems do."""
    if (reason := fuse_missing()) is not None:
        if os.environ.get("REPOINSTALL_REQUIRE_FUSE") == "1":
            pytest.fail(f"FUSE tests are required here but cannot run: {reason}")
        pytest.skip(reason)
    with mounted(tmp_path, ["nolinks"], "--no-links") as [mount]:
        yield mount


def test_where_links_are_refused_trees_are_copies_and_records_alone_hold_the_store(
    no_links: Path, index: IndexServer
) -> None:
    repo = no_links / "repo"
    trees = _ensure(repo, index, "adaptor-b==1.0", "adaptor-x[fast]==1.0", extra=("--no-lock",))
    stored = _stored(repo)
    assert sorted(stored) == ["adaptor-b", "adaptor-x", "dep-c"]
    doctor = run("doctor", "--repo", repo)
    assert doctor.returncode == 1
    assert "FAIL  hard links: refused (EPERM): trees are copies of the store" in doctor.stdout, doctor.stdout
    # Every tree is its own copy: nothing saved.
    figures = _store_figures(repo)
    assert figures["distributions"] == 3 and figures["bytes_saved"] == 0
    assert figures["tree_bytes"] == _sizes(*trees.values())

    assert run("remove", "adaptor-b==1.0", "--repo", repo, "--no-lock", *LOCK).returncode == 0
    _age_past(list(stored.values()), 2.5)
    # No file has a second link here: dep-c stays because adaptor-x's record names it.
    gone = [r for r in _gc(repo, "--older-than", "0", "--no-lock") if r["kind"] == "dist"]
    assert [(r["path"], r["done"]) for r in gone] == [(str(stored["adaptor-b"]), True)], gone
    assert stored["dep-c"].is_dir() and stored["adaptor-x"].is_dir()
    assert json.loads(run("list", "--repo", repo, "--json").stdout)["store"]["distributions"] == 2
