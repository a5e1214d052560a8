"""Probe the repo's filesystem for what repoinstall relies on, and say what follows from what it finds."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import stat
import time
from typing import NamedTuple

from .._disk import fs as _fs
from .._disk.layout import Layout
from .._errors import RepoUnusable
from .._lock.state import foreign_owner, lock_trees
from .._options import LockSettings


class Finding(NamedTuple):
    check: str
    result: str
    ok: bool
    consequence: str = ""

    def as_dict(self) -> dict[str, object]:
        return self._asdict()


def _errno_name(code: int) -> str:
    return errno.errorcode.get(code, str(code))


def probe(layout: Layout, settings: LockSettings | None = None) -> list[Finding]:
    """Run every probe in a private scratch dir inside the repo, then remove it; judge the attribute cache
    against ``settings`` (the lock timings in use; the defaults if not given)."""
    found: list[Finding] = []
    root = layout.root
    scratch = os.path.join(root, f".doctor.{os.uname().nodename}.{os.getpid()}.{os.urandom(3).hex()}")
    try:
        os.mkdir(scratch)
        try:
            probes = [
                _exclusive(scratch),
                _hard_links(layout),
                _rename_onto_taken(scratch),
                _rename_flags(scratch),
                _mtime_granularity(scratch),
            ]
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    except OSError as error:
        # No scratch dir (read-only, out of inodes), or one but no file written in it (out of blocks or quota).
        # What needs no scratch file (free space above all) is still probed and reported.
        found.append(Finding("writable", f"no ({error.strerror})", False, "nothing can be installed here"))
    else:
        found += [Finding("writable", "yes", True), *probes]
    found.append(_attribute_cache(root, settings or LockSettings()))
    found.append(_free_space(root))
    found += _ownership(layout)
    found.append(_store(layout))
    return found


def _attribute_cache(root: str, settings: LockSettings) -> Finding:
    """How late a holder's heartbeat can look from this client, and whether the stale threshold covers it."""
    from .mounts import heartbeat_lag, mount_of, safe_stale_after

    lag = heartbeat_lag(mount_of(root))
    if lag is None:
        return Finding(
            "attribute cache",
            "unknown filesystem",
            True,
            "keep --stale-after well above the attribute cache time of every client",
        )
    needed = safe_stale_after(settings.heartbeat, lag)
    if settings.stale_after >= needed:
        return Finding("attribute cache", lag.description, True)
    remedy = ", or mount with close-to-open (drop nocto)" if "nocto" in lag.description else ""
    return Finding(
        "attribute cache",
        lag.description,
        False,
        f"--stale-after {settings.stale_after:g} could take over a live holder: use --stale-after {needed:g} or more "
        f"(with --heartbeat {settings.heartbeat:g}){remedy}",
    )


def _exclusive(scratch: str) -> Finding:
    path = os.path.join(scratch, "excl")
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return Finding("O_EXCL create", "exclusive", True)
    except OSError as error:
        return Finding(
            "O_EXCL create",
            f"refused with {_errno_name(error.errno or 0)}",
            True,
            "a losing create reports an unusual error; filelock treats it as taken",
        )
    return Finding("O_EXCL create", "NOT exclusive", False, "two pods can both create one file: locks are unsafe")


def _hard_links(layout: Layout) -> Finding:
    """One link of a file of our own in staging/, where trees are composed from the store (see ``_store.links``).
    Two things rest on it: trees share the store's files (else each is a copy), and the install lock commits."""
    from .._store.links import foreign
    from .._store.links import probe as links

    try:
        found = links(layout)
    except (OSError, RepoUnusable) as error:
        why = error.strerror if isinstance(error, OSError) else str(error)
        return Finding("hard links", f"not probed ({why})", False, "nothing can be installed here")
    if found.taken:
        # Our own file links; another UID's may not (fs.protected_hardlinks): then this UID's trees are copies.
        try:
            theirs = foreign(layout)
        except (OSError, RepoUnusable):
            theirs = None
        if theirs is not None and theirs.refused is not None:
            note = "each tree costs its bytes: run every pod with one runAsUser (and one fsGroup)"
            return Finding("hard links", theirs.describe(), True, note)
        return Finding("hard links", found.describe(), True)
    if found.refused is not None:
        return Finding(
            "hard links",
            found.describe(),
            False,
            "each tree costs its bytes; and the install lock commits by hard link: use --no-lock on one node only, "
            "or another volume",
        )
    return Finding("hard links", found.describe(), False, "lock commits cannot be confirmed on this filesystem")


