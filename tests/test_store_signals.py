"""SIGKILL at the steps of the store of distributions (issue 23, point 3): nothing visible is ever partial.

A pinned tree (a lock file's) installs what the store lacks in one installer run, splits it by RECORD into one dir
per distribution, publishes each into ``store/`` by a rename, composes the tree from the store in its staging dir,
then publishes the tree by a rename. A pod SIGKILLed at any of these steps leaves every stored dir whole (or
absent) and no tree (or a whole one); the next ensure uses what was stored (no installer run when everything was)
and gc clears the staging debris. A whole install (``store_installed``) killed while it composes is installed again
and finds its distributions stored: their stored dirs are kept as they are.

Kills land at exact syscalls with strace (as in tests/test_hostile_sweep.py): ``-P`` picks a store or tree path.
Only the split, whose paths are all below a staging dir of random name, is caught by slowing every rename down
(strace's ``delay_enter``) and killing while its files are half moved.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import Pod, actions, document, ensure_args, finish, import_version, isolated_env, run, start, wait_until
from indexserver import IndexServer
from storecheck import assert_store_whole, ownership, shares, stored
from wheels import make_wheel

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("strace"), reason="needs root and strace (signals at chosen syscalls)"
)
#: Fast lock timings: a dead holder's lock is taken over within seconds.
LOCK = ("--stale-after", "2", "--heartbeat", "0.4")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    """app 1.0 needing lib 1.0, lib with many files (so a split or a compose takes many syscalls)."""
    directory = tmp_path_factory.mktemp("store-signal-wheels")
    make_wheel(directory, "app", "1.0", requires=("lib>=1",))
    make_wheel(directory, "lib", "1.0")
    server = IndexServer(directory).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def lock(served: IndexServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("store-signal-lock") / "pylock.toml"
    command = [sys.executable, "-m", "pip", "lock", "app==1.0", "--no-index", "-f", served.url, "-o", str(out)]
    subprocess.run(command, env=isolated_env(), check=True, capture_output=True)
    return out


def _env(repo: Path) -> str:
    return next((repo / "store").iterdir()).name


def _lock_tree_name(lock: Path, repo: Path) -> str:
    """The lock's tree name (``locked-<hash>``), as ``path`` names it without installing anything."""
    done = run("path", "-r", lock, "--repo", repo)
    assert done.returncode == 1 and "locked-" in done.stderr, done.stderr
    return done.stderr.split("error: ", 1)[1].split("==", 1)[0]


def _strace(where: Path | str, syscalls: str, inject: str) -> tuple[str, ...]:
    return ("strace", "-f", "-qq", "-o", os.devnull, "-P", str(where), "-e", f"trace={syscalls}", "-e", inject)


def _killed_at(repo: Path, lock: Path, where: Path, syscalls: str) -> None:
    """``ensure -r lock`` SIGKILLed at the first of ``syscalls`` touching ``where``."""
    inject = f"inject={syscalls}:signal=SIGKILL:when=1"
    pod = start("ensure", "-r", lock, "--repo", repo, "--json", *LOCK, prefix=_strace(where, syscalls, inject))
    code, out, err = finish(pod, timeout=120)
    assert code == -signal.SIGKILL, err
    assert out == ""


def _stored_file(repo: Path, env: str, served: IndexServer, name: str, relative: str) -> Path:
    wheel = served.files(name)[0]
    return repo / "store" / env / name / f"1-{served.sha256(wheel)[:16]}" / relative


def _env_of_this_python(tmp_path: Path, served: IndexServer) -> str:
    """The environment tag, from a throwaway install of a repo of its own."""
    done = run(*ensure_args(tmp_path / "probe", served.url, "lib==1.0"))
    assert done.returncode == 0, done.stderr
    return str(document(done.stdout)["env"])


def _nothing_partial(repo: Path, tree: Path) -> None:
    """Every stored dir whole; the tree absent (never half there); no record without its tree."""
    assert_store_whole(repo)
    assert not tree.exists()
    assert not list((repo / "records").rglob(f"{tree.parent.name}/*.json"))


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _staging_debris(repo: Path) -> list[Path]:
    return [*(repo / "staging").glob("*/*"), *(repo / "trash").glob("*")]


