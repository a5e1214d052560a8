"""A PEP 751 ``pylock.toml``, narrowed to what it installs in one environment.

packaging's ``Pylock.select`` follows the installation steps of the specification
(https://packaging.python.org/specifications/pylock-toml/): ``requires-python``, ``environments``, each package's
``marker`` (with the ``extras`` and ``dependency_groups`` sets: the extras chosen, none by default; the groups
chosen, else ``default-groups``), its ``requires-python``, one selected entry per name, and its artifact: the best
wheel for the environment's tags, else the sdist; or an ``archive``. Around it, this module keeps what a shared,
hash-checked tree needs: ``lock-version`` (major 1; a newer minor is read as 1.0), each key checked with one line
naming it, packages this environment leaves out never read (their artifacts may be for another platform, or
broken there), a sha256 for the chosen artifact, local files only where :mod:`.local` allows, and ``vcs`` and
``directory`` entries refused (nothing to check a hash against).

Every problem is one line naming the file and the key (``packages[3].wheels[0].hashes``) or the package.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import unquote

from .._disk.identity import canonical_name
from .._errors import RequirementsFileError
from .._options import DEFAULT_CHOICE, LockChoice
from . import environment as env
from . import local
from .environment import Environment
from .filenames import sdist_name, wheel_name
from .local import Roots, no_roots
from .model import LockedPackage

if TYPE_CHECKING:
    from packaging.markers import Marker
    from packaging.pylock import Package, Pylock
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

#: The lock-version majors read here. A newer minor of a known major must be read (PEP 751: "tools ... SHOULD
#: warn" at most); an unknown major must be refused.
SUPPORTED_MAJOR = 1
_LOCK_VERSION = re.compile(r"^(\d+)\.(\d+)$")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")


class _Place(NamedTuple):
    """Where the lock's local artifacts may be: below its own directory, or below one of the roots."""

    directory: Path
    #: ``None``: the lock only names a tree (see :func:`repoinstall._lockfile.read.read_lock`).
    roots: Roots | None


