"""What a lock's files on the volume are and say, as values, read without taking part in the lock: the face of
``_lock`` for the operator commands (lock info, gc, doctor) and the index cache. Nothing outside ``_lock`` names
a lock's file or knows its suffixes; :mod:`.filelock_rw` alone knows filelock's format behind these.

A lock at ``<leaf>`` in its directory has three names (:class:`LockFiles`): its state (filelock's directory), its
holder's owner note, and ``<leaf>.lock``, where no lock keeps anything. :func:`entry` says which of them a directory
entry is, so that a sweep of a lock directory classifies what it finds without parsing names itself.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from .._disk.layout import OWNER_SUFFIX
from .filelock_rw import (
    LOCK_SUFFIX,
    STATE_SUFFIX,
    Members,
    Record,
    activity,
    foreign_owner,
    last_sign_of_life,
    lock_trees,
    members,
    record_of,
    state_name,
)

__all__ = [
    "LockEntry",
    "LockFiles",
    "Members",
    "Part",
    "Record",
    "entry",
    "foreign_owner",
    "last_sign_of_life",
    "lock_trees",
    "members",
    "record_of",
]


class LockFiles(NamedTuple):
    """The names of one lock's files in its directory, the lock named by its ``leaf``."""

    leaf: str

    @property
    def state(self) -> str:
        """filelock's state directory: who holds the lock, who waits, its log."""
        return state_name(self.leaf)

    @property
    def note(self) -> str:
        """The holder's owner note (host, pid, since, the tree as it spelled it)."""
        return self.leaf + OWNER_SUFFIX

    @property
    def activity(self) -> str:
        """The path, relative to the lock's directory, whose mtime is the lock's last activity."""
        return activity(self.state)


class Part(enum.Enum):
    """Which of a lock's names a directory entry is."""

    STATE = "state"
    NOTE = "note"
    #: Something at ``<leaf>.lock``: filelock keeps nothing there (its state is the STATE entry), so it is nobody's.
    STRAY = "stray"


class LockEntry(NamedTuple):
    part: Part
    files: LockFiles


def entry(name: str) -> LockEntry | None:
    """What the directory entry ``name`` is of a lock, or ``None`` if it is none of a lock's names."""
    if name.endswith(STATE_SUFFIX):
        return LockEntry(Part.STATE, LockFiles(name.removesuffix(STATE_SUFFIX)))
    if name.endswith(OWNER_SUFFIX):
        return LockEntry(Part.NOTE, LockFiles(name.removesuffix(OWNER_SUFFIX)))
    if name.endswith(LOCK_SUFFIX):
        return LockEntry(Part.STRAY, LockFiles(name.removesuffix(LOCK_SUFFIX)))
    return None
