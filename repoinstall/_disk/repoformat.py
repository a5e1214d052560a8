"""The repo's own statement of its on-disk format and lock protocol, so pods of different releases never share a repo
in ways one of them does not speak.

    <repo>/format    {"format": 1, "locks": "filelock-rw/1", "written_by": "repoinstall 0.4.0"}

Written once, by the first writer that finds it missing (a hard link: a second writer never replaces it), and read
by every writer before it takes a lock or writes anything, and by the commands that read a repo. A repo written
by a release before this file existed has the format 1 layout: the first newer writer states it.

A format this code does not speak (a newer release's, or locks another protocol takes) is one line and exit 2,
with nothing written. The warm check never reads it: a repo where every tree asked for is installed costs no
extra open.
"""

from __future__ import annotations

import json

from .._errors import RepoUnusable
from . import fs as _fs

#: The layout this code reads and writes (see layout.py); bumped by a change an older release would misread.
FORMAT = 1
#: The formats this code can share a repo in: what it writes, and what it reads and writes unchanged.
SPOKEN = frozenset({1})
#: The lock protocol every writer of this repo speaks: filelock's soft read-write locks, whose snapshots and holder
#: records name it (their format is :mod:`repoinstall._lock.filelock_rw`'s). A filelock speaking another one is a
#: new repo format: pods of two protocols must never share a repo.
PROTOCOL = "filelock-rw/1"


def _statement() -> bytes:
    from .._version import __version__

    text = json.dumps({"format": FORMAT, "locks": PROTOCOL, "written_by": f"repoinstall {__version__}"})
    return (text + "\n").encode()


def check(root_fd: int, root: str, name: str, *, write: bool) -> None:
    """Refuse (:class:`RepoUnusable`, exit 2) a repo whose format or lock protocol this code does not speak. ``write``:
    state ours if the repo states none yet (the first writer's wins, and is then checked like any other). ``name``:
    the file's name at the repo's top (the layout's ``FORMAT_FILE``)."""
    data = _fs.read_file(root_fd, (name,), 1 << 12)
    if data is None and write and not _fs.write_once(root_fd, name, _statement()):
        data = _fs.read_file(root_fd, (name,), 1 << 12)  # a peer stated it first: theirs counts
    if data is None:
        return
    try:
        found = json.loads(data)
        version, locks, writer = found["format"], found["locks"], str(found.get("written_by", "an unknown release"))
    except (ValueError, TypeError, KeyError):
        raise RepoUnusable(f"repo {root}: its {name} file is unreadable; refusing to write in it") from None
    if type(version) is not int or version not in SPOKEN or locks != PROTOCOL:
        stated = f"format {json.dumps(version)} with {json.dumps(locks)} locks (stated by {writer})"
        raise RepoUnusable(
            f"repo {root} is in {stated}; this repoinstall speaks format {FORMAT} with {json.dumps(PROTOCOL)} "
            "locks: run a release that speaks the repo's format"
        )
