"""The distributions inside a tree: their ``*.dist-info`` metadata and RECORD hashes."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
from dataclasses import dataclass

from ._metadata import parse_metadata


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
    """What a RECORD check found wrong: files missing, files whose hash or size differs."""

    missing: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.missing or self.changed)

    def summary(self) -> str:
        parts = []
        if self.missing:
            parts.append(f"{len(self.missing)} missing (e.g. {self.missing[0]})")
        if self.changed:
            parts.append(f"{len(self.changed)} changed (e.g. {self.changed[0]})")
        return ", ".join(parts) or "ok"


def check_record(tree: str, dist: Dist) -> RecordProblems:
    """Check every hashed RECORD entry of ``dist`` that lies inside ``tree`` against the file on disk."""
    record_path = os.path.join(tree, dist.dist_info, "RECORD")
    try:
        with open(record_path, "rb") as handle:
            text = handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return RecordProblems(missing=(f"{dist.dist_info}/RECORD",))
    missing: list[str] = []
    changed: list[str] = []
    root = os.path.realpath(tree)
    for row in csv.reader(io.StringIO(text)):
        if len(row) < 2 or not row[1]:
            continue  # RECORD itself and unhashed entries
        relative = row[0]
        # Scripts land outside the --target lib dir ("../../bin/x"); they are not part of what we verify.
        if os.path.isabs(relative) or ".." in relative.replace("\\", "/").split("/"):
            continue
        path = os.path.join(tree, relative)
        if os.path.islink(path) or not os.path.realpath(path).startswith(root + os.sep):
            changed.append(relative)
            continue
        algorithm, _, expected = row[1].partition("=")
        try:
            digest = hashlib.new(algorithm)
            with open(path, "rb") as handle:
                size = 0
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
                    size += len(chunk)
        except FileNotFoundError:
            missing.append(relative)
            continue
        except (OSError, ValueError):
            changed.append(relative)
            continue
        actual = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")
        if actual != expected or (len(row) > 2 and row[2] and row[2] != str(size)):
            changed.append(relative)
    return RecordProblems(tuple(missing), tuple(changed))
