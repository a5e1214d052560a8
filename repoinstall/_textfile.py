"""Reading a text file the user named (requirements, constraints): a regular file, bounded, UTF-8 as pip reads it."""

from __future__ import annotations

import contextlib
import os
import stat

from ._errors import RequirementsFileError

#: Larger than any real requirements or constraints file (a lock file of 5,000 hashed pins is about 2 MiB), small
#: enough that ``-r /dev/zero`` or a runaway generator cannot take a pod's memory.
MAX_BYTES = 16 * 1024 * 1024


def check(path: str, what: str) -> None:
    """:class:`RequirementsFileError` unless ``path`` is a regular file within the size cap; reads nothing (for
    option checks on the warm path: pip and the resolver read the file when they need it)."""
    os.close(_open_regular(path, what))


def _open_regular(path: str, what: str) -> int:
    """An open descriptor of ``path`` once fstat shows a regular file within the cap; never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise RequirementsFileError(f"{path}: {what} not found") from None
    except OSError as error:
        raise RequirementsFileError(f"{path}: cannot read {what}: {error.strerror}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise RequirementsFileError(f"{path}: is a directory, not a {what}")
        if not stat.S_ISREG(info.st_mode):
            raise RequirementsFileError(f"{path}: is not a regular file (a pipe, socket or device), not a {what}")
        if info.st_size > MAX_BYTES:
            raise RequirementsFileError(f"{path}: {what} is larger than {MAX_BYTES // (1024 * 1024)} MiB")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_text(path: str, what: str) -> str:
    """The file's text; :class:`RequirementsFileError` (exit 2) with one line if it cannot be one.

    Opened non-blocking and checked with fstat before any read, so a FIFO, socket or device is refused instead of
    blocking or streaming forever. A UTF-8 byte-order mark is dropped, as pip does.
    """
    data, _ = read_bytes(path, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RequirementsFileError(f"{path}: {what} is not UTF-8 text") from None


def read_bytes(path: str, what: str) -> tuple[bytes, os.stat_result]:
    """The file's bytes, as :func:`read_text` reads them, and its ``fstat`` from before the read."""
    fd = _open_regular(path, what)
    try:
        info = os.fstat(fd)
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, min(1 << 20, MAX_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BYTES:
                raise RequirementsFileError(f"{path}: {what} is larger than {MAX_BYTES // (1024 * 1024)} MiB")
    except OSError as error:
        raise RequirementsFileError(f"{path}: cannot read {what}: {error.strerror}") from None
    finally:
        os.close(fd)
    return b"".join(chunks), info


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a temporary file beside it, renamed over it."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
