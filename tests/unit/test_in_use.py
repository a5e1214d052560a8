"""gc's and remove's in-use check: which processes of this host use a tree, read from /proc once. Real processes,
each using the tree one way: its working directory, an open file, a mapped file, its PYTHONPATH, its command line."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from repoinstall._ops.inuse import User, Users, scan

#: Says "ready" once it has done what the test wants of it (opened or mapped $F), then sleeps.
_READY = """
import os, sys, time
if os.environ.get("HOW") == "open":
    kept = open(os.environ["F"], "rb")
elif os.environ.get("HOW") == "load":  # a C extension from the tree: dlopen leaves no descriptor, only mappings
    import importlib.util
    spec = importlib.util.spec_from_file_location(os.environ["M"], os.environ["F"])
    kept = importlib.util.module_from_spec(spec)
print("ready", flush=True)
time.sleep(60)
"""


@contextmanager
def _processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for process in started:
            process.kill()
            process.wait()


def _start(
    started: list[subprocess.Popen[str]], *args: str | Path, cwd: Path | None = None, **env: str
) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _READY, *map(str, args)],
        cwd=cwd,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | env,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    started.append(process)
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return process


@pytest.fixture
def trees(tmp_path: Path) -> Path:
    for leaf in ("1.0", "1.0-x", "1.1"):
        (tmp_path / "trees" / "env" / "pkg" / leaf / "pkg").mkdir(parents=True)
        (tmp_path / "trees" / "env" / "pkg" / leaf / "pkg" / "__init__.py").write_text("X = 1\n" * 100)
    return tmp_path / "trees"


def _uses(users: Users, tree: Path) -> dict[int, str]:
    return {user.pid: user.how for user in users.of(str(tree))}


def test_each_way_a_process_uses_a_tree_is_seen_by_one_scan(trees: Path, tmp_path: Path) -> None:
    tree = trees / "env" / "pkg" / "1.0"
    module = tree / "pkg" / "__init__.py"
    (tmp_path / "link").symlink_to(tree)
    extension = tree / "pkg" / Path(str(resource.__file__)).name
    shutil.copyfile(str(resource.__file__), extension)
    with _processes() as started:
        cwd = _start(started, cwd=tree / "pkg")
        opened = _start(started, HOW="open", F=str(module))
        mapped = _start(started, HOW="load", F=str(extension), M="resource")
        path = _start(started, PYTHONPATH=f"/nowhere{os.pathsep}{tmp_path / 'link'}")  # by real path
        relative = _start(started, cwd=tree.parent, PYTHONPATH="1.0")  # against its own working directory
        argument = _start(started, module)
        sibling = _start(started, cwd=trees / "env" / "pkg" / "1.0-x", PYTHONPATH=str(trees / "env" / "pkg" / "1.1"))
        with open(module) as mine:  # this process: never counted
            assert mine.readable()
            begun = time.monotonic()
            users = scan(str(trees))
            took = time.monotonic() - begun
        assert _uses(users, tree) == {
            cwd.pid: "cwd",
            opened.pid: "open file",
            mapped.pid: "mapped file",
            path.pid: "PYTHONPATH",
            relative.pid: "PYTHONPATH",
            argument.pid: "command line",
        }
        # "1.0-x" is not inside "1.0"; each tree's users are its own.
        assert _uses(users, trees / "env" / "pkg" / "1.0-x") == {sibling.pid: "cwd"}
        assert _uses(users, trees / "env" / "pkg" / "1.1") == {sibling.pid: "PYTHONPATH"}
        assert users.of(str(trees / "env" / "pkg" / "2.0")) == []
        assert took < 10, took
        first = users.of(str(tree))[0]
        assert str(first) == f"pid {first.pid} ({first.comm}): {first.how}" and first.comm.startswith("python")


def test_a_process_that_uses_a_tree_several_ways_is_named_once_by_the_first() -> None:
    users = Users(
        "/r/trees",
        [
            ("/r/trees/e/p/1.0/m.so", User(7, "w", "mapped file")),
            ("/r/trees/e/p/1.0", User(7, "w", "PYTHONPATH")),
            ("/r/trees/e/p/1.0/bin", User(7, "w", "cwd")),
            ("/r/trees/e/p/1.0", User(3, "v", "PYTHONPATH")),
            ("/r/trees/e/p/1.0-x/y", User(2, "u", "cwd")),
            ("/r/trees/e/p/1.0.1", User(2, "u", "cwd")),
        ],
    )
    assert users.of("/r/trees/e/p/1.0") == [User(3, "v", "PYTHONPATH"), User(7, "w", "cwd")]
    assert users.of("/r/trees/e/p/1") == []


def test_what_cannot_be_read_is_skipped(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    for pid in ("10", "11", "12"):
        (proc / pid).mkdir(parents=True)
    (proc / "self").mkdir()
    (proc / "10" / "comm").write_text("gone-half\n")  # the rest vanished (exited while read)
    (proc / "11" / "comm").write_text("odd\x1bname\n")
    (proc / "11" / "environ").mkdir()  # unreadable: skipped, the rest still read
    (proc / "11" / "cmdline").write_bytes(b"/r/trees/e/p/1.0/bin/tool\0--flag=/r/trees/e/p/1.0\0")
    (proc / "11" / "cwd").symlink_to("/somewhere/else")
    (proc / "11" / "fd").mkdir()
    (proc / "11" / "fd" / "0").symlink_to("socket:[1234]")
    (proc / "11" / "fd" / "1").symlink_to("/r/trees/e/p/1.0/lib.py (deleted)")
    (proc / "11" / "maps").write_text(
        "7f00-7f10 r-xp 00000000 08:01 42   /r/trees/e/p/1.0/m.so\n7f10-7f20 rw-p 00000000 00:00 0 \n"
    )
    # 12 has no comm: hidden from this UID or gone; nothing else of it is read.
    users = scan("/r/trees", proc=str(proc))
    assert users.of("/r/trees/e/p/1.0") == [User(11, "odd?name", "command line")]
    assert sorted(how for _, user in users._uses for how in [user.how]) == ["command line", "mapped file", "open file"]
    assert scan("/r/trees", proc=str(tmp_path / "no-proc")).of("/r/trees/e/p/1.0") == []
