"""The manifest: one small JSON record per tree saying what was installed there, how and when."""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from packaging.version import InvalidVersion, Version

from . import _fs
from ._identity import TreeId
from ._layout import RECORD_SUFFIX, RECORDS, Layout

if TYPE_CHECKING:
    from ._dists import Dist

FORMAT = 1


class Record(NamedTuple):
    """What the manifest knows about one tree."""

    requirement: str
    name: str
    version: str
    extras: tuple[str, ...]
    env: str
    dist_info: str
    installer: str
    installer_version: str
    installed_at: str
    host: str
    dists: tuple[dict[str, str], ...] = ()
    format: int = FORMAT

    def to_json(self) -> bytes:
        return (json.dumps(self._asdict(), sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")

    @classmethod
    def new(
        cls, tid: TreeId, requirement: str, dist_info: str, dists: list[Dist], installer: str, installer_version: str
    ) -> Record:
        return cls(
            requirement=requirement,
            name=tid.name,
            # The version the project's own METADATA names (1.0 when 1.0.0 was asked: the same version).
            version=next((d.version for d in dists if d.dist_info == dist_info), tid.version_text),
            extras=tid.extras,
            env=tid.env,
            dist_info=dist_info,
            installer=installer,
            installer_version=installer_version,
            installed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            host=os.uname().nodename,
            dists=tuple({"name": d.name, "version": d.version, "dist_info": d.dist_info} for d in dists),
        )


def parse(data: bytes, tid: TreeId) -> Record | None:
    """The record in ``data`` if it is well formed and describes ``tid``; ``None`` for anything else."""
    try:
        raw: Any = json.loads(data)
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            return None
        raw["extras"] = tuple(raw.get("extras") or ())
        raw["dists"] = tuple(raw.get("dists") or ())
        record = Record(**raw)
    except (ValueError, TypeError):
        return None
    if (record.name, record.extras, record.env) != (tid.name, tid.extras, tid.env) or not _same_version(record, tid):
        return None
    if "/" in record.dist_info or record.dist_info in ("", ".", "..") or not record.dist_info.endswith(".dist-info"):
        return None
    return record


def _same_version(record: Record, tid: TreeId) -> bool:
    if record.version == tid.version_text:
        return True
    try:
        return Version(record.version) == tid.version
    except InvalidVersion:
        return False


def read(layout: Layout, tid: TreeId) -> Record | None:
    fd = layout.env_fd(RECORDS, tid.env)
    if fd is None:
        return None
    # One open for "<name>/<leaf>.json": a record only names a dist-info, and the tree it names is opened
    # with no symlink followed, so a planted records/ symlink can mislead nothing.
    data = _fs.read_file(fd, (f"{tid.name}/{tid.leaf}{RECORD_SUFFIX}",))
    return None if data is None else parse(data, tid)


def write(layout: Layout, tid: TreeId, record: Record) -> None:
    """Write the record atomically; writers of one tree all write equivalent records, so last one wins."""
    directory = _fs.make_dirs(layout.writable_fd(), layout.record_dir(tid), layout.root)
    try:
        _fs.write_atomic(directory, tid.leaf + RECORD_SUFFIX, record.to_json())
    finally:
        os.close(directory)


def remove(layout: Layout, tid: TreeId) -> None:
    fd = layout.root_fd()
    if fd is None:
        return
    directory = _fs.open_dir(fd, layout.record_dir(tid))
    if directory is not None:
        try:
            _fs.unlink(directory, tid.leaf + RECORD_SUFFIX)
        finally:
            os.close(directory)


def installed_leaves(layout: Layout, env: str, name: str) -> list[str]:
    """The tree leaves (version[extras]) that have a record for ``name``: the candidates for an unpinned spec."""
    fd = layout.root_fd()
    if fd is None:
        return []
    directory = _fs.open_dir(fd, (RECORDS, env, name))
    if directory is None:
        return []
    try:
        return [
            n.removesuffix(RECORD_SUFFIX)
            for n in os.listdir(directory)
            if n.endswith(RECORD_SUFFIX) and not n.startswith(".")
        ]
    finally:
        os.close(directory)


def all_records(layout: Layout) -> list[tuple[str, str, str]]:
    """(env, name, leaf) of every record in the repo, for ``list``."""
    found: list[tuple[str, str, str]] = []
    base = layout.path(RECORDS)
    for env in sorted(_listdirs(base)):
        for name in sorted(_listdirs(os.path.join(base, env))):
            for entry in sorted(os.listdir(os.path.join(base, env, name))):
                if entry.endswith(RECORD_SUFFIX) and not entry.startswith("."):
                    found.append((env, name, entry.removesuffix(RECORD_SUFFIX)))
    return found


def _listdirs(path: str) -> list[str]:
    try:
        with os.scandir(path) as entries:
            return [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []
