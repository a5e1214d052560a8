"""What a person reads: ``list`` fits 100 columns (details behind --long and --json), a tree installed in a batch
reports the batch's time, and the errors pip and uv users hit say what to do (one line, exit 2, nothing written)."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from helpers import run
from indexserver import IndexServer

from repoinstall import InstallOptions, Repo


def find(index: IndexServer) -> list[str]:
    return ["--no-index", "--find-links", index.url]


def test_list_fits_100_columns_and_long_and_json_keep_every_detail(
    repo: Path, index: IndexServer, tmp_path: Path
) -> None:
    specs = ["adaptor-a[fast]==1.0", "adaptor-b==1.0", *(f"adaptor-{letter}==1.0" for letter in "defgh")]
    assert run("ensure", *specs, "--repo", repo, *find(index), "-q").returncode == 0
    assert run("ensure", "--together", *specs[1:], "--repo", repo, *find(index), "-q").returncode == 0
    lock = tmp_path / "pylock.toml"
    assert run("export", *specs[1:], "--repo", repo, "-o", lock).returncode == 0
    assert run("ensure", "-r", lock, "--repo", repo, *find(index), "-q").returncode == 0
    shown = run("list", "--repo", repo)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert len(lines) == 1 + len(specs) + 2 and all(len(line) <= 100 for line in lines), lines
    assert lines[0].endswith(":") and lines[1].startswith("  adaptor-a[fast]==1.0  "), lines
    assert re.search(r"  \d{4}-\d\d-\d\d \d\d:\d\d  with dep-c$", lines[2]), lines[2]  # adaptor-b needs dep-c
    assert any(line.endswith("...") for line in lines), lines  # the set's and the lock's long member lists, cut
    long = run("list", "--repo", repo, "--long").stdout.splitlines()
    assert len(long) == len(specs) + 2 and any(len(line) > 100 for line in long), long
    with Repo(repo) as opened:
        path = opened.tree_path("adaptor-b==1.0")
    assert any(line.endswith(path) for line in long) and not any(path in line for line in lines)
    document = json.loads(run("list", "--repo", repo, "--json").stdout)
    assert {tree["path"] for tree in document["trees"]} >= {path}


def test_a_tree_installed_in_a_batch_reports_the_batchs_time(
    repo: Path, index: IndexServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="repoinstall")
    specs = ["adaptor-b==1.0", "adaptor-d==1.0", "adaptor-e==1.0"]
    with Repo(repo, install=InstallOptions(find_links=(index.url,), no_index=True)) as opened:
        results = opened.ensure_all(specs)
    assert [r.action for r in results] == ["installed"] * 3
    (batch,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("stored the distributions of")]
    seconds = float(re.search(r"\((\d+\.\d+)s\)", batch).group(1))  # type: ignore[union-attr]
    assert batch.startswith("stored the distributions of 3 trees in one run"), batch
    # Each tree waited for the whole batch's run: that is part of what its install took, not 0.1 s of composing.
    assert all(r.seconds_installing >= seconds - 0.05 for r in results), (seconds, results)
    trees = [r.getMessage() for r in caplog.records if r.getMessage().startswith("installed ")]
    assert len(trees) == 3 and all(line.endswith("its batch's run included)") for line in trees), trees


# ---- errors that say what to do ------------------------------------------------------------------------------------


def refused(repo: Path, *args: str | Path) -> str:
    done = run("ensure", *args, "--repo", repo)
    assert done.returncode == 2, done
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("repoinstall: error: "), done.stderr
    assert not repo.exists()  # nothing written
    return done.stderr


@pytest.mark.parametrize("where", ["file", "command line"])
def test_an_editable_install_says_it_is_not_supported_and_what_to_do(repo: Path, tmp_path: Path, where: str) -> None:
    if where == "file":
        requirements = tmp_path / "requirements.txt"
        requirements.write_text("-e .\n")
        message = refused(repo, "-r", requirements)
        assert f"{requirements}:1: editable installs (-e) are not supported" in message, message
    else:
        message = refused(repo, "-e", ".")
    assert "pip wheel --no-deps -w dist ." in message and "--find-links dist" in message, message


def test_an_index_option_in_a_requirements_file_points_to_the_command_line(repo: Path, tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("--only-binary :all:\nsix==1.16.0\n")
    message = refused(repo, "-r", requirements)
    assert "'--only-binary' is not read from requirements files: give --only-binary on the command line" in message


def test_a_uv_lock_is_not_read_as_requirements_and_the_message_says_how_to_make_one(repo: Path, tmp_path: Path) -> None:
    lock = tmp_path / "uv.lock"
    lock.write_text('version = 1\nrequires-python = ">=3.11"\n\n[[package]]\nname = "six"\nversion = "1.17.0"\n')
    message = refused(repo, "-r", lock)
    assert message.strip() == (
        f"repoinstall: error: {lock}: not a lock this reads; "
        "`uv export --format pylock.toml --no-emit-project -o pylock.toml` makes one"
    )


@pytest.mark.parametrize("kind", ["requires-python", "markers"])
def test_a_lock_made_for_another_python_is_refused_naming_it(repo: Path, tmp_path: Path, kind: str) -> None:
    import sys

    other = f"3.{sys.version_info.minor + 1}"
    wheel = '[{ url = "https://files.example/six-1.17.0-py2.py3-none-any.whl", hashes = { sha256 = "' + "a" * 64
    text = 'lock-version = "1.0"\ncreated-by = "uv"\n'
    if kind == "requires-python":
        text += f'requires-python = ">={other}"\n'
    text += '\n[[packages]]\nname = "six"\nversion = "1.17.0"\n'
    if kind == "markers":
        text += f"marker = \"python_version >= '{other}'\"\n"
    lock = tmp_path / "pylock.toml"
    lock.write_text(text + f'wheels = {wheel}" }} }}]\n')
    message = refused(repo, "-r", lock)
    assert f">={other}" in message or f">= '{other}'" in message, message
    this = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"this is {this}" in message or f"Python {this}" in message, message
    assert f"uv pip compile --python-version {this}" in message, message