class _Malformed(Exception):
    """A problem at a key path; :func:`select` turns it into one :class:`RequirementsFileError` line."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")


def select(
    source: str,
    document: Mapping[str, Any],
    environment: Environment,
    *,
    choice: LockChoice = DEFAULT_CHOICE,
    roots: Roots | None = no_roots,
) -> tuple[LockedPackage, ...]:
    """The packages ``document`` (a parsed ``pylock.toml`` read from ``source``) installs in ``environment``,
    sorted by name, with ``choice``'s extras and dependency groups (see :class:`LockChoice`). A local artifact
    must be a regular file below the lock file's directory or one of ``roots()`` (see :mod:`.local`); ``roots``
    ``None``: not looked at."""
    try:
        return _select(source, document, environment, choice, roots)
    except _Malformed as error:
        raise RequirementsFileError(f"{source}: {error}") from None


def _select(
    source: str,
    document: Mapping[str, Any],
    environment: Environment,
    choice: LockChoice,
    roots: Roots | None,
) -> tuple[LockedPackage, ...]:
    from packaging.markers import UndefinedComparison, UndefinedEnvironmentName
    from packaging.pylock import PylockSelectError

    _check_lock_version(document)
    created_by = _optional(document, "created-by", str)
    if not created_by:  # required by PEP 751; nothing here uses it
        raise _Malformed("created-by", "missing (PEP 751 requires the name of the tool that wrote the lock)")
    requires_python = _optional(document, "requires-python", str)
    environments = _strings(document, "environments")
    _check_chosen(document, choice)
    packages = document.get("packages")
    if not isinstance(packages, list):
        raise _Malformed("packages", "missing" if packages is None else "not an array of tables")
    names = [_name(package, index) for index, package in enumerate(packages)]
    # Which packages: packaging's selection (lock and package requires-python, environments, markers with the
    # chosen extras and groups, one entry per name), over entries that stand for any source, so that nothing of
    # a package this environment leaves out is read (its artifacts may be for a platform, or broken, elsewhere).
    stand_ins = [
        _stand_in(package, name, f"packages[{index}]")
        for index, (package, name) in enumerate(zip(packages, names, strict=True))
    ]
    lock = _lock(created_by, stand_ins, requires_python, environments, document)
    values = env.marker_values(environment)
    try:
        index_of = {id(entry): index for index, entry in enumerate(stand_ins)}
        chosen = [
            index_of[id(entry)]
            for entry, _ in lock.select(
                environment=values,  # type: ignore[arg-type]  # packaging's TypedDict of the same keys
                tags=(),
                extras=choice.extras,
                dependency_groups=choice.groups,
            )
        ]
    except PylockSelectError as error:
        raise _refused_selection(error, packages, names, requires_python, environments, environment) from None
    except (UndefinedComparison, UndefinedEnvironmentName) as error:  # a marker PEP 508 leaves undefined here
        raise _unevaluable(packages, stand_ins, environment, choice, str(error)) from None
    if not chosen and (skipped := [p["marker"] for p in packages if p.get("marker")]):
        shown = "; ".join(dict.fromkeys(skipped[:3]))
        python = env.python_version(environment)
        raise _Malformed(
            "packages",
            f"none is for this environment (Python {python}, {env.describe(environment)}): their markers ask for "
            f"{shown}; make the lock for this Python and platform (uv pip compile --python-version "
            f"{python.major}.{python.minor}), or run the Python it was made for",
        )
    # Which artifact of each: packaging's again (the wheel whose tags rank best here, else the sdist; an
    # archive), over the chosen packages' own sources, each checked first.
    place = _Place(Path(os.path.abspath(source)).parent, roots)
    sources: dict[int, tuple[int, str, Mapping[str, Any]]] = {}  # id(packaging's artifact) -> its package, key, table
    entries = [_entry(packages[index], names[index], index, sources, environment) for index in chosen]
    found = []
    try:
        for _, artifact in _lock(created_by, entries).select(
            environment=values,  # type: ignore[arg-type]
            tags=env.wheel_tags(environment),
            dependency_groups=(),
        ):
            index, key, table = sources[id(artifact)]
            found.append(_locked(packages[index], names[index], index, key, table, place))
    except PylockSelectError as error:  # no wheel fits, and no sdist
        number = _index(error)
        where = f"packages[{chosen[number]}] ({names[chosen[number]]})" if number is not None else "packages"
        raise _Malformed(
            where, f"no wheel fits this environment ({env.describe(environment)}) and the lock has no sdist for it"
        ) from None
    return tuple(sorted(found, key=lambda p: p.name))


def _check_lock_version(document: Mapping[str, Any]) -> None:
    text = document.get("lock-version")
    if text is None:
        raise _Malformed("lock-version", 'missing (a PEP 751 lock file starts with lock-version = "1.0")')
    if not isinstance(text, str) or (match := _LOCK_VERSION.match(text)) is None:
        raise _Malformed("lock-version", f'{text!r} is not a version like "1.0"')
    if int(match.group(1)) != SUPPORTED_MAJOR:
        raise _Malformed("lock-version", f"{text!r} is not supported (this repoinstall reads lock-version 1.x)")


def _check_chosen(document: Mapping[str, Any], choice: LockChoice) -> None:
    """Every extra and dependency group chosen is one the lock declares; those it does not, in one line."""
    declared_extras = _strings(document, "extras") or []
    declared_groups = _strings(document, "dependency-groups") or []
    unknown = [
        f"--{kind} {name}"
        for kind, asked, declared in (
            ("extra", choice.extras, declared_extras),
            ("group", choice.groups or frozenset(), declared_groups),
        )
        for name in sorted(asked - {canonical_name(one) for one in declared})
    ]
    if unknown:
        what = " or ".join(dict.fromkeys(flag.split()[0][2:] for flag in unknown))
        has = (
            f"extras: {', '.join(declared_extras) or 'none'}; dependency-groups: {', '.join(declared_groups) or 'none'}"
        )
        raise _Malformed(", ".join(unknown), f"the lock declares no such {what} ({has})")


def _lock(
    created_by: str,
    packages: list[Package],
    requires_python: str | None = None,
    environments: list[str] | None = None,
    document: Mapping[str, Any] | None = None,
) -> Pylock:
    """packaging's lock of ``packages``, with the document's lock-wide keys (each checked before)."""
    from packaging.pylock import Pylock
    from packaging.version import Version

    return Pylock(
        lock_version=Version("1.0"),  # a newer 1.x is read as 1.0 (checked before)
        environments=[_marker(text, f"environments[{i}]") for i, text in enumerate(environments or ())] or None,
        requires_python=None if requires_python is None else _specifier(requires_python, "requires-python"),
        extras=None,
        dependency_groups=None,
        default_groups=None if document is None else _strings(document, "default-groups"),
        created_by=created_by,
        packages=packages,
    )


def _name(package: Any, index: int) -> str:
    key = f"packages[{index}]"
    if not isinstance(package, dict):
        raise _Malformed(key, "not a table")
    name_text = _optional(package, "name", str, key)
    if not name_text:
        raise _Malformed(f"{key}.name", "missing")
    return canonical_name(name_text)


def _stand_in(package: Mapping[str, Any], name: str, key: str) -> Package:
    """The package as its selection sees it: name, marker and requires-python, and a source that is none."""
    from packaging.pylock import Package, PackageArchive

    marker = _optional(package, "marker", str, key)
    requires_python = _optional(package, "requires-python", str, key)
    return Package(
        name=name,  # type: ignore[arg-type]  # canonical already
        marker=None if marker is None else _marker(marker, f"{key}.marker"),
        requires_python=None if requires_python is None else _specifier(requires_python, f"{key}.requires-python"),
        archive=PackageArchive(url="-", hashes={}),
    )


def _entry(
    package: Mapping[str, Any],
    name: str,
    index: int,
    sources: dict[int, tuple[int, str, Mapping[str, Any]]],
    environment: Environment,
) -> Package:
    """A chosen package with its sources, checked: one kind of source, no vcs or directory entry, each wheel of
    this package. ``sources`` learns which table each of packaging's artifacts stands for. Only the wheels with a
    tag ``environment`` takes are handed on: packaging picks the best of those alone anyway, and parses every wheel
    name it is given (a lock's 20 wheels per package for as many platforms cost 20 parses for one answer)."""
    from packaging.pylock import Package, PackageArchive, PackageSdist, PackageWheel

    key = f"packages[{index}]"
    where = f"{key} ({name})"
    version = _version(package, key)
    wheels = package.get("wheels")
    kinds = [s for s in ("vcs", "directory", "archive") if s in package]
    if kinds and ("sdist" in package or wheels):
        raise _Malformed(where, f"has {kinds[0]} and sdist/wheels: PEP 751 allows one kind of source")
    if len(kinds) > 1:
        raise _Malformed(where, f"has both {kinds[0]} and {kinds[1]}: PEP 751 allows one")
    if kinds and kinds[0] == "directory":
        # The project itself, as `uv export --format pylock.toml` writes a packaged project (editable): a tree is
        # immutable and shared by every pod, a working directory is neither, and nothing can check it by hash.
        raise _Malformed(
            where,
            "directory entries (a project's own source, as `uv export --format pylock.toml` writes it) are not "
            "installed: a tree is immutable and shared by every pod, a directory is neither; make the lock without "
            "it: uv export --format pylock.toml --no-emit-project",
        )
    if kinds and kinds[0] == "vcs":
        raise _Malformed(
            where,
            f"{kinds[0]} entries are not supported: a tree must be verifiable by hash (lock a wheel, an sdist "
            "or a hashed archive instead)",
        )
    archive = sdist = None
    found_wheels = []
    if kinds:
        table = _table(package, "archive", key)
        if table.get("subdirectory") is not None:  # a project inside the archive: nothing here can say which
            raise _Malformed(f"{key}.archive.subdirectory", "archives with a subdirectory are not supported")
        archive = PackageArchive(url="-", hashes={})
        sources[id(archive)] = (index, f"{key}.archive", table)
    if wheels is not None:
        if not isinstance(wheels, list) or not all(isinstance(w, dict) for w in wheels):
            raise _Malformed(f"{key}.wheels", "not an array of tables")
        ranks = env.tag_ranks(environment)
        for number, table in enumerate(wheels):
            wheel_key = f"{key}.wheels[{number}]"
            filename = _filename(table, wheel_key)
            parsed = wheel_name(filename)
            if parsed is None:
                raise _Malformed(wheel_key, f"{filename!r} is not a wheel file name")
            _consistent(parsed.name, parsed.version, name, version, wheel_key, filename)
            if not any(tag in ranks for tag in parsed.tags):
                continue
            wheel = PackageWheel(name=filename, hashes={})
            sources[id(wheel)] = (index, wheel_key, table)
            found_wheels.append(wheel)
    if "sdist" in package:
        table = _table(package, "sdist", key)
        sdist = PackageSdist(name=_filename(table, f"{key}.sdist"), hashes={})
        sources[id(sdist)] = (index, f"{key}.sdist", table)
    if archive is None and sdist is None and not found_wheels:
        if wheels:
            raise _Malformed(
                where, f"no wheel fits this environment ({env.describe(environment)}) and the lock has no sdist for it"
            )
        raise _Malformed(where, "has no wheels, sdist, archive, directory or vcs entry")
    return Package(name=name, archive=archive, sdist=sdist, wheels=found_wheels or None)  # type: ignore[arg-type]


def _locked(
    package: Mapping[str, Any], name: str, index: int, key: str, table: Mapping[str, Any], place: _Place
) -> LockedPackage:
    """The chosen artifact (at ``key``) of a package, as installed: its file checked (see :func:`_file`)."""
    where = f"packages[{index}] ({name})"
    version = _version(package, f"packages[{index}]")
    lock_index = _optional(package, "index", str, f"packages[{index}]")
    filename, url, digest = _file(table, key, place)
    if key.endswith(".sdist"):
        named = sdist_name(filename)
        if named is None:
            raise _Malformed(key, f"{filename!r} is not an sdist file name (name-version.tar.gz or .zip)")
        _consistent(named[0], named[1], name, version, key, filename)
        version = named[1]
    elif version is None:  # a wheel names its version; an archive's file name may
        parsed = wheel_name(filename)
        named = (parsed.name, parsed.version) if parsed is not None else sdist_name(filename)
        if named is None:
            raise _Malformed(where, "archive has no version and its file name names none")
        version = named[1]
    return LockedPackage(name, str(version), filename, url, (f"sha256:{digest}",), lock_index)


def _version(package: Mapping[str, Any], key: str) -> Version | None:
    text = _optional(package, "version", str, key)
    if text is None:
        return None
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        raise _Malformed(f"{key}.version", f"{text!r} is not a PEP 440 version") from None


def _refused_selection(
    error: Exception,
    packages: list[Any],
    names: list[str],
    requires_python: str | None,
    environments: list[str] | None,
    environment: Environment,
) -> _Malformed:
    """packaging's refusal of the lock for this environment in this module's words: which key, and what to do.
    packaging names the package (``packages[N]``) a rule refused; a lock-wide refusal names none."""
    python = env.python_version(environment)
    numbers = [int(n) for n in re.findall(r"packages\[(\d+)\]", str(error))]
    if len(numbers) == 2:  # one name selected twice
        first, second = sorted(numbers)
        return _Malformed(
            f"packages[{second}] ({names[second]})", f"selected twice for this environment, also at packages[{first}]"
        )
    if len(numbers) == 1:  # the package's requires-python
        return _Malformed(f"packages[{numbers[0]}] ({names[numbers[0]]})", _made_for(packages[numbers[0]], python))
    if requires_python is not None and "python_full_version" in str(error):
        return _Malformed("requires-python", _made_for({"requires-python": requires_python}, python))
    if environments is not None:
        return _Malformed(
            "environments", f"this environment ({env.describe(environment)}) is none of the lock's {environments!r}"
        )
    return _Malformed("packages", str(error))


def _unevaluable(
    packages: list[Any], stand_ins: list[Package], environment: Environment, choice: LockChoice, error: str
) -> _Malformed:
    """Which package's marker cannot be evaluated here (asked again, one by one, to name it)."""
    for number, entry in enumerate(stand_ins):
        if entry.marker is not None:
            try:
                env.evaluate(entry.marker, environment, extras=choice.extras, groups=choice.groups or frozenset())
            except ValueError as why:
                return _Malformed(f"packages[{number}].marker", f"{packages[number]['marker']!r}: {why}")
    return _Malformed("packages", f"a marker cannot be evaluated: {error}")


def _made_for(table: Mapping[str, Any], python: Version) -> str:
    return (
        f"made for Python {table.get('requires-python')}, this is {python}: make the lock for this Python (uv pip "
        f"compile --python-version {python.major}.{python.minor}), or run repoinstall with a Python it was made for"
    )


def _index(error: Exception) -> int | None:
    """The package packaging's refusal names (``packages[N]``), if it names one."""
    found = re.search(r"packages\[(\d+)\]", str(error))
    return None if found is None else int(found.group(1))


def _marker(text: str, key: str) -> Marker:
    try:
        return env.marker(text)
    except ValueError as error:
        raise _Malformed(key, f"{text!r}: {error}") from None


def _specifier(text: str, key: str) -> SpecifierSet:
    """A ``requires-python`` value, pre-releases of Python included (3.14.0rc1 is a 3.14)."""
    from packaging.specifiers import SpecifierSet

    try:
        env.specifier(text)
    except ValueError as error:
        raise _Malformed(key, f"{text!r} is not a version specifier: {error}") from None
    return SpecifierSet(text, prereleases=True)


def _consistent(found_name: str, found_version: Any, name: str, version: Any, key: str, filename: str) -> None:
    if found_name != name:
        raise _Malformed(key, f"{filename!r} is not a file of {name!r}")
    if version is not None and found_version != version:
        raise _Malformed(key, f"{filename!r} is not version {version} of {name!r}")


def _filename(table: Mapping[str, Any], key: str) -> str:
    """The artifact's file name: ``name``, else the last part of its ``path``, else of its ``url``."""
    name = _optional(table, "name", str, key)
    path = _optional(table, "path", str, key)
    url = _optional(table, "url", str, key)
    if not path and not url:
        raise _Malformed(key, "has neither path nor url")
    if name is None and path:
        name = path.replace("\\", "/").rsplit("/", 1)[-1]
    elif name is None:  # the URL path's last part (urlsplit costs more than the rest of the wheel's checks)
        if "@" in url:  # a password's "/", "?" or "#" would end the path early: refused, hidden, before any name
            try:
                local.readable(url)
            except ValueError as error:
                raise _Malformed(f"{key}.url", str(error)) from None
        last = url.partition("#")[0].partition("?")[0].rsplit("/", 1)[-1]
        name = unquote(last) if "%" in last else last
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise _Malformed(key, f"{name!r} is not a file name")
    return str(name)


def _file(table: Mapping[str, Any], key: str, place: _Place) -> tuple[str, str, str]:
    """(file name, URL, sha256 hex) of a chosen artifact. A ``path`` wins over a ``url`` (as pip does) and becomes
    an absolute ``file://`` URL, relative to the lock file's directory. What it may name: see :mod:`.local`."""
    filename = _filename(table, key)
    path = _optional(table, "path", str, key)
    try:
        if path:
            url = local.from_path(path, place.directory, place.roots)
        else:
            url = local.from_url(str(_optional(table, "url", str, key)), place.directory, place.roots)
    except ValueError as error:
        raise _Malformed(f"{key}.path" if path else f"{key}.url", str(error)) from None
    hashes = table.get("hashes")
    if not isinstance(hashes, dict) or not all(isinstance(v, str) for v in hashes.values()):
        raise _Malformed(f"{key}.hashes", "missing" if hashes is None else "not a table of algorithm = hex digest")
    digest = hashes.get("sha256")
    if digest is None:
        raise _Malformed(f"{key}.hashes", f"{filename} has no sha256: a tree must be verifiable by hash")
    if not _SHA256.match(digest):
        raise _Malformed(f"{key}.hashes.sha256", f"{digest[:80]!r} is not a sha256 hex digest")
    return filename, url, digest.lower()


def _optional(table: Mapping[str, Any], name: str, kind: type, parent: str = "") -> Any:
    value = table.get(name)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool) != (kind is bool)):
        raise _Malformed(f"{parent}.{name}" if parent else name, f"not a {kind.__name__} ({type(value).__name__})")
    return value


def _strings(table: Mapping[str, Any], name: str) -> list[str] | None:
    value = table.get(name)
    if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
        raise _Malformed(name, "not an array of strings")
    return value


def _table(table: Mapping[str, Any], name: str, parent: str) -> Mapping[str, Any]:
    value = table.get(name)
    if not isinstance(value, dict):
        raise _Malformed(f"{parent}.{name}", "not a table")
    return value
