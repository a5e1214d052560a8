"""A pylock.toml's extras and dependency groups (PEP 751), chosen with ``--extra`` and ``--group``: each choice
is its own tree, the same choice the same tree, the markers evaluated for the tree's interpreter. The lock is
written as a locker writes one for a project with optional dependencies and groups, its wheels served by an index
on 127.0.0.1. Hand-written locks read without an install: tests/unit/test_lockfile.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import document, import_version, isolated_env, run
from indexserver import IndexServer
from locks import served_pylock
from wheels import make_wheel

from repoinstall import InstallOptions, Repo
from repoinstall._lockfile.read import forget

#: The default groups' package, the extra's, one of the extra's for Windows only, and a group's.
MARKERS = {
    "xg-base": None,
    "xg-dev": "'dev' in dependency_groups",
    "xg-fast": "'fast' in extras",
    "xg-win": "'fast' in extras and sys_platform == 'win32'",
    "xg-docs": "'docs' in dependency_groups",
    # Only where the tree's interpreter is not the one running repoinstall: its markers decide.
    "xg-other": f"'docs' in dependency_groups and python_version != '{sys.version_info[0]}.{sys.version_info[1]}'",
}

#: An interpreter of another Python version, with pip (read at import: the tests' environment drops REPOINSTALL_*).
OTHER_PYTHON = os.environ.get("REPOINSTALL_TEST_OTHER_PYTHON", "")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IndexServer, Path]]:
    """The index, and the lock of its wheels: extras ``fast``, groups ``dev`` (the default) and ``docs``."""
    directory = tmp_path_factory.mktemp("extras-wheels")
    wheels = [(make_wheel(directory, name, "1.0"), marker) for name, marker in MARKERS.items()]
    server = IndexServer(directory).start()
    lock = tmp_path_factory.mktemp("extras-lock") / "pylock.toml"
    lock.write_text(served_pylock(server.url, wheels, extras=["fast"], groups=["dev", "docs"], default_groups=["dev"]))
    yield server, lock
    server.stop()


def _ensure(repo: Path, lock: Path, *choice: str) -> dict[str, str]:
    done = run("ensure", "-r", lock, *choice, "--repo", repo, "--json")
    assert done.returncode == 0, done.stderr
    [package] = document(done.stdout)["packages"]
    return package


def _held(tree: str) -> list[str]:
    """The distributions a tree holds, its own metapackage left out."""
    names = (p.name.split("-")[0] for p in Path(tree).iterdir() if p.name.endswith(".dist-info"))
    return sorted(name for name in names if not name.startswith("locked"))


def test_each_choice_of_extras_and_groups_is_its_own_tree(tmp_path: Path, served: tuple[IndexServer, Path]) -> None:
    _, lock = served
    repo = tmp_path / "repo"
    default = _ensure(repo, lock)
    assert _held(default["path"]) == ["xg_base", "xg_dev"]  # no extra, the lock's default group
    fast = _ensure(repo, lock, "--extra", "fast")
    assert _held(fast["path"]) == ["xg_base", "xg_dev", "xg_fast"]  # not xg-win: its marker is false here
    assert fast["name"] != default["name"] and fast["path"] != default["path"]
    assert import_version(fast["path"], "xg_fast") == "1.0"
    again = _ensure(repo, lock, "--extra", "Fast")  # names are normalized: the same choice, the same tree
    assert again["action"] == "present" and again["path"] == fast["path"]
    # --group replaces the default groups (as uv pip install --group does); name the default one to keep it.
    docs = _ensure(repo, lock, "--group", "docs")
    assert _held(docs["path"]) == ["xg_base", "xg_docs"]
    both = _ensure(repo, lock, "--group", "docs", "--group", "dev", "--extra", "fast")
    assert _held(both["path"]) == ["xg_base", "xg_dev", "xg_docs", "xg_fast"]
    assert len({default["path"], fast["path"], docs["path"], both["path"]}) == 4
    # path, run and export name the tree of the choice given, and install nothing.
    path = run("path", "-r", lock, "--extra", "fast", "--repo", repo)
    assert path.returncode == 0 and path.stdout.strip() == fast["path"], path.stderr
    assert run("path", "-r", lock, "--repo", repo).stdout.strip() == default["path"]
    code = "import xg_fast, xg_docs; print('both')"
    ran = run(
        "run",
        "-r",
        lock,
        "--group",
        "docs",
        "--group",
        "dev",
        "--extra",
        "fast",
        "--repo",
        repo,
        "--",
        sys.executable,
        "-c",
        code,
    )
    assert ran.returncode == 0 and ran.stdout.strip() == "both", ran.stderr
    exported = run("export", "-r", lock, "--group", "docs", "--repo", repo)
    assert exported.returncode == 0, exported.stderr
    assert 'name = "xg-docs"' in exported.stdout and 'name = "xg-dev"' not in exported.stdout
    checked = run("verify", "-r", lock, "--extra", "fast", "--repo", repo, "--json")
    assert checked.returncode == 0, checked.stderr
    assert [t["path"] for t in document(checked.stdout)["trees"]] == [fast["path"]]
    # remove takes the tree of the choice given, and no other.
    removed = run("remove", "-r", lock, "--extra", "fast", "--repo", repo)
    assert removed.returncode == 0, removed.stderr
    assert not Path(fast["path"]).exists() and Path(default["path"]).exists() and Path(both["path"]).exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--extra", "slow", "--extra", "fast", "--group", "test"],
            "--extra slow, --group test: the lock declares no such extra or group (extras: fast; dependency-groups: "
            "dev, docs)",
        ),
        (
            ["--group", "test", "--group", "TEST"],
            "--group test: the lock declares no such group (extras: fast; dependency-groups: dev, docs)",
        ),
    ],
)
def test_an_extra_or_group_the_lock_does_not_declare_is_one_line(
    tmp_path: Path, served: tuple[IndexServer, Path], args: list[str], message: str
) -> None:
    _, lock = served
    repo = tmp_path / "repo"
    refused = run("ensure", "-r", lock, *args, "--repo", repo)
    assert refused.returncode == 2 and not repo.exists(), refused.stderr
    assert refused.stderr.strip().splitlines() == [f"repoinstall: error: {lock}: {message}"]


def test_extras_and_groups_of_a_requirements_file_or_of_no_file_are_refused(
    tmp_path: Path, served: tuple[IndexServer, Path]
) -> None:
    repo = tmp_path / "repo"
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("xg-base==1.0\n")
    refused = run("ensure", "-r", requirements, "--extra", "fast", "--repo", repo)
    assert refused.returncode == 2 and not repo.exists(), refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"repoinstall: error: {requirements}: not a pylock.toml: --extra fast choose among a pylock.toml's extras "
        "and dependency groups; a requirements file names extras on its lines (name[extra]==1.0)"
    ]
    alone = run("ensure", "xg-base==1.0", "--group", "dev", "--repo", repo)
    assert alone.returncode == 2 and not repo.exists(), alone.stderr
    assert alone.stderr.strip().splitlines() == [
        "repoinstall: error: --group dev: they choose among a pylock.toml's extras and groups: give -r FILE"
    ]


def test_the_api_takes_the_choice_and_reads_the_lock_for_the_trees_interpreter(
    tmp_path: Path, served: tuple[IndexServer, Path]
) -> None:
    _, lock = served
    forget()
    with Repo(tmp_path / "repo", install=InstallOptions(python=sys.executable)) as repo:
        tree = repo.ensure_lock(str(lock), extras=["fast"], groups=["docs"])
        assert _held(str(tree.path)) == ["xg_base", "xg_docs", "xg_fast"]  # xg-other: this very interpreter
        assert repo.ensure_lock(str(lock), extras={"FAST"}, groups=("Docs",)).path == tree.path


@pytest.mark.skipif(
    not OTHER_PYTHON,
    reason="REPOINSTALL_TEST_OTHER_PYTHON names no interpreter of another Python version (with pip)",
)
def test_the_markers_are_those_of_the_interpreter_the_tree_is_for(
    tmp_path: Path, served: tuple[IndexServer, Path]
) -> None:
    _, lock = served
    other = OTHER_PYTHON
    shown = subprocess.run(
        [other, "-c", f"import sys; print(sys.version_info[:2] != {tuple(sys.version_info[:2])})"],
        capture_output=True,
        text=True,
        check=True,
        env=isolated_env(),
    )
    assert shown.stdout.strip() == "True", "REPOINSTALL_TEST_OTHER_PYTHON must be another Python version"
    with Repo(tmp_path / "repo", install=InstallOptions(python=other)) as repo:
        tree = repo.ensure_lock(str(lock), groups=["docs"])
    assert _held(str(tree.path)) == ["xg_base", "xg_docs", "xg_other"]
