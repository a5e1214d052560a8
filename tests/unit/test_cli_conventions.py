"""Command-line conventions users of pip and uv expect: --version, -h on every command; the version is one."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import typer.main

import repoinstall
from repoinstall._cli.app import app

ROOT = Path(__file__).parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "repoinstall", *args], capture_output=True, text=True, check=False)


def test_version_is_the_packages() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert repoinstall.__version__ == project["version"]
    for flag in ("--version", "-V"):
        done = _cli(flag)
        assert done.returncode == 0 and done.stdout.startswith(f"repoinstall {repoinstall.__version__} "), done


def test_every_command_takes_dash_h() -> None:
    commands = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert {"ensure", "run", "verify", "gc", "locks", "doctor", "path", "list"} <= set(commands)
    for command in commands:
        done = _cli(command, "-h")
        assert done.returncode == 0 and done.stdout.startswith(f"Usage: repoinstall {command} "), (command, done)


def test_the_license_ships() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and "MIT License" in (ROOT / "LICENSE").read_text()
    assert "Typing :: Typed" in project["classifiers"]


def test_shell_completion_completes_commands_and_options() -> None:
    """typer's completion, for real: bash sources the script `--show-completion bash` prints and completes."""
    script = _cli("--show-completion")  # the shell it runs under: bash here
    assert script.returncode == 0 and "complete -o default -F _repoinstall_completion repoinstall" in script.stdout
    executable = Path(sys.executable).parent / "repoinstall"
    assert executable.exists(), "the console script is installed beside the interpreter"
    complete = f"""
eval "$({executable} --show-completion bash)"
complete_words() {{
  COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _repoinstall_completion repoinstall; echo "${{COMPREPLY[*]}}"
}}
complete_words repoinstall en
complete_words repoinstall ensure --no-l
complete_words repoinstall gc --dry
"""
    env = {"PATH": f"{executable.parent}:/usr/bin:/bin", "HOME": "/nonexistent"}
    done = subprocess.run(["bash", "-c", complete], capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0 and done.stdout.splitlines() == ["ensure", "--no-lock", "--dry-run"], done
    # zsh's protocol (what its script, printed under zsh, asks): the words in _TYPER_COMPLETE_ARGS.
    zsh = subprocess.run(
        [executable],
        env={**env, "_REPOINSTALL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "repoinstall ver"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert zsh.returncode == 0 and '(("verify":"Check trees' in zsh.stdout, zsh
