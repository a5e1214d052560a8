"""gc never fails a live ensure (issue 30, point 1): a tree removed, then ensured again while gc runs, is composed
from stored distributions no tree holds any more, exactly what gc takes. gc may take them; the ensure then stores
them again and composes anew holding their locks, and exits 0 every time.

Each round: ``remove many==1.0`` (its stored distributions are now held by nothing), their directories aged by
``os.utime`` (as if stored long ago), then ``ensure many==1.0`` racing ``gc``: with ``--older-than 0`` and a short
``--stale-after``, and with gc's default thresholds (the distributions an hour and more old). Real processes, real
wheels, an index on 127.0.0.1. ``REPOINSTALL_GC_RACE_ROUNDS`` runs more rounds (the README's figures: 200).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from gcrace import LOCK, race
from helpers import document, ensure_args, import_version, run
from indexserver import IndexServer
from storecheck import assert_store_whole
from wheels import make_wheel

DEPS = ("alpha", "beta", "gamma", "delta")
ROUNDS = int(os.environ.get("REPOINSTALL_GC_RACE_ROUNDS", "10"))
#: gc's arguments: thresholds shortened to nothing, or gc's defaults (--older-than 1h, --stale-after 120s).
THRESHOLDS = {"shortened": ("--older-than", "0", *LOCK), "default": ()}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    """many 1.0 needing four distributions of some files each: composing it takes a while."""
    directory = tmp_path_factory.mktemp("gc-race-wheels")
    for name in DEPS:
        make_wheel(directory, name, "1", modules=12)
    make_wheel(directory, "many", "1.0", requires=tuple(f"{name}>=1" for name in DEPS))
    server = IndexServer(directory).start()
    yield server
    server.stop()


@pytest.mark.parametrize("thresholds", sorted(THRESHOLDS))
def test_gc_never_fails_an_ensure_composing_from_what_it_takes(
    repo: Path, served: IndexServer, thresholds: str
) -> None:
    done = run(*ensure_args(repo, served.url, "many==1.0"))
    assert done.returncode == 0, done.stderr
    raced = race(repo, "many==1.0", ensure_args(repo, served.url, "many==1.0"), THRESHOLDS[thresholds], ROUNDS)
    print(f"{thresholds}: {ROUNDS} rounds, {len(raced.failed)} failed ensures, gc took {raced.taken} distributions, "
          f"{raced.again} ensures stored them again")  # fmt: skip
    assert raced.failed == [], raced.failed
    assert raced.taken > 0, "gc took nothing: the race never ran"
    # The tree gc raced is whole, and so is every stored distribution.
    tree = Path(document(run(*ensure_args(repo, served.url, "many==1.0")).stdout)["packages"][0]["path"])
    assert import_version(tree, "beta") == "1"
    assert run("verify", "--repo", repo).returncode == 0
    assert_store_whole(repo)
