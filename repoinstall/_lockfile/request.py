"""A requirements file (``-r``) as a request: a lock file's tree, or its requirements one by one.

The input layer's answer to "what does this file ask for": read here, and handed on as values (a
:class:`~repoinstall._requirements.Requested` whose ``locked`` pins name each artifact), so the install layer
takes pins and never opens a lock file. A lock becomes the tree of its pins, named for its closure (each pin's
name, version and hashes), never for the file that carried it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from packaging.version import Version

from .._disk.identity import legacy_lock_name
from .._disk.pin import Pin, closure_key
from .._errors import InvalidInput
from .._requirements import Requested

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from .._options import InstallOptions, LockChoice
    from .environment import Environment
    from .model import Lock

#: A lock file's tree is its own metapackage's only version.
LOCK_VERSION = Version("1")


def read(
    path: str,
    *,
    require_hashes: bool = False,
    install: InstallOptions | None = None,
    choice: LockChoice | None = None,
    environment: Environment | None = None,
) -> Requested | list[Requested]:
    """A requirements file (``-r``) as asked: a lock file's tree, when it is a PEP 751 lock or every line of it is
    pinned and hashed, else its requirements one by one. Mixed hashed and unhashed lines, or anything not fully
    hashed with ``require_hashes``: :class:`RequirementsFileError` with pip's reason (exit 2).

    ``install``: the lock is read to be installed with these options, so each local artifact it names must be a
    regular file below the lock file's directory or a local find-links directory of theirs (see
    :mod:`.local`); ``None``: read only to name its tree (``path``, ``remove``, ``export``), which reads no
    artifact.

    ``choice``: the extras and dependency groups of a ``pylock.toml`` to install (``None``: its defaults); given
    for another file, :class:`RequirementsFileError` (exit 2). ``environment``: the interpreter the tree is for
    (``None``: this one), whose markers and wheel tags select the lock's packages and artifacts."""
    from .._options import DEFAULT_CHOICE
    from .read import is_lock_file, not_a_pylock, read_lock

    if is_lock_file(path):
        roots = None if install is None else _find_links_roots(install)
        return request(read_lock(path, environment=environment, choice=choice or DEFAULT_CHOICE, roots=roots))
    if choice is not None and choice.chosen():
        from .._errors import RequirementsFileError

        raise RequirementsFileError(not_a_pylock(path, choice))
    from .._requirements import read_requirements_file
    from .environment import THIS
    from .hashed import hash_mode, lock_from_requirements

    found = read_requirements_file(path)
    index = found[0].file_index if found else None
    if hash_mode(found, require_hashes=require_hashes, environment=environment or THIS):
        return request(lock_from_requirements(found, path, environment=environment or THIS))._replace(file_index=index)
    if index is not None and index.trusted_hosts and install is not None:
        _check_trusted(path, index.trusted_hosts, install)
    return found


def _check_trusted(path: str, hosts: tuple[str, ...], install: InstallOptions) -> None:
    """A file's ``--trusted-host`` turns TLS certificate checks off for that host: honoured for a lock (every
    artifact's hash is checked, whatever the connection), else only for a host the run trusts already (the command
    line's ``--trusted-host``, or pip's configuration); otherwise one line (exit 2) saying how."""
    from .._errors import RequirementsFileError
    from .._pipconfig import index_config

    trusted = set(index_config(install._replace(file_index=None)).trusted_hosts)
    if untrusted := [host for host in hosts if host not in trusted]:
        host = untrusted[0]
        raise RequirementsFileError(
            f"{path}: --trusted-host {host} would turn TLS certificate checks off for {host}, and not every "
            f"requirement is hashed: give --trusted-host {host} on the command line to allow it, or hash every "
            "requirement (pip-compile --generate-hashes)"
        )


def _find_links_roots(install: InstallOptions) -> Callable[[], Sequence[Path]]:
    """The local find-links directories ``install`` (with pip's configuration) names, read when first asked."""

    def roots() -> Sequence[Path]:
        from .._pipconfig import index_config
        from .local import find_links_roots

        return find_links_roots(index_config(install).find_links)

    return roots


def request(lock: Lock) -> Requested:
    """The request of what ``lock`` installs in this environment: the tree of its pins (see :func:`request_of`)."""
    if not lock.packages:
        raise InvalidInput(f"{lock.source}: no package of this lock is for this environment; nothing to install")
    pins = tuple(Pin(p.name, p.version, p.url or "", p.hashes) for p in lock.packages)
    # Its text is the file's absolute path: the record says where the lock came from.
    return request_of(pins, os.path.abspath(lock.source), lock.source)


def request_of(pins: tuple[Pin, ...], text: str, source: str | None = None, name: str | None = None) -> Requested:
    """The request of the lock tree ``name``==1 that installs ``pins``; its name derives from the closure (each
    pin's name, version and hashes), never from the file that carried it: ``name`` (see
    :meth:`repoinstall._choose.Chooser.pinned`), else ``locked-<16 hex of its key>``."""
    return lock_request(name or legacy_lock_name(closure_key(pins)), text, pins, source)


def lock_request(name: str, text: str, pins: tuple[Pin, ...], source: str | None = None) -> Requested:
    """The request of the lock tree ``name``==1 installed from ``pins``."""
    members = tuple(pin.member for pin in pins)
    return Requested(text, name, (), LOCK_VERSION, source=source or text, members=members, locked=pins)
