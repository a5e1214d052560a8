"""Several requirements as one tree (``--together``, :meth:`Repo.ensure_together`): the installer resolves them
and their dependencies in one go, so the tree holds one version of every distribution.

The set becomes a local metapackage, ``together-<digest of the set>`` version 1, whose wheel holds nothing but
its ``Requires-Dist`` lines. Installed by path from the installer's scratch dir, it is an ordinary tree to
everything else: checked by its dist-info and record, locked, staged, verified, published, listed and
collected like any other. The digest keys the tree by the set of pinned members, so the same set in any
order is one tree, and a different set another.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from collections.abc import Sequence

from packaging.version import Version

from .._errors import InvalidInput
from .._requirements import Requested
from .._store.identity import SET_PREFIX, TreeId

# SET_PREFIX names set trees; the digest makes a clash with a real project's name a non-issue, and the wheel is
# installed by path, so an index that serves such a name is never asked for it.
_VERSION = Version("1")


def combined(env: str, members: Sequence[tuple[Requested, TreeId]]) -> tuple[Requested, TreeId]:
    """The request and tree of a set of chosen trees (two or more, each with its requirement as asked)."""
    hashed = [requested.text for requested, _ in members if requested.hashes]
    if hashed:
        raise InvalidInput(f"{hashed[0]}: --hash cannot be checked for a set installed together; drop --together")
    pins = tuple(sorted({tid.pin for _, tid in members}))
    names = [tid.name for _, tid in members]
    if len(set(names)) != len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise InvalidInput(f"{twice} is asked for twice in one set: a tree holds one version of it")
    key = "\n".join(sorted(f"{tid.name}=={tid.leaf}" for _, tid in members))
    tid = TreeId(env, SET_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:16], _VERSION)
    return Requested(" ".join(pins), tid.name, (), _VERSION, source="together", members=pins), tid


def wheel(tid: TreeId, members: Sequence[str]) -> tuple[str, bytes]:
    """The set's metapackage wheel: its file name and its bytes."""
    module = tid.name.replace("-", "_")
    dist_info = f"{module}-{tid.version_text}.dist-info"
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {tid.name}",
        f"Version: {tid.version_text}",
        "Summary: installed together by repoinstall: " + ", ".join(members),
        *(f"Requires-Dist: {member}" for member in members),
    ]
    files = {
        f"{dist_info}/METADATA": ("\n".join(metadata) + "\n\n").encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: repoinstall\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{path},sha256={_digest(data)},{len(data)}" for path, data in files.items()]
    files[f"{dist_info}/RECORD"] = ("\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return f"{module}-{tid.version_text}-py3-none-any.whl", buffer.getvalue()


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
