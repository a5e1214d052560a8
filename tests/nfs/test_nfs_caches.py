"""What NFS clients cache, and why it does not break the protocol: a heartbeat seen late by a ``nocto`` client
never lets a waiter take over a live holder, and files still open when gc removes their tree (silly-renamed
``.nfsXXXX`` files) are expected by gc and verify and cleaned up later. Runs inside the guest."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import actions, cli, finish, isolated_env, run, start
from indexserver import IndexServer
from nfsrepo import Nfs

STALE, HEARTBEAT = 6.0, 1.0
LOCK = ["--stale-after", str(STALE), "--heartbeat", str(HEARTBEAT)]
#: The third client's attribute cache: the default ratio of acregmax to the lock timings (60 s : 20 s : 120 s),
#: scaled like them, with close-to-open off, so every heartbeat can look that late from there.
LATE = 3


def ensure(repo: Path, index: IndexServer, *specs: str) -> list[str]:
    return ["ensure", *specs, "--repo", str(repo), "--no-index", "--find-links", index.url, "--json", *LOCK]


@pytest.fixture
def late_client(nfs: Nfs) -> Iterator[Path]:
    """A third kernel NFS client of the export whose attributes (and so the heartbeat it reads) are LATE s old."""
    where = nfs.a.parent.parent.parent / "c"
    options = f"vers=4.2,nosharecache,nocto,acregmin={LATE},acregmax={LATE},acdirmin={LATE},acdirmax={LATE}"
    subprocess.run(["mount", "-t", "nfs", "-o", options, "127.0.0.1:/", str(where)], check=True)
    try:
        yield where / nfs.a.parent.name / "repo"
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_heartbeat_seen_late_never_lets_a_waiter_take_over_a_live_holder(
    nfs: Nfs, index: IndexServer, late_client: Path, report: Callable[[str], None]
) -> None:
    # The holder stays alive (heartbeat running), its download held back, until the waiter, started after it,
    # has waited 10 s: more than the stale threshold, however slowly the waiter starts.
    held = index.holds["slow_pkg"] = threading.Event()
    holder = start(*ensure(nfs.a, index, "slow-pkg==1.0"), env=isolated_env(UV_HTTP_TIMEOUT="600", PIP_TIMEOUT="600"))
    index.wait_for_download("slow_pkg", timeout=600)
    began = time.monotonic()
    waiter = run(*ensure(late_client, index, "slow-pkg==1.0"), "--wait-timeout", "10", timeout=600)
    kept = time.monotonic() - began
    held.set()
    assert waiter.returncode == 3, waiter.stderr  # it waited, and gave up: it never took the lock over
    assert "gave up after 10s waiting for" in waiter.stderr
    code, out, err = finish(holder, timeout=600)
    assert code == 0, err
    assert actions(out) == ["installed"]
    assert "lost the lock" not in err, err
    assert index.downloads("slow_pkg") == 1
    ok = json.loads(run("doctor", "--repo", late_client, "--json", *LOCK).stdout)["findings"]
    cache = next(f for f in ok if f["check"] == "attribute cache")
    assert cache["ok"] and f"{LATE} s late" in cache["result"], cache
    tight = run("doctor", "--repo", late_client, "--json", "--stale-after", "4", "--heartbeat", "1")
    assert tight.returncode == 1
    cache = next(f for f in json.loads(tight.stdout)["findings"] if f["check"] == "attribute cache")
    assert not cache["ok"] and f"use --stale-after {2 * HEARTBEAT + LATE:g} or more" in cache["consequence"], cache
    report(
        f"nocto client, heartbeat up to {LATE} s late (stale {STALE:g} s, heartbeat {HEARTBEAT:g} s): "
        f"live holder kept for {kept:.0f} s, the waiter gave up at 10 s; doctor: " + cache["consequence"]
    )


def _unused(repo: Path, index: IndexServer) -> Path:
    """Install adaptor-a, note it as used, then make the note 10 days old; the tree's path."""
    first = run(*ensure(repo, index, "adaptor-a==1.0"))
    assert first.returncode == 0, first.stderr
    run(*ensure(repo, index, "adaptor-a==1.0"))  # a warm ensure writes the "last ensured" note
    note = next((repo / "records").rglob("adaptor-a/1.used"))
    old = note.stat().st_mtime - 10 * 86400
    os.utime(note, (old, old))
    return Path(json.loads(first.stdout)["packages"][0]["path"])


def test_gc_of_a_tree_open_on_this_client_leaves_silly_renames_that_gc_and_verify_expect(
    nfs: Nfs, index: IndexServer, report: Callable[[str], None]
) -> None:
    tree = _unused(nfs.a, index)
    module = next(tree.rglob("adaptor_a/__init__.py"))
    with open(module, "rb") as still_open:  # a worker on this node still has a file of the tree open
        # gc sees it (/proc): the tree is in use, and kept.
        kept = run("gc", "--repo", nfs.a, "--unused-for", "7d", "--json")
        assert kept.returncode == 0 and json.loads(kept.stdout)["removed"] == [], kept.stdout + kept.stderr
        assert "in use" in kept.stderr, kept.stderr
        # A gc in another pod on this node (its own pid namespace: the worker is not in its /proc) cannot see it,
        # and takes the tree out; this NFS client then silly-renames the open file.
        gc = cli("gc", "--repo", nfs.a, "--unused-for", "7d", "--json")
        pod = ["unshare", "--pid", "--fork", "--mount-proc", *gc]
        done = subprocess.run(pod, env=isolated_env(), capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert [r["kind"] for r in json.loads(done.stdout)["removed"]] == ["tree"]
        silly = list((nfs.backing / "trash").rglob(".nfs*"))
        assert silly, "the client silly-renamed the open file"
        for repo in (nfs.a, nfs.b):
            verified = run("verify", "--all", "--repo", repo, "--json")
            assert verified.returncode == 0, verified.stdout
        again = run("gc", "--repo", nfs.a, "--older-than", "0", "--json")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "still open on this NFS client" in again.stdout, again.stdout
        assert still_open.read(1) is not None  # the open file still reads
    report(f"gc of a tree with a file open on the same client: {len(silly)} .nfs file(s) left in trash/, gc exit 0")
    last = run("gc", "--repo", nfs.a, "--older-than", "0", "--json")  # closed: the client deleted them
    assert last.returncode == 0, last.stdout
    assert not list((nfs.backing / "trash").iterdir())


def test_gc_of_a_tree_open_on_another_client_leaves_nothing_behind(nfs: Nfs, index: IndexServer) -> None:
    tree = _unused(nfs.a, index)
    module = nfs.b / next(tree.rglob("adaptor_a/__init__.py")).relative_to(nfs.a)
    with open(module, "rb"):
        done = run("gc", "--repo", nfs.a, "--unused-for", "7d", "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        assert not list((nfs.backing / "trash").rglob(".nfs*"))
    for repo in (nfs.a, nfs.b):
        assert run("verify", "--all", "--repo", repo).returncode == 0
