"""A lock's top-level distributions, for its tree's name: those no other distribution of the lock requires.

Each wheel's ``Requires-Dist`` is read from the store when it is stored there, else from its METADATA on the
index (PEP 658, or the wheel read in ranges, as for ``Requires-Python``). A requirement under an ``extra`` marker
does not count (the extra may not be asked for), nor does an sdist's (its metadata is known only once built) or
a local file's (naming a lock's tree reads none of its local files: see :mod:`repoinstall._lockfile.local`), so
every pod names one closure alike, whatever it has stored. The roots are kept in the repo's index cache as a
fact (a closure's files never change), so naming a lock's tree again reads one small file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from email.parser import BytesHeaderParser
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement

from .._errors import ResolutionError
from .._redact import redact
from .._store.identity import canonical_name
from .._store.pin import Pin, closure_key
from .cache import key_for
from .http import Plan
from .simple import Link
from .wheelmeta import metadata

if TYPE_CHECKING:
    from .cache import IndexCache

#: A stored distribution's ``Requires-Dist``, or ``None`` if the store does not hold the pin's artifact.
Stored = Callable[[Pin], "list[Requirement] | None"]


def kept(pins: Sequence[Pin], cache: IndexCache) -> tuple[str, ...] | None:
    """The roots found for ``pins`` before, from the repo's index cache; ``None`` if none were."""
    entry = cache.read(_key(pins), forever=True)
    roots = entry.get("roots") if entry is not None else None
    if isinstance(roots, list) and roots and all(isinstance(r, str) for r in roots):
        return tuple(roots)
    return None


def keep(pins: Sequence[Pin], cache: IndexCache, roots: Sequence[str]) -> None:
    cache.write(_key(pins), {"roots": list(roots)})


def _key(pins: Sequence[Pin]) -> str:
    return key_for("roots", closure_key(pins))


def requires_plan(pin: Pin, stored: Stored, retries: int) -> Plan[frozenset[str]]:
    """The names ``pin``'s distribution requires (see above); :class:`ResolutionError` if its wheel's METADATA
    cannot be read (its install could not have the file either)."""
    filename = pin.url.rpartition("/")[2]
    if not filename.endswith(".whl") or not pin.url.startswith(("http:", "https:")):
        return frozenset()  # an sdist, or a local file (a lock's, read only where the lock may name it: installing)
    found = stored(pin)
    if found is None:
        data = yield from metadata(Link(filename, pin.url, metadata=True), retries)
        if data is None:
            raise ResolutionError(f"{redact(pin.url)}: its metadata cannot be read, to name the lock's tree")
        try:
            found = [Requirement(line) for line in BytesHeaderParser().parsebytes(data).get_all("Requires-Dist") or []]
        except InvalidRequirement as error:
            raise ResolutionError(f"{redact(pin.url)}: an unreadable Requires-Dist ({error})") from None
    return required_names(found)


def required_names(requirements: Iterable[Requirement]) -> frozenset[str]:
    """The canonical names ``requirements`` ask for, leaving out those under an ``extra`` marker."""
    return frozenset(canonical_name(r.name) for r in requirements if r.marker is None or "extra" not in str(r.marker))


def roots(pins: Sequence[Pin], needs: Mapping[str, frozenset[str]]) -> tuple[str, ...]:
    """The pins' names no other pin requires, sorted (all of them, if they require each other in a circle)."""
    required = {name for pin in pins for name in needs.get(pin.name, frozenset()) if name != pin.name}
    return tuple(sorted({pin.name for pin in pins} - required)) or tuple(sorted(pin.name for pin in pins))
