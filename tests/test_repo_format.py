"""The repo states its on-disk format and lock protocol once; a pod that does not speak it refuses with one line
(exit 2) before it takes a lock or writes anything, and the warm check never reads it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import cli, ensure_args, isolated_env, run, snapshot, start
from indexserver import IndexServer

from repoinstall import __version__
from repoinstall._disk import fs as _fs

STATED = {"format": 1, "locks": "filelock-rw/1", "written_by": f"repoinstall {__version__}"}


def _stated(repo: Path) -> dict[str, object]:
    return json.loads((repo / "format").read_text())


def test_the_first_install_states_the_format_once(repo: Path, index: IndexServer) -> None:
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    assert done.returncode == 0, done.stderr
    assert _stated(repo) == STATED
    first = (repo / "format").stat()
    assert run(*ensure_args(repo, index.url, "adaptor-a==1.1")).returncode == 0
    again = (repo / "format").stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)  # written once, never again


def test_pods_racing_into_a_new_repo_agree_on_one_statement(repo: Path, index: IndexServer) -> None:
    pods = [start(*ensure_args(repo, index.url, f"adaptor-{letter}==1.0")) for letter in "defgh"]
    for pod in pods:
        code, _, err = pod.finish(180)
        assert code == 0, err
    assert _stated(repo) == STATED
    assert not [p.name for p in repo.iterdir() if p.name.startswith(".format")]  # no temporary file left


def test_a_repo_of_the_previous_release_gets_its_statement_from_the_first_writer(
    repo: Path, index: IndexServer
) -> None:
    assert run(*ensure_args(repo, index.url, "adaptor-a==1.0")).returncode == 0
    (repo / "format").unlink()  # as a release before the format file left it
    assert run("list", "--repo", repo).returncode == 0 and not (repo / "format").exists()  # readers write nothing
    assert run(*ensure_args(repo, index.url, "adaptor-a==1.0")).returncode == 0
    assert not (repo / "format").exists()  # warm: nothing written, nothing read
    assert run(*ensure_args(repo, index.url, "adaptor-d==1.0")).returncode == 0
    assert _stated(repo) == STATED


NOT_SPOKEN = [
    ({"format": 2, "locks": "filelock-rw/1", "written_by": "repoinstall 9.0"}, "format 2 with"),
    ({"format": 1, "locks": "filelock-rw/2", "written_by": "repoinstall 9.0"}, '"filelock-rw/2" locks'),
    ({"format": True, "locks": "filelock-rw/1"}, "format true"),
    ({"format": "1", "locks": "filelock-rw/1"}, 'format "1"'),
]


@pytest.mark.parametrize(("statement", "named"), NOT_SPOKEN)
def test_a_format_this_release_does_not_speak_is_refused_before_any_write(
    repo: Path, index: IndexServer, statement: dict[str, object], named: str
) -> None:
    assert run(*ensure_args(repo, index.url, "adaptor-a==1.0")).returncode == 0
    (repo / "format").write_text(json.dumps(statement))
    before = snapshot(repo)
    for args in (
        ensure_args(repo, index.url, "adaptor-d==1.0"),
        ensure_args(repo, index.url, "adaptor-a==1.1"),
        ["remove", "adaptor-a==1.0", "--repo", str(repo)],
        ["gc", "--repo", str(repo), "--older-than", "0"],
        ["verify", "--repo", str(repo), "--repair"],
        ["list", "--repo", str(repo)],
        ["locks", "--repo", str(repo)],
    ):
        done = run(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert named in line and "this repoinstall speaks format 1" in line, line
    assert snapshot(repo) == before  # no lock taken, nothing written
    assert index.completed["adaptor_d-1.0-py3-none-any.whl"] == 0


@pytest.mark.parametrize("content", [b"", b"{not json", b"[1, 2]", b'{"locks": "filelock-rw/1"}', b"\xff\xfe"])
def test_an_unreadable_statement_is_refused(repo: Path, index: IndexServer, content: bytes) -> None:
    repo.mkdir()
    (repo / "format").write_bytes(content)
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    assert done.returncode == 2, done.stderr
    assert "format file is unreadable" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in repo.iterdir()) == ["format"]


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_the_warm_check_never_reads_the_statement(repo: Path, index: IndexServer) -> None:
    assert run(*ensure_args(repo, index.url, "adaptor-a==1.0", "adaptor-b==1.0")).returncode == 0
    trace = repo.parent / "trace"
    argv = ["strace", "-f", "-qq", "-o", str(trace), "-P", str(repo / "format"), "-e", "trace=%file"]
    args = ["ensure", "adaptor-a==1.0", "adaptor-b==1.0", "--repo", str(repo), "--no-index"]
    done = subprocess.run([*argv, *cli(*args)], env=isolated_env(), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("present") == 2
    assert trace.read_text() == "", trace.read_text()


def test_write_once_keeps_the_first_writers_bytes(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert _fs.write_once(fd, "stated", b"first\n")
        assert not _fs.write_once(fd, "stated", b"second\n")
    finally:
        os.close(fd)
    assert (tmp_path / "stated").read_bytes() == b"first\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stated"]
