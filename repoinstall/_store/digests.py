"""What a stored distribution was when it was stored, kept outside its directory: ``store-digests/<env>/<name>/
<leaf>.json`` holds the sha256 of its RECORD, written by the install that published it (after the rename, so only
the publish that won writes it), removed with it.

A stored distribution's directory is named by its artifact's sha256, and ``verify`` hashes every file against
its RECORD. That cannot see a file changed together with its RECORD line, nor a directory whose files were
replaced by another build's (a consistent RECORD of its own): both are self-consistent. Their RECORD is not the
one stored, and this digest, which a writer of the store would have to find and change as well, says so: such a
distribution is reported by ``verify`` and set aside before a new tree links it (:mod:`.audit`).

What it cannot prove: a distribution stored before digests were kept (or whose publisher was killed between the
rename and this write) has none, and ``verify`` says so in a note; and whoever may write the store may write this
file too (it is a check against accidents and careless hands, not a signature). Nothing here stores the
artifact itself, so nothing can tell whether the RECORD was right for the artifact in the first place.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from .. import _log
from .._disk import fs as _fs
from .._disk.layout import STORE_DIGESTS, Layout
from .._errors import RepoUnusable
from .inventory import Stored

_SUFFIX = ".json"
_HEX = re.compile(r"^[0-9a-f]{64}$")


def of_record(dir_fd: int, dist_info: str) -> str | None:
    """The sha256 (hex) of the RECORD of the distribution open at ``dir_fd``, ``None`` if it has none."""
    data = _fs.read_file(dir_fd, (dist_info, "RECORD"), 1 << 26)
    return None if data is None else hashlib.sha256(data).hexdigest()


def keep(layout: Layout, stored: Stored, record: str) -> None:
    """Keep ``record`` (a RECORD's sha256) as ``stored``'s, atomically; best effort: the distribution is stored
    already, and one without a digest is only checked less (verify says so), so something in the way of
    ``store-digests/`` (a file, a symlink, another UID's directory) is a warning, never a failed install."""
    try:
        directory = _fs.make_dirs(layout.writable_fd(), (STORE_DIGESTS, stored.env, stored.name), layout.root)
        try:
            _fs.write_atomic(directory, _name(stored), (json.dumps({"record": record}) + "\n").encode())
        finally:
            os.close(directory)
    except (OSError, RepoUnusable) as error:
        _log.logger().warning("%s: its RECORD digest is not kept (%s)", stored, error)


def kept(layout: Layout, stored: Stored) -> str | None:
    """``stored``'s kept RECORD digest, ``None`` if none is kept (or it is not one)."""
    root = layout.root_fd()
    try:
        # Opened as any repo file: no symlink followed, a FIFO or device not read, a size cap.
        data = None if root is None else _fs.read_file(root, (STORE_DIGESTS, stored.env, stored.name, _name(stored)))
        record = json.loads(data or b"")["record"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if isinstance(record, str) and _HEX.match(record) else None


def forget(layout: Layout, stored: Stored) -> None:
    """Drop ``stored``'s digest: it left the store (set aside, taken by gc)."""
    root = layout.root_fd()
    try:
        directory = None if root is None else _fs.open_dir(root, (STORE_DIGESTS, stored.env, stored.name))
    except OSError:
        return
    if directory is not None:
        try:
            _fs.unlink(directory, _name(stored))
        except OSError:
            pass  # a directory in its place: not a digest, and nothing reads it as one
        finally:
            os.close(directory)


def _name(stored: Stored) -> str:
    return stored.leaf + _SUFFIX
