"""What the store holds for a set of pins: each pin's stored distribution, named by its artifact's sha256."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from ..._disk.pin import Pin
from ..._errors import InvalidRequirement
from ..._store.identity import DistId

T = TypeVar("T")


def plan(env: str, pins: Sequence[Pin]) -> list[tuple[DistId, Pin]] | None:
    """Each pin's stored distribution, in order; ``None`` if a pin does not name one artifact by its sha256 (hashed
    requirements with several hashes: only the installer knows which it takes), so the tree is installed whole."""
    planned = []
    for pin in pins:
        if pin.sha256 is None:
            return None
        planned.append((DistId.of(env, pin.name, pin.version, pin.sha256), pin))
    return planned


def plannable(env: str, pins: Sequence[Pin]) -> list[tuple[DistId, Pin]]:
    """Each pin that names one artifact by its sha256, with its stored distribution, once each and sorted (a batch's
    pins: others are left to their trees' own installs)."""
    found: dict[DistId, Pin] = {}
    for pin in pins:
        if pin.sha256 is None:
            continue
        try:
            found.setdefault(DistId.of(env, pin.name, pin.version, pin.sha256), pin)
        except InvalidRequirement:
            continue
    return sorted(found.items())


def distinct(items: Sequence[T], name: Callable[[T], str]) -> list[list[T]]:
    """``items`` in as few groups as hold each ``name`` once, in order (one ``--target`` dir, or one resolution,
    cannot hold two versions of one project)."""
    groups: list[list[T]] = []
    names: list[set[str]] = []
    for item in items:
        number = next((n for n, held in enumerate(names) if name(item) not in held), len(groups))
        if number == len(groups):
            groups.append([])
            names.append(set())
        groups[number].append(item)
        names[number].add(name(item))
    return groups
