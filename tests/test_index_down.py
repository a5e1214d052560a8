"""An index that does not answer, asked by the installer (a pinned spec, which repoinstall does not resolve): one
line naming the index as configured, its password hidden, and why; the same line from the command line, from
``--json`` and as the API's exception; ``-v`` adds the installer's own log. A real port on 127.0.0.1 that refuses
connections (bound, never listening), with pip and with uv."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import document, isolated_env, run
from locks import served_pylock
from wheels import make_wheel

from repoinstall import InstallError, InstallOptions, Repo

PASSWORD = "s3cret-pw"


@pytest.fixture
def refusing() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses every connection: bound for the test, so nothing else takes it, and never
    listening."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def test_an_index_that_does_not_answer_is_one_line_naming_it(tmp_path: Path, refusing: int, installer: str) -> None:
    index = f"http://user:{PASSWORD}@127.0.0.1:{refusing}/simple"
    expected = (
        f"dep==1.0: index http://****@127.0.0.1:{refusing}/simple does not answer (connection refused); {installer} "
        "gave up after its retries"
    )
    env = isolated_env(PIP_RETRIES="1")  # pip's retries, and uv's (UV_HTTP_RETRIES): one retry, then the answer
    args = ["ensure", "dep==1.0", "--repo", tmp_path / "repo", "--index-url", index]
    quiet = run(*args, "-q", env=env)
    assert quiet.returncode == 1
    assert quiet.stderr.splitlines() == [f"repoinstall: error: {expected}"]
    as_json = run(*args, "--json", env=env)
    assert as_json.returncode == 1
    [error] = document(as_json.stdout)["errors"]
    assert error == {"requirement": "dep==1.0", "error": expected, "exit_code": 1}
    verbose = run(*args, "-v", env=env)
    assert verbose.returncode == 1 and verbose.stderr.splitlines()[-1] == f"repoinstall: error: {expected}"
    assert "retry" in verbose.stderr.lower() and len(verbose.stderr.splitlines()) > 3  # the installer's log
    for done in (quiet, as_json, verbose):
        assert PASSWORD not in done.stdout + done.stderr


def test_the_api_raises_the_same_line(
    tmp_path: Path, refusing: int, installer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_RETRIES", "1")
    index = f"http://user:{PASSWORD}@127.0.0.1:{refusing}/simple"
    options = InstallOptions(index_url=index, installer=installer)
    with Repo(tmp_path / "repo", install=options) as repo, pytest.raises(InstallError) as raised:
        repo.ensure("dep==1.0")
    assert str(raised.value) == (
        f"dep==1.0: index http://****@127.0.0.1:{refusing}/simple does not answer (connection refused); {installer} "
        "gave up after its retries"
    )


def test_a_lock_whose_host_does_not_answer_is_one_line_not_an_artifact_gone(
    tmp_path: Path, refusing: int, installer: str
) -> None:
    (tmp_path / "wheels").mkdir()
    wheel = make_wheel(tmp_path / "wheels", "dep", "1.0")
    lock = tmp_path / "pylock.toml"
    lock.write_text(served_pylock(f"http://127.0.0.1:{refusing}/", [(wheel, None)]))
    done = run("ensure", "-r", lock, "--repo", tmp_path / "repo", "-q", env=isolated_env(PIP_RETRIES="1"))
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.endswith(
        f"127.0.0.1:{refusing} does not answer (connection refused); {installer} gave up after its retries"
    ), line
