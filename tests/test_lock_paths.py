"""What local files a lock may name (README "Lock files"): regular files below the lock file's directory or below a
local --find-links directory of the run. Anything else is one line, exit 2, at once: no repo, no lock, no
installer, and never the hash of a file the lock may not name.

Real processes and real wheels; the "secret" is a file outside the lock's directory whose sha256 the lock gives,
so an installer that read it would match it (and an error would print its hash).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import time
from pathlib import Path

import pytest
from helpers import document, import_version, run
from wheels import make_wheel

WHEEL = "solo-1.0-py3-none-any.whl"
#: Far more than a refusal takes, far less than the installer would spin on /dev/zero (--install-timeout).
AT_ONCE = 20.0


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pylock(directory: Path, entry: str, digest: str, name: str | None = WHEEL) -> Path:
    """A lock of solo 1.0 whose one wheel is ``entry`` (``path = ...`` or ``url = ...``)."""
    named = f"name = {json.dumps(name)}\n" if name else ""
    path = directory / "pylock.toml"
    path.write_text(
        'lock-version = "1.0"\ncreated-by = "test"\n[[packages]]\nname = "solo"\nversion = "1.0"\n'
        f"[[packages.wheels]]\n{named}{entry}\n[packages.wheels.hashes]\nsha256 = {json.dumps(digest)}\n"
    )
    return path


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Path]:
    """lock/ (with wheels/solo...whl), a wheelhouse/ beside it holding the same wheel, and outside/secret."""
    (tmp_path / "built").mkdir()
    built = make_wheel(tmp_path / "built", "solo", "1.0")
    lock = tmp_path / "lock"
    (lock / "wheels").mkdir(parents=True)
    shutil.copy(built, lock / "wheels" / WHEEL)
    (tmp_path / "wheelhouse").mkdir()
    shutil.copy(built, tmp_path / "wheelhouse" / WHEEL)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_bytes(b"root:$6$not-for-a-lock$:19000:0:99999:7:::\n")
    return {"lock": lock, "wheel": built, "wheelhouse": tmp_path / "wheelhouse", "secret": tmp_path / "outside/secret"}


def refused(lock: Path, repo: Path, *extra: str) -> str:
    """The one error line of ensuring ``lock``: exit 2 at once, nothing made."""
    started = time.monotonic()
    done = run("ensure", "-r", lock, "--repo", repo, *extra, timeout=AT_ONCE * 3)
    took = time.monotonic() - started
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith("repoinstall: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert took < AT_ONCE, took
    assert not repo.exists()  # no repo, so no lock taken, no staging, no installer
    return done.stderr.strip()


def _fifo(lock: Path) -> str:
    os.unlink(lock / "wheels" / WHEEL)
    os.mkfifo(lock / "wheels" / WHEEL)
    return f'path = "wheels/{WHEEL}"'


def _symlink_to(target: str) -> object:
    def make(lock: Path) -> str:
        os.unlink(lock / "wheels" / WHEEL)
        os.symlink(target, lock / "wheels" / WHEEL)
        return f'path = "wheels/{WHEEL}"'

    return make


def _device(lock: Path) -> str:
    os.unlink(lock / "wheels" / WHEEL)
    try:
        os.mknod(lock / "wheels" / WHEEL, 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # what /dev/zero is
    except PermissionError:
        pytest.skip("making a device needs root")
    return f'path = "wheels/{WHEEL}"'


def _directory(lock: Path) -> str:
    os.unlink(lock / "wheels" / WHEEL)
    (lock / "wheels" / WHEEL).mkdir()
    return f'path = "wheels/{WHEEL}"'


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ('path = "/dev/zero"', "outside the lock file's directory"),
        ('path = "/dev/urandom"', "outside the lock file's directory"),
        (_fifo, "is a FIFO, not a regular file"),
        (_device, "is a character device, not a regular file"),
        (_symlink_to("/dev/zero"), "outside the lock file's directory"),
        (_directory, "is a directory, not a regular file"),
        ('path = "' + "../" * 12 + 'etc/shadow"', "outside the lock file's directory"),
        ('url = "file:///etc/shadow"', "outside the lock file's directory"),
        ('path = "file:///etc/shadow"', "is a URL, not a path"),
        ('path = "wheels/missing.whl"', "no such file"),
        ('path = "wheels/' + "a" * 5000 + '.whl"', "cannot be read: File name too long"),
        ('path = "wheels/solo\\u0000.whl"', "holds no NUL character"),
        ('url = "file://elsewhere/x/solo-1.0-py3-none-any.whl"', "a file URL of another host"),
        ('url = "ftp://127.0.0.1/solo-1.0-py3-none-any.whl"', "not an http, https or file URL"),
    ],
    ids=[
        "dev-zero", "dev-urandom", "fifo", "device-inside", "symlink-to-device", "directory", "etc-shadow-relative",
        "file-url-shadow",
        "url-as-path", "missing", "huge-name", "nul-byte", "file-url-other-host", "ftp",
    ],
)  # fmt: skip
def test_what_a_lock_may_not_name_is_refused_at_once(
    tmp_path: Path, place: dict[str, Path], entry: object, reason: str
) -> None:
    text = entry(place["lock"]) if callable(entry) else entry
    assert isinstance(text, str)
    error = refused(pylock(place["lock"], text, sha256(place["wheel"])), tmp_path / "repo")
    assert "packages[0].wheels[0]." in error and reason in error, error
    assert len(error) < 500, error


@pytest.mark.parametrize("how", ["relative", "absolute", "file-url", "symlink-out"])
def test_a_file_outside_is_refused_without_its_hash(
    tmp_path: Path, place: dict[str, Path], installer: str, how: str
) -> None:
    # The lock gives the outside file's true hash: read, it would match, and a mismatch elsewhere would name it.
    secret = place["secret"]
    entry = {
        "relative": f"path = {json.dumps(os.path.relpath(secret, place['lock']))}",
        "absolute": f"path = {json.dumps(str(secret))}",
        "file-url": f"url = {json.dumps(secret.as_uri())}",
        "symlink-out": f'path = "wheels/{WHEEL}"',
    }[how]
    if how == "symlink-out":
        os.unlink(place["lock"] / "wheels" / WHEEL)
        os.symlink(secret, place["lock"] / "wheels" / WHEEL)
    error = refused(pylock(place["lock"], entry, sha256(secret)), tmp_path / "repo")
    assert "outside the lock file's directory" in error, error
    digest = sha256(secret)
    assert digest not in error and digest[:16] not in error


def test_a_wheel_below_the_locks_directory_installs(tmp_path: Path, place: dict[str, Path], installer: str) -> None:
    for entry in (f'path = "wheels/{WHEEL}"', f"path = {json.dumps(str(place['lock'] / 'wheels' / WHEEL))}"):
        lock = pylock(place["lock"], entry, sha256(place["wheel"]), name=None)
        done = run("ensure", "-r", lock, "--repo", tmp_path / "repo", "--json")
        assert done.returncode == 0, done.stderr
        assert import_version(document(done.stdout)["packages"][0]["path"], "solo") == "1.0"


def test_a_wheelhouse_outside_needs_the_run_to_name_it(tmp_path: Path, place: dict[str, Path], installer: str) -> None:
    # What `uv pip compile --find-links DIR --format pylock.toml` and `pip lock --find-links DIR` write.
    wheelhouse = place["wheelhouse"]
    lock = pylock(place["lock"], f"url = {json.dumps((wheelhouse / WHEEL).as_uri())}", sha256(place["wheel"]), None)
    repo = tmp_path / "repo"
    error = refused(lock, repo)
    assert "every local --find-links directory" in error, error
    # Naming a tree reads no artifact: path and remove answer without the wheelhouse.
    assert run("path", "-r", lock, "--repo", repo).returncode == 1  # not installed (and no repo: nothing made)
    for named in (str(wheelhouse), wheelhouse.as_uri()):
        shutil.rmtree(repo, ignore_errors=True)
        done = run("ensure", "-r", lock, "--repo", repo, "--json", "--find-links", named)
        assert done.returncode == 0, done.stderr
        tree = document(done.stdout)["packages"][0]["path"]
        assert import_version(tree, "solo") == "1.0"
        path = run("path", "-r", lock, "--repo", repo)
        assert path.returncode == 0 and path.stdout.strip() == tree, path.stderr
    # pip's configuration names it as well as the command line does.
    shutil.rmtree(repo)
    from helpers import isolated_env

    done = run("ensure", "-r", lock, "--repo", repo, "--json", env=isolated_env(PIP_FIND_LINKS=str(wheelhouse)))
    assert done.returncode == 0, done.stderr


def test_the_api_refuses_and_installs_by_the_same_rule(
    tmp_path: Path, place: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from repoinstall import InstallOptions, Repo, RequirementsFileError

    lock = pylock(place["lock"], f"path = {json.dumps(str(place['secret']))}", sha256(place["secret"]))
    with Repo(tmp_path / "repo") as repo, pytest.raises(RequirementsFileError, match="outside the lock file's"):
        repo.ensure_lock(str(lock))
    wheelhouse = place["wheelhouse"]
    lock = pylock(place["lock"], f"url = {json.dumps((wheelhouse / WHEEL).as_uri())}", sha256(place["wheel"]), None)
    with Repo(tmp_path / "repo", install=InstallOptions(find_links=(str(wheelhouse),))) as repo:
        assert repo.ensure_lock(str(lock)).action == "installed"
