"""One resolution is one tree, whichever format carried it, and every format goes through the store.

Real locks of one resolution made by the real tools against the test index on 127.0.0.1: ``pip lock``,
``uv pip compile --format pylock.toml``, ``uv pip compile --generate-hashes`` (this platform's hashes, and
``--universal``: every file's, as pip-compile writes them), ``uv export`` as ``pylock.toml`` and as requirements
(the hashes its lock holds). Each is ensured with pip and with uv: one tree name, its record naming every
artifact's URL and sha256, exported, and composed from the store without an installer once stored.
"""

from __future__ import annotations

import json
import re
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


@pytest.fixture
def static(tmp_path: Path) -> Iterator[IndexServer]:
    """A plain static find-links host: no hashes, no metadata files, no byte ranges."""
    packages = tmp_path / "static"
    packages.mkdir()
    for version in ("1.0", "2.0"):
        make_wheel(packages, "oc-alpha", version)
    make_wheel(packages, "oc-beta", "1.0", requires=("oc-alpha<2",))
    server = IndexServer(packages)
    server.hashes = server.ranges = False
    server.start()
    yield server
    server.stop()


def test_a_batch_downloads_each_distribution_once_from_a_host_without_ranges(
    tmp_path: Path, static: IndexServer, installer: str
) -> None:
    # beta asks alpha<2, the batch alpha==1.0: "would beta alone hold a newer alpha?" reads alpha 1.0's
    # Requires-Python off the stored distribution, not off a second download of its wheel.
    done = run("ensure", "oc-alpha==1.0", "oc-beta==1.0", "--repo", tmp_path / "repo", "--no-index",
               "--find-links", static.url, "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [p["action"] for p in json.loads(done.stdout)["packages"]] == ["installed", "installed"]
    # Every download is the installer's: pip takes each file once; uv, reading metadata without ranges, more.
    assert not [client for client in static.clients.elements() if client[1] == "repoinstall"], static.clients
    if installer == "pip":
        assert static.downloads("oc_alpha-1.0") == static.downloads("oc_beta-1.0") == 1, static.clients


def test_a_lock_tree_is_named_for_the_distributions_it_holds(tmp_path: Path, locks: Path, index: IndexServer) -> None:
    done = _ensure(tmp_path / "repo", locks / "hashed.txt", index)
    assert done.returncode == 0, done.stderr
    [package] = json.loads(done.stdout)["packages"]
    assert re.fullmatch(r"locked-oc-dep-oc-top-[0-9a-f]{10}", package["name"]), package["name"]


#: The last commit whose lock trees are named ``locked-<16 hex>`` alone.
LEGACY = "8374d5e555e71f4d8b3b29546e814cdb0c401949"


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """That commit's ``repoinstall`` package (``git archive``), to put first on a pod's path."""
    root = Path(__file__).resolve().parents[1]
    if subprocess.run(["git", "-C", root, "cat-file", "-e", f"{LEGACY}^{{commit}}"], check=False).returncode:
        pytest.skip(f"commit {LEGACY[:12]} is not in this clone")
    into = tmp_path_factory.mktemp("legacy")
    archive = subprocess.run(
        ["git", "-C", root, "archive", "--format=tar", LEGACY, "repoinstall"], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", into], input=archive.stdout, check=True)
    return into


def test_a_lock_tree_recorded_under_its_former_name_stays_usable(
    tmp_path: Path, locks: Path, index: IndexServer, legacy: Path
) -> None:
    repo = tmp_path / "repo"
    former = {}
    for kind in ("pylock.uv.toml", "universal.txt"):  # a hashed file was a tree of its own then
        old = subprocess.run(
            [sys.executable, "-P", "-m", "repoinstall", "ensure", "-r", locks / kind, "--repo", repo,
             "--index-url", index.simple, "--json"],
            env=isolated_env(PYTHONPATH=str(legacy)), capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert old.returncode == 0, old.stderr
        [made] = json.loads(old.stdout)["packages"]
        assert re.fullmatch(r"locked-[0-9a-f]{16}", made["name"])
        former[kind] = made["name"]
    assert len(set(former.values())) == 2
    # Each found again by what named it then (every hashed file here lists the same hashes), verified, exported,
    # then removed.
    for kind in KINDS:
        done = _ensure(repo, locks / kind, index)
        assert done.returncode == 0, done.stderr
        [now] = json.loads(done.stdout)["packages"]
        name = former["universal.txt" if kind.endswith(".txt") else "pylock.uv.toml"]
        assert (now["name"], now["action"]) == (name, "present"), kind
        shown = run("path", "-r", locks / kind, "--repo", repo)
        assert shown.returncode == 0 and name in shown.stdout, shown.stderr
    for kind, name in former.items():
        checked = run("verify", f"{name}==1", "--repo", repo, "--json")
        assert checked.returncode == 0, checked.stdout
        exported = run("export", "-r", locks / kind, "--repo", repo)
        assert exported.returncode == 0 and f"oc_dep-1.0-{BEST}.whl" in exported.stdout, exported.stderr
        assert run("remove", "-r", locks / kind, "--repo", repo).returncode == 0
    # Once it is gone, the lock names its tree for what it holds: composed from the store the old one filled.
    again = _ensure(repo, locks / "pylock.uv.toml", index, "-v")
    [after] = json.loads(again.stdout)["packages"]
    assert after["action"] == "installed" and re.fullmatch(r"locked-oc-dep-oc-top-[0-9a-f]{10}", after["name"])
    assert not re.search(r"installing \S+ with (pip|uv)", again.stderr), again.stderr
