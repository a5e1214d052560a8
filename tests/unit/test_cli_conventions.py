"""Command-line conventions users of pip and uv expect: --version, -h on every command; the version is one;
``--help`` shows each command's summary whole."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import typer.main
from packaging.version import Version

import repoinstall
from repoinstall._cli.app import _app_for, app

ROOT = Path(__file__).parents[2]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "repoinstall", *args], capture_output=True, text=True, check=False, env=env
    )


def test_version_is_the_packages() -> None:
    """One release everywhere: pyproject.toml, the package (--version), the chart's appVersion and the latest
    release of CHANGELOG.md, which keeps an [Unreleased] section above its dated releases, newest first."""
    import yaml

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    chart = yaml.safe_load((ROOT / "helm" / "repoinstall" / "Chart.yaml").read_text())
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", changelog, re.M)
    assert headings[0] == ("Unreleased", ""), headings[:2]
    releases = headings[1:]
    assert releases and all(date for _, date in releases), releases
    assert [Version(v) for v, _ in releases] == sorted((Version(v) for v, _ in releases), reverse=True), releases
    assert [d for _, d in releases] == sorted((d for _, d in releases), reverse=True), releases
    assert repoinstall.__version__ == project["version"] == str(chart["appVersion"]) == releases[0][0], (
        repoinstall.__version__,
        project["version"],
        chart["appVersion"],
        releases[0],
    )
    for flag in ("--version", "-V"):
        done = _cli(flag)
        assert done.returncode == 0 and done.stdout.startswith(f"repoinstall {repoinstall.__version__} "), done


def test_every_command_takes_dash_h() -> None:
    commands = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert {"ensure", "run", "verify", "gc", "remove", "locks", "doctor", "path", "list"} <= set(commands)
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


def _listed_commands(help_text: str) -> dict[str, str]:
    """The Commands section of ``--help``: name -> its summary, wrapped lines joined."""
    listed: dict[str, list[str]] = {}
    section = help_text.partition("\nCommands:\n")[2]
    for line in section.splitlines():
        if not line.strip():
            break
        if line.startswith("  ") and not line.startswith("   "):  # "  name  summary": a new row
            name, _, summary = line.strip().partition(" ")
            listed[name] = [summary.strip()]
        else:
            listed[list(listed)[-1]].append(line.strip())
    return {name: " ".join(parts) for name, parts in listed.items()}


def test_help_shows_every_commands_summary_whole() -> None:
    """click cuts a summary taken from the docstring at ~45 characters (or the terminal's width) with "...":
    each command declares one that fits, shown whole on one line at 80 columns and wider, wrapped (never cut)
    on a narrow terminal."""
    group = typer.main.get_command(app)
    summaries = {name: command.short_help for name, command in group.commands.items()}  # type: ignore[attr-defined]
    assert len(summaries) == 12 and all(summaries.values()), summaries
    for columns in ("200", "80", "50"):
        done = _cli("--help", env={**os.environ, "COLUMNS": columns})
        assert done.returncode == 0, done
        for line in done.stdout.splitlines():
            if not line.startswith("Usage:"):  # "COMMAND [ARGS]..." is the usage's own notation
                assert not line.rstrip().endswith(("...", "\u2026")), (columns, line)
        listed = _listed_commands(done.stdout)
        assert list(listed) == list(summaries), (columns, done.stdout)
        for name, summary in summaries.items():
            if columns == "50":  # wrapped at spaces or after a hyphen: the same characters, laid out anew
                assert "".join(listed[name].split()) == "".join(str(summary).split()), (columns, name, listed)
            else:
                assert listed[name] == summary, (columns, name, listed)


def test_a_run_builds_only_the_command_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """typer builds click's objects for every registered command on each run: a run that names a command gets
    an app holding that one alone (the group's options too), which behaves as the whole app does."""
    from typer.testing import CliRunner

    runner = CliRunner()
    names = list(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    for name in names:
        one = _app_for([name, "--help"])
        assert list(typer.main.get_command(one).commands) == [name]  # type: ignore[attr-defined]
        for args in ([name, "--help"], [name, "--no-such-option"], ["-V"]):
            alone, whole = runner.invoke(one, args), runner.invoke(app, args)
            assert (alone.exit_code, alone.output) == (whole.exit_code, whole.output), (args, alone.output)
    # Help, version, unknown names and shell completion list or suggest every command: the whole app.
    for args in ([], ["--help"], ["-V"], ["ensur"], ["--repo", "ensure"]):
        assert _app_for(args) is app, args
    monkeypatch.setenv("_REPOINSTALL_COMPLETE", "complete_bash")
    assert _app_for(["ensure"]) is app
