"""Each distribution once per repo: trees composed of stored distributions, one resolution and one installer run per
batch, each distribution installed once however many trees or pods want it. Real wheels, a real index on
127.0.0.1, real pip and uv, real processes racing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import actions, cli, document, ensure_args, import_version, isolated_env, run
from indexserver import IndexServer
from wheels import make_wheel

LIBRARIES = ("lib-one", "lib-two", "lib-three")


@pytest.fixture(scope="module")
def shared_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four adaptors over three shared libraries (2 each), a second version of one, and two that clash."""
    directory = tmp_path_factory.mktemp("store-wheels")
    for name in LIBRARIES:
        make_wheel(directory, name, "1.0", modules=2)
    for number, needs in enumerate((("lib-one", "lib-two"), ("lib-two", "lib-three"), ("lib-one", "lib-three"))):
        make_wheel(directory, f"uses-{number}", "1.0", requires=tuple(f"{n}>=1" for n in needs))
    make_wheel(directory, "uses-0", "2.0", requires=("lib-one>=1", "lib-two>=1"))
    # Two distributions that both write clash/__init__.py, and an app that needs both.
    for name in ("clash-a", "clash-b"):
        make_wheel(directory, name, "1.0", more={"clash/__init__.py": f"WHO = {name!r}\n".encode()})
    make_wheel(directory, "clash-app", "1.0", requires=("clash-a>=1", "clash-b>=1"))
    return directory


@pytest.fixture
def shared(shared_wheels: Path) -> Iterator[IndexServer]:
    server = IndexServer(shared_wheels).start()
    yield server
    server.stop()


def inodes(tree: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(tree)): (p.stat().st_dev, p.stat().st_ino) for p in tree.rglob("*") if p.is_file()}


def stored_dirs(repo: Path) -> list[str]:
    return sorted(f"{p.parent.name}/{p.name}" for p in (repo / "store").glob("*/*/*"))


def test_trees_of_one_batch_share_each_distribution_and_install_it_once(
    repo: Path, shared: IndexServer, installer: str
) -> None:
    done = run(*ensure_args(repo, shared.url, "uses-0==1.0", "uses-1==1.0", "uses-2==1.0"))
    assert done.returncode == 0, done.stderr
    packages = document(done.stdout)["packages"]
    assert [p["action"] for p in packages] == ["installed"] * 3
    # 6 distinct distributions for 3 trees of 3: each installed once, counted once.
    assert sum(p["stored"] for p in packages) == 6
    assert len(stored_dirs(repo)) == 6
    # A cold store: the batch is resolved and installed in one installer run, each file fetched once.
    for name in ("lib_one", "lib_two", "lib_three", "uses_0", "uses_1", "uses_2"):
        assert shared.downloads(name) == 1, name
    trees = {p["name"]: Path(p["path"]) for p in packages}
    # lib-two is in uses-0's and uses-1's trees as one inode, which is the store's.
    in_0, in_1 = inodes(trees["uses-0"]), inodes(trees["uses-1"])
    shared_files = [path for path in in_0 if path.startswith("lib_two/")]
    assert shared_files and all(in_0[path] == in_1[path] for path in shared_files)
    assert all(os.stat(trees["uses-0"] / path).st_nlink >= 3 for path in shared_files)
    assert not any(path.startswith("lib_three/") for path in in_0)  # only its own closure
    for tree in trees.values():
        assert all(not os.stat(tree / path).st_mode & 0o222 for path in inodes(tree))  # read-only files
        directories = [tree, *(p for p in tree.rglob("*") if p.is_dir())]
        assert all(not d.stat().st_mode & 0o222 for d in directories)  # and directories
    stored = [p for p in (repo / "store").glob("*/*/*/**/*") if p.is_dir()]
    assert stored and all(not d.stat().st_mode & 0o222 for d in stored)
    assert import_version(trees["uses-1"], "lib_three") == "1.0"
    assert run("verify", "--all", "--repo", repo).returncode == 0


