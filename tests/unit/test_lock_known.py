"""The per-user hint of which tree a lock file named (``repoinstall._lockfile.known``): keyed by the file's exact
bytes and everything else that names the tree, written whole, and ignored whenever it is not exactly what was
written for that key."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from repoinstall._lockfile import known
from repoinstall._options import InstallOptions

TREE = "locked-app-dep-0123456789"
LOCK = 'lock-version = "1.0"\ncreated-by = "test"\n'


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "repoinstall" / "lock-trees"


def look(path: Path, install: InstallOptions | None = None) -> known.Hint:
    hint = known.look(str(path), env="cp311-cp311-manylinux_2_36_x86_64", install=install)
    assert hint is not None
    return hint


def test_remembered_under_the_files_bytes(tmp_path: Path, cache: Path) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(LOCK)
    assert look(lock).tree is None
    known.remember(look(lock), TREE)
    assert look(lock).tree == TREE
    (entry,) = cache.iterdir()
    assert json.loads(entry.read_text()) == {"key": entry.name, "tree": TREE}
    assert entry.stat().st_mode & 0o077 == 0 and cache.stat().st_mode & 0o077 == 0  # the user's alone
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]
    lock.write_text(LOCK + " ")  # one byte more
    assert look(lock).tree is None
    other = tmp_path / "elsewhere" / "pylock.toml"
    other.parent.mkdir()
    other.write_text(LOCK)  # the same bytes anywhere: the same tree
    assert look(other).tree == TREE


@pytest.mark.parametrize(
    "options",
    [
        {"extras": ["cli"]},
        {"groups": []},
        {"groups": ["dev"]},
        {"look_up_artifacts": False},
        {"install": InstallOptions(index_url="https://example.org/simple")},
        {"install": InstallOptions(only_binary=(":all:",))},
        {"env": "cp312-cp312-manylinux_2_36_x86_64"},
    ],
)
def test_whatever_names_the_tree_is_in_the_key(tmp_path: Path, options: dict[str, object]) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(LOCK)
    known.remember(look(lock), TREE)
    hint = known.look(
        str(lock),
        env=str(options.pop("env", "cp311-cp311-manylinux_2_36_x86_64")),
        install=options.pop("install", None),  # type: ignore[arg-type]
        **options,  # type: ignore[arg-type]
    )
    assert hint is not None and hint.tree is None


def test_pip_variables_are_in_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(LOCK)
    known.remember(look(lock), TREE)
    monkeypatch.setenv("PIP_INDEX_URL", "https://example.org/simple")
    assert look(lock).tree is None


def test_the_timeout_and_cache_dir_are_not(tmp_path: Path) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(LOCK)
    known.remember(look(lock, install=InstallOptions()), TREE)
    assert look(lock, install=InstallOptions(timeout=5, cache_dir=str(tmp_path))).tree == TREE


@pytest.mark.parametrize("line", ["-r base.txt", "-rbase.txt", "--requirement=base.txt", "-c constraints.txt"])
def test_a_file_that_includes_another_is_never_remembered(tmp_path: Path, line: str, cache: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text(f"{line}\napp==1.0 --hash=sha256:{'0' * 64}\n")
    known.remember(look(lock), TREE)
    assert look(lock).tree is None and not cache.exists()


def test_a_file_changed_while_it_was_read_is_not_remembered(tmp_path: Path, cache: Path) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(LOCK)
    hint = look(lock)
    lock.write_text(LOCK.replace("test", "tset"))  # the same size, other bytes: the name may be of these
    known.remember(hint, TREE)
    lock.write_text(LOCK)
    hint = look(lock)
    os.utime(lock, ns=(0, 0))  # the same bytes, but touched since they were read
    known.remember(hint, TREE)
    assert not cache.exists()
    assert look(lock).tree is None


@pytest.mark.parametrize(
    "written",
    [
        b"",
        b"\x00\xff",
        b'{"key": "KEY", "tree": "locked-app-dep-0123456789"',
        b'{"key": "0000", "tree": "locked-app-dep-0123456789"}',
        b'{"key": "KEY", "tree": "app"}',
        b'{"key": "KEY", "tree": "locked-../../etc"}',
        b'{"key": "KEY", "tree": 1}',
        b'{"key": "KEY", "tree": "locked-app-dep-0123456789", "more": 1}',
        b'["KEY", "locked-app-dep-0123456789"]',
        b'{"key": "KEY", "tree": "locked-app-dep-0123456789"}' + b" " * 5000,
    ],
)
def test_an_entry_not_exactly_as_written_is_ignored(tmp_path: Path, cache: Path, written: bytes) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(LOCK)
    hint = look(lock)
    cache.mkdir(parents=True)
    (cache / hint.key).write_bytes(written.replace(b"KEY", hint.key.encode()))
    assert look(lock).tree is None
    known.remember(look(lock), TREE)  # and replaced by a good one
    assert look(lock).tree == TREE


def test_a_fifo_or_a_fifo_entry_never_blocks(tmp_path: Path, cache: Path) -> None:
    fifo = tmp_path / "pylock.toml"
    os.mkfifo(fifo)
    assert known.look(str(fifo), env="cp311-cp311-manylinux_2_36_x86_64", install=None) is None
    lock = tmp_path / "pylock.other.toml"
    lock.write_text(LOCK)
    cache.mkdir(parents=True)
    os.mkfifo(cache / look(lock).key)
    assert look(lock).tree is None


def test_an_unwritable_cache_is_only_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))  # a file where the directory would be
    lock = tmp_path / "pylock.toml"
    lock.write_text(LOCK)
    known.remember(look(lock), TREE)
    assert look(lock).tree is None


def test_an_unchanged_file_is_hashed_once_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from repoinstall import _textfile

    reads: list[str] = []
    read_bytes = _textfile.read_bytes

    def counted(path: str, what: str) -> tuple[bytes, os.stat_result]:
        reads.append(path)
        return read_bytes(path, what)

    monkeypatch.setattr(_textfile, "read_bytes", counted)
    monkeypatch.setattr(known, "_digests", {})
    lock = tmp_path / "pylock.toml"
    lock.write_text(LOCK)
    known.remember(look(lock), TREE)
    reads.clear()
    look(lock), look(lock)
    assert len(reads) == 2  # just written: its ctime may not have moved on for the next write, so read each time
    monkeypatch.setattr(known, "_SETTLED_NS", -1)  # as a file written long before
    first, again = look(lock), look(lock)
    assert len(reads) == 3 and first == again and again.tree == TREE
    lock.write_text(LOCK + " ")
    assert look(lock).tree is None and len(reads) == 4  # a write: read again
