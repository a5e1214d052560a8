"""Bytecode compiled once, after the installer, on several processes: every recorded source gets its unchecked
hash-based pyc, listed with its hash in its distribution's RECORD, the same bytes however the work is shared out."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import os
import signal
import sys
import threading
from pathlib import Path

import pytest
from helpers import pip_target, wait_until
from wheels import make_wheel

from repoinstall import _stop
from repoinstall._disk.dists import check_tree, scan
from repoinstall._errors import Interrupted
from repoinstall._store.bytecode import hash_based


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    directory = tmp_path_factory.mktemp("bytecode-wheels")
    # 92 sources: enough for two compiling interpreters (40 each at least), so the work is really shared out.
    return [make_wheel(directory, "alpha", "1.0", modules=45), make_wheel(directory, "beta", "2.0", modules=45)]


def pycs(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in tree.rglob("*.pyc")}


def test_every_source_is_compiled_and_recorded_the_same_on_any_number_of_processes(
    tmp_path: Path, wheels: list[Path]
) -> None:
    one, many = tmp_path / "one", tmp_path / "many"
    pip_target(one, *wheels, compile=False)
    pip_target(many, *wheels, compile=False)
    assert not pycs(one)  # the installer compiled nothing
    sources = sorted(str(p.relative_to(one)) for p in one.rglob("*.py"))
    assert hash_based(str(one), sys.executable, processes=1) == len(sources)
    assert hash_based(str(many), sys.executable, processes=3) == len(sources)
    compiled = pycs(one)
    assert compiled == pycs(many) and len(compiled) == len(sources)  # byte for byte, whoever compiled which
    for source in sources:
        pyc = Path(importlib.util.cache_from_source(source))
        data = compiled[str(pyc)]
        assert data[4:8] == b"\x01\x00\x00\x00"  # PEP 552: hash-based, unchecked
        assert data[8:16] == importlib.util.source_hash((one / source).read_bytes())
    dists = scan(str(one))
    checked = check_tree(str(one), dists)
    assert not checked  # every pyc is in a RECORD, with its hash
    # The size an install reports is the verify's count: every file of the tree, the pycs and RECORDs too.
    assert checked.size == sum(p.stat().st_size for p in one.rglob("*") if p.is_file() and not p.is_symlink())
    rows = [row for d in dists for row in csv.reader((one / d.dist_info / "RECORD").open())]
    assert all(row[1].startswith("sha256=") for row in rows if row[0].endswith(".pyc"))


def test_compiling_twice_changes_nothing(tmp_path: Path, wheels: list[Path]) -> None:
    tree = tmp_path / "tree"
    pip_target(tree, *wheels, compile=False)
    hash_based(str(tree), sys.executable)
    records = {p: p.read_bytes() for p in tree.glob("*.dist-info/RECORD")}
    before = {p: p.stat().st_mtime_ns for p in tree.rglob("*.pyc")}
    assert hash_based(str(tree), sys.executable) == len(before)
    assert {p: p.stat().st_mtime_ns for p in tree.rglob("*.pyc")} == before  # found so: none written again
    assert {p: p.read_bytes() for p in tree.glob("*.dist-info/RECORD")} == records


def test_a_source_that_does_not_compile_gets_no_pyc_and_the_rest_do(tmp_path: Path, wheels: list[Path]) -> None:
    tree = tmp_path / "tree"
    pip_target(tree, *wheels, compile=False)
    broken = next(tree.glob("alpha/*.py"))
    broken.write_text("def (:\n")  # as a wheel may ship (a Python 2 test file): pip skips it too
    sources = list(tree.rglob("*.py"))
    assert hash_based(str(tree), sys.executable, processes=2) == len(sources) - 1
    assert not Path(tree, importlib.util.cache_from_source(str(broken.relative_to(tree)))).exists()


def test_an_interpreter_that_fails_leaves_no_unrecorded_pyc(tmp_path: Path, wheels: list[Path]) -> None:
    tree = tmp_path / "tree"
    pip_target(tree, *wheels, compile=False)
    # An "interpreter" that writes one pyc and dies, as one killed mid-work would.
    fake = tmp_path / "python"
    victim = next(tree.glob("alpha/*.py"))
    pyc = Path(importlib.util.cache_from_source(str(victim)))
    fake.write_text(f"#!/bin/sh\nmkdir -p {pyc.parent}\necho junk > {pyc}\nkill -9 $$\n")
    fake.chmod(0o755)
    assert hash_based(str(tree), str(fake)) == 0
    assert not pycs(tree)
    assert not check_tree(str(tree), scan(str(tree)))


def test_a_stop_kills_the_compiling_interpreter_at_once_and_the_install_stops(
    tmp_path: Path, wheels: list[Path]
) -> None:
    """SIGTERM or Ctrl-C while bytecode compiles (a batch's stop, as the command line's handler stops the process):
    the interpreter is killed as an installer is, none goes on writing into the staging dir after the run ended,
    and the compile raises ``Interrupted`` at once instead of waiting for it (up to ten minutes)."""
    tree = tmp_path / "tree"
    pip_target(tree, *wheels, compile=False)
    pids = tmp_path / "pids"
    fake = tmp_path / "python"  # an interpreter that hangs: it says its pid, then sleeps as itself
    fake.write_text(f"#!/bin/sh\necho $$ >> {pids}\nexec sleep 120\n")
    fake.chmod(0o755)
    scope = _stop.Scope()
    raised: list[BaseException] = []

    def compile_in_a_batch() -> None:
        _stop.enter(scope)
        try:
            hash_based(str(tree), str(fake), processes=1)
        except Interrupted as error:
            raised.append(error)

    worker = threading.Thread(target=compile_in_a_batch)
    worker.start()
    try:
        wait_until(lambda: pids.is_file() and pids.read_text().strip(), 30, "the interpreter to start")
        (pid,) = map(int, pids.read_text().split())
        scope.stop()
        worker.join(10)
        assert not worker.is_alive(), "the compile still waits for its interpreter after the stop"
        assert len(raised) == 1
        assert not Path(f"/proc/{pid}").exists()  # killed, and reaped
    finally:
        for pid in map(int, pids.read_text().split() if pids.is_file() else []):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        worker.join(30)


def test_an_interpreter_that_dies_leaves_only_its_chunk_and_the_others_compile_the_rest(tmp_path: Path) -> None:
    """Sources are handed out a chunk at a time: one interpreter that dies (killed, out of memory) after taking its
    first chunk costs that chunk's pycs, not its whole share; the other compiles every chunk left, and nothing
    unrecorded stays behind."""
    wheels = [make_wheel(tmp_path, name, "1.0", modules=50) for name in ("gamma", "delta")]
    tree = tmp_path / "tree"
    pip_target(tree, *wheels, compile=False)
    sources = list(tree.rglob("*.py"))
    assert len(sources) >= 80  # two interpreters' worth (40 sources each at least)
    started = tmp_path / "started"
    fake = tmp_path / "python"  # the first interpreter reads its first chunk and dies; the second is the real one
    first = f"if mkdir {started} 2>/dev/null; then head -n 1 > /dev/null; exit 1; fi"
    fake.write_text(f'#!/bin/sh\n{first}\nexec {sys.executable} "$@"\n')
    fake.chmod(0o755)
    compiled = hash_based(str(tree), str(fake), processes=2)
    assert started.is_dir()
    assert 0 < len(sources) - compiled <= len(sources) // 4, compiled  # one chunk lost, not half of them
    assert len(pycs(tree)) == compiled
    assert not check_tree(str(tree), scan(str(tree)))  # every pyc there is recorded, with its hash


def test_every_pyc_written_is_normalised_and_recorded_with_the_normalised_bytes_hash(
    tmp_path: Path, wheels: list[Path]
) -> None:
    import base64
    import hashlib
    import marshal

    from repoinstall._store.marshalnorm import normalize

    tree = tmp_path / "tree"
    pip_target(tree, *wheels, compile=False)
    hash_based(str(tree), sys.executable, processes=2)
    recorded = {row[0]: row[1] for d in scan(str(tree)) for row in csv.reader((tree / d.dist_info / "RECORD").open())}
    written = pycs(tree)
    assert written
    for relative, data in written.items():
        assert normalize(data[16:]) == data[16:], relative  # as marshal wrote it, it has unreferenced FLAG_REFs
        marshal.loads(data[16:])
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert recorded[relative] == f"sha256={digest}"