def test_a_tree_whose_distributions_are_stored_installs_and_downloads_nothing(repo: Path, shared: IndexServer) -> None:
    assert run(*ensure_args(repo, shared.url, "uses-0==1.0")).returncode == 0
    # A new version of the adaptor over the same libraries: one distribution installed, the libraries linked.
    newer = run(*ensure_args(repo, shared.url, "uses-0==2.0"))
    assert newer.returncode == 0, newer.stderr
    assert [p["stored"] for p in document(newer.stdout)["packages"]] == [1]
    assert "installing uses-0==2.0" in newer.stderr
    # A tree removed (and its closure kept) comes back from the store with no installer run at all.
    assert run("remove", "uses-0==1.0", "--repo", repo).returncode == 0
    before = {name: shared.downloads(name) for name in ("uses_0", "lib_one", "lib_two")}
    again = run(*ensure_args(repo, shared.url, "uses-0==1.0"))
    assert again.returncode == 0, again.stderr
    assert actions(again.stdout) == ["installed"] and document(again.stdout)["packages"][0]["stored"] == 0
    assert "every distribution is in the store" in again.stderr
    assert {name: shared.downloads(name) for name in before} == before


def test_two_distributions_writing_one_path_are_one_line_and_publish_nothing(
    repo: Path, shared: IndexServer, installer: str
) -> None:
    done = run(*ensure_args(repo, shared.url, "clash-app==1.0"))
    assert done.returncode == 1
    error = done.stderr.strip().splitlines()[-1]
    assert "clash-a" in error and "clash-b" in error and "clash/__init__.py" in error, done.stderr
    assert not list((repo / "trees").glob("*/clash-app/*"))


def test_a_repo_made_before_the_store_keeps_working(repo: Path, shared: IndexServer) -> None:
    done = run(*ensure_args(repo, shared.url, "uses-0==1.0"))
    tree = Path(document(done.stdout)["packages"][0]["path"])
    # What every tree was before the store: its own files, no store beside it.
    copy = tree.with_name("copy")
    shutil.copytree(tree, copy)
    shutil.rmtree(tree)
    copy.rename(tree)
    shutil.rmtree(repo / "store")
    assert all(os.stat(tree / path).st_nlink == 1 for path in inodes(tree))
    present = run(*ensure_args(repo, shared.url, "uses-0==1.0"))
    assert actions(present.stdout) == ["present"], present.stderr
    assert run("verify", "--all", "--repo", repo).returncode == 0
    # New installs use the store; the old tree is read as it is.
    newer = run(*ensure_args(repo, shared.url, "uses-1==1.0"))
    assert newer.returncode == 0, newer.stderr
    assert len(stored_dirs(repo)) == 3
    assert all(os.stat(tree / path).st_nlink == 1 for path in inodes(tree))
    assert run("verify", "--all", "--repo", repo).returncode == 0


