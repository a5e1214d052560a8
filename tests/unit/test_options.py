"""The API refuses the options the CLI refuses, with the same one-line reasons, before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from repoinstall import InstallOptions, InvalidInput, LockSettings, Repo


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        (InstallOptions(installer="conda"), "--installer must be one of pip, uv"),
        (InstallOptions(timeout=0), "--install-timeout must be a positive number"),
        (InstallOptions(timeout=float("nan")), "--install-timeout must be a positive number"),
        (InstallOptions(constraints=("/dev/zero",)), "not a regular file"),
        (InstallOptions(constraints=("/nonexistent/c.txt",)), "constraints file not found"),
        (InstallOptions(bytecode="no"), "bytecode must be True or False"),  # type: ignore[arg-type]
    ],
)
def test_install_options_are_checked_for_api_users(options: InstallOptions, reason: str, tmp_path: Path) -> None:
    assert reason in (options.validate() or "")
    with pytest.raises(InvalidInput, match=reason):
        Repo(tmp_path / "repo", install=options)
    assert not (tmp_path / "repo").exists()


def test_a_cache_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("")
    assert (
        InstallOptions(cache_dir=str(tmp_path / "cache")).validate()
        == f"--cache-dir {tmp_path / 'cache'}: not a directory"
    )


def test_good_options_pass(tmp_path: Path) -> None:
    (tmp_path / "c.txt").write_text("\ufeffadaptor-a<2\n")
    assert InstallOptions(constraints=(str(tmp_path / "c.txt"),), cache_dir=str(tmp_path)).validate() is None
    assert LockSettings().validate() is None
