"""Every bad input: exit 2, one clear line on stderr, nothing written to the repo."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import cli, ensure_args, isolated_env, run, snapshot
from indexserver import IndexServer


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, wheel_dir: Path) -> Iterator[tuple[Path, Path, str]]:
    server = IndexServer(wheel_dir).start()
    base = tmp_path_factory.mktemp("bad")
    repo = base / "repo"
    done = run(*ensure_args(repo, server.url, "adaptor-a==1.0"))
    assert done.returncode == 0, done.stderr
    files = base / "files"
    files.mkdir()
    (files / "option.txt").write_text("--pre\nadaptor-a==1.0\n")
    (files / "editable.txt").write_text("-e .\n")
    (files / "global.txt").write_text("adaptor-a==1.0 --global-option=--x\n")
    (files / "loop.txt").write_text("-r loop.txt\n")
    (files / "badspec.txt").write_text("adaptor-a===\n")
    (files / "binary.txt").write_bytes(b"\xff\xfe\x00bad\n")
    (files / "a-file").write_text("not a directory\n")
    yield repo, files, server.url
    server.stop()


CASES: list[tuple[str, list[str]]] = [
    ("option as spec", ["--", "--index-url=http://127.0.0.1:9/"]),
    ("editable as spec", ["--", "-e", "."]),
    ("short option as spec", ["--", "-r"]),
    ("slash in name", ["foo/bar==1.0"]),
    ("dot-dot", ["..==1.0"]),
    ("dot-dot path", ["../../etc==1.0"]),
    ("empty", [""]),
    ("blank", ["   "]),
    ("unparsable", ["adaptor-a=="]),
    ("bad operator", ["adaptor-a=>1.0"]),
    ("bad extra", ["adaptor-a[not valid]==1.0"]),
    ("control character", ["adaptor-a\n==1.0"]),
    ("url spec", ["adaptor-a @ https://127.0.0.1:9/adaptor_a-1.0-py3-none-any.whl"]),
    ("vcs spec", ["git+https://127.0.0.1:9/x/y.git"]),
    ("local path", ["./some/dir"]),
    ("local archive", ["adaptor_a-1.0-py3-none-any.whl"]),
    ("negative index ttl", ["adaptor-d==1.0", "--index-ttl", "-1"]),
    ("missing requirements file", ["-r", "{files}/nope.txt"]),
    ("requirements file is a directory", ["-r", "{files}"]),
    ("option line in file", ["-r", "{files}/option.txt"]),
    ("editable line in file", ["-r", "{files}/editable.txt"]),
    ("other option after requirement", ["-r", "{files}/global.txt"]),
    ("file includes itself", ["-r", "{files}/loop.txt"]),
    ("bad spec in file", ["-r", "{files}/badspec.txt"]),
    ("file not text", ["-r", "{files}/binary.txt"]),
    ("missing constraints file", ["adaptor-d==1.0", "-c", "{files}/nope.txt"]),
    ("no specs", []),
    ("heartbeat not below stale", ["adaptor-d==1.0", "--stale-after", "1", "--heartbeat", "5"]),
    ("negative wait", ["adaptor-d==1.0", "--wait-timeout", "-3"]),
    ("not a number", ["adaptor-d==1.0", "--stale-after", "soon"]),
    ("zero jobs", ["adaptor-d==1.0", "--jobs", "0"]),
    ("unknown option", ["adaptor-d==1.0", "--frobnicate"]),
]


@pytest.mark.parametrize(("case", "args"), CASES, ids=[c for c, _ in CASES])
def test_bad_input_exits_2_with_one_line(setup: tuple[Path, Path, str], case: str, args: list[str]) -> None:
    repo, files, url = setup
    before = snapshot(repo)
    argv = [a.replace("{files}", str(files)) for a in args]
    done = run("ensure", "--repo", repo, "--no-index", "--find-links", url, *argv)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, (case, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("repoinstall: error: "), lines
    assert "Traceback" not in done.stderr
    assert snapshot(repo) == before


def test_repo_path_that_is_a_file(setup: tuple[Path, Path, str]) -> None:
    _, files, url = setup
    done = run("ensure", "adaptor-d==1.0", "--repo", files / "a-file", "--no-index", "--find-links", url)
    assert done.returncode == 2
    assert done.stderr.strip() == f"repoinstall: error: repo {files / 'a-file'}: exists and is not a directory"


def test_repo_below_a_file(setup: tuple[Path, Path, str]) -> None:
    _, files, url = setup
    done = run("ensure", "adaptor-d==1.0", "--repo", files / "a-file" / "repo", "--no-index", "--find-links", url)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not shutil.which("unshare") or os.geteuid() != 0, reason="needs root and unshare")
def test_read_only_repo_serves_the_warm_path_and_refuses_installs(setup: tuple[Path, Path, str]) -> None:
    repo, _, url = setup
    before = snapshot(repo)
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && "$@"; code=$?; exit $code'

    def in_read_only(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["unshare", "--mount", "sh", "-c", script, str(repo), *cli(*args)],
            env=isolated_env(),
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )

    warm = in_read_only(*ensure_args(repo, url, "adaptor-a==1.0"))
    assert warm.returncode == 0, warm.stderr
    assert '"action": "present"' in warm.stdout
    cold = in_read_only(*ensure_args(repo, url, "adaptor-d==1.0"))
    assert cold.returncode == 2, cold.stderr
    assert cold.stderr.strip() == f"repoinstall: error: repo {repo} is read-only: cannot install missing packages here"
    assert snapshot(repo) == before
