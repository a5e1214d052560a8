"""What one lock guards, as the lock needs to know it: where its files go, how messages name it, and the version
its holder's owner note carries. A tree's key comes from :func:`tree_key`; anything else lockable on the volume
(an index cache entry, a stored distribution) builds its own :class:`LockKey`, and the same lock serves it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from .._disk.layout import Layout

if TYPE_CHECKING:
    from .._disk.identity import TreeId


class LockKey(NamedTuple):
    """One lockable thing: the lock's directory below the repo (``parts``) and its name there (``leaf``: the lock
    is ``<leaf>.lock``, its state ``<leaf>.lock.rw/``, its owner note ``<leaf>.owner``), how messages name the
    thing (``what``), and the version as its holder spells it, carried in the owner note
    (``None``: the note carries no version)."""

    parts: tuple[str, ...]
    leaf: str
    what: str
    version_text: str | None = None


def tree_key(tid: TreeId) -> LockKey:
    """The key of a tree's lock. The holder's note carries the version as the user spelled it: the lock's name is
    the canonical one."""
    return LockKey(Layout.lock_dir(tid), tid.leaf, str(tid), tid.version_text)
