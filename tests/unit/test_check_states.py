"""The lock-free check's four states, on trees built by hand in a real repo directory: installed means a
manifest entry AND the tree's own METADATA naming the project and version, read without following symlinks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version

from repoinstall._disk import manifest
from repoinstall._disk.check import State, check, in_use, present
from repoinstall._disk.identity import TreeId
from repoinstall._disk.layout import Layout
from repoinstall._disk.manifest import TreeEntry

TID = TreeId("cp311-test", "demo-pkg", Version("1.0"))
DIST_INFO = "demo_pkg-1.0.dist-info"


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[Layout]:
    layout = Layout(tmp_path / "repo")
    layout.writable_fd()  # makes the repo
    yield layout
    layout.close()


def _tree(layout: Layout, tid: TreeId = TID) -> Path:
    return Path(layout.tree_path(tid))


def _write_tree(layout: Layout, name: str = "demo-pkg", version: str = "1.0", dist_info: str = DIST_INFO) -> Path:
    tree = _tree(layout)
    (tree / dist_info).mkdir(parents=True)
    (tree / dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return tree


def _record(layout: Layout, dist_info: str = DIST_INFO) -> None:
    manifest.write(layout, TID, TreeEntry.new(TID, "demo-pkg==1.0", dist_info, [], "pip", "24.0"))


def test_nothing_is_missing(layout: Layout) -> None:
    assert check(layout, TID).state is State.MISSING
    assert not present(layout, TID)


def test_a_record_without_its_tree_is_missing(layout: Layout) -> None:
    _record(layout)
    assert check(layout, TID).state is State.MISSING  # a stale entry: the install step writes a new one
    _tree(layout).parent.mkdir(parents=True)  # the project's trees dir, but not this tree
    assert check(layout, TID).state is State.MISSING


def test_record_and_matching_metadata_are_present(layout: Layout) -> None:
    _write_tree(layout)
    _record(layout)
    status = check(layout, TID)
    assert status.state is State.PRESENT
    assert status.dist_info == DIST_INFO


def test_a_tree_without_a_record_is_unrecorded(layout: Layout) -> None:
    _write_tree(layout)
    status = check(layout, TID)
    assert status.state is State.UNRECORDED
    assert status.dist_info == DIST_INFO


def test_an_unrecorded_tree_is_found_under_an_old_dist_info_spelling(layout: Layout) -> None:
    _write_tree(layout, dist_info="Demo.Pkg-1.0.dist-info")
    assert check(layout, TID) == (State.UNRECORDED, None, "Demo.Pkg-1.0.dist-info")


@pytest.mark.parametrize(("name", "version"), [("demo-pkg", "2.0"), ("other-pkg", "1.0")])
def test_metadata_of_another_project_or_version_is_broken(layout: Layout, name: str, version: str) -> None:
    _write_tree(layout, name, version)
    _record(layout)
    assert check(layout, TID).state is State.BROKEN


def test_a_tree_dir_with_no_metadata_is_broken(layout: Layout) -> None:
    _tree(layout).mkdir(parents=True)
    _record(layout)
    assert check(layout, TID).state is State.BROKEN


def test_a_file_at_the_tree_path_is_broken(layout: Layout) -> None:
    _tree(layout).parent.mkdir(parents=True)
    _tree(layout).write_text("not a tree")
    assert check(layout, TID).state is State.BROKEN


def test_a_symlink_to_a_good_tree_is_broken_not_followed(layout: Layout, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / DIST_INFO).mkdir(parents=True)
    (elsewhere / DIST_INFO / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n")
    _tree(layout).parent.mkdir(parents=True)
    os.symlink(elsewhere, _tree(layout))
    _record(layout)
    assert check(layout, TID).state is State.BROKEN


def test_a_symlinked_dist_info_is_not_present(layout: Layout, tmp_path: Path) -> None:
    tree = _tree(layout)
    tree.mkdir(parents=True)
    real = tmp_path / "real.dist-info"
    real.mkdir()
    (real / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n")
    os.symlink(real, tree / DIST_INFO)
    _record(layout)
    assert check(layout, TID).state is State.BROKEN


def test_in_use_notes_the_use_only_of_a_present_tree(layout: Layout) -> None:
    assert not in_use(layout, TID)
    assert manifest.last_used(layout, TID) is None
    _write_tree(layout)
    _record(layout)
    assert in_use(layout, TID)
    assert manifest.last_used(layout, TID) is not None
