"""A hostile repo: symlinks, FIFOs, devices and deep nests planted by anyone who can write the volume, and gc
racing installs that take no lock. Nothing outside the repo is touched, nothing published is emptied, and every
failure is one line."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import actions, document, ensure_args, finish, run, signal_group, snapshot, start, wait_until
from indexserver import IndexServer

LOCK = ["--stale-after", "2", "--heartbeat", "0.4"]


def _install(repo: Path, index: IndexServer, *specs: str) -> list[Path]:
    done = run(*ensure_args(repo, index.url, *specs))
    assert done.returncode == 0, done.stderr
    return [Path(p["path"]) for p in document(done.stdout)["packages"]]


def _env(repo: Path) -> str:
    return next(p.name for p in (repo / "trees").iterdir())


def _one_line(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("repoinstall: error:")]
    assert len(errors) <= 1, stderr


def _gc(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = run("gc", "--repo", repo, "--older-than", "0", *LOCK, *args)
    assert done.returncode in (0, 1), done.stderr
    _one_line(done.stderr)
    return done


def _replace_with_link(inside: Path, outside: Path) -> None:
    """Copy ``inside`` to ``outside`` (so what gc would delete there looks like the real thing), then put a
    symlink to the copy in its place."""
    shutil.copytree(inside, outside, symlinks=True)
    shutil.rmtree(inside)
    inside.symlink_to(outside, target_is_directory=True)


# ---- gc never follows a symlink out of the repo ----------------------------------------------------------------


@pytest.mark.parametrize("where", ["trash", "staging", "staging/<env>", "locks", "cache/index", "records/<env>/<name>"])
def test_gc_leaves_a_planted_symlink_alone_and_deletes_nothing_outside(
    repo: Path, index: IndexServer, tmp_path: Path, where: str
) -> None:
    _install(repo, index, "adaptor-a==1.0")
    env = _env(repo)
    # Debris of every kind gc removes, so that following the link would delete something.
    for directory in (
        repo / "trash" / "old-tree",
        repo / "staging" / env / "dead.host.1.abcd",
        repo / "cache" / "index",
    ):
        directory.mkdir(parents=True, exist_ok=True)
    (repo / "trash" / "old-tree" / "important").write_text("keep me")
    (repo / "staging" / env / "dead.host.1.abcd" / "important").write_text("keep me")
    (repo / "cache" / "index" / "answer.json").write_text(json.dumps({"found": [], "at": 0}))
    (repo / "cache" / "index" / ".x.json.1234.tmp").write_text("partial")
    (repo / "records" / env / "adaptor-a" / ".1.json.1234.tmp").write_text("partial")
    inside = repo / where.replace("<env>", env).replace("<name>", "adaptor-a")
    outside = tmp_path / "outside" / inside.name
    _replace_with_link(inside, outside)
    before = snapshot(outside)

    if where == "trash":
        # Every removal goes through trash/: with a link there, gc removes nothing and says why in one line.
        refused = run("gc", "--repo", repo, "--older-than", "0", "--unused-for", "0")
        assert refused.returncode == 2
        assert refused.stderr.splitlines() == [
            f"repoinstall: error: {inside} is not a directory (a symlink is in the way)"
        ]
        assert snapshot(outside) == before
        return
    done = _gc(repo, "--unused-for", "0")
    assert snapshot(outside) == before  # nothing outside the repo was deleted, or even touched
    if where == "staging/<env>":
        # Debris among staging dirs: removed as a link (renamed into trash/, unlinked there), never followed.
        assert f"removed      staging  {inside}" in done.stdout, done.stdout
        assert not os.path.lexists(inside)
    else:
        assert f"{inside}" in done.stdout and "left alone" in done.stdout, done.stdout
        assert done.returncode == 1  # gc could not clean everything: the link is for a person to look at


def test_gc_with_unused_for_never_removes_trees_through_a_symlinked_trees_dir(
    repo: Path, index: IndexServer, tmp_path: Path
) -> None:
    _install(repo, index, "adaptor-a==1.0")
    outside = tmp_path / "outside" / "trees"
    _replace_with_link(repo / "trees", outside)
    before = snapshot(outside)
    done = _gc(repo, "--unused-for", "0")
    assert snapshot(outside) == before
    assert not any(line.startswith("removed      tree") for line in done.stdout.splitlines()), done.stdout
    assert done.returncode == 1 and f"kept         symlink  {repo / 'trees'}" in done.stdout, done.stdout


def test_the_lock_free_check_does_not_follow_a_symlinked_records_dir(
    repo: Path, index: IndexServer, tmp_path: Path
) -> None:
    _install(repo, index, "adaptor-a==1.0")
    env = _env(repo)
    outside = tmp_path / "outside" / "adaptor-a"
    _replace_with_link(repo / "records" / env / "adaptor-a", outside)
    (outside / "1.used").unlink(missing_ok=True)
    before = snapshot(outside)
    again = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    _one_line(again.stderr)
    assert not (outside / "1.used").exists()  # the "last ensured" note is never written through the link
    assert snapshot(outside) == before


# ---- gc racing installs --------------------------------------------------------------------------------------------


def test_gc_racing_lockless_installs_never_empties_a_published_tree(
    repo: Path, index: IndexServer, tmp_path: Path
) -> None:
    specs = [f"adaptor-{letter}==1.0" for letter in "adefgh"] + ["adaptor-a==1.1", "adaptor-a==2.0"]
    for spec in specs:
        index.delays[spec.split("==")[0].replace("-", "_") + "-"] = 0.5  # installs last long enough to be raced
    sentinel = tmp_path / "sentinel"
    sentinel.write_text("outside the repo")
    # Three lockless pods per tree, and a gc loop that removes everything it may, all at once.
    pods = [start(*ensure_args(repo, index.url, spec), "--no-lock") for spec in specs for _ in range(3)]
    raced = 0  # gc rounds that started while some install was staging
    while any(pod.poll() is None for pod in pods):
        if not repo.exists():
            time.sleep(0.02)
            continue  # no pod has made it yet: gc says so (exit 2), which is not this test's point
        staging = any((repo / "staging").rglob("owner.json"))
        _gc(repo)
        raced += staging
    outcomes = [finish(pod) for pod in pods]
    for code, out, err in outcomes:
        assert code == 0, err  # a live installer's staging dir is never taken from it
        assert actions(out)[0] in ("installed", "waited", "present")
    assert raced >= 1
    verified = run("verify", "--all", "--repo", repo, "--json")
    assert verified.returncode == 0, verified.stdout
    trees = json.loads(verified.stdout)["trees"]
    assert len(trees) == len(specs) and all(t["status"] == "ok" for t in trees)
    assert sentinel.read_text() == "outside the repo"
    assert not any((repo / "staging").rglob("owner.json"))  # every install cleaned up after itself


def test_a_staging_dir_of_another_pod_is_kept_while_its_heartbeat_runs_and_removed_once_it_stops(
    repo: Path, index: IndexServer
) -> None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare")
    index.delays["slow_pkg"] = 30.0
    # Another "pod": its own hostname and pid namespace, so gc cannot see its process and must go by heartbeat.
    pod = start(
        *ensure_args(repo, index.url, "slow-pkg==1.0"),
        "--no-lock",
        prefix=("unshare", "--uts", "--pid", "--fork", "--mount-proc", "sh", "-c", 'hostname pod-b; exec "$@"', "sh"),
    )
    try:
        wait_until(lambda: any((repo / "staging").rglob("owner.json")), what="the pod's staging dir")
        staged = next((repo / "staging").rglob("owner.json")).parent
        assert json.loads((staged / "owner.json").read_text())["host"] == "pod-b"
        # Older than --stale-after 2, and its heartbeat (0.4 s) seen since: a live pod's dir.
        made = (staged / "owner.json").stat().st_mtime
        wait_until(
            lambda: time.time() - made > 2.5 and (staged / "owner.json").stat().st_mtime > made,
            what="the staging dir to outlive the stale threshold with its heartbeat running",
        )
        kept = _gc(repo)
        assert staged.is_dir(), kept.stdout
        assert "staging" not in kept.stdout
    finally:
        signal_group(pod, __import__("signal").SIGKILL)
        finish(pod)
    wait_until(lambda: time.time() - (staged / "owner.json").stat().st_mtime > 2.5, what="the heartbeat to age")
    removed = _gc(repo)
    assert not staged.exists()
    assert "removed      staging" in removed.stdout and "no heartbeat" in removed.stdout, removed.stdout


# ---- lock state, deep nests, FIFOs and bytecode --------------------------------------------------------------------


def test_a_file_or_symlink_in_place_of_a_lock_does_not_stop_the_other_specs(
    repo: Path, index: IndexServer, tmp_path: Path
) -> None:
    _install(repo, index, "adaptor-d==1.0")
    env = _env(repo)
    (repo / "locks" / env / "adaptor-a").mkdir(parents=True)
    (repo / "locks" / env / "adaptor-a" / "1.lock.rw").write_text("not a lock")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "important").write_text("keep me")
    (repo / "locks" / env / "adaptor-e").mkdir(parents=True)
    (repo / "locks" / env / "adaptor-e" / "1.lock.rw").symlink_to(outside, target_is_directory=True)
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0", "adaptor-e==1.0", "adaptor-f==1.0"))
    assert done.returncode == 0, done.stderr
    assert actions(done.stdout) == ["installed"] * 3
    assert "Traceback" not in done.stderr and "is not a directory" in done.stderr
    cleaned = _gc(repo)
    assert "not a lock's state directory" in cleaned.stdout, cleaned.stdout
    assert (outside / "important").read_text() == "keep me"
    assert not (repo / "locks" / env / "adaptor-e" / "1.lock.rw").is_symlink()


@pytest.mark.parametrize(
    "where", ["records/<env>/<name> link", "records/<env>/<name> file", "the record's dir", "locks/<env>/<name> link"]
)
def test_what_would_stop_the_record_or_the_lock_is_refused_before_installing(
    repo: Path, index: IndexServer, tmp_path: Path, where: str
) -> None:
    _install(repo, index, "adaptor-a==1.0")
    env = _env(repo)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "1.json").write_text("keep me")
    kind, _, what = where.partition(" ")
    if kind == "the":  # a directory where adaptor-d's record would be written (a link there is replaced)
        (repo / "records" / env / "adaptor-d").mkdir()
        in_the_way = repo / "records" / env / "adaptor-d" / "1.json"
        in_the_way.mkdir()
        (in_the_way / "x").write_text("in the way")
    else:
        in_the_way = repo / kind.replace("<env>", env).replace("<name>", "adaptor-d")
        in_the_way.parent.mkdir(parents=True, exist_ok=True)
        if what == "link":
            in_the_way.symlink_to(outside, target_is_directory=True)
        else:
            in_the_way.write_text("in the way")
    before = snapshot(outside)
    done = run("ensure", "adaptor-d==1.0", "--repo", repo, "--no-index", "--find-links", index.url, *LOCK)
    assert done.returncode == 2, done.stderr
    said = (
        "a regular file (a directory"
        if kind == "the"
        else f"a directory ({'a symlink' if what == 'link' else 'a regular file'}"
    )
    # One line and nothing else: no "installing", no installer run, nothing published, staged or locked.
    assert done.stderr.splitlines() == [f"repoinstall: error: {in_the_way} is not {said} is in the way)"]
    assert index.downloads("adaptor_d") == 0
    assert not (repo / "trees" / env / "adaptor-d").exists()
    assert not list((repo / "staging").glob("*/*")) and not list((repo / "trash").iterdir())
    assert (repo / "locks" / env / "adaptor-d").is_symlink() or not (repo / "locks" / env / "adaptor-d").exists()
    assert os.path.lexists(in_the_way) and snapshot(outside) == before  # left as it was, for a person to look at


def _nest(top: Path, depth: int) -> None:
    """``top/d/d/.../d/bottom.txt``, ``depth`` levels, made one level at a time (pathlib and os.makedirs recurse)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = deeper
        os.close(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


def test_a_1200_deep_directory_in_a_tree_is_a_finding_not_a_crash(repo: Path, index: IndexServer) -> None:
    (tree,) = _install(repo, index, "adaptor-a==1.0")
    _nest(tree / "adaptor_a", 1200)
    found = run("verify", "--all", "--repo", repo, "--json")
    assert found.returncode == 1, found.stderr
    _one_line(found.stderr)
    (report,) = json.loads(found.stdout)["trees"]
    assert report["status"] == "changed" and "deeper than" in report["changed"][0]

    repaired = run("verify", "--all", "--repair", "--repo", repo, "--json", *LOCK, "--no-index", "-f", index.url)
    assert repaired.returncode == 0, repaired.stderr
    assert [r["action"] for r in json.loads(repaired.stdout)["repaired"]] == ["reinstalled"]
    assert run("verify", "--all", "--repo", repo).returncode == 0
    _gc(repo)
    assert list((repo / "trash").iterdir()) == []  # the 1,200 levels were deleted too


def test_ensure_and_gc_handle_a_deep_nest_in_an_unrecorded_tree(repo: Path, index: IndexServer) -> None:
    (tree,) = _install(repo, index, "adaptor-a==1.0")
    next((repo / "records").rglob("1.json")).unlink()
    _nest(tree, 1200)
    again = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    assert again.returncode == 0, again.stderr
    assert actions(again.stdout) == ["installed"]  # its RECORD check failed: set aside and reinstalled
    _nest(tree, 1200)
    gone = _gc(repo, "--unused-for", "0")
    assert gone.returncode == 0, gone.stdout
    assert not tree.exists() and list((repo / "trash").iterdir()) == []


def test_verify_never_opens_a_fifo_socket_or_device_in_a_tree(repo: Path, index: IndexServer) -> None:
    (tree,) = _install(repo, index, "adaptor-a==1.0")
    package = tree / "adaptor_a"
    (package / "__init__.py").unlink()
    os.mkfifo(package / "__init__.py")  # where a recorded file was
    os.mkfifo(package / "planted-fifo")
    subprocess.run(
        [sys.executable, "-c", "import socket; socket.socket(socket.AF_UNIX).bind('planted-sock')"],
        cwd=package,
        check=True,
    )
    if os.geteuid() == 0:
        os.mknod(package / "planted-dev", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero
    found = run("verify", "--all", "--repo", repo, "--json", *LOCK)
    assert found.returncode == 1
    (report,) = json.loads(found.stdout)["trees"]
    assert report["changed"] == ["adaptor_a/__init__.py"]
    assert {"adaptor_a/planted-fifo", "adaptor_a/planted-sock"} <= set(report["extra"])
    assert socket  # imported for the type of file planted above


def test_extra_bytecode_from_python_O_is_reported_not_broken(repo: Path, index: IndexServer) -> None:
    (tree,) = _install(repo, index, "adaptor-a==1.0")
    # A worker running python -O imports from a read-write mount and writes *.opt-1.pyc into the tree.
    subprocess.run([sys.executable, "-O", "-c", "import adaptor_a"], env={"PYTHONPATH": str(tree)}, check=True)
    written = list(tree.rglob("*.opt-1.pyc"))
    assert written
    before = snapshot(tree)
    found = run("verify", "--all", "--repo", repo, "--json")
    assert found.returncode == 0, found.stdout
    (report,) = json.loads(found.stdout)["trees"]
    assert report["status"] == "ok" and report["bytecode"] == [str(written[0].relative_to(tree))]
    shown = run("verify", "--all", "--repo", repo)
    assert shown.returncode == 0 and "bytecode" in shown.stdout.splitlines()[1], shown.stdout  # the note is shown
    repaired = run("verify", "--all", "--repair", "--repo", repo, "--json", *LOCK)
    assert repaired.returncode == 0 and json.loads(repaired.stdout)["repaired"] == []
    assert snapshot(tree) == before  # the healthy tree was not touched


# ---- gc says only what it did ----------------------------------------------------------------------------------------


def test_gc_removes_plain_files_in_trash_and_staging_and_says_so_only_when_done(repo: Path, index: IndexServer) -> None:
    _install(repo, index, "adaptor-a==1.0")
    env = _env(repo)
    planted = [repo / "trash" / "a-file", repo / "staging" / "a-file", repo / "staging" / env / "a-file"]
    for path in planted:
        path.write_text("debris")
    (repo / "staging" / env / "a-link").symlink_to("/etc/hostname")
    done = _gc(repo)
    assert done.returncode == 0, done.stdout
    for path in [*planted, repo / "staging" / env / "a-link"]:
        assert not os.path.lexists(path)
        assert "removed" in done.stdout and str(path) in done.stdout
    assert Path("/etc/hostname").exists()
    assert _gc(repo).stdout == "nothing to do\n"  # nothing left, nothing claimed


def test_gc_on_a_read_only_repo_says_read_only(repo: Path, index: IndexServer, tmp_path: Path) -> None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare")
    _install(repo, index, "adaptor-a==1.0")
    (repo / "trash" / "x").write_text("debris")
    script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "sh",
            "-c",
            script,
            "sh",
            str(repo),
            sys.executable,
            "-m",
            "repoinstall",
            "gc",
            "--repo",
            str(repo),
            "--older-than",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"repoinstall: error: repo {repo} is read-only: gc can remove nothing (--dry-run lists)"
    ]
    assert (repo / "trash" / "x").exists()
