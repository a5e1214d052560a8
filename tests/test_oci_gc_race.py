"""gc never fails a live ``ensure --from`` either: a tree removed, then ensured again from its image while gc runs, is
composed from stored distributions no tree holds any more, exactly what gc takes. gc may take them; the ensure then
fetches their layers again and composes anew holding their locks, and exits 0 every time.

As tests/test_store_gc_race.py, with the tree's image in a real registry on 127.0.0.1 (Debian's docker-registry)
and the pod's index stopped, so whatever the ensure stores again can only come from the registry.
``REPOINSTALL_GC_RACE_ROUNDS`` runs more rounds.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from gcrace import LOCK, race
from helpers import document, import_version, run
from indexserver import IndexServer
from registry import registry
from storecheck import assert_store_whole
from wheels import make_wheel

pytestmark = pytest.mark.skipif(not shutil.which("docker-registry"), reason="needs docker-registry (.ci/run)")

DEPS = ("alpha", "beta", "gamma", "delta")
ROUNDS = int(os.environ.get("REPOINSTALL_GC_RACE_ROUNDS", "20"))
#: No index for the pod: a closed port on 127.0.0.1, so an installer run could not store anything.
STOPPED = "http://127.0.0.1:9/simple"


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """many 1.0 (four distributions of some files each: composing it takes a while) pushed as an image."""
    wheels = tmp_path_factory.mktemp("oci-gc-race-wheels")
    for name in DEPS:
        make_wheel(wheels, name, "1", modules=12)
    make_wheel(wheels, "many", "1.0", requires=tuple(f"{name}>=1" for name in DEPS))
    server = IndexServer(wheels).start()
    try:
        with registry(tmp_path_factory.mktemp("oci-gc-race-registry")) as found:
            where = f"{found.host}/gc-race"
            pushed = run("push", where, "many==1.0", "--repo", tmp_path_factory.mktemp("pusher") / "repo",
                         "--no-index", "-f", server.url, "--plain-http")  # fmt: skip
            assert pushed.returncode == 0, pushed.stderr
            yield where
    finally:
        server.stop()


def _ensure(repo: Path, where: str, *extra: str) -> list[str]:
    return ["ensure", "many==1.0", "--repo", str(repo), "--from", where, "--plain-http", "--index-url", STOPPED,
            "--json", *LOCK, *extra]  # fmt: skip


def test_gc_never_fails_an_ensure_from_an_image_composing_from_what_it_takes(repo: Path, image: str) -> None:
    done = run(*_ensure(repo, image))
    assert done.returncode == 0, done.stderr
    raced = race(repo, "many==1.0", _ensure(repo, image), ("--older-than", "0", *LOCK), ROUNDS)
    print(f"{ROUNDS} rounds, {len(raced.failed)} failed ensures, gc took {raced.taken} distributions, {raced.again} "
          "ensures fetched them again")  # fmt: skip
    assert raced.failed == [], raced.failed
    assert raced.taken > 0, "gc took nothing: the race never ran"
    tree = Path(document(run(*_ensure(repo, image)).stdout)["packages"][0]["path"])
    assert import_version(tree, "beta") == "1"
    assert run("verify", "--repo", repo).returncode == 0
    assert_store_whole(repo)
