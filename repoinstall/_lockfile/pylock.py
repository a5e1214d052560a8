"""A PEP 751 ``pylock.toml``, narrowed to what it installs in one environment.

The installation steps of the specification (https://packaging.python.org/specifications/pylock-toml/), in its
order: ``lock-version`` (major 1; a newer minor is read as 1.0), ``requires-python``, ``environments``, then each
package's ``marker`` (with the ``extras`` and ``dependency_groups`` sets: no extras and ``default-groups`` unless
asked otherwise), its ``requires-python``, one selected entry per name, and its artifact: the best wheel for this
interpreter's tags, else the sdist; or a hashed ``archive``. ``vcs`` and ``directory`` entries are refused: a tree
must be verifiable by hash, and they have none.

Every problem is one line naming the file and the key (``packages[3].wheels[0].hashes``) or the package.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple
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
    _check_lock_version(document)
    if not _optional(document, "created-by", str):  # required by PEP 751; nothing here uses it
        raise _Malformed("created-by", "missing (PEP 751 requires the name of the tool that wrote the lock)")
    requires_python = _optional(document, "requires-python", str)
    if requires_python is not None:
        _check_python(requires_python, environment, "requires-python")
    environments = _strings(document, "environments")
    if environments is not None and not any(
        _marker_holds(text, environment, f"environments[{i}]") for i, text in enumerate(environments)
    ):
        raise _Malformed(
            "environments", f"this environment ({env.describe(environment)}) is none of the lock's {environments!r}"
        )
    extras_set, groups_set = _chosen(document, choice)
    packages = document.get("packages")
    if not isinstance(packages, list):
        raise _Malformed("packages", "missing" if packages is None else "not an array of tables")
    base = Path(os.path.abspath(source)).parent
    selected: dict[str, int] = {}
    found: list[LockedPackage] = []
    skipped: list[str] = []  # the markers that left packages out, to say what the lock is for if none is left
    for index, package in enumerate(packages):
        key = f"packages[{index}]"
        if not isinstance(package, dict):
            raise _Malformed(key, "not a table")
        name_text = _optional(package, "name", str, key)
        if not name_text:
            raise _Malformed(f"{key}.name", "missing")
        name = canonical_name(name_text)
        marker = _optional(package, "marker", str, key)
        if marker is not None and not _marker_holds(marker, environment, f"{key}.marker", extras_set, groups_set):
            skipped.append(marker)
            continue
        where = f"{key} ({name})"
        package_python = _optional(package, "requires-python", str, key)
        if package_python is not None:
            _check_python(package_python, environment, f"{key}.requires-python", where)
        if name in selected:
            raise _Malformed(where, f"selected twice for this environment, also at packages[{selected[name]}]")
        selected[name] = index
        found.append(_artifact(package, name, key, where, _Place(base, roots), environment))
    if not found and skipped:
        shown = "; ".join(dict.fromkeys(skipped[:3]))
        python = env.python_version(environment)
        raise _Malformed(
            "packages",
            f"none is for this environment (Python {python}, {env.describe(environment)}): their markers ask for "
            f"{shown}; make the lock for this Python and platform (uv pip compile --python-version "
            f"{python.major}.{python.minor}), or run the Python it was made for",
        )
    return tuple(sorted(found, key=lambda p: p.name))


def _check_lock_version(document: Mapping[str, Any]) -> None:
    text = document.get("lock-version")
    if text is None:
        raise _Malformed("lock-version", 'missing (a PEP 751 lock file starts with lock-version = "1.0")')
    if not isinstance(text, str) or (match := _LOCK_VERSION.match(text)) is None:
        raise _Malformed("lock-version", f'{text!r} is not a version like "1.0"')
    if int(match.group(1)) != SUPPORTED_MAJOR:
        raise _Malformed("lock-version", f"{text!r} is not supported (this repoinstall reads lock-version 1.x)")


def _chosen(document: Mapping[str, Any], choice: LockChoice) -> tuple[frozenset[str], frozenset[str]]:
    """The extras and dependency groups markers see: those chosen (no extras and ``default-groups`` unless
    chosen), each declared by the lock; every name it does not declare in one line."""
    declared_extras = _strings(document, "extras") or []
    declared_groups = _strings(document, "dependency-groups") or []
    default_groups = _strings(document, "default-groups") or []
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
    groups = frozenset(default_groups) if choice.groups is None else choice.groups
    return choice.extras, frozenset(canonical_name(g) for g in groups)


def _artifact(
    package: Mapping[str, Any], name: str, key: str, where: str, place: _Place, environment: Environment
) -> LockedPackage:
    """The one artifact of a selected package this environment installs."""
    version_text = _optional(package, "version", str, key)
    version = None
    if version_text is not None:
        from packaging.version import InvalidVersion, Version

        try:
            version = Version(version_text)
        except InvalidVersion:
            raise _Malformed(f"{key}.version", f"{version_text!r} is not a PEP 440 version") from None
    index = _optional(package, "index", str, key)
    wheels = package.get("wheels")
    sources = [s for s in ("vcs", "directory", "archive") if s in package]
    if sources and ("sdist" in package or wheels):
        raise _Malformed(where, f"has {sources[0]} and sdist/wheels: PEP 751 allows one kind of source")
    if len(sources) > 1:
        raise _Malformed(where, f"has both {sources[0]} and {sources[1]}: PEP 751 allows one")
    if sources and sources[0] == "directory":
        # The project itself, as `uv export --format pylock.toml` writes a packaged project (editable): a tree is
        # immutable and shared by every pod, a working directory is neither, and nothing can check it by hash.
        raise _Malformed(
            where,
            "directory entries (a project's own source, as `uv export --format pylock.toml` writes it) are not "
            "installed: a tree is immutable and shared by every pod, a directory is neither; make the lock without "
            "it: uv export --format pylock.toml --no-emit-project",
        )
    if sources and sources[0] == "vcs":
        raise _Malformed(
            where,
            f"{sources[0]} entries are not supported: a tree must be verifiable by hash (lock a wheel, an sdist "
            "or a hashed archive instead)",
        )
    if sources:  # an archive: a URL or path and its hashes
        table = _table(package, "archive", key)
        if table.get("subdirectory") is not None:  # a project inside the archive: nothing here can say which
            raise _Malformed(f"{key}.archive.subdirectory", "archives with a subdirectory are not supported")
        filename, url, digest = _file(table, f"{key}.archive", place)
        if version is None:
            parsed = wheel_name(filename)
            named = (parsed.name, parsed.version) if parsed is not None else sdist_name(filename)
            if named is None:
                raise _Malformed(where, "archive has no version and its file name names none")
            version = named[1]
        return LockedPackage(name, str(version), filename, url, (f"sha256:{digest}",), index)
    if wheels is not None:
        if not isinstance(wheels, list) or not all(isinstance(w, dict) for w in wheels):
            raise _Malformed(f"{key}.wheels", "not an array of tables")
        best = _best_wheel(wheels, name, version, key, environment)
        if best is not None:
            filename, url, digest = _file(wheels[best], f"{key}.wheels[{best}]", place)
            parsed = wheel_name(filename)
            assert parsed is not None  # _best_wheel parsed it
            return LockedPackage(name, str(parsed.version), filename, url, (f"sha256:{digest}",), index)
    if "sdist" in package:
        table = _table(package, "sdist", key)
        filename, url, digest = _file(table, f"{key}.sdist", place)
        named = sdist_name(filename)
        if named is None:
            raise _Malformed(f"{key}.sdist", f"{filename!r} is not an sdist file name (name-version.tar.gz or .zip)")
        _consistent(named[0], named[1], name, version, f"{key}.sdist", filename)
        return LockedPackage(name, str(named[1]), filename, url, (f"sha256:{digest}",), index)
    if wheels:
        raise _Malformed(
            where, f"no wheel fits this environment ({env.describe(environment)}) and the lock has no sdist for it"
        )
    raise _Malformed(where, "has no wheels, sdist, archive, directory or vcs entry")


def _best_wheel(
    wheels: Sequence[Mapping[str, Any]], name: str, version: Any, key: str, environment: Environment
) -> int | None:
    """The index of the wheel whose best tag ranks highest for ``environment`` (the first of equals)."""
    ranks = env.tag_ranks(environment)
    best: int | None = None
    best_rank = len(ranks)
    for number, wheel in enumerate(wheels):
        wheel_key = f"{key}.wheels[{number}]"
        filename = _filename(wheel, wheel_key)
        parsed = wheel_name(filename)
        if parsed is None:
            raise _Malformed(wheel_key, f"{filename!r} is not a wheel file name")
        _consistent(parsed.name, parsed.version, name, version, wheel_key, filename)
        rank = min((ranks[t] for t in parsed.tags if t in ranks), default=None)
        if rank is not None and rank < best_rank:
            best, best_rank = number, rank
    return best


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


def _marker_holds(
    text: str,
    environment: Environment,
    key: str,
    extras: frozenset[str] = frozenset(),
    groups: frozenset[str] = frozenset(),
) -> bool:
    try:
        return env.evaluate(env.marker(text), environment, extras=extras, groups=groups)
    except ValueError as error:
        raise _Malformed(key, f"{text!r}: {error}") from None


def _check_python(text: str, environment: Environment, key: str, where: str | None = None) -> None:
    try:
        wanted = env.specifier(text)
    except ValueError as error:
        raise _Malformed(key, f"{text!r} is not a version specifier: {error}") from None
    python = env.python_version(environment)
    if not wanted.contains(python, prereleases=True):
        raise _Malformed(
            where or key,
            f"made for Python {text}, this is {python}: make the lock for this Python (uv pip compile "
            f"--python-version {python.major}.{python.minor}), or run repoinstall with a Python it was made for",
        )


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
