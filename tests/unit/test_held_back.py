"""Which of a batch's trees the index is asked about: only where the rest of the batch asked a name for more."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from repoinstall._disk.identity import TreeId
from repoinstall._install.fill.batch import _held_back
from repoinstall._requirements import parse_spec

ENV = "cp311-cp311-linux_x86_64"


def _tree(name: str, version: str = "1.0") -> tuple[object, TreeId]:
    return parse_spec(f"{name}=={version}", source="test"), TreeId(ENV, name, Version(version))


def test_a_name_every_tree_asks_alike_is_not_asked_about() -> None:
    trees = [_tree("app-a"), _tree("app-b")]
    asked = [
        (trees[0][1], {"app-a": SpecifierSet(), "lib": SpecifierSet(">=1")}),
        (trees[1][1], {"app-b": SpecifierSet(), "lib": SpecifierSet(">=1")}),
    ]
    assert [names for _, names in _held_back(trees, asked)] == [{}, {}]  # type: ignore[arg-type]


def test_a_name_another_tree_narrows_is_asked_about_for_the_tree_that_asked_less() -> None:
    trees = [_tree("app-a"), _tree("app-b")]
    asked = [
        (trees[0][1], {"app-a": SpecifierSet(), "lib": SpecifierSet(">=1")}),
        (trees[1][1], {"app-b": SpecifierSet(), "lib": SpecifierSet(">=1,<2")}),
    ]
    held = _held_back(trees, asked)  # type: ignore[arg-type]
    assert [names for _, names in held] == [{"lib": SpecifierSet(">=1")}, {}]


def test_a_tree_pinned_beside_one_that_holds_it_is_asked_about() -> None:
    # app-a holds lib (>=1); lib==1.0 is a tree of the batch too: its pin narrows lib for app-a.
    trees = [_tree("app-a"), _tree("lib")]
    asked = [
        (trees[0][1], {"app-a": SpecifierSet(), "lib": SpecifierSet(">=1")}),
        (trees[1][1], {"lib": SpecifierSet()}),
    ]
    held = _held_back(trees, asked)  # type: ignore[arg-type]
    assert held[0][1] == {"lib": SpecifierSet(">=1")}


def test_every_name_is_asked_about_when_a_trees_part_could_not_be_read() -> None:
    trees = [_tree("app-a"), _tree("app-b")]
    asked = [(trees[0][1], {"app-a": SpecifierSet(), "lib": SpecifierSet(">=1")})]
    assert _held_back(trees, asked) == asked  # type: ignore[arg-type]
