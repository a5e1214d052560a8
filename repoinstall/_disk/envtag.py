"""The environment tag of this interpreter: computed with ``packaging.tags``, remembered per interpreter build.

Computing it imports packaging.tags (with logging, sysconfig and ELF parsing), a third of what the warm CLI
adds to a bare typer import. The tag depends only on the interpreter binary and the C library it runs on,
so it is kept in the user's cache directory under a fingerprint of exactly those: another image, another
Python or an upgraded glibc misses the cache and computes it afresh. A cache that cannot be read or written
(a read-only home) only means computing it each time.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import zlib

_TAG = re.compile(r"^[A-Za-z0-9._]+-[A-Za-z0-9._]+-[A-Za-z0-9._]+$")
#: Part of the cache key: bump it when the way the tag is derived changes, so no stale tag is ever reused.
_DERIVATION = 2
#: Platform tags that name the C library's level: a tree with compiled code is only good for that level or above.
_LIBC_LEVELS = ("manylinux_", "musllinux_")


def compute() -> str:
    """interpreter-abi-platform, e.g. ``cp311-cp311-manylinux_2_36_x86_64``: the interpreter and ABI of the first
    tag ``packaging.tags.sys_tags()`` gives, on the platform that names the C library's level.

    A tree is built by and for one such tag, so a tree built in one container image is never imported by an
    image with another interpreter, ABI or platform (glibc level included).
    """
    from packaging import tags

    # The platform: the highest manylinux/musllinux level where there is one, else the first platform. Not
    # simply the first: packaging 26.3 lists the bare linux_<arch> tag first, which names no glibc level, and
    # two packaging releases must not file one interpreter's trees under two tags.
    every = list(tags.platform_tags())
    platforms = [next((p for p in every if p.startswith(_LIBC_LEVELS)), every[0])]
    if tags.interpreter_name() == "cp":
        # CPython's ABI tag is cp<version><abiflags>; deriving it from sys.abiflags spares loading all of
        # sysconfig's build data, which is what packaging reads it from (a test checks they agree).
        major, minor = sys.version_info[:2]
        abis = [f"cp{major}{minor}{sys.abiflags}"] if hasattr(sys, "abiflags") else None
        tag = next(iter(tags.cpython_tags(abis=abis, platforms=platforms)))
    else:
        tag = next(iter(tags.generic_tags(platforms=platforms)))
    return f"{tag.interpreter}-{tag.abi}-{tag.platform}"


def fingerprint() -> str:
    """Everything the tag is derived from: the interpreter binary, its version and flags, the C library, the
    machine, and the packaging release that derives it."""
    import packaging

    info = os.stat(sys.executable)
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        libc = ""
    return "|".join(
        map(
            str,
            (
                os.path.realpath(sys.executable),
                info.st_dev,
                info.st_ino,
                info.st_size,
                info.st_mtime_ns,
                sys.version,
                getattr(sys, "abiflags", ""),
                sys.implementation.cache_tag,
                libc,
                os.uname().machine,
                packaging.__version__,
                _DERIVATION,
            ),
        )
    )


def user_cache_dir() -> str:
    """This user's cache directory of repoinstall: ``$XDG_CACHE_HOME/repoinstall``, else ``~/.cache/repoinstall``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "repoinstall")


def cache_path(key: str) -> str:
    return os.path.join(user_cache_dir(), f"env-tag-{zlib.crc32(key.encode()):08x}")


@functools.cache
def environment_tag() -> str:
    key = fingerprint()
    path = cache_path(key)
    with contextlib.suppress(OSError, UnicodeDecodeError):
        with open(path, encoding="utf-8") as handle:
            stored_key, _, tag = handle.read(4096).rstrip("\n").partition("\n")
        if stored_key == key and _TAG.match(tag):
            return tag
    tag = compute()
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(f"{key}\n{tag}\n")
        os.replace(temporary, path)  # readers see the old file or the whole new one
    return tag
