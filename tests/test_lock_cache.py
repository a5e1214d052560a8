"""The tree a lock file named, remembered per user (``repoinstall._lockfile.known``): a warm ``ensure -r LOCK``
whose tree is there parses nothing (no TOML, no requirements grammar, no markers, no index), and the entry is
only ever a hint: a changed byte misses it, a corrupt or misplaced entry is ignored, a removed tree is
reinstalled, and two tools' locks of one set still name one tree. Real ``pip lock`` files, real wheels, real
installs; what a run parsed is read off ``python -X importtime``."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import document, import_version, isolated_env
from wheels import make_wheel

#: What reading a lock file imports; a run that answers from its remembered tree imports none of them.
PARSERS = (
    "tomllib",
    "packaging.markers",
    "packaging.tags",
    "repoinstall._lockfile.read",
    "repoinstall._lockfile.pylock",
    "repoinstall._lockfile.hashed",
    "repoinstall._lockfile.request",
    "repoinstall._index",
)


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    """app 1.0 (needs dep>=1), dep 1.0 and lone 1.0, below the directory the locks are written to."""
    directory = tmp_path / "wheels"
    directory.mkdir()
    make_wheel(directory, "app", "1.0", requires=("dep>=1",))
    make_wheel(directory, "dep", "1.0")
    make_wheel(directory, "lone", "1.0")
    return directory


def env_for(tmp_path: Path) -> dict[str, str]:
    """The tests' isolated environment with a cache directory of this test's own."""
    return isolated_env(XDG_CACHE_HOME=str(tmp_path / "cache"))


def pip_lock(wheels: Path, out: Path, *specs: str) -> Path:
    command = [sys.executable, "-m", "pip", "lock", *specs, "--no-index", "--find-links", str(wheels), "-o", str(out)]
    done = subprocess.run(command, env=isolated_env(), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return out


def hashed(wheels: Path, out: Path, *names: str) -> Path:
    """A hashed requirements file of ``names`` at 1.0, with the file's own index lines (as pip-compile writes)."""
    lines = ["--no-index", f"--find-links {wheels}"]
    for name in names:
        digest = hashlib.sha256((wheels / f"{name}-1.0-py3-none-any.whl").read_bytes()).hexdigest()
        lines.append(f"{name}==1.0 --hash=sha256:{digest}")
    out.write_text("\n".join(lines) + "\n")
    return out


