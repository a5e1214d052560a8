"""Hashed requirements files: pip's ``--require-hashes`` rules, and such a file read as a lock.

pip turns hash-checking mode on when ``--require-hashes`` is given or when any requirement carries a ``--hash``
(a line whose marker is false included). In that mode every requirement that applies here must be pinned with
``==`` (or ``===``) and carry a hash; lines whose marker is false are skipped, as pip skips them. The messages
are pip's own, on one line.

A requirements file is a lock when every requirement that applies here is so pinned and hashed (pip-compile
``--generate-hashes``, ``uv pip compile --generate-hashes``). Extras (``name[extra]==1.0``) are accepted and
left out of the lock: in hash mode every distribution an extra brings must be a pinned, hashed line of its own,
so the extra adds nothing to what is installed.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._errors import RequirementsFileError
from .._requirements import Requested
from . import environment as env
from .environment import THIS, Environment
from .model import HASHED_REQUIREMENTS, Lock, LockedPackage

#: The hash algorithms pip accepts with --hash (pip's STRONG_HASHES).
ALGORITHMS = ("sha256", "sha384", "sha512")

_UNPINNED = "In --require-hashes mode, all requirements must have their versions pinned with ==. These do not:"
_MISSING = (
    "Hashes are required in --require-hashes mode, but they are missing from some requirements (it turns on "
    "automatically when any requirement has a hash):"
)
_SHOWN = 3


def is_hashed_requirements(requested: Sequence[Requested]) -> bool:
    """Whether there are requirements and every one carries a ``--hash``."""
    return bool(requested) and all(r.hashes for r in requested)


def hash_mode(requested: Sequence[Requested], *, require_hashes: bool = False, environment: Environment = THIS) -> bool:
    """Whether pip would install ``requested`` in hash-checking mode: ``require_hashes`` (``--require-hashes`` on
    the command line), or any requirement has a hash. In that mode, :class:`RequirementsFileError` with pip's
    reason unless every requirement that applies here is pinned and hashed; mixed hashed and unhashed lines are
    that error. ``False``: ordinary requirements, nothing hashed."""
    if not (require_hashes or any(r.hashes for r in requested)):
        return False
    applying = [r for r in requested if applies(r, environment)]
    if unpinned := [r for r in applying if r.pinned is None]:
        raise RequirementsFileError(f"{_UNPINNED} {_listed(unpinned)}")
    if missing := [r for r in applying if not r.hashes]:
        raise RequirementsFileError(f"{_MISSING} {_listed(missing)}")
    return True


def lock_from_requirements(requested: Sequence[Requested], source: str, *, environment: Environment = THIS) -> Lock:
    """The lock a fully hashed requirements list (read from ``source``) makes here: one package per requirement
    whose marker holds, sorted by name; :class:`RequirementsFileError` if it is not fully hashed, or names a
    project twice."""
    if not hash_mode(requested, environment=environment):
        raise RequirementsFileError(f"{source}: not a lock: no requirement has a --hash")
    packages: dict[str, tuple[Requested, LockedPackage]] = {}
    for requested_one in requested:
        if not applies(requested_one, environment):
            continue
        if requested_one.name in packages:
            first = packages[requested_one.name][0]
            raise RequirementsFileError(
                f"{requested_one.source}: {requested_one.name} is already pinned at {first.source}; a lock names "
                "each project once"
            )
        packages[requested_one.name] = (requested_one, _package(requested_one))
    if not packages:
        raise RequirementsFileError(f"{source}: no requirement applies to this environment")
    return Lock(source, HASHED_REQUIREMENTS, tuple(p for _, p in sorted(packages.values(), key=lambda i: i[0].name)))


def applies(requested: Requested, environment: Environment = THIS) -> bool:
    """Whether the requirement's marker holds in ``environment`` (no marker: it does)."""
    if requested.requirement is None or requested.requirement.marker is None:
        return True
    if environment == THIS:
        return requested.marker_applies()
    try:
        return env.evaluate(requested.requirement.marker, environment, lock_file=False)
    except ValueError as error:
        raise RequirementsFileError(f"{requested.text!r} ({requested.source}): marker {error}") from None


def _package(requested: Requested) -> LockedPackage:
    hashes = set()
    for value in requested.hashes:
        algorithm, _, digest = value.partition(":")
        if algorithm.lower() not in ALGORITHMS:
            raise RequirementsFileError(
                f"{requested.text!r} ({requested.source}): --hash algorithm {algorithm!r} is not one pip accepts "
                f"({', '.join(ALGORITHMS)})"
            )
        hashes.add(f"{algorithm.lower()}:{digest.lower()}")
    assert requested.pinned is not None  # hash_mode checked
    return LockedPackage(requested.name, str(requested.pinned), None, None, tuple(sorted(hashes)), None)


def _listed(requested: Sequence[Requested]) -> str:
    shown = ", ".join(f"{r.text} ({r.source})" for r in requested[:_SHOWN])
    return shown + (f" and {len(requested) - _SHOWN} more" if len(requested) > _SHOWN else "")
