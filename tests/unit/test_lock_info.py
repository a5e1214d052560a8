"""What ``locks`` and gc read of a lock's state: stale by the same rule a waiter uses (the longer of its own
threshold and the holder's declared lease), a damaged state named as a problem, and gc setting a damaged state
aside once nobody is proven in it. Real lock files, no process."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from filelock import SoftReadWriteLock
from packaging.version import Version

from repoinstall._disk.identity import TreeId
from repoinstall._disk.layout import Layout
from repoinstall._lock.filelock_rw import GENERATIONS, HOLDERS, holder_lease, lock_name, state_name
from repoinstall._lock.key import tree_key
from repoinstall._lock.locks import TreeLocks
from repoinstall._ops.gc import Collector
from repoinstall._ops.lockinfo import inspect
from repoinstall._options import LockSettings

TID = TreeId("cp311-test", "demo-pkg", Version("1.0"))
TIGHT = LockSettings(stale_after=2.0, heartbeat=0.5, wait_timeout=30.0)


def _lock_dir(layout: Layout) -> Path:
    return Path(layout.path(*layout.lock_dir(TID)))


def _state(layout: Layout) -> Path:
    return _lock_dir(layout) / state_name(TID.leaf)


@pytest.mark.parametrize(
    ("record", "lease"),
    [
        (b"lease=12.0\n", 12.0),
        (b"x\nlease=120.0\nnonce=1\n", 120.0),
        (b"lease=12\n", None),  # not as repr() writes it
        (b"lease=inf\n", None),
        (b"lease=nan\n", None),
        (b"lease=-3.0\n", None),
        (b"lease=0.0\n", None),
        (b"lease=1_000.0\n", None),
        (b"lease= 12.0\n", None),
        (b"lease=12.0\nlease=99.0\n", 12.0),  # the first wins
        (b"no lease\n", None),
        (b"lease=\xff\n", None),
        (b"", None),
    ],
)
def test_a_holders_lease_counts_only_as_a_holder_writes_it(record: bytes, lease: float | None) -> None:
    assert holder_lease(record) == lease


@pytest.mark.parametrize("threshold", [0.5, 7.25, 120.0])
def test_a_real_holders_record_declares_its_own_stale_threshold(layout: Layout, threshold: float) -> None:
    # What filelock writes, read back through the public lock: the lease we read is the holder's threshold.
    _lock_dir(layout).mkdir(parents=True)
    holder = SoftReadWriteLock(
        str(_lock_dir(layout) / lock_name(TID.leaf)),
        heartbeat_interval=threshold / 4,
        stale_threshold=threshold,
        is_singleton=False,
    )
    holder.acquire_write(timeout=10)
    try:
        [record] = (_state(layout) / HOLDERS).iterdir()
        assert holder_lease(record.read_bytes()) == threshold
    finally:
        holder.release(force=True)
        holder.close()


def test_locks_judges_stale_by_the_longer_of_its_threshold_and_the_holders_lease(layout: Layout) -> None:
    # A holder configured slower (stale threshold 120 s) than the looker (2 s): a waiter with --stale-after 2 would
    # not take it over before 120 s without a heartbeat, so locks must not call it stale before either.
    _lock_dir(layout).mkdir(parents=True)
    holder = SoftReadWriteLock(
        str(_lock_dir(layout) / lock_name(TID.leaf)), heartbeat_interval=60, stale_threshold=120, is_singleton=False
    )
    holder.acquire_write(timeout=10)
    try:
        [record] = (_state(layout) / HOLDERS).iterdir()
        beat = record.stat().st_mtime
        quiet = inspect(layout, TID, TIGHT.stale_after, now=beat + 60)
        assert quiet.held and quiet.lease == 120.0 and quiet.heartbeat_age == pytest.approx(60, abs=1)
        assert not quiet.stale, "stale by --stale-after alone, while the holder's own lease still runs"
        assert quiet.as_dict()["lease"] == 120.0
        assert inspect(layout, TID, TIGHT.stale_after, now=beat + 121).stale
        assert inspect(layout, TID, 300, now=beat + 200).stale is False  # the looker's longer threshold counts too
    finally:
        holder.release(force=True)
        holder.close()


def _damage(layout: Layout, how: str) -> Path:
    state = _state(layout)
    (state / HOLDERS).mkdir(parents=True)
    (state / GENERATIONS).mkdir()
    if how == "holders-file":
        (state / HOLDERS).rmdir()
        (state / HOLDERS).write_text("not a directory")
    elif how == "gen-file":
        (state / GENERATIONS).rmdir()
        (state / GENERATIONS).write_text("not a directory")
    else:
        (state / GENERATIONS / ("0" * 19 + "7")).write_bytes(b"garbage \xff\n")
    return state


DAMAGE = ["holders-file", "gen-file", "garbage-generation"]


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_lock_state_is_a_problem_not_free(layout: Layout, how: str) -> None:
    _damage(layout, how)
    info = inspect(layout, TID, TIGHT.stale_after)
    assert not info.held and not info.stale
    assert info.problem is not None and "unreadable lock state" in info.problem, info


def _age_all(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    for each in [path, *path.rglob("*")]:
        os.utime(each, (old, old), follow_symlinks=False)


def _gc(layout: Layout, settings: LockSettings = TIGHT, *, dry_run: bool = False) -> list[tuple[str, str, bool]]:
    found = Collector(layout, TID.env, settings, older_than=0, unused_for=None, dry_run=dry_run).run()
    return [(r.kind, r.path, r.done) for r in found]


@pytest.mark.parametrize("how", DAMAGE)
def test_gc_sets_a_damaged_lock_state_aside_once_nobody_is_proven_in_it(layout: Layout, how: str) -> None:
    state = _damage(layout, how)
    assert _gc(layout) == []  # just made: someone may be between two steps in it
    assert state.exists()
    _age_all(state, 60)  # nothing in it renewed for 60 s, more than the stale threshold (2 s)
    assert _gc(layout, dry_run=True) == [("lock", str(state), False)]
    assert _gc(layout, LockSettings(stale_after=120.0, heartbeat=20.0)) == []  # a longer threshold: not yet
    assert ("lock", str(state), True) in _gc(layout)
    assert not _lock_dir(layout).exists()  # and its directory, left empty
    with TreeLocks(layout, TIGHT).hold(tree_key(TID)) as held:  # the next ensure takes a fresh lock at once
        assert held.without is None and not held.peer_finished


def test_gc_keeps_a_damaged_state_whose_holder_record_is_fresh(layout: Layout) -> None:
    state = _damage(layout, "garbage-generation")
    (state / HOLDERS / "someone").write_bytes(b"lease=600.0\n")  # a participant of a format we misread, say
    _age_all(state, 60)
    os.utime(state / HOLDERS / "someone")  # ... that just beat
    assert _gc(layout) == []
    _age_all(state, 60)
    assert _gc(layout) == []  # its declared lease (600 s) has not run out
    _age_all(state, 601)
    assert ("lock", str(state), True) in _gc(layout)


def test_gc_names_a_symlink_at_a_repo_directory_once(layout: Layout, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    for kind in ("records", "locks"):
        os.symlink(outside, layout.path(kind))
    found = Collector(layout, TID.env, TIGHT, older_than=0, unused_for=0, dry_run=False).run()
    assert sorted((r.kind, r.path) for r in found) == [
        ("symlink", layout.path("locks")),
        ("symlink", layout.path("records")),
    ]
