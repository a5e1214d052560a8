"""A lock's artifacts while its tree installs: a local file swapped for a FIFO after it was checked, and the
scratch files a killed install leaves, which may name a URL with its password.

The installer is held on a slow download (the index server delays it) so that the swap, or the kill, lands while
it runs: counted by the server, never timed.
"""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import document, finish, signal_group, start, wait_until
from indexserver import IndexServer
from wheels import make_wheel

PASSWORD = "s3cr3tPW"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[IndexServer]:
    directory = tmp_path / "wheels"
    directory.mkdir()
    make_wheel(directory, "aaa-remote", "1.0")
    server = IndexServer(directory).start()
    yield server
    server.stop()


def _lock(served: IndexServer, directory: Path, *, user: str = "") -> Path:
    """A pylock of a remote wheel (listed first, so the installer takes it first) and a local one beside it."""
    make_wheel(directory, "zzz-local", "1.0")
    remote = served.files("aaa-remote")[0]
    local = next(directory.glob("zzz_local-*.whl"))
    base = served.url.replace("http://", f"http://{user}@") if user else served.url
    lock = directory / "pylock.toml"
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "hand"\n'
        f'[[packages]]\nname = "aaa-remote"\nversion = "1.0"\n'
        f'wheels = [{{ url = "{base}{remote.name}", hashes = {{ sha256 = "{served.sha256(remote)}" }} }}]\n'
        f'[[packages]]\nname = "zzz-local"\nversion = "1.0"\n'
        f'wheels = [{{ path = "{local.name}", hashes = {{ sha256 = "{served.sha256(local)}" }} }}]\n'
    )
    return lock


def _ensure(repo: Path, lock: Path) -> list[str]:
    return ["ensure", "-r", str(lock), "--repo", str(repo), "--json", "--stale-after", "2", "--heartbeat", "0.4",
            "--install-timeout", "60"]  # fmt: skip


def test_a_local_artifact_swapped_for_a_fifo_after_its_check_is_not_what_the_installer_reads(
    served: IndexServer, repo: Path, tmp_path: Path
) -> None:
    lock = _lock(served, tmp_path)
    local = next(tmp_path.glob("zzz_local-*.whl"))
    original = local.read_bytes()
    served.delays["aaa_remote"] = 3.0
    pod = start(*_ensure(repo, lock))
    wait_until(lambda: served.sending > 0, what="the remote download under way")
    local.unlink()
    os.mkfifo(local)  # checked when the lock was read; the installer has not opened it yet
    code, out, err = finish(pod, timeout=120)
    assert code == 0, err
    tree = Path(document(out)["packages"][0]["path"])
    assert (tree / "zzz_local").is_dir()
    record = next((repo / "records").rglob("1.json")).read_text()
    assert local.as_uri() in record, "recorded as the lock named it, not as the private copy"
    assert len(original) > 0


def test_a_killed_install_leaves_no_scratch_file_with_a_password_others_may_read(
    served: IndexServer, repo: Path, tmp_path: Path
) -> None:
    lock = _lock(served, tmp_path, user=f"deploy:{PASSWORD}")
    served.delays["aaa_remote"] = 30.0
    pod = start(*_ensure(repo, lock))
    wait_until(lambda: served.sending > 0, what="the remote download under way")
    signal_group(pod, signal.SIGKILL)
    finish(pod)
    left = [p for p in (repo / "staging").rglob("*") if p.is_file() and not p.is_symlink()]
    holding = [p for p in left if PASSWORD.encode() in p.read_bytes()]
    assert holding, "the scratch requirements file names the URL (pip needs it)"
    for path in holding:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, f"{path}: {stat.S_IMODE(path.stat().st_mode):04o}"
