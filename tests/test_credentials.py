"""Credentials in URLs never show: not in a one-line error, a ``--json`` document, a ``-v`` log, an installer's
quoted output, a listing, an export, nor in any file written into the repo (records, closures, the index cache).

Real processes with pip and uv against real servers on 127.0.0.1: a package server (which takes any credentials),
one that answers only an HTTP status, one that never answers, and a port nobody listens on. The secret is put
where a lock, an index URL, a find-links URL or a spec can carry it, in every shape pip and uv read: a password,
a token alone (``https://TOKEN@host``), a token as a user with an empty password (``https://TOKEN:@host``, which
pip itself shows), a user holding an encoded ``@``.
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers import isolated_env, run
from indexserver import IndexServer
from wheels import make_wheel

SECRET = "s3cr3tPW"
WHEEL = "solo-1.0-py3-none-any.whl"
#: No retries: a refused or silent server fails at once, with pip and with uv (it is given pip's retries).
QUICK = {"PIP_RETRIES": "0", "PIP_TIMEOUT": "2"}


class Servers:
    """Where a lock's artifact can be: served, answering a status, silent, or nobody there."""

    def __init__(self, directory: Path) -> None:
        self.index = IndexServer(directory).start()
        self.host = self.index.url.split("//", 1)[1].rstrip("/")
        self.status = ThreadingHTTPServer(("127.0.0.1", 0), _Status)
        self.status.daemon_threads = True
        threading.Thread(target=self.status.serve_forever, daemon=True).start()
        self.silent = socket.create_server(("127.0.0.1", 0))
        self._held: list[socket.socket] = []
        threading.Thread(target=self._hold, daemon=True).start()
        with socket.create_server(("127.0.0.1", 0)) as closed:
            self.closed_port = closed.getsockname()[1]

    def _hold(self) -> None:
        while True:
            try:
                self._held.append(self.silent.accept()[0])
            except OSError:
                return

    def url(self, userinfo: str, where: str) -> str:
        """The wheel's URL with ``userinfo@``, at ``where``: served, 404, 500, silent or refused."""
        if where in ("served", "mismatch"):
            return f"http://{userinfo}@{self.host}/{WHEEL}"
        if where in ("404", "500"):
            return f"http://{userinfo}@127.0.0.1:{self.status.server_address[1]}/{where}/{WHEEL}"
        port = self.silent.getsockname()[1] if where == "silent" else self.closed_port
        return f"http://{userinfo}@127.0.0.1:{port}/{WHEEL}"

    def stop(self) -> None:
        self.index.stop()
        self.status.shutdown()
        self.status.server_close()
        self.silent.close()
        for held in self._held:
            held.close()


