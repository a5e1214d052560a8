"""Which artifacts a lock may name, and how: the rule for a ``path`` and for a ``url``.

A lock file is input: whoever wrote it (a pull request, a generator) is not who runs it (an init container whose
repo every pod mounts). pip refuses a lock obtained from a URL whose ``path`` leaves its location (an absolute
path, or one that resolves to another scheme or host); a local lock here is held to the same idea:

- a ``path`` is a path, never a URL (``file:///etc/shadow`` as a path is refused: a URL goes in ``url``);
- a local artifact (a ``path``, relative to the lock file's directory or absolute, or a ``file:`` URL) must lie,
  once ``..`` and symlinks are resolved, below the lock file's own directory, or below a local find-links
  directory of the run (``--find-links DIR``, pip.conf's ``find-links``): a place the operator chose, not the
  lock. ``../../../../etc/shadow`` and a symlink out of the lock's directory are refused before anything reads
  them, so no message can tell a hash (or even the existence) of a file the lock may not name;
- it must be a regular file (symlinks followed): a FIFO, a device (``/dev/zero``, ``/dev/urandom``), a socket or
  a directory would have the installer block or read forever while it holds the tree's lock;
- a ``url`` is ``http``, ``https`` or ``file``, with no white space and its credentials readable as pip and uv
  read them (a password's ``/``, ``?``, ``#`` or ``@`` percent-encoded), else the installers would print the
  password as a host, port or path.

Every refusal is a :class:`ValueError` with one line (no hash, no password) that :mod:`.pylock` puts after the key.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from .._redact import redact_all

#: The local find-links directories of this run (resolved), asked for only when an artifact lies outside the
#: lock file's directory: reading pip's configuration may start pip.
Roots = Callable[[], Sequence[Path]]
#: Something with a URL scheme (``file:``, ``http:``, ``c:`` is a relative file name on POSIX): two letters or more.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
_SHOWN = 120
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def no_roots() -> Sequence[Path]:
    return ()


def from_path(path: str, base: Path, roots: Roots | None) -> str:
    """The ``file:`` URL of the lock's ``path`` (relative to ``base``, the lock file's directory, or absolute), once
    :func:`checked` (``roots`` ``None``: the lock only names a tree, and the file is not looked at)."""
    if _SCHEME.match(path):
        raise ValueError(f"{_shown(path)} is a URL, not a path (a URL goes in url)")
    parts = PurePosixPath(path.replace("\\", "/")).parts
    local = Path(path) if os.path.isabs(path) else base.joinpath(*parts)
    if roots is None:
        return Path(os.path.normpath(local)).as_uri()
    return checked(local, path, base, roots).as_uri()


def from_url(url: str, base: Path, roots: Roots | None) -> str:
    """The lock's ``url`` as the installer gets it: an http(s) URL as it is, once readable; a ``file:`` URL as
    the file it names, once :func:`checked` (``roots`` ``None``: not looked at)."""
    from urllib.parse import urlsplit

    from .._urls import file_path

    readable(url)
    parts = urlsplit(url)
    if parts.scheme.lower() != "file" or roots is None:
        return url
    if parts.netloc not in ("", "localhost"):
        raise ValueError(f"{_shown(url)}: a file URL of another host")
    local = file_path(url)
    if not os.path.isabs(local):
        raise ValueError(f"{_shown(url)}: a file URL names an absolute path")
    return checked(Path(local), url, base, roots).as_uri()


def readable(url: str) -> None:
    """``ValueError`` (password hidden) unless ``url`` is an http, https or file URL pip and uv read as it is meant:
    before anything (its file name included) is taken from it."""
    from .._errors import InvalidInput
    from .._urls import check

    try:
        check(url, "URL")
    except InvalidInput as error:
        raise ValueError(str(error)) from None


def checked(local: Path, shown: str, base: Path, roots: Roots) -> Path:
    """``local`` resolved (``..`` and symlinks), when it lies below ``base`` or a root and is a regular file."""
    if "\0" in str(local):
        raise ValueError(f"{_shown(shown)}: a path holds no NUL character")
    real = Path(os.path.realpath(local))
    if not _below(real, Path(os.path.realpath(base))) and not any(_below(real, root) for root in roots()):
        raise ValueError(
            f"{_shown(shown)} is outside the lock file's directory ({base}) and every local --find-links "
            "directory: a lock may name local files only there"
        )
    try:
        info = os.stat(real)
    except FileNotFoundError:
        raise ValueError(f"{_shown(shown)}: no such file") from None
    except OSError as error:
        raise ValueError(f"{_shown(shown)}: cannot be read: {error.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
        raise ValueError(f"{_shown(shown)} is {kind}, not a regular file")
    return real


def find_links_roots(find_links: Sequence[str]) -> tuple[Path, ...]:
    """The local directories among find-links entries (a path or a ``file:`` URL), resolved; pages and URLs are
    no place for a lock's local files."""
    from urllib.parse import urlsplit

    from .._urls import file_path

    found = []
    for entry in find_links:
        directory = entry
        if "://" in entry:
            parts = urlsplit(entry)
            if parts.scheme.lower() != "file" or parts.netloc not in ("", "localhost"):
                continue
            directory = file_path(entry)
        try:
            if os.path.isdir(directory):
                found.append(Path(os.path.realpath(directory)))
        except (OSError, ValueError):
            continue
    return tuple(found)


def _below(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _shown(text: str) -> str:
    text = redact_all(text)  # before it is cut: a cut URL could keep its password and lose its "@"
    return repr(text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "...")
