"""The Python API: typed results and exceptions, pip configuration honoured, the terminal progress line."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
from pathlib import Path

import pytest
from helpers import actions, cli, ensure_args, isolated_env, run
from indexserver import IndexServer

from repoinstall import (
    EnsureResult,
    InvalidInput,
    InvalidRequirement,
    NotInstalled,
    Repo,
    RepoinstallError,
    RepoUnusable,
)
from repoinstall._cli.progress import _FRAMES


def test_typed_exceptions_share_one_base(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(RepoUnusable) as unusable:
        Repo(tmp_path / "file")
    assert unusable.value.exit_code == 2
    with Repo(tmp_path / "repo") as repo:
        with pytest.raises(InvalidRequirement) as caught:
            repo.ensure("-e .")
        assert isinstance(caught.value, InvalidInput) and isinstance(caught.value, RepoinstallError)
        with pytest.raises(NotInstalled):
            repo.tree_path("a==1")
        skipped = repo.ensure("a==1; sys_platform == 'no-such'")
    assert isinstance(skipped, EnsureResult) and skipped.action == "skipped" and skipped.path is None
    assert not (tmp_path / "repo").exists()
    with pytest.raises(InvalidInput):
        Repo(tmp_path / "repo", stale_after=1, heartbeat=2)


def test_pip_configuration_is_honoured(repo: Path, index: IndexServer, tmp_path: Path, installer: str) -> None:
    # No index options on the command line: pip finds the wheels through its own PIP_* settings.
    env = isolated_env(PIP_FIND_LINKS=index.url, PIP_NO_INDEX="1")
    done = run("ensure", "adaptor-a==1.0", "--repo", repo, "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert actions(done.stdout) == ["installed"]
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nno-index = true\nfind-links = {index.url}\n")
    via_file = run("ensure", "adaptor-d==1.0", "--repo", repo, "--json", env=isolated_env(PIP_CONFIG_FILE=str(config)))
    assert via_file.returncode == 0, via_file.stderr


def test_constraints_are_passed_to_the_installer(
    repo: Path, index: IndexServer, tmp_path: Path, installer: str
) -> None:
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("dep-c==9.9\n")
    done = run(*ensure_args(repo, index.url, "adaptor-b==1.0", "-c", str(constraints)))
    assert done.returncode == 1, done.stderr
    assert "dep-c" in done.stderr


def test_progress_line_on_a_terminal(repo: Path, index: IndexServer) -> None:
    index.delays["slow_pkg"] = 1.0
    controller, terminal = pty.openpty()
    columns = 24  # narrower than "⠋ installing slow-pkg==1.0 (1s)": the line must be cropped, not wrapped
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 20, columns, 0, 0))
    try:
        proc = subprocess.Popen(
            cli("ensure", "slow-pkg==1.0", "--repo", repo, "--no-index", "--find-links", index.url),
            env=isolated_env(),
            stdout=subprocess.PIPE,
            stderr=terminal,
            stdin=subprocess.DEVNULL,
        )
        os.close(terminal)
        seen = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        proc.wait(timeout=120)
    finally:
        os.close(controller)
    assert proc.returncode == 0
    text = seen.decode()
    drawn = [
        line
        # A control sequence (erase the line, move the cursor) parts two frames as a carriage return does.
        for line in re.split(r"[\r\n]", re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", text))
        if line.startswith(tuple(_FRAMES))
    ]
    assert drawn and "repoinstall: installing slow-pkg==1.0 with pip" in text, text  # the log line goes above it
    assert all(line.startswith(f"{line[0]} installing slow-pkg") for line in drawn), drawn
    assert all(line.endswith("…") for line in drawn), drawn  # rich's cut at the terminal's width: not wrapped
    assert all(len(line) <= columns for line in drawn), drawn
    assert "\x1b[2K" in text  # transient: erased once the install is done
