"""A pin: one distribution of a resolved closure, as a value from the input that named it to the record.

A lock file's package, a kept closure's entry, an installer's resolution: each is a :class:`Pin` (canonical
name, version, the artifact's URL or ``""`` for "the index's file of that version", and its hashes). A pin that
names one artifact by one sha256 (:attr:`Pin.sha256`) is a distribution of the store. Pins cross modules as they
are; an installer's command line is rendered from them inside its backend, and the one text form that is kept
on disk (a kept closure, a lock tree's ``lock.json``: the requirement line an installer reads, beside its
``name==version``) is written and read here alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Pin:
    """One distribution pinned: ``name==version`` from the artifact at ``url`` whose hash is one of ``hashes``."""

    #: Canonical (PEP 503) project name.
    name: str
    #: Its version, as the lock or installer gave it (normalized by whoever compares).
    version: str
    #: Where the artifact is: a URL (``file://`` for a local file); ``""``: the index's file of ``version``.
    url: str = ""
    #: ``algorithm:hex`` (lowercase), sorted, no duplicates: one for a lock's chosen artifact, every one a hashed
    #: requirement lists (the installer picks among them) for a pin not resolved to its artifact.
    hashes: tuple[str, ...] = ()

    @property
    def sha256(self) -> str | None:
        """The one artifact this pin names, by its sha256; ``None`` if it names none or several."""
        if len(self.hashes) == 1 and self.hashes[0].startswith("sha256:"):
            return self.hashes[0].removeprefix("sha256:")
        return None

    @property
    def member(self) -> str:
        """``name==version``."""
        return f"{self.name}=={self.version}"

    def public(self) -> Pin:
        """This pin with its URL as a record keeps it (no user, password or token)."""
        from .._urls import without_credentials

        if not self.url:
            return self
        return Pin(self.name, self.version, without_credentials(self.url) or self.url, self.hashes)

    def line(self) -> str:
        """The requirement line an installer reads (``name @ URL --hash=...`` or ``name==version --hash=...``):
        the form a kept closure stores, and the one backends write for ``--no-deps --require-hashes``."""
        head = f"{self.name} @ {self.url}" if self.url else self.member
        return head + "".join(f" --hash={h}" for h in self.hashes)

    @classmethod
    def parse(cls, line: str, member: str) -> Pin | None:
        """The pin a kept ``line`` (see :meth:`line`) and its ``member`` (``name==version``) say; ``None`` if they
        are not one's (then what kept them is not used: the tree is resolved afresh, or its record read)."""
        from .identity import canonical_name

        name, _, version = member.partition("==")
        head, *hashes = line.split(" --hash=")
        who, at, url = head.partition(" @ ")
        if not at:
            who, _, pinned = head.partition("==")
            if pinned.strip() != version:
                return None
        if not (name and version and url.strip() == url) or canonical_name(who.strip()) != canonical_name(name):
            return None
        if any(not h or " " in h for h in hashes):
            return None
        return cls(canonical_name(name), version, url, tuple(sorted(set(hashes))))


def closure_key(pins: Iterable[Pin]) -> str:
    """A hex sha256 of the set of (name, version, hashes): the identity of what ``pins`` install, whatever file
    carried them (its format, order, URLs or comments); a changed hash, version or package gives another."""
    lines = sorted(f"{p.name}=={p.version} {' '.join(sorted(p.hashes))}\n" for p in pins)
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def pins_of(lines: Iterable[str], members: Iterable[str]) -> tuple[Pin, ...] | None:
    """The pins kept as ``lines`` beside their ``members`` (matched by name: the two lists need not be in one
    order); ``None`` unless every line is one member's pin and every member has one."""
    from .identity import canonical_name

    by_name = {canonical_name(member.partition("==")[0]): member for member in members}
    found = []
    for line in lines:
        head = line.split(" --hash=")[0]
        name = head.partition(" @ ")[0] if " @ " in head else head.partition("==")[0]
        member = by_name.pop(canonical_name(name.strip()), None)
        pin = None if member is None else Pin.parse(line, member)
        if pin is None:
            return None
        found.append(pin)
    return tuple(found) if found and not by_name else None
