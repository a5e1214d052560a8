"""Publish never replaces what is there, and the manifest reads only well-formed entries of the tree asked for.
Real directories on the test's filesystem; the no-renameat2 case is a libc without the call."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version

from repoinstall._disk import publish as _publish
from repoinstall._disk.dists import Dist
from repoinstall._disk.identity import TreeId
from repoinstall._disk.manifest import FORMAT, TreeEntry, parse, recorded_dists

TID = TreeId("cp311-test", "adaptor-a", Version("1.0"), ("fast",))


@pytest.fixture(params=["renameat2", "plain rename"])
def flavour(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "plain rename":
        monkeypatch.setattr(_publish, "_renameat2", lambda: None)  # as where flags are refused (NFS, CephFS)
    yield request.param


def _staged(tmp_path: Path, marker: str) -> tuple[int, int]:
    (tmp_path / "staging" / "tree").mkdir(parents=True)
    (tmp_path / "staging" / "tree" / "mine.txt").write_text(marker)
    (tmp_path / "trees").mkdir(exist_ok=True)
    return os.open(tmp_path / "staging", os.O_RDONLY), os.open(tmp_path / "trees", os.O_RDONLY)


def test_publish_into_a_free_name(tmp_path: Path, flavour: str) -> None:
    src, dst = _staged(tmp_path, "ours")
    try:
        assert _publish.publish(src, "tree", dst, "1") is True
    finally:
        os.close(src)
        os.close(dst)
    assert (tmp_path / "trees" / "1" / "mine.txt").read_text() == "ours"
    assert not (tmp_path / "staging" / "tree").exists()


@pytest.mark.parametrize("there", ["a published tree", "an empty directory", "a file"])
def test_publish_never_replaces_what_is_there(tmp_path: Path, flavour: str, there: str) -> None:
    src, dst = _staged(tmp_path, "ours")
    target = tmp_path / "trees" / "1"
    if there == "a file":
        target.write_text("theirs")
    else:
        target.mkdir()
        if there == "a published tree":
            (target / "mine.txt").write_text("theirs")
    try:
        assert _publish.publish(src, "tree", dst, "1") is False
    finally:
        os.close(src)
        os.close(dst)
    if there == "a file":
        assert target.read_text() == "theirs"
    else:
        assert [p.name for p in target.iterdir()] == (["mine.txt"] if there == "a published tree" else [])
    assert (tmp_path / "staging" / "tree" / "mine.txt").read_text() == "ours"  # ours is left for its owner


def _entry_bytes(**changes: object) -> bytes:
    entry = TreeEntry.new(
        TID,
        "adaptor-a[fast]==1.0",
        "adaptor_a-1.0.dist-info",
        [Dist("adaptor_a-1.0.dist-info", "adaptor-a", "1.0")],
        "pip",
        "24.0",
    )
    raw = {"format": FORMAT, **entry._asdict(), **changes}
    return json.dumps(raw).encode()


def test_a_well_formed_entry_round_trips() -> None:
    entry = parse(_entry_bytes(), TID)
    assert entry is not None and (entry.name, entry.version, entry.extras) == ("adaptor-a", "1.0", ("fast",))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[1, 2]",
        _entry_bytes(format=FORMAT + 1),
        _entry_bytes(name="adaptor-b"),
        _entry_bytes(version="2.0"),
        _entry_bytes(extras=[]),
        _entry_bytes(env="cp312-other"),
        _entry_bytes(dist_info="../outside.dist-info"),
        _entry_bytes(dist_info="adaptor_a-1.0"),
        _entry_bytes(unexpected_field=1),
        _entry_bytes(dist_info=5),
        _entry_bytes(dist_info=["x"]),
        _entry_bytes(version=5),
        _entry_bytes(version=1.0),
        _entry_bytes(extras="fast"),
        _entry_bytes(extras=[1]),
        _entry_bytes(requirement=None),
        _entry_bytes(installed_at={}),
        _entry_bytes(format=True),
        _entry_bytes(format="1"),
        b'{"format": 1, "name": "\xff\xfe", "version": "1.0"}',
    ],
    ids=[
        "empty",
        "garbage",
        "not an object",
        "newer format",
        "other project",
        "other version",
        "other extras",
        "other env",
        "dist-info path escapes",
        "not a dist-info",
        "unknown field",
        "dist-info a number",
        "dist-info a list",
        "version a number",
        "version a float",
        "extras a string",
        "extras not strings",
        "requirement null",
        "installed-at an object",
        "format a bool",
        "format a string",
        "not UTF-8",
    ],
)
def test_anything_else_reads_as_no_entry(data: bytes) -> None:
    assert parse(data, TID) is None


@pytest.mark.parametrize("dists", ["abc", [1, 2], [{"name": 5}], [["adaptor-a"]], {"name": "adaptor-a"}])
def test_dists_that_are_not_objects_of_strings_read_as_none(dists: object) -> None:
    """Only verify reads them: the record still names the tree, and verify finds it not matching its record."""
    entry = parse(_entry_bytes(dists=dists), TID)
    assert entry is not None and recorded_dists(entry) == ()


def test_one_point_zero_and_one_name_the_same_tree() -> None:
    assert parse(_entry_bytes(version="1"), TID) is not None
