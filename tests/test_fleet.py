"""A rolling update on one repo: pods of the lowest and the newest filelock the project allows, and pods of the
previous release of repoinstall beside this one, race for the same trees. Exclusion must hold across versions:
each wheel is downloaded once (the index counts; pip's cache is off), every pod succeeds, and each side reads the
other's locks and trees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleet import command, filelock_versions, filelock_wheel, previous_release
from helpers import Pod, isolated_env, wait_until
from indexserver import IndexServer

SPECS = ("slow-pkg==1.0", "adaptor-b==1.0")  # adaptor-b brings dep-c
WHEELS = ("slow_pkg-1.0", "adaptor_b-1.0", "dep_c-1.0")


def _pod(pythonpath: str, *args: str | Path) -> Pod:
    return Pod(command(*args), isolated_env(PYTHONPATH=pythonpath))


def _ensure(repo: Path, index: IndexServer, *specs: str) -> list[str]:
    return ["ensure", *specs, "--repo", str(repo), "--no-index", "--find-links", index.url, "--json",
            "--stale-after", "4", "--heartbeat", "0.5"]  # fmt: skip


def _race(repo: Path, index: IndexServer, paths: list[str]) -> None:
    """Pods with these PYTHONPATHs, in this order, all ensuring SPECS at once: every one succeeds and each wheel
    is downloaded once."""
    index.completed.clear()
    pods = [_pod(path, *_ensure(repo, index, *SPECS)) for path in paths]
    for pod in pods:
        code, out, err = pod.finish(180)
        assert code == 0, (pod.args, out, err)
    downloads = {wheel: sum(n for name, n in index.completed.items() if name.startswith(wheel)) for wheel in WHEELS}
    assert downloads == dict.fromkeys(WHEELS, 1), (downloads, paths)


def _present(pythonpath: str, repo: Path, index: IndexServer, specs: tuple[str, ...] = SPECS) -> None:
    done = _pod(pythonpath, *_ensure(repo, index, *specs))
    code, out, err = done.finish(60)
    assert code == 0, err
    assert [p["action"] for p in json.loads(out)["packages"]] == ["present"] * len(specs), out


@pytest.fixture
def flocks() -> tuple[str, str]:
    lowest, newest = filelock_versions()
    return str(filelock_wheel(lowest)), str(filelock_wheel(newest))


@pytest.mark.parametrize("rounds", [3])
def test_pods_of_the_lowest_and_newest_filelock_install_each_tree_once(
    tmp_path: Path, index: IndexServer, flocks: tuple[str, str], rounds: int
) -> None:
    lowest, newest = flocks
    index.delays["slow_pkg"] = 1.5  # every pod arrives while the first is still installing
    for round_ in range(rounds):
        repo = tmp_path / f"repo{round_}"
        order = [lowest, newest] * 2 if round_ % 2 == 0 else [newest, lowest] * 2
        _race(repo, index, order)
        _present(lowest, repo, index)
        _present(newest, repo, index)


@pytest.mark.parametrize("holder_first", [True, False], ids=["lowest-holds", "newest-holds"])
def test_locks_and_gc_read_a_holder_of_the_other_filelock(
    tmp_path: Path, index: IndexServer, flocks: tuple[str, str], holder_first: bool
) -> None:
    holder_path, reader_path = flocks if holder_first else flocks[::-1]
    repo = tmp_path / "repo"
    index.delays["slow_pkg"] = 6.0
    holder = _pod(holder_path, *_ensure(repo, index, "slow-pkg==1.0"))
    index.wait_for_download("slow_pkg")
    wait_until(lambda: any((repo / "locks").rglob("*.lock.rw/holders/*")), what="the holder's record")
    seen = _pod(reader_path, "locks", "--repo", repo, "--json", "--stale-after", "2").finish(60)
    assert seen[0] == 0, seen[2]
    [lock] = [entry for entry in json.loads(seen[1])["locks"] if entry["held"]]
    assert lock["pid"] == holder.pid and not lock["stale"], lock
    swept = _pod(
        reader_path, "gc", "--repo", repo, "--older-than", "0", "--stale-after", "2", "--heartbeat", "0.5"
    ).finish(60)
    assert swept[0] == 0, swept[1] + swept[2]
    assert any((repo / "locks").rglob("*.lock.rw/holders/*")), "gc took a live holder's lock"
    code, out, err = holder.finish(120)
    assert code == 0, err
    assert [p["action"] for p in json.loads(out)["packages"]] == ["installed"]
    _present(reader_path, repo, index, ("slow-pkg==1.0",))
    after = _pod(reader_path, "locks", "--repo", repo, "--json").finish(60)
    assert not any(entry["held"] for entry in json.loads(after[1])["locks"]), after[1]


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(previous_release(tmp_path_factory.mktemp("previous")))


@pytest.mark.parametrize("previous_first", [True, False], ids=["previous-first", "this-first"])
def test_the_previous_release_and_this_one_install_each_tree_once(
    tmp_path: Path, index: IndexServer, previous: str, previous_first: bool
) -> None:
    this = ""  # no PYTHONPATH: this checkout's package, as installed
    index.delays["slow_pkg"] = 1.5
    for round_ in range(2):
        repo = tmp_path / f"repo{round_}"
        _race(repo, index, [previous, this] * 2 if previous_first else [this, previous] * 2)
        # Each reads the other's trees: both answer present, and list names both trees.
        _present(previous, repo, index)
        _present(this, repo, index)
        for path in (previous, this):
            listed = _pod(path, "list", "--repo", repo).finish(60)
            assert listed[0] == 0 and "slow-pkg==1.0" in listed[1] and "adaptor-b==1.0" in listed[1], listed


def test_the_previous_release_waits_for_this_ones_holder(tmp_path: Path, index: IndexServer, previous: str) -> None:
    # The previous release has no word for the format file: it must still see this release's lock, and wait.
    repo = tmp_path / "repo"
    index.delays["slow_pkg"] = 4.0
    holder = _pod("", *_ensure(repo, index, "slow-pkg==1.0"))
    index.wait_for_download("slow_pkg")
    waiter = _pod(previous, *_ensure(repo, index, "slow-pkg==1.0"))
    for pod in (holder, waiter):
        code, _, err = pod.finish(120)
        assert code == 0, err
    assert sum(n for name, n in index.completed.items() if name.startswith("slow_pkg")) == 1


def test_the_previous_release_leaves_trees_without_bytecode_to_them(
    tmp_path: Path, index: IndexServer, previous: str
) -> None:
    # This release's trees without bytecode are one more environment to the previous release: its gc keeps them
    # and what they are composed from, its verify finds them whole, and its own trees are beside them.
    repo = tmp_path / "repo"
    for path, more in (("", ["--no-compile"]), (previous, [])):
        code, out, err = _pod(path, *_ensure(repo, index, "adaptor-b==1.0"), *more).finish(120)
        assert code == 0, err
    envs = sorted(p.name for p in (repo / "trees").iterdir())
    assert len(envs) == 2 and envs[1] == envs[0] + ".nopyc", envs
    for args in (("gc", "--older-than", "0", "--unused-for", "1d"), ("verify",)):
        code, out, err = _pod(previous, *args, "--repo", repo).finish(120)
        assert code == 0, (args, out, err)
    _present("", repo, index, ("adaptor-b==1.0",))
    done = _pod("", *_ensure(repo, index, "adaptor-b==1.0"), "--no-compile").finish(60)
    assert done[0] == 0 and json.loads(done[1])["packages"][0]["action"] == "present", done
    assert _pod("", "verify", "--repo", repo).finish(120)[0] == 0
    assert not list((repo / "trees" / envs[1]).rglob("*.pyc")) and list((repo / "trees" / envs[0]).rglob("*.pyc"))
