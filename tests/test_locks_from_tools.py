"""Lock files made by the real tools: ``pip lock`` (pip 26) and ``uv pip compile`` (``--format pylock.toml``, and
``--generate-hashes``) against pypiserver on 127.0.0.1, read for this interpreter. Hand-written and malformed
files: tests/unit/test_lockfile.py."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import isolated_env
from packaging.tags import sys_tags
from servers import PypiServer
from wheels import make_wheel

from repoinstall._lockfile.environment import Environment
from repoinstall._lockfile.hashed import hash_mode, is_hashed_requirements
from repoinstall._lockfile.read import forget, is_lock_file, read_lock
from repoinstall._requirements import read_requirements_file

#: This interpreter's best wheel tag: lk-dep has a wheel for it beside its py3-none-any one.
BEST = str(next(iter(sys_tags())))


@pytest.fixture(scope="module")
def pypi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PypiServer]:
    packages = tmp_path_factory.mktemp("lock-packages")
    make_wheel(packages, "lk-top", "1.0", requires=("lk-dep>=1", 'lk-win; sys_platform == "win32"'))
    make_wheel(packages, "lk-dep", "1.0")
    make_wheel(packages, "lk-dep", "1.0", tag=BEST)
    make_wheel(packages, "lk-win", "1.0")
    server = PypiServer(packages, tmp_path_factory.mktemp("lock-pypiserver"))
    yield server
    server.stop()


def _uv() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


def _made(tmp_path: Path, command: list[str]) -> None:
    done = subprocess.run(
        command, cwd=tmp_path, env=isolated_env(), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


def _sha256(pypi: PypiServer, filename: str) -> str:
    return "sha256:" + hashlib.sha256((pypi.packages / filename).read_bytes()).hexdigest()


@pytest.fixture
def locks(tmp_path: Path, pypi: PypiServer) -> Path:
    """pip's and uv's locks of ``lk-top`` in ``tmp_path``."""
    forget()
    (tmp_path / "in.txt").write_text("lk-top\n")
    index = ["--index-url", pypi.simple]
    pip_lock = [sys.executable, "-m", "pip", "lock", "--no-cache-dir", *index, "-r", "in.txt", "-o", "pylock.toml"]
    _made(tmp_path, pip_lock)
    compile_ = [_uv(), "pip", "compile", "--no-cache", "--quiet", *index, "in.txt"]
    _made(tmp_path, [*compile_, "--format", "pylock.toml", "-o", "pylock.uv.toml"])
    _made(tmp_path, [*compile_, "--universal", "--format", "pylock.toml", "-o", "pylock.universal.toml"])
    _made(tmp_path, [*compile_, "--generate-hashes", "-o", "requirements.txt"])
    _made(tmp_path, [*compile_, "--universal", "--generate-hashes", "-o", "universal.txt"])
    return tmp_path


def test_pip_and_uv_locks_install_the_same_here(locks: Path, pypi: PypiServer) -> None:
    best = f"lk_dep-1.0-{BEST}.whl"
    expected = [("lk-dep", "1.0", best, (_sha256(pypi, best),)), ("lk-top", "1.0", "lk_top-1.0-py3-none-any.whl", None)]
    keys = set()
    for name in ("pylock.toml", "pylock.uv.toml", "pylock.universal.toml"):
        path = str(locks / name)
        assert is_lock_file(path)
        lock = read_lock(path)
        assert lock.kind == "pylock" and lock.source == path
        found = [(p.name, p.version, p.filename, p.hashes) for p in lock.packages]
        assert [row[:3] for row in found] == [row[:3] for row in expected], name
        assert found[0][3] == expected[0][3]
        assert found[1][3] == (_sha256(pypi, "lk_top-1.0-py3-none-any.whl"),)
        assert all(p.url is not None and p.url.startswith(pypi.url) for p in lock.packages)
        keys.add(lock.key())
    assert len(keys) == 1  # pip's single-wheel lock, uv's and uv's universal one: one tree here


def test_the_universal_lock_installs_the_windows_only_dependency_on_windows(locks: Path) -> None:
    universal = str(locks / "pylock.universal.toml")
    windows = Environment.of({"sys_platform": "win32", "platform_system": "Windows"}, ["py3-none-any"])
    lock = read_lock(universal, environment=windows)
    assert [(p.name, p.filename) for p in lock.packages] == [
        ("lk-dep", "lk_dep-1.0-py3-none-any.whl"),
        ("lk-top", "lk_top-1.0-py3-none-any.whl"),
        ("lk-win", "lk_win-1.0-py3-none-any.whl"),
    ]
    assert lock.key() != read_lock(universal).key()


def test_uv_hashed_requirements_are_a_lock(locks: Path, pypi: PypiServer) -> None:
    requirements = str(locks / "requirements.txt")
    assert not is_lock_file(requirements)
    requested = read_requirements_file(requirements)
    assert is_hashed_requirements(requested) and hash_mode(requested)
    lock = read_lock(requirements)
    assert lock.kind == "hashed-requirements"
    assert [(p.name, p.version, p.filename, p.url) for p in lock.packages] == [
        ("lk-dep", "1.0", None, None),
        ("lk-top", "1.0", None, None),
    ]
    both = sorted(_sha256(pypi, f) for f in (f"lk_dep-1.0-{BEST}.whl", "lk_dep-1.0-py3-none-any.whl"))
    assert lock.packages[0].hashes == tuple(both)
    # The universal file's Windows-only line (a marker, and hashed) is skipped here, as pip skips it.
    universal = read_lock(str(locks / "universal.txt"))
    assert universal.key() == lock.key()
    assert "lk-win" in (locks / "universal.txt").read_text()
