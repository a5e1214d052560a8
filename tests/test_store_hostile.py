"""Hostile cases around the store and its locks (issue 30's own sweep): each plants or does one hostile thing at
``store/`` or ``store-locks/`` and asserts the contract: one clear line where something must be refused (never a
traceback or "internal error"), nothing outside the repo followed or touched, nothing stored half, gc naming what
it leaves by what it is, and the next ensure working. Real processes, real wheels, an index on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import (
    cli,
    document,
    ensure_args,
    finish,
    import_version,
    isolated_env,
    run,
    signal_group,
    start,
    wait_until,
)
from indexserver import IndexServer
from storecheck import assert_store_whole
from wheels import make_wheel

from repoinstall._disk.identity import environment_tag

LOCK = ("--stale-after", "2", "--heartbeat", "0.4")
ROOT = os.geteuid() == 0
needs_strace = pytest.mark.skipif(not ROOT or not shutil.which("strace"), reason="needs root and strace")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    """app 1.0 needing lib 1.0, lib of some files."""
    directory = tmp_path_factory.mktemp("store-hostile-wheels")
    make_wheel(directory, "app", "1.0", requires=("lib>=1",))
    make_wheel(directory, "lib", "1.0", modules=3)
    server = IndexServer(directory).start()
    yield server
    server.stop()


def _leaf(served: IndexServer, project: str) -> str:
    return f"1-{served.sha256(served.files(project)[0])[:16]}"


def _stored(repo: Path, served: IndexServer, project: str = "lib") -> Path:
    return repo / "store" / environment_tag() / project / _leaf(served, project)


def _locks(repo: Path, served: IndexServer, project: str = "lib") -> Path:
    return repo / "store-locks" / environment_tag() / project


def _ensure(repo: Path, served: IndexServer, *extra: str) -> subprocess.CompletedProcess[str]:
    return run(*ensure_args(repo, served.url, "app==1.0"), *extra)


def _installed(repo: Path, served: IndexServer) -> Path:
    done = _ensure(repo, served)
    assert done.returncode == 0, done.stderr
    return Path(document(done.stdout)["packages"][0]["path"])


def _gc(repo: Path, *extra: str) -> tuple[int, list[dict[str, object]]]:
    done = run("gc", "--repo", repo, "--json", "--older-than", "0", *LOCK, *extra)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return done.returncode, document(done.stdout)["removed"]


def _clean(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr


def _age(paths: list[Path], seconds: float = 7200) -> None:
    old = time.time() - seconds
    for path in paths:
        os.utime(path, (old, old), follow_symlinks=False)


def _unheld(repo: Path, served: IndexServer) -> list[Path]:
    """app's tree removed: its stored distributions held by nothing, set back an hour and more."""
    assert run("remove", "app==1.0", "--repo", repo, *LOCK).returncode == 0
    stored = list((repo / "store").glob("*/*/*"))
    _age(stored)
    return stored


# ---- store locks ---------------------------------------------------------------------------------------------


def test_a_directory_where_a_store_lock_file_belongs_is_set_aside_by_gc(repo: Path, served: IndexServer) -> None:
    planted = _locks(repo, served) / f"{_leaf(served, 'lib')}.lock"
    (planted / "inside").mkdir(parents=True)
    _installed(repo, served)  # filelock keeps a lock's state in <leaf>.lock.rw/: this one is in nobody's way
    code, removed = _gc(repo)
    assert code == 0, removed
    done = {(r["kind"], r["path"]) for r in removed if r["done"]}
    assert ("lock", str(planted)) in done, removed
    assert ("lock", str(planted.parent)) in done, "the lock directory it kept goes too"


def test_a_fifo_at_a_store_locks_owner_note_neither_hangs_an_ensure_nor_stays(repo: Path, served: IndexServer) -> None:
    note = _locks(repo, served) / f"{_leaf(served, 'lib')}.owner"
    note.parent.mkdir(parents=True)
    os.mkfifo(note)
    done = run(*ensure_args(repo, served.url, "app==1.0"), timeout=60)
    assert done.returncode == 0, done.stderr
    _age([note])  # an owner note goes once older than --stale-after: nobody renews this one
    code, removed = _gc(repo)
    assert code == 0 and not os.path.lexists(note), removed


