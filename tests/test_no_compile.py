"""``--no-compile``: trees without bytecode, as pip's ``--no-compile`` and uv's default. The choice is part of a
tree's identity: a tree with pycs and one without are two trees, side by side, their distributions stored apart
(``store/<env>.nopyc/``), neither replacing the other, each verified for what it should hold."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from helpers import isolated_env, run
from indexserver import IndexServer

from repoinstall import InstallOptions, InvalidInput, Repo
from repoinstall._disk.identity import NO_BYTECODE, environment_tag


def _ensure(repo: Path, index: IndexServer, *more: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = run("ensure", "adaptor-b==1.0", "--repo", repo, "--no-index", "-f", index.url, "--json", *more, env=env)
    assert done.returncode == 0, done.stderr
    (package,) = json.loads(done.stdout)["packages"]
    return package  # type: ignore[no-any-return]


def _pycs(tree: Path) -> list[Path]:
    return sorted(tree.rglob("*.pyc"))


def _files(tree: Path) -> dict[str, tuple[int, int]]:
    """Every file of a tree: (inode, mtime in ns), to show nothing in it was replaced."""
    return {str(p.relative_to(tree)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in tree.rglob("*") if p.is_file()}


def test_trees_with_and_without_bytecode_side_by_side(repo: Path, index: IndexServer, installer: str) -> None:
    compiled = _ensure(repo, index)
    tree = Path(str(compiled["path"]))
    assert _pycs(tree), "a tree with bytecode holds pycs"
    before = _files(tree)

    bare = _ensure(repo, index, "--no-compile")
    assert bare["action"] == "installed"
    without = Path(str(bare["path"]))
    tag = environment_tag()
    assert (tree.parent.parent.name, without.parent.parent.name) == (tag, tag + NO_BYTECODE)
    assert without != tree and without.is_dir() and tree.is_dir()
    assert _pycs(without) == []
    # Stored apart: dep-c twice, once with its pycs and once without; the tree with pycs is untouched.
    assert {p.parent.parent.name for p in (repo / "store").glob("*/dep-c/*")} == {tag, tag + NO_BYTECODE}
    assert not list((repo / "store" / (tag + NO_BYTECODE)).rglob("*.pyc"))
    assert _files(tree) == before
    for line in ("RECORD",):
        recorded = "".join(p.read_text() for p in without.glob(f"*.dist-info/{line}"))
        assert ".pyc" not in recorded

    # Both present: the warm path finds each, and path tells them apart (option and environment variable).
    assert _ensure(repo, index)["action"] == "present"
    assert _ensure(repo, index, "--no-compile")["action"] == "present"
    assert run("path", "adaptor-b==1.0", "--repo", repo).stdout.strip() == str(tree)
    assert run("path", "adaptor-b==1.0", "--repo", repo, "--no-compile").stdout.strip() == str(without)
    by_env = run("path", "adaptor-b==1.0", "--repo", repo, env=isolated_env(REPOINSTALL_NO_COMPILE="1"))
    assert by_env.stdout.strip() == str(without)

    # verify checks both, each for what it should hold; gc keeps both (each holds its stored distributions).
    checked = run("verify", "--repo", repo, "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    reports = json.loads(checked.stdout)["trees"]
    assert sorted((r["env"], r["status"]) for r in reports) == [(tag, "ok"), (tag + NO_BYTECODE, "ok")]
    assert run("gc", "--repo", repo, "--older-than", "0").returncode == 0
    assert tree.is_dir() and without.is_dir()
    assert run("verify", "--repo", repo).returncode == 0

    # A pyc in the tree made without bytecode is a fault verify names; in the other one, a harmless extra.
    cache = without / "adaptor_b" / "__pycache__"
    os.chmod(without / "adaptor_b", os.stat(without / "adaptor_b").st_mode | stat.S_IWUSR)
    cache.mkdir()
    (cache / "__init__.cpython-311.opt-1.pyc").write_bytes(b"planted")
    found = run("verify", "--repo", repo, "--json")
    assert found.returncode == 1, found.stdout + found.stderr
    bad = [r for r in json.loads(found.stdout)["trees"] if r["status"] != "ok"]
    assert [(r["env"], r["compiled"]) for r in bad] == [
        (tag + NO_BYTECODE, ["adaptor_b/__pycache__/__init__.cpython-311.opt-1.pyc"])
    ]
    # Repaired as what it is, whatever the run's own trees carry: reinstalled without bytecode.
    repaired = run("verify", "--repo", repo, "--repair", "--no-index", "-f", index.url)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert run("verify", "--repo", repo).returncode == 0
    assert _pycs(without) == [] and _files(tree) == before


def test_the_api_takes_it_as_an_install_option(repo: Path, index: IndexServer) -> None:
    options = InstallOptions(no_index=True, find_links=(index.url,), bytecode=False)
    with Repo(repo, install=options) as without, Repo(repo, install=options._replace(bytecode=True)) as compiled:
        assert without.env == compiled.env + NO_BYTECODE
        bare = Path(without.ensure("dep-c==1.0").path or "")
        full = Path(compiled.ensure("dep-c==1.0").path or "")
        assert bare != full and _pycs(bare) == [] and _pycs(full)
        assert without.tree_path("dep-c==1.0") == str(bare)
        assert all(report.ok for report in without.verify().trees)
    with pytest.raises(InvalidInput, match="bytecode must be True or False"):
        Repo(repo, install=InstallOptions(bytecode="no"))  # type: ignore[arg-type]
