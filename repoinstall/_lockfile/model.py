"""What a lock installs here: its packages and the key that names that set."""

from __future__ import annotations

from dataclasses import dataclass, field

#: The two kinds of lock: a PEP 751 ``pylock.toml``, or a requirements file whose every line is pinned and hashed.
PYLOCK = "pylock"
HASHED_REQUIREMENTS = "hashed-requirements"


@dataclass(frozen=True, slots=True)
class LockedPackage:
    """One distribution the lock installs in this environment."""

    #: Canonical (PEP 503) project name.
    name: str
    #: Normalized PEP 440 version (``str(Version(...))``).
    version: str
    #: The chosen artifact's file name (a wheel or an sdist; for an ``archive`` entry, the last part of its URL or
    #: path); ``None`` for hashed requirements, where the installer picks among the hashes.
    filename: str | None
    #: Where to get the artifact: the lock's URL, or a ``file://`` URL (absolute) for a ``path``, which PEP 751
    #: makes relative to the lock file's directory. ``None``: from the index (hashed requirements).
    url: str | None
    #: ``sha256:<lowercase hex>``: the chosen artifact's sha256 (pylock), or every ``--hash`` of the line,
    #: lowercased, sorted, duplicates dropped (hashed requirements).
    hashes: tuple[str, ...]
    #: The package's index URL when the lock names one (pylock ``index``), else ``None``.
    index: str | None = None


@dataclass(frozen=True)
class Lock:
    """What one lock file installs in one environment."""

    #: The lock file's path as given.
    source: str
    #: :data:`PYLOCK` or :data:`HASHED_REQUIREMENTS`.
    kind: str
    #: Sorted by name; one entry per project.
    packages: tuple[LockedPackage, ...]
    _key: str = field(default="", init=False, repr=False, compare=False)

    def key(self) -> str:
        """A hex sha256 of the set of (name, version, hashes): the identity of the tree this lock installs here.

        Files with the same packages and hashes for this environment give the same key, whatever their kind of
        lock, order, URLs or comments; a changed hash, version or package gives another.
        """
        if not self._key:
            from .._disk.pin import Pin, closure_key

            key = closure_key(Pin(p.name, p.version, p.url or "", p.hashes) for p in self.packages)
            object.__setattr__(self, "_key", key)
        return self._key
