"""The repo's wheel cache hands out a kept wheel only as a private copy whose bytes hash to what they were stored
under (and to the index's sha256, when it gave one): damaged, truncated, replaced, planted or garbled is a miss."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from repoinstall._disk.layout import Layout
from repoinstall._disk.wheelcache import CACHE_DIR, Kept, copy_checked, keep, recall, remember

BODY = b"PK" + os.urandom(4096)
SHA = hashlib.sha256(BODY).hexdigest()
NAME = "demo_pkg-1.0-py3-none-any.whl"
SOURCES = ("https://user:secret@example/simple",)


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[Layout]:
    opened = Layout(tmp_path / "repo")
    opened.writable_fd()
    yield opened
    opened.close()


def _stored(tmp_path: Path) -> Path:
    return tmp_path / "repo" / os.path.join(*CACHE_DIR) / f"{SHA}.whl"


def test_a_kept_wheel_is_copied_whole_and_checked(layout: Layout, tmp_path: Path) -> None:
    assert keep(layout, BODY) == SHA
    copy = copy_checked(layout, Kept("https://example/x.whl", NAME, SHA), str(tmp_path / "copy"))
    assert copy is not None and Path(copy).read_bytes() == BODY and Path(copy).name == NAME
    assert Path(copy).stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("damage", ["flipped", "truncated", "gone", "fifo", "symlink", "index-disagrees"])
def test_a_kept_wheel_that_is_not_what_was_stored_is_a_miss(layout: Layout, tmp_path: Path, damage: str) -> None:
    keep(layout, BODY)
    stored = _stored(tmp_path)
    index_sha256 = None
    if damage == "flipped":
        stored.write_bytes(BODY[:100] + bytes([BODY[100] ^ 1]) + BODY[101:])
    elif damage == "truncated":
        stored.write_bytes(BODY[:-1])
    elif damage == "gone":
        stored.unlink()
    elif damage == "fifo":
        stored.unlink()
        os.mkfifo(stored)
    elif damage == "symlink":
        elsewhere = tmp_path / "elsewhere.whl"
        elsewhere.write_bytes(BODY)
        stored.unlink()
        stored.symlink_to(elsewhere)
    else:
        index_sha256 = "0" * 64
    into = tmp_path / "copy"
    assert copy_checked(layout, Kept("https://example/x.whl", NAME, SHA, index_sha256), str(into)) is None
    assert not (into / NAME).exists()  # nothing of it is left for anyone to take


def test_what_a_pin_resolved_to_is_recalled_for_the_same_sources_only(layout: Layout) -> None:
    kept = Kept("https://example/demo_pkg-1.0-py3-none-any.whl", NAME, SHA, None)
    remember(layout, SOURCES, "demo-pkg", "1.0", kept)
    assert recall(layout, SOURCES, "demo-pkg", "1.0") == kept
    assert recall(layout, ("https://other/simple",), "demo-pkg", "1.0") is None
    assert recall(layout, SOURCES, "demo-pkg", "1.1") is None
    # The sources' credentials are not part of what is written.
    assert not any(b"secret" in p.read_bytes() for p in Path(layout.root, "cache").rglob("*") if p.is_file())


@pytest.mark.parametrize(
    "row",
    [
        ["u", "../../etc/passwd.whl", SHA, None],
        ["u", ".hidden.whl", SHA, None],
        ["u", NAME, "not-a-sha", None],
        ["u", "demo.tar.gz", SHA, None],
        ["u", NAME, SHA, 5],
        ["u", NAME, SHA],
    ],
)
def test_a_garbled_fact_is_a_miss_never_a_path(layout: Layout, row: list[object]) -> None:
    from repoinstall._disk.wheelcache import _fact

    directory = Path(layout.root, *CACHE_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / _fact(SOURCES, "demo-pkg", "1.0")).write_text(json.dumps({"wheel": row}))
    assert recall(layout, SOURCES, "demo-pkg", "1.0") is None


def test_gc_takes_old_wheels_facts_and_temporaries_only(layout: Layout, tmp_path: Path) -> None:
    from repoinstall._disk.wheelcache import garbage

    keep(layout, BODY)
    remember(layout, SOURCES, "demo-pkg", "1.0", Kept("u", NAME, SHA))
    directory = tmp_path / "repo" / os.path.join(*CACHE_DIR)
    (directory / ".x.whl.abc.tmp").write_bytes(b"")
    (directory / "keep-me.txt").write_bytes(b"")  # not the cache's: never named
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert list(garbage(fd, lambda name: False)) == []
        found = {entry: kind for entry, kind, _ in garbage(fd, lambda name: True)}
    finally:
        os.close(fd)
    assert found == {
        f"{SHA}.whl": "cache",
        next(p.name for p in directory.glob("*.json")): "cache",
        ".x.whl.abc.tmp": "temp",
    }
