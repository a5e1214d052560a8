"""The distributions inside a tree: their ``*.dist-info`` metadata and RECORD hashes."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import posixpath
from dataclasses import dataclass

from ._metadata import parse_metadata

#: pip --target installs into a temporary home scheme (purelib ``lib/python``, scripts ``bin``) and moves it
#: into the target, so RECORD paths are relative to ``lib/python``: ``../../bin/tool`` is the tree's ``bin/tool``.
_TARGET_PURELIB = "lib/python"


@dataclass(frozen=True, slots=True)
class Dist:
    """One ``*.dist-info`` directory of a tree, with the project and version its METADATA names."""

    dist_info: str
    name: str
    version: str


def scan(tree: str) -> list[Dist]:
    """Every dist-info in ``tree`` whose METADATA names a project and version."""
    found: list[Dist] = []
    with os.scandir(tree) as entries:
        for entry in entries:
            if not entry.name.endswith(".dist-info") or not entry.is_dir(follow_symlinks=False):
                continue
            meta_path = os.path.join(entry.path, "METADATA")
            if os.path.islink(meta_path):
                continue
            try:
                with open(meta_path, "rb") as handle:
                    parsed = parse_metadata(handle.read(1 << 20))
            except OSError:
                continue
            if parsed is not None:
                found.append(Dist(entry.name, *parsed))
    return sorted(found, key=lambda dist: dist.dist_info)


@dataclass(frozen=True, slots=True)
class RecordProblems:
    """What a RECORD check found wrong: files missing, files whose hash or size differs, files nobody recorded."""

    missing: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.missing or self.changed or self.extra)

    def summary(self) -> str:
        parts = [
            f"{len(files)} {label} (e.g. {files[0]})"
            for label, files in (("missing", self.missing), ("changed", self.changed), ("extra", self.extra))
            if files
        ]
        return ", ".join(parts) or "ok"


def tree_relative(recorded: str) -> str | None:
    """Where a RECORD path lies in a --target tree, or ``None`` if it points outside the tree."""
    path = posixpath.normpath(posixpath.join(_TARGET_PURELIB, recorded.replace("\\", "/")))
    if path.startswith(_TARGET_PURELIB + "/"):
        return path[len(_TARGET_PURELIB) + 1 :]
    if posixpath.isabs(path) or path == ".." or path.startswith("../") or path.startswith(_TARGET_PURELIB):
        return None
    return path


def record_rows(tree: str, dist: Dist) -> list[list[str]] | None:
    """The rows of a dist's RECORD, or ``None`` if it is missing or unreadable."""
    try:
        with open(os.path.join(tree, dist.dist_info, "RECORD"), "rb") as handle:
            return list(csv.reader(io.StringIO(handle.read().decode("utf-8"))))
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


def check_tree(tree: str, dists: list[Dist], *, extra: bool = True) -> RecordProblems:
    """Check all ``dists`` of a tree against their RECORDs and, with ``extra``, find files none of them lists."""
    missing: list[str] = []
    changed: list[str] = []
    recorded: set[str] = set()
    inside = _Inside(tree)
    for dist in dists:
        rows = record_rows(tree, dist)
        if rows is None:
            missing.append(f"{dist.dist_info}/RECORD")
            continue
        for row in rows:
            if not row or (relative := tree_relative(row[0])) is None:
                continue
            recorded.add(relative)
            problem = _check_file(
                tree, inside, relative, row[1] if len(row) > 1 else "", row[2] if len(row) > 2 else ""
            )
            if problem == "missing":
                missing.append(relative)
            elif problem == "changed":
                changed.append(relative)
    found_extra: list[str] = []
    if extra:
        for directory, subdirs, files in os.walk(tree):
            subdirs.sort()
            for name in sorted(files):
                relative = os.path.relpath(os.path.join(directory, name), tree)
                if relative not in recorded:
                    found_extra.append(relative)
    return RecordProblems(tuple(missing), tuple(changed), tuple(found_extra))


class _Inside:
    """Whether a path's directory resolves inside the tree; resolved once per directory, not once per file."""

    def __init__(self, tree: str) -> None:
        self._root = os.path.realpath(tree) + os.sep
        self._seen: dict[str, bool] = {}

    def __call__(self, path: str) -> bool:
        directory = os.path.dirname(path)
        if (known := self._seen.get(directory)) is None:
            known = self._seen[directory] = (os.path.realpath(directory) + os.sep).startswith(self._root)
        return known


def _check_file(tree: str, inside: _Inside, relative: str, hash_field: str, size_field: str) -> str | None:
    path = os.path.join(tree, relative)
    if os.path.islink(path) or not inside(path):
        return "changed"  # a symlink where a file was installed (or in a directory's place): never followed
    if not hash_field:
        # RECORD itself and pip's compiled bytecode carry no hash: they must only exist.
        return None if os.path.isfile(path) or relative.endswith("/RECORD") else "missing"
    algorithm, _, expected = hash_field.partition("=")
    try:
        digest = hashlib.new(algorithm)
        size = 0
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
    except FileNotFoundError:
        return "missing"
    except (OSError, ValueError):
        return "changed"
    actual = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")
    if actual != expected or (size_field and size_field != str(size)):
        return "changed"
    return None