class _Status(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return

    def do_GET(self) -> None:
        self.send_response(int(self.path.strip("/").split("/")[0]))
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("cred-wheels")
    make_wheel(directory, "needs-gone", "1.0", requires=("not-on-the-index>=1",))
    return make_wheel(directory, "solo", "1.0")


@pytest.fixture(scope="module")
def servers(wheel: Path) -> Iterator[Servers]:
    found = Servers(wheel.parent)
    yield found
    found.stop()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pylock(directory: Path, url: str, digest: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "pylock.toml"
    path.write_text(
        f'lock-version = "1.0"\ncreated-by = "test"\n[[packages]]\nname = "solo"\nversion = "1.0"\n'
        f"[[packages.wheels]]\nurl = {json.dumps(url)}\n[packages.wheels.hashes]\nsha256 = {json.dumps(digest)}\n"
    )
    return path


def leaks(repo: Path, *outputs: str) -> list[str]:
    """Where the secret shows: an output, or a file in the repo (its path)."""
    found = [output for output in outputs if SECRET in output]
    if repo.exists():
        for path in repo.rglob("*"):
            if path.is_file() and not path.is_symlink() and SECRET.encode() in path.read_bytes():
                found.append(str(path))
    return found


def one_error(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("repoinstall: error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    return errors[0]


# ---- a lock's artifact URL -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("userinfo", "where"),
    [
        (f"deploy:{SECRET}", "mismatch"),
        (f"{SECRET}:", "404"),  # a token as the user: pip shows a user, and would show this one
        (SECRET, "500"),
        (f"me%40corp:{SECRET}", "refused"),
        (f"deploy:{SECRET}", "silent"),
    ],
)
def test_a_lock_artifacts_credentials_never_show(
    tmp_path: Path, servers: Servers, wheel: Path, installer: str, userinfo: str, where: str
) -> None:
    digest = "0" * 64 if where == "mismatch" else sha256(wheel)
    lock = pylock(tmp_path / "lock", servers.url(userinfo, where), digest)
    repo = tmp_path / "repo"
    env = isolated_env(**QUICK)
    plain = run("ensure", "-r", lock, "--repo", repo, "--json", env=env)
    error = one_error(plain, 1)
    assert json.loads(plain.stdout)["errors"][0]["error"].splitlines()[0] in error
    verbose = run("ensure", "-r", lock, "--repo", repo, "-v", env=env)
    assert verbose.returncode == 1
    assert "://****@" in verbose.stderr or "://127.0.0.1" in verbose.stderr, verbose.stderr
    assert leaks(repo, plain.stdout, plain.stderr, verbose.stdout, verbose.stderr) == []
    if where == "mismatch":
        assert "hash mismatch for solo" in error and f"://****@{servers.host}" in error, error


@pytest.mark.parametrize("password", ["se/cr3tPW", "se#cr3tPW", "se?cr3tPW", "s3cr 3tPW", "s3cr\\u0007tPW"])
def test_a_lock_url_whose_password_the_installers_would_misread_is_refused_before_them(
    tmp_path: Path, servers: Servers, wheel: Path, password: str
) -> None:
    # Unencoded, "/", "#" or "?" end the host part early: pip and uv then print the URL whole, password and all.
    lock = pylock(tmp_path / "lock", "", sha256(wheel))
    url = f"http://deploy:{SECRET}{password}@{servers.host}/{WHEEL}"
    lock.write_text(lock.read_text().replace('url = ""', f'url = "{url}"'))
    repo = tmp_path / "repo"
    started = servers.index.downloads("solo")
    error = one_error(run("ensure", "-r", lock, "--repo", repo, "--json"), 2)
    assert "packages[0].wheels[0].url" in error and "****@" in error, error
    assert leaks(repo, error) == [] and not repo.exists()
    assert servers.index.downloads("solo") == started  # no installer ran


def test_a_lock_installed_from_a_url_with_credentials_keeps_them_nowhere(
    tmp_path: Path, servers: Servers, wheel: Path, installer: str
) -> None:
    lock = pylock(tmp_path / "lock", servers.url(f"deploy:{SECRET}", "served"), sha256(wheel))
    repo = tmp_path / "repo"
    done = run("ensure", "-r", lock, "--repo", repo, "--json", "-v")
    assert done.returncode == 0, done.stderr
    outputs = [done.stdout, done.stderr]
    for command in (
        ("list", "--repo", repo),
        ("list", "--repo", repo, "--json"),
        ("locks", "--repo", repo),
        ("locks", "--repo", repo, "--json"),
        ("export", "-r", lock, "--repo", repo),
        ("path", "-r", lock, "--repo", repo),
        ("verify", "--all", "--repo", repo, "--json"),
    ):
        shown = run(*command)
        assert shown.returncode == 0, (command, shown.stderr)
        outputs += [shown.stdout, shown.stderr]
        if command[0] == "export":  # it names the artifact, without the user
            assert f'url = "http://{servers.host}/{WHEEL}"' in shown.stdout, shown.stdout
    assert leaks(repo, *outputs) == []


# ---- index and find-links URLs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("userinfo", [f"deploy:{SECRET}", SECRET, f"{SECRET}:"])
def test_index_and_find_links_credentials_never_show(
    tmp_path: Path, servers: Servers, wheel: Path, installer: str, userinfo: str
) -> None:
    index = servers.index.simple.replace("http://", f"http://{userinfo}@")
    links = servers.index.url.replace("http://", f"http://{userinfo}@")
    hashed = tmp_path / "locked.txt"
    hashed.write_text(f"solo==1.0 --hash=sha256:{'0' * 64}\n")
    repo = tmp_path / "repo"
    outputs = []
    # A hashed requirements file installs from the index: a hash mismatch there names the index's file.
    mismatch = run("ensure", "-r", hashed, "--repo", repo, "--index-url", index, "--json", "-v")
    outputs += [one_error(mismatch, 1), mismatch.stdout, mismatch.stderr]
    # A dependency that no find-links page has: the resolver (index cache in the repo) and the installer fail.
    for extra in ([], ["--refresh"]):
        missing = run(
            "ensure", "needs-gone==1.0", "--repo", repo, "--no-index", "--find-links", links, "--json", "-v", *extra
        )
        outputs += [one_error(missing, 1), missing.stdout, missing.stderr]
    # And one that works, through both, leaving records and closures and the index cache in the repo.
    fine = run("ensure", "solo", "--repo", repo, "--index-url", index, "--find-links", links, "--json")
    assert fine.returncode == 0, fine.stderr
    listed = run("list", "--repo", repo, "--json")
    assert leaks(repo, *outputs, fine.stdout, fine.stderr, listed.stdout) == []
    assert any((repo / "cache").rglob("*.json")) and any((repo / "closures").rglob("*.json"))


@pytest.mark.parametrize("userinfo", [f"deploy:{SECRET}", SECRET, f"{SECRET}:"])
def test_index_lines_in_a_requirements_file_keep_their_credentials_hidden(
    tmp_path: Path, servers: Servers, wheel: Path, installer: str, userinfo: str
) -> None:
    """pip-compile copies pip.conf's index options, credentials and all, into its output: read, never shown."""
    index = servers.index.simple.replace("http://", f"http://{userinfo}@")
    links = servers.index.url.replace("http://", f"http://{userinfo}@")
    nobody = f"http://{userinfo}@127.0.0.1:{servers.closed_port}/simple"
    env = isolated_env(**QUICK)
    repo = tmp_path / "repo"
    outputs: list[str] = []
    files = {
        "fine.txt": f"--index-url {index}\n--find-links {links}\nsolo>=1\n",
        "mismatch.txt": f"--index-url {index}\nsolo==1.0 --hash=sha256:{'0' * 64}\n",
        "gone.txt": f"--index-url {index}\n-f {links}\nneeds-gone==1.0\n",
        "nobody.txt": f"--index-url {nobody}\nsolo>=2\n",
        "after.txt": f"solo==1.0 --index-url={index}\n",
        "misread.txt": f"--index-url http://deploy:{SECRET}/x@{servers.host}/simple\nsolo==1.0\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    # Installed through repoinstall's resolution (a range) and the installer (-v: its command line and output).
    fine = run("ensure", "-r", tmp_path / "fine.txt", "--repo", repo, "--json", "-v", env=env)
    assert fine.returncode == 0, fine.stderr
    outputs += [fine.stdout, fine.stderr]
    planned = run("ensure", "-r", tmp_path / "fine.txt", "--repo", repo, "--dry-run", "--json", env=env)
    outputs += [planned.stdout, planned.stderr]
    # A hash mismatch names the index's file; a dependency no source has fails the resolution and the installer;
    # an index nobody answers fails the resolution; an index option after a requirement, and a password pip and uv
    # would misread (an unencoded "/"), are refused before anything runs.
    for name, code in (("mismatch.txt", 1), ("gone.txt", 1), ("nobody.txt", 1), ("after.txt", 2), ("misread.txt", 2)):
        done = run("ensure", "-r", tmp_path / name, "--repo", repo, "--json", "-v", env=env)
        outputs += [one_error(done, code), done.stdout, done.stderr]
    listed = run("list", "--repo", repo, "--json", env=env)
    assert leaks(repo, *outputs, listed.stdout, listed.stderr) == []
    assert "****@" in "".join(outputs)


@pytest.mark.parametrize("where", ["command line", "requirements file"])
@pytest.mark.parametrize("user", ["deploy", "a-rather-long-user-name-that-pushes-the-password-past-eighty-characters"])
def test_a_direct_url_requirement_is_refused_without_its_password(tmp_path: Path, where: str, user: str) -> None:
    spec = f"solo @ http://{user}:{SECRET}@127.0.0.1:9/{WHEEL}"
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(spec + "\n")
    asked = [spec] if where == "command line" else ["-r", str(requirements)]
    done = run("ensure", *asked, "--repo", tmp_path / "repo", "--json")
    error = one_error(done, 2)
    assert "direct URL" in error, error
    assert leaks(tmp_path / "repo", error, done.stdout) == [] and not (tmp_path / "repo").exists()


# ---- the API -------------------------------------------------------------------------------------------------------


def test_the_api_error_and_log_never_hold_the_secret(
    tmp_path: Path, servers: Servers, wheel: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from repoinstall import InstallError, Repo

    for key, value in QUICK.items():
        monkeypatch.setenv(key, value)
    lock = pylock(tmp_path / "lock", servers.url(f"{SECRET}:", "404"), sha256(wheel))
    caplog.set_level("DEBUG", logger="repoinstall")
    started = time.monotonic()
    with Repo(tmp_path / "repo") as repo, pytest.raises(InstallError) as raised:
        repo.ensure_lock(str(lock))
    assert time.monotonic() - started < 120
    assert "****@127.0.0.1" in str(raised.value), raised.value
    assert leaks(tmp_path / "repo", str(raised.value), repr(raised.value.args), caplog.text) == []
    assert "pip said" in caplog.text or "uv said" in caplog.text  # the installer's output was logged, hidden
