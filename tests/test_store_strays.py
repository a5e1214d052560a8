"""What stands in the store's way (issue 30, points 2 and 3): a stray at a stored distribution's path, a FIFO or
symlink where a directory of the store or its locks belongs, and what failed installs of a lock's tree leave.

A stray (a regular file, a FIFO) at ``store/<env>/<name>/<version>-<sha16>`` is ours to set aside: the install that
needs the distribution does, before its installer runs, and stores it as usual; gc and ``verify --repair`` do too,
and ``verify`` reports it. A symlink there, or anything but a directory where one of the store's or its locks'
directories belongs, is refused in one line naming it and its kind (exit 2) before anything is downloaded, named
by ``verify``, ``locks`` and gc, and left alone. Real processes, real wheels, an index on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import document, ensure_args, finish, import_version, run, start, wait_until
from indexserver import IndexServer
from storecheck import assert_store_whole

from repoinstall._disk.identity import canonical_version, environment_tag

LOCK = ["--stale-after", "2", "--heartbeat", "0.4"]


def _leaf(index: IndexServer, project: str) -> str:
    """The stored distribution's directory name of ``project``'s one wheel on the index."""
    wheel = index.files(project)[0]
    version = wheel.name.split("-")[1]
    return f"{canonical_version(__import__('packaging.version').version.Version(version))}-{index.sha256(wheel)[:16]}"


def _plant(path: Path, kind: str, outside: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "file":
        path.write_text("not a stored distribution\n")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        outside.mkdir(exist_ok=True)
        (outside / "keep.txt").write_text("outside the repo\n")
        path.symlink_to(outside, target_is_directory=True)


NAMED = {"file": "a regular file", "fifo": "a FIFO", "symlink": "a symlink"}
KINDS = ("file", "fifo", "symlink")


def _one_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("repoinstall: error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.parametrize("kind", KINDS)
def test_ensure_sets_a_stray_at_a_stored_path_aside_or_refuses_a_symlink(
    repo: Path, index: IndexServer, tmp_path: Path, kind: str
) -> None:
    stray = repo / "store" / environment_tag() / "dep-c" / _leaf(index, "dep-c")
    _plant(stray, kind, tmp_path / "outside")
    done = run(*ensure_args(repo, index.url, "adaptor-b==1.0"))
    if kind == "symlink":
        # Refused before anything is downloaded, in one line naming it; left for a person to look at.
        assert done.returncode == 2, done.stderr
        line = _one_error(done.stderr)
        assert f"{stray} is a symlink where a stored distribution belongs" in line, line
        assert index.downloads("dep_c") == index.downloads("adaptor_b") == 0
        assert stray.is_symlink() and (tmp_path / "outside" / "keep.txt").is_file()
        assert not list((repo / "trees").glob("*/*/*"))
        return
    # A stray is ours: set aside (named with its kind), then the distribution is stored as usual, installed once.
    assert done.returncode == 0, done.stderr
    assert f"set aside {NAMED[kind]} where a stored distribution belongs: {stray}" in done.stderr, done.stderr
    assert index.downloads("dep_c") == 1
    assert stray.is_dir() and not stray.is_symlink()
    assert_store_whole(repo)


@pytest.mark.parametrize("kind", KINDS)
def test_verify_and_gc_name_a_stray_at_a_stored_path_and_set_it_aside(
    repo: Path, index: IndexServer, tmp_path: Path, kind: str
) -> None:
    assert run(*ensure_args(repo, index.url, "adaptor-a==1.0")).returncode == 0
    stray = repo / "store" / environment_tag() / "dep-c" / "2-0123456789abcdef"
    _plant(stray, kind, tmp_path / "outside")

    done = run("verify", "--repo", repo, "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    [found] = [d for d in json.loads(done.stdout)["store"] if d["status"] != "ok"]
    assert found["path"] == str(stray) and found["status"] == "broken", found
    assert found["notes"][0].startswith(f"{NAMED[kind]} where a stored distribution belongs"), found
    text = run("verify", "--repo", repo)
    assert f"broken     dep-c (store/{environment_tag()}/dep-c/2-0123456789abcdef)" in text.stdout, text.stdout

    dry = run("gc", "--repo", repo, "--json", "--older-than", "0", "--dry-run", *LOCK)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert os.path.lexists(stray)
    gc = run("gc", "--repo", repo, "--json", "--older-than", "0", *LOCK)
    named = [r for r in document(gc.stdout)["removed"] if r["path"] == str(stray)]
    if kind == "symlink":
        # Named as what it is and left alone (exit 1), as gc leaves a symlink in trees/; verify --repair refuses it.
        assert gc.returncode == 1
        assert [(r["kind"], r["done"]) for r in named] == [("symlink", False)], named
        assert "a symlink where a stored distribution belongs" in named[0]["reason"]
        repair = run("verify", "--repo", repo, "--repair", *LOCK)
        assert repair.returncode == 1 and f"{stray} is a symlink where a stored distribution belongs" in repair.stderr
        assert stray.is_symlink() and (tmp_path / "outside" / "keep.txt").is_file()
        return
    assert gc.returncode == 0, gc.stdout + gc.stderr
    assert [(r["kind"], r["done"]) for r in named] == [("stray", True)], named
    assert named[0]["reason"] == f"{NAMED[kind]} where a stored distribution belongs: not one"
    assert not os.path.lexists(stray) and not list((repo / "trash").iterdir())
    # verify --repair sets one aside just as well.
    _plant(stray, kind, tmp_path / "outside")
    repair = run("verify", "--repo", repo, "--repair", "--json", *LOCK)
    assert repair.returncode == 0, repair.stdout + repair.stderr
    assert [r["action"] for r in json.loads(repair.stdout)["repaired"]] == ["set aside"]
    assert not os.path.lexists(stray)
    assert run("verify", "--repo", repo).returncode == 0


def _store_locks_fifo(repo: Path) -> Path:
    fifo = repo / "store-locks" / environment_tag()
    fifo.parent.mkdir(parents=True, exist_ok=True)
    if fifo.is_dir():
        fifo.rmdir()
    os.mkfifo(fifo)
    return fifo


def _store_link(repo: Path) -> Path:
    link = repo / "store"
    repo.mkdir()
    (repo.parent / "elsewhere").mkdir()
    link.symlink_to(repo.parent / "elsewhere", target_is_directory=True)
    return link


def _dependency_link(repo: Path) -> Path:
    link = repo / "store" / environment_tag() / "dep-c"
    link.parent.mkdir(parents=True)
    (repo.parent / "elsewhere").mkdir()
    link.symlink_to(repo.parent / "elsewhere", target_is_directory=True)
    return link


@pytest.mark.parametrize(
    ("plant", "what"),
    [(_store_locks_fifo, "a FIFO"), (_store_link, "a symlink"), (_dependency_link, "a symlink")],
    ids=["fifo at store-locks/<env>", "symlink at store/", "symlink at store/<env>/<dependency>"],
)
def test_a_non_directory_where_the_stores_directories_belong_is_refused_before_any_download(
    repo: Path, index: IndexServer, plant: Callable[[Path], Path], what: str
) -> None:
    obstacle = plant(repo)
    before = sorted(str(p) for p in repo.rglob("*"))
    done = run(*ensure_args(repo, index.url, "adaptor-b==1.0"))
    assert done.returncode == 2, done.stderr
    line = _one_error(done.stderr)
    assert line.endswith(f"{obstacle} is not a directory ({what} is in the way)"), line
    assert index.downloads("adaptor_b") == index.downloads("dep_c") == 0
    made = sorted(str(p) for p in repo.rglob("*") if p.name != "format" and str(p) not in before)
    if plant is _dependency_link:
        # Its name is known once the tree is resolved (inside the tree's lock, in a staging dir, set aside now):
        # only the repo's own empty directories are left.
        assert [p for p in made if not Path(p).is_dir() or Path(p).is_symlink()] == [], made
    else:
        assert made == [], "nothing created"


def test_locks_gc_and_verify_name_a_fifo_where_the_store_locks_of_an_env_belong(repo: Path, index: IndexServer) -> None:
    assert run(*ensure_args(repo, index.url, "adaptor-a==1.0")).returncode == 0
    env = environment_tag()
    fifo = _store_locks_fifo(repo)
    locks = run("locks", "--repo", repo, "--json")
    assert locks.returncode == 1, locks.stdout + locks.stderr
    assert json.loads(locks.stdout)["obstacles"] == [
        {"path": str(fifo), "kind": "fifo", "problem": "a FIFO where a repo directory belongs"}
    ]
    assert f"{fifo}  [a FIFO where a repo directory belongs" in run("locks", "--repo", repo).stdout
    gc = run("gc", "--repo", repo, "--older-than", "0", *LOCK)
    assert gc.returncode == 1
    assert f"kept         fifo     {fifo}  (a FIFO where a repo directory belongs: left alone)" in gc.stdout, gc.stdout
    verify = run("verify", "--repo", repo)
    assert verify.returncode == 1 and f"obstacle   {fifo}\n" in verify.stdout, verify.stdout
    assert (repo / "store-locks" / env).is_fifo()


def _pip_lock(tmp_path: Path, index: IndexServer) -> Path:
    import subprocess
    import sys

    from helpers import isolated_env

    lock = tmp_path / "pylock.toml"
    command = [sys.executable, "-m", "pip", "lock", "adaptor-b==1.0", "--no-index", "-f", index.url, "-o", str(lock)]
    subprocess.run(command, env=isolated_env(), check=True, capture_output=True)
    return lock


def test_a_failed_install_of_a_lock_leaves_nothing_in_the_store(tmp_path: Path, index: IndexServer) -> None:
    lock = _pip_lock(tmp_path, index)
    text = lock.read_text()
    good = text.split('sha256 = "')[2].split('"')[0]  # dep-c's
    lock.write_text(text.replace(good, "0" * 64))
    repo = tmp_path / "repo"
    done = run("ensure", "-r", lock, "--repo", repo, *LOCK)
    assert done.returncode == 1 and "hash mismatch" in _one_error(done.stderr), done.stderr
    # The lock's own metapackage is stored after its installer run, which failed: nothing of it is there.
    assert not list((repo / "store").glob("*/locked-*")), "its metapackage stored for a tree that cannot be"
    assert not list((repo / "store-locks").glob("*/locked-*"))


def test_gc_leaves_nothing_of_a_lock_whose_tree_went(tmp_path: Path, index: IndexServer) -> None:
    # Whatever leaves a lock's metapackage stored and unheld (its tree removed; a tree that failed its check after
    # it was composed), gc takes it and then the directory of its name: one per lock would otherwise stay for good.
    lock = _pip_lock(tmp_path, index)
    repo = tmp_path / "repo"
    done = run("ensure", "-r", lock, "--repo", repo, "--json", *LOCK)
    assert done.returncode == 0, done.stderr
    package = document(done.stdout)["packages"][0]
    tree = f"{package['name']}=={package['version']}"
    assert run("remove", tree, "--repo", repo, *LOCK).returncode == 0
    [name] = (repo / "store").glob("*/locked-*")
    old = time.time() - 7200
    for stored in (repo / "store").glob("*/*/*"):
        os.utime(stored, (old, old))
    gc = run("gc", "--repo", repo, "--json", "--older-than", "0", *LOCK)
    assert gc.returncode == 0, gc.stdout + gc.stderr
    removed = {(r["kind"], r["path"]) for r in document(gc.stdout)["removed"] if r["done"]}
    assert ("store", str(name)) in removed, removed
    assert not list((repo / "store").glob("*/*")), "every distribution and its name's directory went"
    assert not list((repo / "store-locks").glob("*/*"))


def test_gc_removes_empty_store_directories(repo: Path, index: IndexServer) -> None:
    assert run(*ensure_args(repo, index.url, "adaptor-a==1.0")).returncode == 0
    env = repo / "store" / environment_tag()
    (env / "locked-0123456789abcdef").mkdir()  # what a failed lock install of an earlier release left
    old = time.time() - 7200
    os.utime(env / "locked-0123456789abcdef", (old, old))
    gc = run("gc", "--repo", repo, "--json", "--older-than", "0", *LOCK)
    assert gc.returncode == 0, gc.stdout + gc.stderr
    gone = [(r["kind"], r["path"], r["done"]) for r in document(gc.stdout)["removed"] if r["kind"] == "store"]
    assert gone == [("store", str(env / "locked-0123456789abcdef"), True)], gone
    assert (env / "adaptor-a").is_dir(), "a name with a stored distribution keeps its directory"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("strace"), reason="needs root and strace")
def test_gc_removing_an_empty_store_directory_as_a_publisher_renames_into_it_fails_no_ensure(
    repo: Path, index: IndexServer
) -> None:
    # The publisher made store/<env>/adaptor-d/ and is about to rename its staged distribution into it (that rename
    # held back 5 s by strace); gc removes the directory, empty. The rename finds it gone: the publisher makes it
    # again and renames again.
    stored = repo / "store" / environment_tag() / "adaptor-d" / _leaf(index, "adaptor-d")
    inject = "inject=renameat2:delay_enter=5000000:when=1"
    strace = ("strace", "-f", "-qq", "-o", os.devnull, "-P", str(stored.parent), "-e", "trace=renameat2", "-e", inject)
    pod = start(*ensure_args(repo, index.url, "adaptor-d==1.0"), prefix=strace)
    wait_until(lambda: stored.parent.is_dir() and index.downloads("adaptor_d") == 1, timeout=60, what="the publish")
    gc = run("gc", "--repo", repo, "--json", "--older-than", "0", *LOCK)
    assert gc.returncode == 0, gc.stdout + gc.stderr
    gone = [r["path"] for r in document(gc.stdout)["removed"] if r["kind"] == "store" and r["done"]]
    assert gone == [str(stored.parent)], gc.stdout
    code, out, err = finish(pod, timeout=120)
    assert code == 0, err
    assert stored.is_dir() and import_version(document(out)["packages"][0]["path"], "adaptor_d") == "1.0"
    assert_store_whole(repo)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("strace"), reason="needs root and strace")
def test_gc_removing_an_empty_store_directory_a_publisher_just_found_fails_no_ensure(
    repo: Path, index: IndexServer
) -> None:
    # store/<env>/adaptor-d/ is there, empty (its last distribution just went); the publisher's mkdir finds it
    # (EEXIST, its return held back 5 s by strace) and gc removes it before the publisher opens it: the publisher
    # makes it again.
    name = repo / "store" / environment_tag() / "adaptor-d"
    name.mkdir(parents=True)
    inject = "inject=mkdirat:delay_exit=5000000:when=1"
    strace = ("strace", "-f", "-qq", "-o", os.devnull, "-P", str(name.parent), "-e", "trace=mkdirat", "-e", inject)
    before = index.downloads("adaptor_d")
    pod = start(*ensure_args(repo, index.url, "adaptor-d==1.0"), prefix=strace)
    wait_until(lambda: index.downloads("adaptor_d") > before, timeout=60, what="the download")
    time.sleep(1.5)  # the installer is done and the publisher in its held-back mkdir
    gc = run("gc", "--repo", repo, "--json", "--older-than", "0", *LOCK)
    assert gc.returncode == 0, gc.stdout + gc.stderr
    assert [r["path"] for r in document(gc.stdout)["removed"] if r["kind"] == "store"] == [str(name)], gc.stdout
    code, out, err = finish(pod, timeout=120)
    assert code == 0, err
    assert import_version(document(out)["packages"][0]["path"], "adaptor_d") == "1.0"
    assert_store_whole(repo)
