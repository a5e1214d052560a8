"""Reading a lock file: which kind it is, and what it installs here, remembered per file and environment.

``read_lock`` is on the warm path of ``ensure -r pylock.toml``: asked again in the same process for an unchanged
file (same device, inode, size, mtime and ctime: any write changes the ctime, which no user can set back), it
answers from memory with one ``stat``. Hashed requirements files are read each time: a nested ``-r`` file could
change unseen, and their reader is cheap.
"""

from __future__ import annotations

import os
import re

from .._errors import RequirementsFileError
from .._options import DEFAULT_CHOICE, LockChoice
from .environment import THIS, Environment
from .local import Roots, no_roots
from .model import PYLOCK, Lock, LockedPackage

#: PEP 751's file names: ``pylock.toml`` and ``pylock.<name>.toml``.
_LOCK_NAME = re.compile(r"^pylock\.(?:[^.]+\.)?toml$")
#: A top-level ``lock-version`` key (bare or quoted) at the start of a line.
_LOCK_VERSION_KEY = re.compile(r"""^[ \t]*(?:lock-version|"lock-version"|'lock-version')[ \t]*=""", re.MULTILINE)
_CACHE_SIZE = 64

_Key = tuple[str, str, Environment, LockChoice]
_Stat = tuple[int, int, int, int, int]
_cache: dict[_Key, tuple[_Stat, Lock]] = {}


def is_lock_file(path: str, text: str | None = None) -> bool:
    """Whether ``path`` is a PEP 751 lock: named ``pylock.toml`` or ``pylock.<name>.toml``, or a TOML file (its
    ``text`` if given, else the file when its name ends in ``.toml``) with a ``lock-version`` key."""
    name = os.path.basename(path)
    if _LOCK_NAME.match(name):
        return True
    if text is None:
        if not name.endswith(".toml"):
            return False
        from .._textfile import read_text

        try:
            text = read_text(path, "lock file")
        except RequirementsFileError:
            return False  # not readable: whoever reads it next says why
    return _LOCK_VERSION_KEY.search(text) is not None


def read_lock(
    path: str,
    *,
    environment: Environment | None = None,
    choice: LockChoice = DEFAULT_CHOICE,
    roots: Roots | None = no_roots,
) -> Lock:
    """What the lock file at ``path`` installs in ``environment`` (this interpreter by default): a ``pylock.toml``
    (see :func:`is_lock_file`) or a requirements file whose every line that applies here is pinned and hashed.

    ``choice`` is the PEP 751 selection of a pylock's extras and dependency groups (default: no extras, the lock's
    ``default-groups``); a requirements file takes none (one line, exit 2). A local artifact must be a regular
    file below the lock file's directory or one of ``roots()``, the run's local find-links directories (see
    :mod:`.local`); ``roots`` ``None``: the lock is read only to name its tree, and its local artifacts are not
    looked at. Any problem is one :class:`RequirementsFileError` line (exit 2) naming the file.

    A lock naming local artifacts is not remembered: each read checks them again, as they may have changed."""
    from .._requirements import foreign_lock

    if (made_by := foreign_lock(path)) is not None:
        raise RequirementsFileError(f"{path}: not a lock this reads; `{made_by}` makes one")
    environment = environment or THIS
    key = (path, "" if path.startswith("/") else os.getcwd(), environment, choice)
    try:
        info = os.stat(path)
        signature: _Stat | None = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    except OSError:
        signature = None  # read_text says why, in one line
    cached = _cache.get(key)
    if cached is not None and cached[0] == signature:
        return cached[1]
    from .._textfile import read_text

    text = read_text(path, "lock file")
    if not is_lock_file(path, text):
        from .._requirements import read_requirements_file
        from .hashed import lock_from_requirements

        if choice.chosen():
            raise RequirementsFileError(not_a_pylock(path, choice))
        return lock_from_requirements(read_requirements_file(path), path, environment=environment)
    lock = Lock(path, PYLOCK, _pylock(path, text, environment, choice, roots))
    if signature is not None and not any(p.url and p.url.startswith("file:") for p in lock.packages):
        if len(_cache) >= _CACHE_SIZE:
            del _cache[next(iter(_cache))]
        _cache[key] = (signature, lock)
    return lock


def not_a_pylock(path: str, choice: LockChoice) -> str:
    """Why ``choice`` cannot be taken from the requirements file ``path``, in one line."""
    return (
        f"{path}: not a pylock.toml: {choice.flags()} choose among a pylock.toml's extras and dependency groups; a "
        "requirements file names extras on its lines (name[extra]==1.0)"
    )


def forget() -> None:
    """Drop every remembered lock (tests)."""
    _cache.clear()


def _pylock(
    path: str,
    text: str,
    environment: Environment,
    choice: LockChoice,
    roots: Roots | None,
) -> tuple[LockedPackage, ...]:
    import tomllib

    from .pylock import select
    from .shape import check_shape

    check_shape(path, text)  # before tomllib, which recurses per level and is quadratic in a key's dotted parts
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise RequirementsFileError(f"{path}: not a valid TOML lock file: {error}") from None
    return select(path, document, environment, choice=choice, roots=roots)