def test_pods_racing_for_overlapping_batches_install_each_distribution_once(
    tmp_path: Path, shared: IndexServer
) -> None:
    repo = tmp_path / "repo"
    batches = [["uses-0==1.0", "uses-1==1.0"], ["uses-1==1.0", "uses-2==1.0"], ["uses-2==1.0", "uses-0==1.0"]] * 2
    env = isolated_env()
    pods = [
        subprocess.Popen(
            cli(*ensure_args(repo, shared.url, *batch)),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for batch in batches
    ]
    outputs = [pod.communicate(timeout=300) for pod in pods]
    assert [pod.returncode for pod in pods] == [0] * len(pods), [err for _, err in outputs]
    stored = sum(p["stored"] for out, _ in outputs for p in json.loads(out)["packages"])
    # Six distinct distributions, each installed by exactly one pod (the others waited on its lock, or found it).
    assert stored == 6, [err for _, err in outputs]
    assert len(stored_dirs(repo)) == 6
    for name in ("lib_one", "lib_two", "lib_three"):
        assert shared.downloads(name) >= 1
    assert run("verify", "--all", "--repo", repo).returncode == 0


def test_no_lock_still_stores_each_distribution_whole(repo: Path, shared: IndexServer) -> None:
    done = run(*ensure_args(repo, shared.url, "uses-0==1.0", "uses-2==1.0"), "--no-lock")
    assert done.returncode == 0, done.stderr
    assert len(stored_dirs(repo)) == 5
    assert not (repo / "store-locks").exists() or not list((repo / "store-locks").rglob("*.lock*"))
    assert run("verify", "--all", "--repo", repo).returncode == 0


def test_a_lock_whose_packages_are_stored_runs_no_installer(repo: Path, shared: IndexServer, tmp_path: Path) -> None:
    assert run(*ensure_args(repo, shared.url, "uses-0==1.0")).returncode == 0
    lock = tmp_path / "pylock.toml"
    assert run("export", "uses-0==1.0", "--repo", repo, "-o", lock).returncode == 0
    done = run("ensure", "-r", lock, "--repo", repo, "--json", "-v")
    assert done.returncode == 0, done.stderr
    # Its own metapackage (made here, metadata alone) is unpacked into the store; its packages are linked.
    assert "with pip" not in done.stderr and "with uv" not in done.stderr, done.stderr
    tree = Path(document(done.stdout)["packages"][0]["path"])
    assert import_version(tree, "uses_0") == "1.0"
    assert len(stored_dirs(repo)) == 4
    assert run("verify", "--all", "--repo", repo).returncode == 0


def test_a_set_installed_together_installs_only_what_the_store_lacks(repo: Path, shared: IndexServer) -> None:
    assert run(*ensure_args(repo, shared.url, "uses-0==1.0")).returncode == 0
    before = {name: shared.downloads(name) for name in ("lib_one", "lib_two", "uses_0")}
    done = run(*ensure_args(repo, shared.url, "uses-0==1.0", "uses-1==1.0"), "--together")
    assert done.returncode == 0, done.stderr
    # uses-1 and lib-three installed; the set's own metapackage unpacked; lib-one, lib-two and uses-0 linked.
    assert [p["stored"] for p in document(done.stdout)["packages"]] == [3]
    assert {name: shared.downloads(name) for name in before} == before
    tree = Path(document(done.stdout)["packages"][0]["path"])
    assert import_version(tree, "lib_three") == "1.0" and import_version(tree, "uses_0") == "1.0"
    assert run("verify", "--all", "--repo", repo).returncode == 0


#: Ensures its argv's specs in one batch, in-process, and prints how often this process opened a file named
#: ``payload.bin`` meanwhile (an audit hook sees every open; the installers and compilers are processes of their
#: own), then verifies the repo.
_COUNT_OPENS = """
import json, sys
opened = []
counting = [True]
sys.addaudithook(
    lambda event, args: event == "open" and counting[0] and str(args[0]).endswith("payload.bin") and opened.append(1)
)
from repoinstall import Repo
from repoinstall._options import InstallOptions
options = InstallOptions(find_links=(sys.argv[2],), no_index=True, installer=sys.argv[3])
with Repo(sys.argv[1], install=options) as repo:
    actions = [result.action for result in repo.ensure_all(sys.argv[4:])]
    counting[0] = False
    reports = repo.verify()
print(json.dumps({"actions": actions, "ok": all(r.ok for r in reports), "opens": len(opened)}))
"""


def test_a_batch_hashes_each_file_it_stores_once_for_all_its_trees(repo: Path, tmp_path: Path, installer: str) -> None:
    """A cold batch of two trees that both hold one distribution: this process hashes its file once (while the
    bytecode compiles, or in the store's check before its publish); both trees' verifies find it hashed (before,
    the store's check and each tree's verify hashed it, three times)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "bulky", "1.0", payload=1 << 20, incompressible=True)
    make_wheel(wheels, "uses-bulky", "1.0", requires=("bulky>=1",))
    args = ["-c", _COUNT_OPENS, repo, wheels, installer, "bulky==1.0", "uses-bulky==1.0"]
    command = [sys.executable, *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, env=isolated_env(), check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"actions": ["installed", "installed"], "ok": True, "opens": 1}