def test_a_symlink_at_a_store_locks_state_is_never_followed(repo: Path, served: IndexServer, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    state = _locks(repo, served) / f"{_leaf(served, 'lib')}.lock.rw"
    state.parent.mkdir(parents=True)
    state.symlink_to(outside, target_is_directory=True)
    done = _ensure(repo, served)
    assert done.returncode == 0, done.stderr  # that lock cannot be had: the ensure goes on without it
    code, removed = _gc(repo)
    assert code == 0 and ("lock", str(state)) in {(r["kind"], r["path"]) for r in removed if r["done"]}, removed
    assert [p.name for p in outside.iterdir()] == ["keep.txt"]


def test_a_symlink_at_store_locks_is_refused_and_named(repo: Path, served: IndexServer, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    repo.mkdir()
    (repo / "store-locks").symlink_to(outside, target_is_directory=True)
    before = served.downloads("lib")
    done = _ensure(repo, served)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().endswith(f"{repo / 'store-locks'} is not a directory (a symlink is in the way)")
    assert served.downloads("lib") == before and list(outside.iterdir()) == []
    code, removed = _gc(repo)
    assert code == 1 and [(r["kind"], r["path"]) for r in removed] == [("symlink", str(repo / "store-locks"))]
    locks = run("locks", "--repo", repo, "--json")
    assert locks.returncode == 1 and json.loads(locks.stdout)["obstacles"][0]["kind"] == "symlink"
    assert run("verify", "--repo", repo).returncode == 1
    assert list(outside.iterdir()) == []


@needs_strace
def test_an_ensure_killed_holding_a_store_lock_is_cleared_by_gc_once_proven_gone(
    repo: Path, served: IndexServer, tmp_path: Path
) -> None:
    # A lock's tree is installed from its lines: each distribution the store lacks under its own store lock, held
    # while the installer runs. The pod is SIGKILLed as it downloads lib (held back 30 s).
    lock = tmp_path / "pylock.toml"
    command = [sys.executable, "-m", "pip", "lock", "app==1.0", "--no-index", "-f", served.url, "-o", str(lock)]
    subprocess.run(command, env=isolated_env(), check=True, capture_output=True)
    served.delays["lib-"] = 30
    try:
        before = served.downloads("lib-")
        pod = start("ensure", "-r", lock, "--repo", repo, *LOCK)
        served.wait_for_download("lib-", before + 1, timeout=60)
        state = _locks(repo, served) / f"{_leaf(served, 'lib')}.lock.rw"
        assert state.is_dir(), "the store lock is held while the installer runs"
        signal_group(pod, signal.SIGKILL)
        finish(pod, timeout=30)
    finally:
        served.delays.clear()
    # At once: its staging dir goes (its process is gone), its lock state stays (renewed within --stale-after).
    code, removed = _gc(repo)
    assert code == 0, removed
    assert state.is_dir() and not list((repo / "staging").glob("*/*"))
    time.sleep(2.5)
    code, removed = _gc(repo)
    assert code == 0 and ("lock", str(state)) in {(r["kind"], r["path"]) for r in removed if r["done"]}, removed
    assert not state.parent.exists(), "nothing of that lock is left"
    again = run("ensure", "-r", lock, "--repo", repo, *LOCK, timeout=60)
    assert again.returncode == 0, again.stderr
    assert_store_whole(repo)


# ---- stored distributions --------------------------------------------------------------------------------------


def test_an_empty_stored_dir_is_set_aside_and_stored_again(repo: Path, served: IndexServer) -> None:
    _stored(repo, served).mkdir(parents=True)
    before = served.downloads("lib")
    verify = run("verify", "--repo", repo, "--json")
    assert verify.returncode == 1 and json.loads(verify.stdout)["store"][0]["status"] == "broken"
    done = _ensure(repo, served)
    assert done.returncode == 0, done.stderr
    assert "moved a damaged stored distribution aside (holds no dist-info" in done.stderr
    assert served.downloads("lib") == before + 1 and len(assert_store_whole(repo)) == 2


@pytest.mark.parametrize("plant", ["fifo", "extra"])
def test_what_is_planted_inside_a_stored_dir_is_never_opened_nor_linked_into_a_tree(
    repo: Path, served: IndexServer, plant: str
) -> None:
    _installed(repo, served)
    package = _stored(repo, served) / "lib"
    package.chmod(0o755)
    if plant == "fifo":  # a FIFO where a stored file was: opening it would hang
        (package / "__init__.py").unlink()
        os.mkfifo(package / "__init__.py")
    else:  # a file no RECORD lists, and a link out of the repo
        (package / "evil.py").write_text("import os\n")
        (package / "etc").symlink_to("/etc", target_is_directory=True)
    verify = run("verify", "--repo", repo, "--json", timeout=60)
    assert verify.returncode == 1
    assert [d["status"] for d in json.loads(verify.stdout)["store"] if d["dist"] == "lib==1.0"] == ["changed"]
    _unheld(repo, served)
    done = run(*ensure_args(repo, served.url, "app==1.0"), timeout=60)
    assert done.returncode == 0, done.stderr
    assert "moved a damaged stored distribution aside" in done.stderr
    tree = Path(document(done.stdout)["packages"][0]["path"])
    assert import_version(tree, "lib") == "1.0"
    assert not (tree / "lib" / "evil.py").exists() and not os.path.lexists(tree / "lib" / "etc")
    assert_store_whole(repo)


def test_a_stored_file_linked_from_outside_keeps_its_distribution_and_gc_says_so(
    repo: Path, served: IndexServer, tmp_path: Path
) -> None:
    _installed(repo, served)
    outside = tmp_path / "outside-link.py"
    os.link(_stored(repo, served) / "lib" / "__init__.py", outside)
    _unheld(repo, served)
    done = run("gc", "--repo", repo, "--json", "--older-than", "0", "-v", *LOCK)
    assert done.returncode == 0, done.stderr
    gone = {r["path"] for r in document(done.stdout)["removed"] if r["kind"] == "dist"}
    assert gone == {str(_stored(repo, served, "app"))}, gone
    assert "linked elsewhere (lib/__init__.py has 2 links: a tree's, or one made outside the repo)" in done.stderr
    outside.unlink()  # once nothing else links it, it goes like any other
    code, removed = _gc(repo)
    assert code == 0 and str(_stored(repo, served)) in {r["path"] for r in removed if r["kind"] == "dist"}


def test_a_stored_dir_dated_a_year_ahead_is_not_kept_for_a_year(repo: Path, served: IndexServer) -> None:
    _installed(repo, served)
    stored = _unheld(repo, served)
    _age(stored, -365 * 86400)  # its mtime a year on (touch -d, a skewed clock); its ctime is now
    time.sleep(2.5)  # past --stale-after by its ctime
    code, removed = _gc(repo)
    assert code == 0
    assert {r["path"] for r in removed if r["kind"] == "dist" and r["done"]} == {str(p) for p in stored}, removed


def test_junk_in_a_stores_name_directory_is_named_by_its_kind(repo: Path, served: IndexServer) -> None:
    _installed(repo, served)
    junk = _stored(repo, served).parent / "notes.txt"
    junk.write_text("an operator's")
    code, removed = _gc(repo)
    assert code == 1
    assert [(r["kind"], r["reason"]) for r in removed if r["path"] == str(junk)] == [
        ("file", "a regular file in store/ that is not a stored distribution: left alone")
    ]
    assert junk.is_file()


@needs_strace
def test_a_stored_dir_renamed_away_while_a_tree_is_composed_from_it_is_stored_again(
    repo: Path, served: IndexServer, tmp_path: Path
) -> None:
    # An operator moves lib's stored dir away (a mv, not gc) while a tree is being linked from it: the compose
    # finds it gone, stores it again and composes anew; the tree is whole.
    _installed(repo, served)
    _unheld(repo, served)
    stored = _stored(repo, served)
    first = stored / "lib" / "__init__.py"
    inject = "inject=linkat:delay_enter=3000000:when=1"
    strace = ("strace", "-f", "-qq", "-o", os.devnull, "-P", str(first), "-e", "trace=linkat", "-e", inject)
    pod = start(*ensure_args(repo, served.url, "app==1.0"), "-v", prefix=strace)
    wait_until(lambda: any((repo / "staging").glob("*/*/tree/lib")), timeout=60, what="the compose of lib")
    os.rename(stored, tmp_path / "moved-away")
    code, out, err = finish(pod, timeout=120)
    assert code == 0, err
    assert "was taken out of the store (by gc) while this tree was composed from it" in err
    tree = Path(document(out)["packages"][0]["path"])
    assert import_version(tree, "lib") == "1.0" and stored.is_dir()
    assert run("verify", "--repo", repo).returncode == 0
    assert_store_whole(repo)


# ---- another UID ---------------------------------------------------------------------------------------------

_PYENV = Path(sys.executable).resolve().parents[2]  # .../versions/X.Y.Z: the interpreter, maybe under /root


@pytest.fixture
def as_owner() -> Iterator[tuple[Path, Callable[..., subprocess.CompletedProcess[str]]]]:
    """A repo owned by uid 1001, and a runner of the CLI as that UID with no capability at all (``mode 000`` then
    means what it says): in a mount namespace where the interpreter is readable by it, as an image's would be."""
    if not ROOT or not shutil.which("unshare") or not shutil.which("setpriv"):
        pytest.skip("needs root, unshare and setpriv")
    top = Path(tempfile.mkdtemp(prefix="repoinstall-uid-"))  # pytest's own tmp dirs are private to root
    top.chmod(0o755)
    base = top / "owned"
    base.mkdir()
    os.chown(base, 1001, 1001)
    bound = top / "interpreter"
    bound.mkdir()
    become = 'exec setpriv --reuid=1001 --regid=1001 --clear-groups "$@"'
    if str(_PYENV).startswith("/root/"):
        become = (
            f"mount --bind {_PYENV} {bound} && mount -t tmpfs -o mode=755 tmpfs /root && mkdir -p {_PYENV} && "
            f"mount --bind {bound} {_PYENV} && {become}"
        )

    def runner(*args: str | Path) -> subprocess.CompletedProcess[str]:
        command = ["unshare", "-m", "sh", "-c", become, "sh", *cli(*args)]
        return subprocess.run(
            command, env=isolated_env(HOME="/tmp"), capture_output=True, text=True, timeout=180, check=False
        )

    try:
        yield base / "repo", runner
    finally:
        for path in base.rglob("*"):
            with contextlib.suppress(OSError):
                if path.is_dir() and not path.is_symlink():
                    path.chmod(0o755)
        shutil.rmtree(top, ignore_errors=True)


def test_a_stored_dir_of_mode_000_is_named_with_its_owner_and_mode_and_left_alone(
    as_owner: tuple[Path, Callable[..., subprocess.CompletedProcess[str]]], served: IndexServer
) -> None:
    repo, runner = as_owner
    done = runner(*ensure_args(repo, served.url, "app==1.0"))
    assert done.returncode == 0, done.stderr
    stored = _stored(repo, served)
    stored.chmod(0)
    verify = runner("verify", "--repo", repo, "--json")
    assert verify.returncode == 1
    assert [d["status"] for d in json.loads(verify.stdout)["store"] if d["path"] == str(stored)] == ["unreadable"]
    assert runner("remove", "app==1.0", "--repo", repo, *LOCK).returncode == 0
    again = runner(*ensure_args(repo, served.url, "app==1.0"))
    assert again.returncode == 2
    assert again.stderr.strip() == (
        f"repoinstall: error: {stored}: permission denied: uid 1001 cannot read it (owner uid 1001, gid 1001, mode "
        "0000); pods sharing a repo need group read access to it (one fsGroup, umask 002) or one runAsUser"
    )
    _age(list((repo / "store").glob("*/*/*")))
    gc = runner("gc", "--repo", repo, "--json", "--older-than", "0", *LOCK)
    _clean(gc)
    assert gc.returncode == 1, gc.stdout + gc.stderr
    kept = [r for r in document(gc.stdout)["removed"] if r["path"] == str(stored)]
    assert [(r["kind"], r["reason"]) for r in kept] == [
        ("dir", "uid 1001 may not read it (owner uid 1001, mode 0000): left alone")
    ]
    assert stat.S_IMODE(stored.stat().st_mode) == 0, "left as it was, for a person to look at"
