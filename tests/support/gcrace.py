"""A race of an ensure against gc over distributions no tree holds (issue "Faults in the store", point 2): each round
``remove``\\s the tree, ages the store as if it were stored long ago, then starts the ensure and gc together."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from helpers import document, finish, run, start

#: Lock timings short enough that a round's locks go stale quickly.
LOCK = ("--stale-after", "2", "--heartbeat", "0.4")


class Raced(NamedTuple):
    failed: list[str]  #: each failed ensure's last line
    taken: int  #: distributions gc took
    again: int  #: ensures that found one taken while composing and stored it again


def age_store(repo: Path, seconds: float) -> None:
    """Set every stored distribution's directory back ``seconds`` (its mtime: what gc judges its age by)."""
    old = time.time() - seconds
    for stored in (repo / "store").glob("*/*/*"):
        os.utime(stored, (old, old), follow_symlinks=False)


def race(repo: Path, spec: str, ensure: Sequence[str | Path], gc: Sequence[str], rounds: int) -> Raced:
    """``rounds`` of: remove ``spec``, age the store, then ``ensure`` (a CLI command, run with ``-v``) racing ``gc``
    (its arguments after ``gc --repo REPO --json``)."""
    failed: list[str] = []
    taken = again = 0
    for _ in range(rounds):
        removed = run("remove", spec, "--repo", repo, *LOCK)
        assert removed.returncode == 0, removed.stderr
        age_store(repo, 7200)
        ensuring = start(*ensure, "-v")
        collecting = start("gc", "--repo", repo, "--json", *gc)
        code, _, err = finish(ensuring)
        gc_code, gc_out, gc_err = finish(collecting)
        assert gc_code in (0, 1), gc_err  # 1: something kept (its lock held by the ensure), said in the report
        taken += sum(r["kind"] == "dist" and r["done"] for r in document(gc_out)["removed"])
        again += "taken out of the store (by gc)" in err
        if code != 0:
            failed.append(err.strip().splitlines()[-1] if err.strip() else f"exit {code}")
    return Raced(failed, taken, again)
