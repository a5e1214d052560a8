"""Which stored distributions the records hold (what gc keeps), and a stored distribution's directory name read
back: real records written by the manifest, in a real repo directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from repoinstall._disk import manifest as _manifest
from repoinstall._disk.identity import TreeId
from repoinstall._disk.layout import Layout
from repoinstall._store.held import held
from repoinstall._store.identity import DistId, split_leaf, stored_lock_key

ENV = "cp311-cp311-manylinux_2_36_x86_64"
SHA = "06b727032f26e77c0a8f22bfb3e10841fff499f1c7fc06f4ad6b133212778d79"


@pytest.mark.parametrize("version", ["1", "1.0", "1.0.0", "1!2.0", "1.0rc1", "1.0.post3.dev1", "1.0+local.7"])
def test_a_leaf_reads_back_as_its_distribution_made_it(version: str) -> None:
    dist = DistId.of(ENV, "Dep_C", version, SHA)
    assert split_leaf(dist.leaf) == (dist.leaf.rpartition("-")[0], SHA[:16])
    assert (
        stored_lock_key(ENV, dist.name, dist.leaf)[:2]
        == dist.lock_key()[:2]
        == (
            ("store-locks", ENV, "dep-c"),
            dist.leaf,
        )
    )


@pytest.mark.parametrize("leaf", ["1-06b7", "1.0-06b727032f26e77c", "x-06b727032f26e77c", "1-06B727032F26E77C", "1"])
def test_a_name_the_store_never_makes_is_no_leaf(leaf: str) -> None:
    assert split_leaf(leaf) is None


def _record(layout: Layout, name: str, rows: list[dict[str, str]]) -> None:
    tid = TreeId(ENV, name, Version("1.0"))
    entry = _manifest.TreeEntry(
        requirement=f"{name}==1.0",
        name=name,
        version="1.0",
        extras=(),
        env=ENV,
        dist_info=f"{name.replace('-', '_')}-1.0.dist-info",
        installer="pip",
        installer_version="25",
        installed_at="2025-01-01T00:00:00Z",
        host="test",
        dists=tuple(rows),
    )
    _manifest.write(layout, tid, entry)


def test_records_hold_their_artifacts_and_rows_without_one_hold_every_artifact_of_their_version(
    tmp_path: Path,
) -> None:
    layout = Layout(tmp_path / "repo")
    _record(
        layout, "adaptor-b", [{"name": "Dep_C", "version": "1.0", "dist_info": "dep_c-1.0.dist-info", "sha256": SHA}]
    )
    _record(layout, "adaptor-y", [{"name": "old-dep", "version": "2.0.0", "dist_info": "old_dep-2.0.0.dist-info"}])
    _record(layout, "adaptor-z", [{"name": "odd", "version": "not a version", "dist_info": "odd.dist-info"}])
    found = held(layout)
    assert found.records == 3
    assert found.holds(ENV, "dep-c", f"1-{SHA[:16]}")
    assert not found.holds(ENV, "dep-c", f"1-{'0' * 16}")  # another artifact of that version: nobody's
    assert not found.holds(ENV, "dep-c", f"1.1-{SHA[:16]}")
    assert not found.holds("other-env", "dep-c", f"1-{SHA[:16]}")
    # No hash said: every stored artifact of that version; no version that parses: every one of that name.
    assert found.holds(ENV, "old-dep", f"2-{SHA[:16]}") and found.holds(ENV, "old-dep", f"2-{'0' * 16}")
    assert not found.holds(ENV, "old-dep", f"3-{SHA[:16]}")
    assert found.holds(ENV, "odd", f"9-{SHA[:16]}")
    # A record that is garbage names nothing (its tree, if any, holds its files by their links).
    garbage = tmp_path / "repo" / "records" / ENV / "adaptor-q"
    garbage.mkdir()
    (garbage / "1.json").write_text("{not json")
    assert held(layout).records == 3
    layout.close()


def test_a_registry_sourced_distribution_never_shares_a_wheels_name() -> None:
    """Named by its layer's diff_id under ``<version>-layer-``: no wheel's sha256 (whatever its first 16 hex) can
    name the same directory, and a record row says which kind it holds."""
    from repoinstall._store.identity import DistId, is_layer_leaf, of_row, split_leaf

    wheel = DistId.of(ENV, "Dep_C", "1.0", SHA)
    layer = DistId.of_layer(ENV, "Dep_C", "1.0", f"sha256:{SHA}")
    assert (wheel.leaf, layer.leaf) == (f"1-{SHA[:16]}", f"1-layer-{SHA[:16]}")
    assert wheel != layer and (wheel.provenance, layer.provenance) == ("wheel", "registry")
    assert split_leaf(layer.leaf) == split_leaf(wheel.leaf) == ("1", SHA[:16])
    assert is_layer_leaf(layer.leaf) and not is_layer_leaf(wheel.leaf)
    row = {"name": "Dep_C", "version": "1.0", "dist_info": "dep_c-1.0.dist-info"}
    assert of_row(ENV, {**row, "sha256": SHA}) == wheel
    # A pulled tree's row: its diff_id names it; the claimed wheel sha256 is never its name.
    assert of_row(ENV, {**row, "diff_id": f"sha256:{SHA}", "claimed": "b" * 64}) == layer
    assert of_row(ENV, row) is None and of_row(ENV, {**row, "diff_id": "sha256:nothex"}) is None


def test_a_pulled_trees_rows_hold_its_registry_sourced_distributions(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "repo")
    row = {"name": "dep-c", "version": "1.0", "dist_info": "dep_c-1.0.dist-info"}
    _record(layout, "adaptor-p", [{**row, "diff_id": f"sha256:{SHA}", "claimed": "b" * 64}])
    found = held(layout)
    assert found.holds(ENV, "dep-c", f"1-layer-{SHA[:16]}")
    assert not found.holds(ENV, "dep-c", f"1-{SHA[:16]}") and not found.holds(ENV, "dep-c", f"1-{'b' * 16}")
