"""What the user asked for: PEP 508 specs from the command line and from pip-style requirements files."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from packaging.version import InvalidVersion, Version

from ._disk.identity import MAX_NAME_AND_LEAF, TreeId, canonical_name
from ._errors import InvalidRequirement, RequirementsFileError
from ._options import FileIndex
from ._redact import redact_all

if TYPE_CHECKING:
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    from ._disk.pin import Pin

_HASH = re.compile(r"^[a-z0-9]+:[0-9a-fA-F]+$")
_ARCHIVE_SUFFIXES = (".whl", ".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tar", ".egg")
_MAX_SPEC = 1000
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_PLAIN = re.compile(r"^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[([^\]]+)\])?\s*==\s*([A-Za-z0-9.!+_-]+)$")


class Requested(NamedTuple):
    """One requirement as asked: who (canonical name, extras), which version(s), its hashes and its origin."""

    text: str
    name: str
    extras: tuple[str, ...]
    pinned: Version | None
    hashes: tuple[str, ...] = ()
    source: str = "command line"
    #: The full PEP 508 parse; ``None`` for a plain ``name[extras]==version``, which needs nothing more.
    requirement: Requirement | None = None
    #: For a set installed together (see ``_install.together``): the pinned requirements it holds; for a lock
    #: file's tree (see ``_install.locked``): ``name==version`` of each package it installs.
    members: tuple[str, ...] = ()
    #: For a lock file's tree: its resolved closure, one pin per package (its artifact's URL, if known, and
    #: hashes), installed as they are with ``--no-deps``.
    locked: tuple[Pin, ...] = ()
    #: The index lines of the requirements file it was read from (``None``: none, or not from a file): its tree
    #: is resolved and installed with them (see :func:`repoinstall._options.for_file`).
    file_index: FileIndex | None = None

    def pinned_version(self) -> Version | None:
        """The one version an ``==X`` or ``===X`` spec names, or ``None`` for a range."""
        return self.pinned

    def specifier(self) -> SpecifierSet:
        from packaging.specifiers import SpecifierSet

        if self.requirement is not None:
            return self.requirement.specifier
        return SpecifierSet(f"=={self.pinned}")

    def choose(self, versions: Iterable[Version], *, pre: bool = False) -> list[Version]:
        """The versions this spec admits, best first (see :func:`choose`)."""
        return choose(versions, self.specifier(), pre=pre)

    def marker_applies(self) -> bool:
        if self.requirement is None or self.requirement.marker is None:
            return True
        from packaging.markers import UndefinedComparison, UndefinedEnvironmentName

        try:
            return self.requirement.marker.evaluate({"extra": ""})
        except (UndefinedComparison, UndefinedEnvironmentName) as error:
            raise InvalidRequirement(f"{self.text!r} ({self.source}): marker cannot be evaluated: {error}") from None


def choose(versions: Iterable[Version], specifier: SpecifierSet, *, pre: bool = False) -> list[Version]:
    """The versions ``specifier`` admits, best first, with pip's pre-release rule: pre-releases with ``--pre``,
    when the spec names one, or when nothing else matches. Installed trees and index answers both go through
    here, so offline-first and the index pick by the same rule."""
    return sorted(specifier.filter(versions, prereleases=True if pre else None), reverse=True)


def parse_spec(spec: str, source: str = "command line", hashes: Iterable[str] = ()) -> Requested:
    """Parse one spec; a clear :class:`InvalidRequirement` for anything that is not ``name[extras] spec; marker``.

    Results are immutable and cached: a worker asks for the same few specs over and over, and parsing one
    costs more than the whole installed-check.
    """
    return _parse_spec(spec, source, tuple(hashes))


@functools.lru_cache(maxsize=4096)
def _parse_spec(spec: str, source: str, hashes: tuple[str, ...]) -> Requested:
    shown = redact_all(spec)  # before it is cut: a cut URL could keep a password and lose its "@"
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    where = f"{shown!r} ({source})"
    if not spec.strip():
        raise InvalidRequirement(f"empty requirement ({source})")
    if len(spec) > _MAX_SPEC:
        raise InvalidRequirement(f"{where}: requirement is longer than {_MAX_SPEC} characters")
    if spec.lstrip().startswith("-"):
        raise InvalidRequirement(f"{where}: looks like an option, not a requirement (options are not accepted here)")
    if any(ord(ch) < 32 for ch in spec):
        raise InvalidRequirement(f"{where}: contains control characters")
    if "://" in spec or spec.lstrip().startswith(("git+", "hg+", "svn+", "bzr+")):
        raise InvalidRequirement(f"{where}: direct URL and VCS requirements are not supported; name a version")
    stripped = spec.strip()
    if stripped.startswith((".", "/", "~")) or os.sep in stripped.split(";")[0] or "\\" in stripped:
        raise InvalidRequirement(f"{where}: local paths are not supported; name a project and version")
    for value in hashes:
        if not _HASH.match(value):
            raise InvalidRequirement(f"{where}: --hash {value!r} is not algorithm:hexdigest")
    requested = _plain(stripped, source, hashes) or _full(stripped, source, hashes, where)
    if len(requested.name) >= MAX_NAME_AND_LEAF:  # refused before the index is asked (see MAX_NAME_AND_LEAF)
        raise InvalidRequirement(
            f"{where}: project name is {len(requested.name)} characters; at most {MAX_NAME_AND_LEAF - 1} fit in a "
            "file name with its version"
        )
    if requested.pinned is not None:
        TreeId("env", requested.name, requested.pinned, requested.extras)  # too long a pin: refused here, too
    return requested


def _full(stripped: str, source: str, hashes: tuple[str, ...], where: str) -> Requested:
    from packaging.requirements import InvalidRequirement as _PackagingInvalid
    from packaging.requirements import Requirement

    try:
        requirement = Requirement(stripped)
    except _PackagingInvalid as error:
        message = str(error).splitlines()[0]
        raise InvalidRequirement(f"{where}: not a valid requirement: {message}") from None
    if requirement.url:
        raise InvalidRequirement(f"{where}: direct URL requirements are not supported; name a version")
    if requirement.name.lower().endswith(_ARCHIVE_SUFFIXES):
        raise InvalidRequirement(f"{where}: local archives are not supported; name a project and version")
    return Requested(
        text=str(requirement),
        name=canonical_name(requirement.name),
        extras=tuple(sorted({canonical_name(extra) for extra in requirement.extras})),
        pinned=_pinned(requirement, where),
        hashes=hashes,
        source=source,
        requirement=requirement,
    )


def _pinned(requirement: Requirement, where: str) -> Version | None:
    specs = list(requirement.specifier)
    if len(specs) != 1 or specs[0].operator not in ("==", "===") or specs[0].version.endswith(".*"):
        return None
    try:
        return Version(specs[0].version)
    except InvalidVersion:
        raise InvalidRequirement(f"{where}: {specs[0].version!r} is not a valid version") from None


def _plain(spec: str, source: str, hashes: tuple[str, ...]) -> Requested | None:
    # The shape nearly every worker asks for, "name[extras]==version", parsed without packaging's PEP 508
    # grammar: importing and running that costs more than the whole installed-check. Anything else, or
    # anything this regex lets through that Version() refuses, goes to the full parser. The result is the
    # same Requested the full parser builds (tests compare the two).
    match = _PLAIN.match(spec)
    if match is None:
        return None
    name, extras_text, version_text = match.groups()
    extras = [e.strip() for e in extras_text.split(",")] if extras_text is not None else []
    if any(not _NAME.match(e) for e in extras) or name.lower().endswith(_ARCHIVE_SUFFIXES):
        return None
    try:
        version = Version(version_text)
    except InvalidVersion:
        return None
    shown_extras = f"[{','.join(sorted(set(extras)))}]" if extras else ""
    return Requested(
        text=f"{name}{shown_extras}=={version_text}",
        name=canonical_name(name),
        extras=tuple(sorted({canonical_name(e) for e in extras})),
        pinned=version,
        hashes=hashes,
        source=source,
    )


#: ``-r`` files nested deeper than this are refused: far above any real layout, and the files are read one after
#: another (no recursion), so a chain of 1,500 files is one line, not a ``RecursionError``.
MAX_NESTING = 64


def read_requirements_file(path: str) -> list[Requested]:
    """Read a pip-style requirements file: comments, blank lines, ``\\`` continuations, ``-r``, ``--hash``, and
    the index lines pip reads there (:data:`INDEX_OPTIONS`).

    A nested ``-r`` file's requirements stand where its line does. Files including each other in a loop, or ``-r``
    files nested more than :data:`MAX_NESTING` deep, are one :class:`RequirementsFileError` line (exit 2). The
    index lines of the file and of the files it includes, in the order pip reads them, are each requirement's
    ``file_index``: they apply to this file's trees only, wherever in it they stand (pip, too, reads them all
    before it resolves)."""
    found: list[Requested] = []
    index_lines = _IndexLines()
    # One frame per open file: its path, its real path (for loops) and the lines still to read.
    stack: list[tuple[str, str, Iterator[tuple[int, str]]]] = []
    _enter(stack, path, where=path)
    while stack:
        current, _, lines = stack[-1]
        line = next(lines, None)
        if line is None:
            stack.pop()
            continue
        number, text = line
        source = f"{current}:{number}"
        words = text.split()
        head = words[0]
        if head in ("-r", "--requirement") or head.startswith(("--requirement=", "-r")):
            nested = _option_value(words, head, ("-r", "--requirement"), source)
            nested_path = nested if os.path.isabs(nested) else os.path.join(os.path.dirname(current), nested)
            _enter(stack, nested_path, where=source)
            continue
        if head.split("=", 1)[0] in INDEX_OPTIONS or head.startswith(_SHORT_INDEX_OPTIONS):
            index_lines.read(words, current, source)
            continue
        if head.startswith("-"):
            raise RequirementsFileError(f"{source}: {unsupported_option(head.split('=')[0])}")
        spec, hashes = _split_hashes(text, source)
        found.append(parse_spec(spec, source, hashes))
    index = index_lines.value()
    return found if index is None else [one._replace(file_index=index) for one in found]


#: The index lines pip reads in a requirements file, and what each takes (``None``: no value).
INDEX_OPTIONS = {
    "-i": "URL",
    "--index-url": "URL",
    "--extra-index-url": "URL",
    "-f": "LOCATION",
    "--find-links": "LOCATION",
    "--no-index": None,
    "--trusted-host": "HOST",
}
#: Short options whose value may follow with no space (``-ihttps://...``), as pip's option parser reads them.
_SHORT_INDEX_OPTIONS = ("-i", "-f")


def _check_url(url: str, source: str) -> None:
    """A URL pip and uv would misread (a password's unencoded ``/``, say) refused when read, its password hidden."""
    from ._errors import InvalidInput
    from ._urls import check

    try:
        check(url, "index URL")
    except InvalidInput as error:
        raise RequirementsFileError(f"{source}: {error}") from None


class _IndexLines:
    """A requirements file's index lines as pip applies them, one after another: ``--index-url`` replaces the
    list so far (the extra indexes read before it included), ``--extra-index-url`` and ``--find-links`` add,
    ``--no-index`` leaves no index whatever comes after."""

    def __init__(self) -> None:
        self.index_url: str | None = None
        self.extra: list[str] = []
        self.find_links: list[str] = []
        self.no_index = False
        self.trusted_hosts: list[str] = []
        self.seen = False

    def read(self, words: list[str], current: str, source: str) -> None:
        head = words[0]
        if head.startswith("--"):
            option, equals, value = head.partition("=")
            values = [value, *words[1:]] if equals else words[1:]
        else:
            option, value = head[:2], head[2:]
            values = [value, *words[1:]] if value else words[1:]
        self.seen = True
        if INDEX_OPTIONS[option] is None:
            if values:
                raise RequirementsFileError(f"{source}: {option} takes no value")
            self.no_index = True
            return
        if len(values) != 1 or not values[0]:
            raise RequirementsFileError(f"{source}: {option} takes exactly one {INDEX_OPTIONS[option]}")
        value = values[0]
        if option != "--trusted-host" and (option not in ("-f", "--find-links") or "://" in value):
            _check_url(value, source)
        if option in ("-i", "--index-url"):
            self.index_url, self.extra = value, []
        elif option == "--extra-index-url":
            self.extra.append(value)
        elif option == "--trusted-host":
            self.trusted_hosts.append(value)
        else:
            # As pip: a relative location that exists beside the file is that one; anything else as written.
            beside = os.path.join(os.path.dirname(os.path.abspath(current)), value)
            self.find_links.append(beside if "://" not in value and os.path.exists(beside) else value)

    def value(self) -> FileIndex | None:
        if not self.seen:
            return None
        return FileIndex(
            None if self.no_index else self.index_url,
            () if self.no_index else tuple(self.extra),
            tuple(self.find_links),
            self.no_index,
            tuple(self.trusted_hosts),
        )


def _enter(stack: list[tuple[str, str, Iterator[tuple[int, str]]]], path: str, *, where: str) -> None:
    """Open ``path`` (named at ``where``) as the next file to read, unless it is in a loop or too deep."""
    from ._textfile import read_text  # here: specs on the command line need no file reading

    if (made_by := foreign_lock(path)) is not None:
        raise RequirementsFileError(f"{path}: not a lock this reads; `{made_by}` makes one")
    real = os.path.realpath(path)
    if any(seen == real for _, seen, _ in stack):
        raise RequirementsFileError(f"{path}: requirements files include each other in a loop")
    if len(stack) >= MAX_NESTING:
        raise RequirementsFileError(f"{where}: -r files nested more than {MAX_NESTING} deep")
    stack.append((path, real, _logical_lines(read_text(path, "requirements file"))))


#: Other tools' own lock files, by name, and the command that makes from one a lock this reads.
_FOREIGN_LOCKS = {
    # --no-emit-project: a packaged project's own source would be an editable directory entry, refused.
    "uv.lock": "uv export --format pylock.toml --no-emit-project -o pylock.toml",
    "poetry.lock": "poetry export --format requirements.txt -o requirements.txt",
    "pipfile.lock": "pipenv requirements --hash > requirements.txt",
    "pdm.lock": "pdm export --format requirements -o requirements.txt",
}


def foreign_lock(path: str) -> str | None:
    """The command that makes a lock this reads from the other tool's lock file at ``path``, or ``None``."""
    return _FOREIGN_LOCKS.get(os.path.basename(path).lower())


#: Resolution options pip takes in a requirements file and repoinstall takes on its command line only.
_COMMAND_LINE_OPTIONS = frozenset({"-c", "--constraint", "--pre", "--only-binary", "--no-binary"})
#: pip's editable install, in a requirements file and on the command line.
EDITABLE = frozenset({"-e", "--editable"})


def unsupported_option(option: str) -> str:
    """What to do instead of ``option`` in a requirements file (one line, after the file and line)."""
    if option in EDITABLE:
        return editable_refused()
    if option in _COMMAND_LINE_OPTIONS:
        return f"option line {option!r} is not read from requirements files: give {option} on the command line"
    return (
        f"option line {option!r} is not supported in requirements files (only -r, --hash and the index lines "
        f"{', '.join(o for o in INDEX_OPTIONS if o.startswith('--'))})"
    )


def editable_refused() -> str:
    """Why an editable install (``-e``) is refused, and what to do instead."""
    return (
        "editable installs (-e) are not supported: a tree is immutable and shared by every pod; build a wheel "
        "(pip wheel --no-deps -w dist .) and ensure it by name and version with --find-links dist"
    )


#: pip's environment variables in requirements files: ``${NAME}``, uppercase letters, digits and underscores only.
_ENV_VAR = re.compile(r"\$\{([A-Z0-9_]+)\}")


def _expand(line: str) -> str:
    """``${VAR}`` replaced by its value, as pip does; an unset one is left as written."""
    return _ENV_VAR.sub(lambda found: os.environ.get(found.group(1), found.group(0)), line)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    # pip's order: join continuations, drop comments (a '#' at the start or after whitespace), expand ${VAR}.
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        if raw.endswith("\\"):
            pending.append(raw[:-1])
            continue
        pending.append(raw)
        joined = _expand(re.sub(r"(^|\s)#.*$", "", "".join(pending)).strip())
        pending = []
        if joined:
            yield start, joined
    if pending:
        joined = _expand(re.sub(r"(^|\s)#.*$", "", "".join(pending)).strip())
        if joined:
            yield start, joined


def _option_value(words: list[str], head: str, names: tuple[str, ...], source: str) -> str:
    for name in names:
        if head == name:
            if len(words) != 2:
                raise RequirementsFileError(f"{source}: {name} takes exactly one file name")
            return words[1]
    value = head.split("=", 1)[1] if head.startswith("--") else head[2:]
    if len(words) != 1 or not value:
        raise RequirementsFileError(f"{source}: {head!r} takes exactly one file name")
    return value


def _split_hashes(line: str, source: str) -> tuple[str, list[str]]:
    # Everything from the first " --" on is options; only --hash is allowed there.
    match = re.search(r"\s--?[a-zA-Z]", line)
    if match is None:
        return line, []
    spec, rest = line[: match.start()], line[match.start() :].split()
    hashes: list[str] = []
    index = 0
    while index < len(rest):
        word = rest[index]
        if word.startswith("--hash="):
            hashes.append(word.removeprefix("--hash="))
        elif word == "--hash" and index + 1 < len(rest):
            index += 1
            hashes.append(rest[index])
        else:
            raise RequirementsFileError(
                f"{source}: option {word.split('=')[0]!r} is not supported after a requirement (only --hash)"
            )
        index += 1
    return spec, hashes


def collect(specs: Iterable[str], files: Iterable[str]) -> list[Requested]:
    """Everything asked for on a command line: the specs, then each file's requirements, in order."""
    found = [parse_spec(spec) for spec in specs]
    for path in files:
        found.extend(read_requirements_file(path))
    return found


def hashed_requirements(scratch: str, requested: Requested, pin: str) -> str:
    """A requirements file holding the pin and its hashes: hashes only travel in one, for pip and uv alike.

    Written from the validated pin, nothing user-shaped."""
    path = os.path.join(scratch, "requirements.txt")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(pin + "".join(f" --hash={h}" for h in requested.hashes) + "\n")
    return path
