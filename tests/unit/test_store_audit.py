"""A stored distribution audited on a real install: every file against its RECORD (verify's check), the sizes
only (the install path's guard), and a damaged one set aside whole into trash/."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from test_store_split_compose import pip_target
from wheels import make_wheel

from repoinstall._disk.dists import Hashed, check_tree, scan
from repoinstall._disk.layout import Layout
from repoinstall._store import audit
from repoinstall._store.compose import compose
from repoinstall._store.identity import DistId
from repoinstall._store.inventory import Stored, every
from repoinstall._store.split import split

ENV = "cp311-cp311-x"


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Layout, DistId, Path]:
    """A repo whose store holds alpha 1.0, made as the install path makes it (one pip run, split by RECORD)."""
    wheel = make_wheel(tmp_path, "alpha", "1.0", modules=2)
    pip_target(tmp_path / "combined", wheel)
    (made,) = split(str(tmp_path / "combined"), str(tmp_path / "split")).values()
    dist = DistId.of(ENV, "alpha", "1.0", "ab" * 32)
    layout = Layout(tmp_path / "repo")
    path = Path(layout.path(*dist.parts()))
    path.parent.mkdir(parents=True)
    os.rename(made, path)
    return layout, dist, path


def test_a_whole_stored_distribution_checks_out_and_is_listed(stored: tuple[Layout, DistId, Path]) -> None:
    layout, dist, _ = stored
    assert every(layout) == [Stored.of(dist)]
    found = audit.check(layout, Stored.of(dist))
    assert found is not None and found.dist is not None and found.dist.name == "alpha" and not found.problems
    assert audit.fit(layout, dist)


def test_a_file_changed_in_place_in_its_size_is_found_by_its_hash(stored: tuple[Layout, DistId, Path]) -> None:
    layout, dist, path = stored
    module = path / "alpha" / "__init__.py"
    module.write_bytes(b"#" * module.stat().st_size)  # in place, the same size: only the hash tells
    found = audit.check(layout, Stored.of(dist))
    assert found is not None and found.problems.changed == ("alpha/__init__.py",)


def test_an_unfit_stored_distribution_is_set_aside_whole_into_trash(stored: tuple[Layout, DistId, Path]) -> None:
    layout, dist, path = stored
    (path / "alpha" / "__init__.py").write_text("grown by a tamperer\n")
    assert not audit.fit(layout, dist)
    assert not path.exists() and every(layout) == []
    assert not audit.fit(layout, dist)  # gone: the caller installs it afresh
    assert audit.check(layout, Stored.of(dist)) is None


def test_a_dir_without_the_dist_info_that_names_it_is_broken(
    stored: tuple[Layout, DistId, Path], tmp_path: Path
) -> None:
    layout, _, path = stored
    other = Stored(ENV, "beta", path.name)
    shutil.copytree(path, tmp_path / "repo" / "store" / ENV / "beta" / path.name)
    found = audit.check(layout, other)
    assert found is not None and found.broken is not None and "alpha-1.0.dist-info" in found.broken


def test_listing_the_store_follows_no_symlink(stored: tuple[Layout, DistId, Path], tmp_path: Path) -> None:
    layout, dist, path = stored
    elsewhere = tmp_path / "elsewhere" / "gamma" / "1-cdcdcdcdcdcdcdcd"
    elsewhere.mkdir(parents=True)
    os.symlink(elsewhere.parent, path.parent.parent / "gamma")
    os.symlink(path, path.parent / "1-efefefefefefefef")
    assert every(layout) == [Stored.of(dist)]


def test_a_file_linked_into_many_trees_is_hashed_once_per_run_and_again_once_changed(
    stored: tuple[Layout, DistId, Path], tmp_path: Path
) -> None:
    _, _, path = stored
    trees = [tmp_path / "one", tmp_path / "two"]
    for tree in trees:
        compose(str(tree), [("alpha", str(path))])
    hashed = Hashed()
    assert not check_tree(str(trees[0]), scan(str(trees[0])), hashed=hashed)
    linked = len(hashed)
    assert linked > 3  # every recorded file with a hash: each a link of the store's
    assert not check_tree(str(trees[1]), scan(str(trees[1])), hashed=hashed)
    assert len(hashed) == linked  # the same inodes: nothing hashed again
    time.sleep(0.05)  # past the kernel's coarse timestamp tick since compose linked it (a link sets the ctime)
    with open(path / "alpha" / "__init__.py", "r+b") as changing:  # in place, the same size
        first = changing.read(1)
        changing.seek(0)
        changing.write(b"#" if first != b"#" else b" ")
    for tree in trees:
        assert check_tree(str(tree), scan(str(tree)), hashed=hashed).changed == ("alpha/__init__.py",)


def test_an_install_hashes_its_own_files_once_whatever_links_and_chmods_followed(
    stored: tuple[Layout, DistId, Path], tmp_path: Path
) -> None:
    """One install's memo: a file checked before its publish is not hashed again in the tree of its links (which
    change its ctime), but a write to it (a new mtime) is hashed again and found."""
    _, _, path = stored
    fresh = Hashed(fresh=True)
    assert not check_tree(str(path), scan(str(path)), hashed=fresh)
    checked = len(fresh)
    assert checked > 3  # every recorded file with a hash, each with one link when it was checked
    tree = tmp_path / "tree"
    compose(str(tree), [("alpha", str(path))])
    os.chmod(path / "alpha" / "__init__.py", 0o444)
    assert not check_tree(str(tree), scan(str(tree)), hashed=fresh)
    assert len(fresh) == checked  # linked and chmodded since: nothing hashed again
    module = path / "alpha" / "__init__.py"
    os.chmod(module, 0o644)
    time.sleep(0.05)  # past the kernel's coarse timestamp tick
    module.write_bytes(b"#" * module.stat().st_size)  # in place, the same size: a new mtime
    assert check_tree(str(tree), scan(str(tree)), hashed=fresh).changed == ("alpha/__init__.py",)
