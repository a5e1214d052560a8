"""``Requires-Python`` of a remote distribution when its index does not say (pypiserver, find-links pages).

Cheapest first: the PEP 658 metadata file if the index offers one; else the wheel's own METADATA read with
HTTP range requests (the zip's directory at its end, then the one member), as pip's lazy wheel does; else,
from a server without range support, the whole wheel up to a size limit. Files are immutable, so what is
learnt is cached on the volume for good.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable
from email.parser import BytesHeaderParser

from .._redact import redact
from .._urls import file_path
from . import http as _http
from .http import Plan
from .simple import Link

#: The tail fetched first: enough for the central directory of any ordinary wheel.
_TAIL = 64 << 10
#: A server that ignores ranges sends the whole file; beyond this we stop reading and trust the wheel's tags.
_WHOLE_LIMIT = 32 << 20
_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+)")


class _Missing(Exception):
    def __init__(self, start: int, end: int) -> None:
        super().__init__(start, end)
        self.start, self.end = start, end


class _Sparse(io.RawIOBase):
    """A file of known size of which only some byte ranges are here; reading elsewhere raises ``_Missing``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.pos = 0
        self.pieces: list[tuple[int, bytes]] = []

    def add(self, start: int, data: bytes) -> None:
        self.pieces.append((start, data))

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        for start, data in self.pieces:
            if start <= self.pos and end <= start + len(data):
                chunk = data[self.pos - start : end - start]
                self.pos = end
                return chunk
        raise _Missing(self.pos, end)


def requires_python(link: Link, retries: int, whole: Callable[[bytes], None] | None = None) -> Plan[str | None]:
    """The file's ``Requires-Python`` (``None``: it sets none, or it cannot be learnt: pip will check). ``whole`` is
    given the wheel's bytes where the server sent all of them (it ignores ranges): to keep, not to fetch again."""
    if not link.filename.endswith(".whl"):
        return None
    if link.url.startswith("file:"):
        return _from_local(link.url)
    what = f"{redact(link.url)} (metadata)"
    if link.metadata:
        reply = yield from _http.get(link.url + ".metadata", retries, what=what, limit=1 << 20)
        if reply.status == 200:
            return _from_metadata(reply.body)
    reply = yield from _http.get(
        link.url, retries, what=what, headers=[("Range", f"bytes=-{_TAIL}")], limit=_WHOLE_LIMIT
    )
    if reply.error is not None or reply.status not in (200, 206):
        return None
    if reply.status == 200:
        if whole is not None:
            whole(reply.body)
        return _from_wheel(io.BytesIO(reply.body))
    matched = _RANGE.match(reply.content_range)
    if matched is None:
        return None
    sparse = _Sparse(int(matched.group(3)))
    sparse.add(int(matched.group(1)), reply.body)
    for _ in range(8):  # directory, then member: two fetches for any sane wheel
        try:
            return _from_wheel(sparse)
        except _Missing as missing:
            # Read ahead: the member's local header is followed by its data; fetch generously, once.
            end = min(sparse.size, max(missing.end, missing.start + _TAIL)) - 1
            reply = yield from _http.get(
                link.url, retries, what=what, headers=[("Range", f"bytes={missing.start}-{end}")], limit=_WHOLE_LIMIT
            )
            if reply.status != 206:
                return None
            sparse.add(missing.start, reply.body)
    return None


def _from_local(url: str) -> str | None:
    path = file_path(url)
    try:
        with open(path, "rb") as handle:
            return _from_wheel(io.BytesIO(handle.read(_WHOLE_LIMIT)))
    except OSError:
        return None


def _from_wheel(source: io.RawIOBase | io.BytesIO) -> str | None:
    try:
        with zipfile.ZipFile(source) as wheel:
            names = [n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(names) != 1:
                return None
            return _from_metadata(wheel.read(names[0]))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return None


def _from_metadata(data: bytes) -> str | None:
    value = BytesHeaderParser().parsebytes(data).get("Requires-Python")
    return str(value).strip() or None if value is not None else None