def _store(layout: Layout) -> Finding:
    """The store's figures: distributions, their bytes, and what hard links save (see ``_store.usage``)."""
    from .._store.usage import usage

    try:
        return Finding("store", usage(layout).summary(), True)
    except OSError as error:
        return Finding("store", f"cannot be read ({error.strerror})", True)


def _rename_onto_taken(scratch: str) -> Finding:
    source, target = os.path.join(scratch, "src"), os.path.join(scratch, "dst")
    os.mkdir(source)
    os.mkdir(target)
    with open(os.path.join(target, "tree-file"), "w") as handle:
        handle.write("published")
    try:
        os.rename(source, target)
    except OSError as error:
        return Finding(
            "rename dir onto a taken name",
            f"refused with {_errno_name(error.errno or 0)}",
            True,
            "a second publisher's rename fails and it uses the published tree",
        )
    return Finding(
        "rename dir onto a taken name",
        "REPLACED it",
        False,
        "a published tree could be replaced: repoinstall cannot be safe here",
    )


def _rename_flags(scratch: str) -> Finding:
    source, target = os.path.join(scratch, "flag-src"), os.path.join(scratch, "flag-dst")
    os.mkdir(source)
    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return Finding("renameat2 flags", "no renameat2 in libc", True, "publishing falls back to plain rename")
    if call(-100, os.fsencode(source), -100, os.fsencode(target), 1) == 0:
        return Finding("renameat2 flags", "supported (RENAME_NOREPLACE)", True)
    code = ctypes.get_errno()
    return Finding(
        "renameat2 flags",
        f"refused with {_errno_name(code)} (as NFS and CephFS do)",
        True,
        "publishing uses plain rename; the lock takes over with link and rename only, so both still work",
    )


def _mtime_granularity(scratch: str) -> Finding:
    path = os.path.join(scratch, "mtime")
    stamps = set()
    for _ in range(5):
        with open(path, "w") as handle:
            handle.write(str(time.monotonic()))
        stamps.add(os.stat(path).st_mtime_ns)
        time.sleep(0.003)
    if all(s % 1_000_000_000 == 0 for s in stamps):
        return Finding("mtime granularity", "1 s or coarser", True, "heartbeat ages are only known to the second")
    return Finding("mtime granularity", "sub-second", True)


def _free_space(root: str) -> Finding:
    info = os.statvfs(root)
    free = info.f_bavail * info.f_frsize
    inodes = info.f_favail
    low = free < 512 << 20
    return Finding(
        "free space",
        f"{free / (1 << 30):.2f} GiB, {inodes} inodes",
        not low,
        "installs will fail with 'filesystem is full'" if low else "",
    )


def _ownership(layout: Layout) -> list[Finding]:
    root = os.stat(layout.root)
    me = os.geteuid()
    mode = stat.S_IMODE(root.st_mode)
    group_writable = bool(mode & stat.S_IWGRP)
    found = [
        Finding(
            "repo ownership",
            f"uid {root.st_uid} gid {root.st_gid} mode {mode:o}",
            True,
            "" if group_writable else "not group-writable: pods with other UIDs of one fsGroup cannot install here",
        )
    ]
    foreign = set()
    root_fd = layout.existing_fd()
    for tid in lock_trees(layout):  # by descriptor: a symlink in locks/ is neither followed nor counted
        with contextlib.suppress(OSError):
            directory = _fs.open_dir(root_fd, layout.lock_dir(tid))
            if directory is None:
                continue
            try:
                owner = foreign_owner(directory, tid.leaf)
            finally:
                os.close(directory)
            if owner is not None:
                foreign.add(owner)
    if foreign:
        uids = ", ".join(str(u) for u in sorted(foreign))
        found.append(
            Finding(
                "lock ownership",
                f"locks owned by uid {uids} (this is uid {me})",
                False,
                "filelock keeps its lock state private (0700): pods with different UIDs cannot share "
                "a lock and go on without it; run every pod with one runAsUser",
            )
        )
    else:
        found.append(Finding("lock ownership", f"all locks owned by uid {me}", True))
    return found