class Ran:
    """One ``ensure --json`` run: its exit code, document and the modules it imported."""

    def __init__(self, tmp_path: Path, repo: Path, lock: Path) -> None:
        command = [sys.executable, "-X", "importtime", "-m", "repoinstall", "ensure", "--json", "--repo", str(repo)]
        done = subprocess.run(
            [*command, "-r", str(lock)], env=env_for(tmp_path), capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        self.packages = document(done.stdout)["packages"]
        lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
        self.modules = {line.rpartition("|")[2].strip() for line in lines[1:]}

    @property
    def action(self) -> str:
        (package,) = self.packages
        return str(package["action"])

    @property
    def path(self) -> str:
        (package,) = self.packages
        return str(package["path"])

    def parsed(self) -> list[str]:
        return [name for name in PARSERS if name in self.modules]


def remove(tmp_path: Path, repo: Path, lock: Path) -> None:
    command = [sys.executable, "-m", "repoinstall", "remove", "--repo", str(repo), "-r", str(lock)]
    done = subprocess.run(command, env=env_for(tmp_path), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def entries(tmp_path: Path) -> list[Path]:
    directory = tmp_path / "cache" / "repoinstall" / "lock-trees"
    return sorted(directory.iterdir()) if directory.is_dir() else []


@pytest.mark.parametrize("kind", ["pylock", "hashed"])
def test_the_second_run_parses_nothing(tmp_path: Path, wheels: Path, kind: str) -> None:
    lock = (
        pip_lock(wheels, tmp_path / "pylock.toml", "app==1.0")
        if kind == "pylock"
        else hashed(wheels, tmp_path / "requirements.txt", "app", "dep")
    )
    repo = tmp_path / "repo"
    first = Ran(tmp_path, repo, lock)
    assert first.action == "installed" and first.parsed(), first.parsed()
    (entry,) = entries(tmp_path)
    assert json.loads(entry.read_text())["tree"] == Path(first.path).parent.name
    second = Ran(tmp_path, repo, lock)
    assert (second.action, second.path) == ("present", first.path)
    assert second.parsed() == []
    assert import_version(second.path, "app") == "1.0"


def test_one_changed_byte_misses(tmp_path: Path, wheels: Path) -> None:
    lock = pip_lock(wheels, tmp_path / "pylock.toml", "app==1.0")
    repo = tmp_path / "repo"
    first = Ran(tmp_path, repo, lock)
    lock.write_bytes(lock.read_bytes() + b"#")  # a comment: the same tree, other bytes
    again = Ran(tmp_path, repo, lock)
    assert (again.action, again.path) == ("present", first.path)
    assert "repoinstall._lockfile.pylock" in again.parsed()
    assert len(entries(tmp_path)) == 2  # and remembered under its own key
    assert Ran(tmp_path, repo, lock).parsed() == []


@pytest.mark.parametrize("damage", ["garbage", "truncated", "another file's entry", "not a lock tree", "no tree"])
def test_a_corrupt_or_misplaced_entry_is_ignored(tmp_path: Path, wheels: Path, damage: str) -> None:
    app, lone = pip_lock(wheels, tmp_path / "pylock.toml", "app==1.0"), hashed(wheels, tmp_path / "lone.txt", "lone")
    repo = tmp_path / "repo"
    app_tree = Ran(tmp_path, repo, app).path
    (app_entry,) = entries(tmp_path)
    lone_tree = Ran(tmp_path, repo, lone).path
    (lone_entry,) = (e for e in entries(tmp_path) if e != app_entry)
    remove(tmp_path, repo, lone)  # lone's tree gone: the damaged entry is all that says anything of it
    text = lone_entry.read_text()
    lone_entry.write_text(
        {
            "garbage": "\x00\xff not json",
            "truncated": text[: len(text) // 2],
            # app's entry copied over lone's: it names app's tree, which is there, under another key.
            "another file's entry": app_entry.read_text(),
            # lone's key, but naming a tree that is no lock's (a project of that name, were one installed).
            "not a lock tree": json.dumps({"key": lone_entry.name, "tree": "app"}),
            "no tree": json.dumps({"key": lone_entry.name, "tree": "locked-nothing-0000000000"}),
        }[damage]
    )
    again = Ran(tmp_path, repo, lone)
    assert (again.action, again.path) == ("installed", lone_tree)
    assert "repoinstall._lockfile.hashed" in again.parsed()
    assert import_version(again.path, "lone") == "1.0"
    assert not (Path(again.path) / "app").exists()
    assert json.loads(lone_entry.read_text()) == {"key": lone_entry.name, "tree": Path(lone_tree).parent.name}
    assert Ran(tmp_path, repo, app).path == app_tree


def test_a_removed_tree_with_an_entry_is_reinstalled(tmp_path: Path, wheels: Path) -> None:
    lock = hashed(wheels, tmp_path / "requirements.txt", "lone")
    repo = tmp_path / "repo"
    first = Ran(tmp_path, repo, lock)
    assert len(entries(tmp_path)) == 1
    remove(tmp_path, repo, lock)
    assert not Path(first.path).exists()
    again = Ran(tmp_path, repo, lock)
    assert (again.action, again.path) == ("installed", first.path)
    assert import_version(again.path, "lone") == "1.0"


def test_two_tools_locks_of_one_set_name_one_tree(tmp_path: Path, wheels: Path) -> None:
    locks = [
        pip_lock(wheels, tmp_path / "pylock.toml", "app==1.0"),
        hashed(wheels, tmp_path / "requirements.txt", "app", "dep"),
    ]
    repo = tmp_path / "repo"
    runs = [Ran(tmp_path, repo, lock) for lock in locks] + [Ran(tmp_path, repo, lock) for lock in locks]
    assert [r.action for r in runs] == ["installed", "present", "present", "present"]
    assert len({r.path for r in runs}) == 1
    assert [r.parsed() == [] for r in runs] == [False, False, True, True]
    assert {json.loads(e.read_text())["tree"] for e in entries(tmp_path)} == {Path(runs[0].path).parent.name}
    assert len(entries(tmp_path)) == 2


#: ``Repo.ensure_lock`` (and ``aensure_lock``) in a new interpreter: the action, the path and which parsers it loaded.
API = """
import asyncio, json, sys
from repoinstall import Repo
with Repo(sys.argv[1]) as repo:
    done = repo.ensure_lock(sys.argv[2]) if sys.argv[3] == "sync" else asyncio.run(repo.aensure_lock(sys.argv[2]))
print(json.dumps([done.action, done.path, [m for m in sys.argv[4:] if m in sys.modules]]))
"""


@pytest.mark.parametrize("call", ["sync", "async"])
def test_the_api_remembers_too(tmp_path: Path, wheels: Path, call: str) -> None:
    lock = pip_lock(wheels, tmp_path / "pylock.toml", "app==1.0")
    runs = []
    for _ in range(2):
        command = [sys.executable, "-c", API, str(tmp_path / "repo"), str(lock), call, *PARSERS]
        done = subprocess.run(command, env=env_for(tmp_path), capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout))
    (first_action, first_path, first_parsers), (action, path, parsers) = runs
    assert (first_action, action, path) == ("installed", "present", first_path)
    assert "repoinstall._lockfile.pylock" in first_parsers and parsers == []
    # The CLI reads the same entry.
    assert Ran(tmp_path, tmp_path / "repo", lock).parsed() == []