def _gc_clears_the_debris(repo: Path) -> None:
    done = run("gc", "--repo", repo, "--older-than", "0", *LOCK, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _staging_debris(repo) == [], done.stdout + done.stderr


def _verified(repo: Path) -> None:
    done = run("verify", "--repo", repo)
    assert done.returncode == 0, done.stdout + done.stderr


def _ensure_again(repo: Path, lock: Path) -> tuple[str, Path]:
    """The next ensure of the lock (taking the dead pod's lock over): its stderr and its tree."""
    done = run("ensure", "-r", lock, "--repo", repo, "--json", *LOCK, "--wait-timeout", "30", timeout=120)
    assert done.returncode == 0, done.stderr
    assert actions(done.stdout) == ["installed"]
    assert "Traceback" not in done.stderr
    tree = Path(document(done.stdout)["packages"][0]["path"])
    assert import_version(tree, "app") == "1.0" and import_version(tree, "lib") == "1.0"
    return done.stderr, tree


def test_killed_after_storing_before_the_tree_is_published(tmp_path: Path, served: IndexServer, lock: Path) -> None:
    # Killed as it renames its composed tree into trees/: every distribution is stored, no tree is there. The
    # next ensure composes the tree from the store with no installer run and downloads nothing.
    env = _env_of_this_python(tmp_path, served)
    repo = tmp_path / "repo"
    name = _lock_tree_name(lock, repo)
    _killed_at(repo, lock, repo / "trees" / env / name, "rename,renameat,renameat2")
    tree = repo / "trees" / env / name / "1"
    _nothing_partial(repo, tree)
    before = {key: ownership(path) for key, path in stored(repo).items()}
    assert {key.split("/")[0] for key in before} == {"app", "lib", name}
    assert _staging_debris(repo) != []  # the dead pod's staging dir, with its composed tree in it
    downloads = served.downloads("")

    err, tree = _ensure_again(repo, lock)
    assert "every distribution is in the store; composing it" in err  # no installer run
    assert served.downloads("") == downloads
    assert {key: ownership(path) for key, path in stored(repo).items()} == before
    assert shares(tree, stored(repo)[next(k for k in before if k.startswith("lib/"))])[1] == 0  # linked
    _verified(repo)
    _gc_clears_the_debris(repo)


def test_killed_between_two_stored_distributions(tmp_path: Path, served: IndexServer, lock: Path) -> None:
    # Killed as it renames lib into the store, after what it stored before: those stay whole and are used by
    # the next ensure, which installs lib alone.
    env = _env_of_this_python(tmp_path, served)
    repo = tmp_path / "repo"
    name = _lock_tree_name(lock, repo)
    _killed_at(repo, lock, repo / "store" / env / "lib", "rename,renameat,renameat2")
    _nothing_partial(repo, repo / "trees" / env / name / "1")
    before = {key: ownership(path) for key, path in stored(repo).items()}
    assert not any(key.startswith("lib/") for key in before)
    assert not list((repo / "store" / env / "lib").iterdir())
    downloads = {project: served.downloads(project) for project in ("app", "lib")}

    _ensure_again(repo, lock)
    assert served.downloads("lib") == downloads["lib"] + 1
    assert served.downloads("app") == downloads["app"] + (0 if any(k.startswith("app/") for k in before) else 1)
    after = {key: ownership(path) for key, path in stored(repo).items()}
    assert {key: after[key] for key in before} == before  # what was stored is used as it is
    assert_store_whole(repo)
    _verified(repo)
    _gc_clears_the_debris(repo)


def test_killed_while_composing_the_tree(tmp_path: Path, served: IndexServer, lock: Path) -> None:
    # Killed as it links lib's module into the tree it composes: the staging dir holds a half-composed tree,
    # which nobody sees; the store is whole; the next ensure composes with no installer run.
    env = _env_of_this_python(tmp_path, served)
    repo = tmp_path / "repo"
    name = _lock_tree_name(lock, repo)
    linked = _stored_file(repo, env, served, "lib", "lib/__init__.py")
    _killed_at(repo, lock, linked, "link,linkat")
    tree = repo / "trees" / env / name / "1"
    _nothing_partial(repo, tree)
    half = [path for path in (repo / "staging" / env).glob("*/tree") if path.is_dir()]
    assert len(half) == 1 and not (half[0] / "lib" / "__init__.py").exists()  # killed mid-compose
    downloads = served.downloads("")

    err, _ = _ensure_again(repo, lock)
    assert "every distribution is in the store; composing it" in err
    assert served.downloads("") == downloads
    _verified(repo)
    _gc_clears_the_debris(repo)


def test_killed_while_splitting_the_installers_run(tmp_path: Path, served: IndexServer, lock: Path) -> None:
    # The split's paths are all below the staging dir (random name): every rename is slowed down by 0.3 s and
    # the pod is killed once the split dir holds some files and the installer's dir still holds others.
    env = _env_of_this_python(tmp_path, served)
    repo = tmp_path / "repo"
    name = _lock_tree_name(lock, repo)
    renames = "rename,renameat,renameat2"
    slowed = (
        "strace",
        "-f",
        "-qq",
        "-o",
        os.devnull,
        "-e",
        f"trace={renames}",
        "-e",
        f"inject={renames}:delay_enter=300000",
    )
    pod = start("ensure", "-r", lock, "--repo", repo, "--json", *LOCK, prefix=slowed)
    staging = repo / "staging" / env

    def has_files(directory: Path) -> bool:
        return any(p.is_file() for p in directory.rglob("*"))

    def mid_split() -> bool:
        # The installer's dir ("combined") and the split beside it, wherever below a staging dir they are.
        assert pod.poll() is None, "".join(pod.err)
        try:
            return any(has_files(d) and has_files(d.parent / "combined") for d in staging.rglob("split"))
        except FileNotFoundError:  # a dir went as it was walked
            return False

    try:
        wait_until(mid_split, timeout=120, what="the split half done")
    finally:
        os.killpg(pod.pid, signal.SIGKILL)
    pod.finish(30)
    wait_until(lambda: _group_gone(pod.pid), timeout=30, what="every process of the killed pod to be reaped")
    _nothing_partial(repo, repo / "trees" / env / name / "1")
    # The split comes before any installed distribution is stored (the lock's own metapackage, made here and
    # unpacked without an installer, may be stored already, whole).
    assert [shown for shown in stored(repo) if not shown.startswith("locked-")] == []
    assert_store_whole(repo)
    _gc_clears_the_debris(repo)

    _ensure_again(repo, lock)
    assert_store_whole(repo)
    _verified(repo)


def test_a_whole_install_killed_while_composing_keeps_the_stored_dirs(tmp_path: Path, served: IndexServer) -> None:
    # A whole install (no lock, no kept closure) moves its distributions into the store, then composes its tree
    # from them. Killed in the compose, it is installed again by the next ensure (the installer resolves), which
    # finds every distribution stored: the stored dirs stay as they were, the fresh copies are dropped.
    env = _env_of_this_python(tmp_path, served)
    repo = tmp_path / "repo"
    linked = _stored_file(repo, env, served, "lib", "lib/__init__.py")
    args = ensure_args(repo, served.url, "app==1.0")
    pod: Pod = start(*args, prefix=_strace(linked, "link,linkat", "inject=link,linkat:signal=SIGKILL:when=1"))
    code, _, err = finish(pod, timeout=120)
    assert code == -signal.SIGKILL, err
    _nothing_partial(repo, repo / "trees" / env / "app" / "1")
    before = {key: ownership(path) for key, path in stored(repo).items()}
    assert {key.split("/")[0] for key in before} == {"app", "lib"}

    done = run(*args, "--wait-timeout", "30", timeout=120)
    assert done.returncode == 0, done.stderr
    assert actions(done.stdout) == ["installed"]
    tree = Path(document(done.stdout)["packages"][0]["path"])
    assert import_version(tree, "app") == "1.0"
    assert {key: ownership(path) for key, path in stored(repo).items()} == before
    assert shares(tree, stored(repo)[next(k for k in before if k.startswith("lib/"))])[1] == 0
    _verified(repo)
    _gc_clears_the_debris(repo)
