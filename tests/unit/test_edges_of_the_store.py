"""Edges of the store's small steps: an atomic write interrupted or blocked by a directory, a repo path that is a
dangling symlink, and index cache entries that are garbled (a miss, never an answer)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version

from repoinstall import RepoUnusable
from repoinstall._disk import fs, manifest
from repoinstall._disk.identity import TreeId
from repoinstall._disk.layout import Layout
from repoinstall._index.cache import CACHE_DIR, IndexCache
from repoinstall._index.simple import Link
from repoinstall._index.sources import _entry, _from_entry, _well_formed
from repoinstall._options import LockSettings

TID = TreeId("cp311-test", "demo-pkg", Version("1.0"))


@pytest.fixture
def directory(tmp_path: Path) -> Iterator[int]:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def test_a_directory_in_the_way_of_an_atomic_write_is_named_and_no_temporary_is_left(
    tmp_path: Path, directory: int
) -> None:
    (tmp_path / "1.json").mkdir()
    with pytest.raises(IsADirectoryError) as raised:
        fs.write_atomic(directory, "1.json", b"{}")
    assert raised.value.filename == "1.json" and raised.value.filename2 is None
    assert os.listdir(tmp_path) == ["1.json"]


def test_an_interrupt_as_the_temporary_file_is_created_leaves_nothing(
    tmp_path: Path, directory: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal handler's exception at the earliest point it can come: as the create returns."""
    real_open = os.open
    opened: list[int] = []

    def open_then_interrupted(*args: object, **kwargs: object) -> int:
        opened.append(real_open(*args, **kwargs))
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "open", open_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        fs.write_atomic(directory, "1.json", b"{}")
    monkeypatch.undo()
    for fd in opened:
        os.close(fd)
    assert os.listdir(tmp_path) == []


def test_a_failed_create_removes_nothing(tmp_path: Path, directory: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """O_EXCL refused: whatever is at the temporary name is not ours."""
    monkeypatch.setattr(os, "urandom", lambda size: b"\0" * size)
    taken = tmp_path / f".1.json.{'00' * 6}.tmp"
    taken.write_text("a peer's")
    with pytest.raises(FileExistsError):
        fs.write_atomic(directory, "1.json", b"{}")
    assert taken.read_text() == "a peer's"


def test_a_record_write_blocked_by_a_directory_is_repo_unusable_naming_it(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "repo")
    try:
        record = tmp_path / "repo" / "records" / TID.env / TID.name / "1.json"
        record.mkdir(parents=True)
        entry = manifest.TreeEntry.new(TID, "demo-pkg==1.0", "demo_pkg-1.0.dist-info", [], "pip", "24")
        with pytest.raises(RepoUnusable, match=f"^{record} is not a regular file"):
            manifest.write(layout, TID, entry)
        assert os.listdir(record.parent) == ["1.json"]
    finally:
        layout.close()


def test_a_dangling_symlink_as_repo_is_unusable_and_nothing_is_made_through_it(tmp_path: Path) -> None:
    link = tmp_path / "repo"
    link.symlink_to(tmp_path / "nowhere")
    layout = Layout(link)
    try:
        assert layout.root_fd() is None  # reading: a repo that is not there
        with pytest.raises(RepoUnusable, match="which does not exist"):
            layout.writable_fd()
    finally:
        layout.close()
    assert not (tmp_path / "nowhere").exists()


# ---- the index cache ----------------------------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[IndexCache]:
    layout = Layout(tmp_path / "repo")
    layout.writable_fd()
    yield IndexCache(layout, 300, LockSettings())
    layout.close()


def _plant(tmp_path: Path, key: str, entry: dict[str, object]) -> None:
    directory = tmp_path / "repo" / os.path.join(*CACHE_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{key}.json").write_text(json.dumps({"format": 1, **entry}))


@pytest.mark.parametrize("written", ["soon", [1], None, True, {}])
def test_an_entry_with_a_time_nobody_wrote_is_a_miss(written: object, cache: IndexCache, tmp_path: Path) -> None:
    _plant(tmp_path, "k", {"written": written, "found": True, "links": []})
    assert cache.read("k") is None
    assert cache.read("k", forever=True) is None


def test_a_fresh_entry_is_a_hit_unless_it_is_not_valid(cache: IndexCache, tmp_path: Path) -> None:
    _plant(tmp_path, "k", {"written": time.time(), "found": True, "links": 5})
    assert cache.read("k") is not None
    assert cache.read("k", valid=_well_formed) is None


LINK = ["demo_pkg-1.0-py3-none-any.whl", "https://example/demo_pkg-1.0-py3-none-any.whl", None, False, True, "ab" * 32]


@pytest.mark.parametrize(
    "entry",
    [
        {"found": True, "links": 5},
        {"found": True, "links": [[1, 2], ["x"]]},
        {"found": True, "links": [["x"]]},
        {"found": True, "links": [[*LINK[:2], 3]]},
        {"found": True, "links": [[*LINK[:3], "no"]]},
        {"found": True, "links": [[*LINK, "one too many"]]},
        {"found": True, "links": ["abc"]},
        {"found": "yes", "links": []},
        {"links": []},
        {"found": True},
    ],
)
def test_a_garbled_listing_is_not_well_formed(entry: dict[str, object]) -> None:
    assert not _well_formed(entry)


def test_a_listing_round_trips_through_its_entry() -> None:
    links = (Link(*LINK[:2]), Link(LINK[0], LINK[1], ">=3.8", True, False), Link(*LINK))
    entry = json.loads(json.dumps(_entry(_from_entry({"found": True, "links": [list(x) for x in links]}), "s", "p")))
    assert _well_formed(entry) and _from_entry(entry).links == links
    assert _well_formed({"found": True, "links": [LINK[:2]]})  # older, shorter rows: the defaults
    assert _well_formed({"found": True, "links": [LINK[:5]]})  # a release before sha256 was kept
