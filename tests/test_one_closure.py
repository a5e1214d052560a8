"""One resolution is one tree, whichever format carried it, and every format goes through the store.

Real locks of one resolution made by the real tools against the test index on 127.0.0.1: ``pip lock``,
``uv pip compile --format pylock.toml``, ``uv pip compile --generate-hashes`` (this platform's hashes, and
``--universal``: every file's, as pip-compile writes them), ``uv export`` as ``pylock.toml`` and as requirements
(the hashes its lock holds). Each is ensured with pip and with uv: one tree name, its record naming every
artifact's URL and sha256, exported, and composed from the store without an installer once stored.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import isolated_env, run
from indexserver import IndexServer
from packaging.tags import sys_tags
from wheels import make_wheel

#: This interpreter's best wheel tag: oc-dep has a wheel for it beside its py3-none-any one.
BEST = str(next(iter(sys_tags())))
KINDS = ("pylock.pip.toml", "pylock.uv.toml", "hashed.txt", "universal.txt", "project/pylock.toml", "project/req.txt")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    packages = tmp_path_factory.mktemp("closure-packages")
    make_wheel(packages, "oc-top", "1.0", requires=("oc-dep>=1",))
    make_wheel(packages, "oc-dep", "1.0")
    make_wheel(packages, "oc-dep", "1.0", tag=BEST)
    server = IndexServer(packages).start()
    yield server
    server.stop()


def _uv() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


def _made(cwd: Path, command: list[str]) -> None:
    done = subprocess.run(
        command, cwd=cwd, env=isolated_env(), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def locks(tmp_path_factory: pytest.TempPathFactory, index: IndexServer) -> Path:
    """Six locks of ``oc-top``'s one resolution, by pip and uv."""
    where = tmp_path_factory.mktemp("closure-locks")
    (where / "in.txt").write_text("oc-top\n")
    url = ["--index-url", index.simple]
    _made(where, [sys.executable, "-m", "pip", "lock", "--no-cache-dir", *url, "-r", "in.txt", "-o", KINDS[0]])
    compile_ = [_uv(), "pip", "compile", "--no-config", "--quiet", *url, "in.txt"]
    _made(where, [*compile_, "--format", "pylock.toml", "-o", KINDS[1]])
    _made(where, [*compile_, "--generate-hashes", "-o", KINDS[2]])
    _made(where, [*compile_, "--universal", "--generate-hashes", "-o", KINDS[3]])
    project = where / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "0"\nrequires-python = ">=3.8"\ndependencies = ["oc-top"]\n'
    )
    _made(project, [_uv(), "lock", "--no-config", *url])
    export = [_uv(), "export", "--no-config", "--frozen", "--no-emit-project"]
    _made(project, [*export, "--format", "pylock.toml", "-o", "pylock.toml"])
    _made(project, [*export, "--format", "requirements-txt", "-o", "req.txt"])
    return where


def _ensure(repo: Path, lock: Path, index: IndexServer, *extra: str) -> subprocess.CompletedProcess[str]:
    return run("ensure", "-r", lock, "--repo", repo, "--index-url", index.simple, "--json", *extra)


def test_six_formats_of_one_resolution_are_one_tree_with_every_artifact_recorded(
    tmp_path: Path, locks: Path, index: IndexServer, installer: str
) -> None:
    repo = tmp_path / "repo"
    trees, actions = set(), []
    for kind in KINDS:
        done = _ensure(repo, locks / kind, index)
        assert done.returncode == 0, (kind, done.stderr)
        [package] = json.loads(done.stdout)["packages"]
        trees.add(package["name"])
        actions.append(package["action"])
    assert len(trees) == 1, trees
    assert actions == ["installed"] + ["present"] * (len(KINDS) - 1)
    # The record names each distribution's artifact: the one this interpreter takes, by URL and sha256.
    for kind in ("hashed.txt", "project/req.txt"):
        exported = run("export", "-r", locks / kind, "--repo", repo)
        assert exported.returncode == 0, exported.stderr
        assert f"oc_dep-1.0-{BEST}.whl" in exported.stdout and "oc_top-1.0-py3-none-any.whl" in exported.stdout
        assert exported.stdout.count("sha256 = ") == 2


def test_hashed_requirements_compose_from_the_store_without_an_installer(
    tmp_path: Path, locks: Path, index: IndexServer, installer: str
) -> None:
    repo = tmp_path / "repo"
    assert _ensure(repo, locks / "pylock.uv.toml", index).returncode == 0
    assert run("remove", "-r", locks / "pylock.uv.toml", "--repo", repo).returncode == 0
    before = index.downloads("oc_")
    for kind in ("hashed.txt", "project/req.txt"):
        done = _ensure(repo, locks / kind, index, "-v")
        assert done.returncode == 0, done.stderr
        assert "every distribution is in the store; composing it" in done.stderr or kind != "hashed.txt"
        assert f"with {installer}" not in done.stderr, done.stderr
    assert index.downloads("oc_") == before
    stored = list((repo / "store").rglob("*.dist-info"))
    assert len(stored) == 3  # oc-dep, oc-top and the lock tree's own metapackage, each once
