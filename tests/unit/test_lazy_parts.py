"""Parts a Repo makes on first use are made once, however many threads (``--jobs``) ask first at the same moment."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path

from repoinstall import Repo


def _first_use_by_many(make: Callable[[], object], threads: int = 16) -> set[int]:
    start = threading.Barrier(threads)
    made: list[object] = []

    def one() -> None:
        start.wait()
        made.append(make())

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: a check-then-set race shows at once
    try:
        workers = [threading.Thread(target=one) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(before)
    return {id(m) for m in made}


def test_one_resolver_and_one_http_client_for_all_threads(tmp_path: Path) -> None:
    for attempt in range(20):
        with Repo(tmp_path / f"repo-{attempt}") as repo:
            assert len(_first_use_by_many(repo._chooser._make_resolver)) == 1


def test_one_single_flight_table_for_all_threads(tmp_path: Path) -> None:
    for attempt in range(20):
        with Repo(tmp_path / f"repo-{attempt}") as repo:
            assert len(_first_use_by_many(repo._ensurer.single_flight)) == 1


def test_one_set_of_tree_locks_for_all_threads(tmp_path: Path) -> None:
    # One TreeLocks per repo: it remembers which "no lock possible" warnings were already given.
    for attempt in range(20):
        with Repo(tmp_path / f"repo-{attempt}") as repo:
            assert len(_first_use_by_many(repo._ensurer.tree_locks)) == 1
