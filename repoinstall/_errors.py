"""Exceptions: one base, one subclass per way an ensure can end badly, each with its CLI exit code."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

from ._redact import redact_all


class RepoinstallError(Exception):
    """Base of every error repoinstall raises on purpose; ``exit_code`` is what the CLI exits with.

    Its message never holds a URL's credentials: whatever text it is made from (an installer's output, a line of
    a lock file, a spec), a password or token in it is hidden (see :mod:`repoinstall._redact`), so neither the
    one-line error, the ``--json`` document nor an API caller's ``str(error)`` can show one."""

    exit_code: int = 1

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact_all(arg) if isinstance(arg, str) else arg for arg in args))


class InvalidInput(RepoinstallError):
    """A spec, requirements file, option or repo path that cannot be used (exit 2). Nothing was written."""

    exit_code = 2


class InvalidRequirement(InvalidInput):
    """A requirement that is not a usable PEP 508 name-and-version spec."""


class RequirementsFileError(InvalidInput):
    """A requirements file that is missing, unreadable or holds an unsupported line."""


class RepoUnusable(InvalidInput):
    """The repo path is not a directory, cannot be created, or cannot be written when it must be."""


class InstallError(RepoinstallError):
    """pip failed, the staged tree did not verify, or the repo ran out of space (exit 1)."""


class SourceRefused(InstallError):
    """What a source other than an installer sent (a registry's image) was refused: unsafe, over a bound, or not
    what it claims (exit 1). Nothing of it is stored; ``ensure --from`` installs from the index instead where one
    is allowed, with a warning naming the refusal."""


class ArtifactGone(InstallError):
    """An artifact a pinned install names (a lock file's, a tree's kept closure's) is no longer where it was
    (exit 1)."""


class Interrupted(RepoinstallError):
    """An install stopped because its caller or the process is being interrupted (SIGTERM, Ctrl-C): its installer
    was killed (or never started), its staging dir removed and its lock released (exit 130)."""

    exit_code = 130


class NotInstalled(RepoinstallError):
    """``path`` asked for a tree that is not installed (exit 1)."""


class LockTimeout(RepoinstallError):
    """Waiting for a peer's install lock took longer than the wait timeout (exit 3)."""

    exit_code = 3


class ResolutionError(RepoinstallError):
    """An unpinned spec could not be resolved to one version: index unreachable, refusing, garbled, or no
    version matches (exit 1). The message names the index with its credentials redacted."""


class NotOnIndex(ResolutionError):
    """No source lists a file of any version the spec admits for this Python: what every source answered proves it
    (not a source that could not be read). A pinned spec this is true of is not handed to an installer (exit 1)."""


class ActivationConflict(RepoinstallError):
    """``Repo.activate`` was asked for a tree whose modules this process already imported from another
    version (exit 1): one process holds one version of a module; use an isolated call for another."""


class TreesConflict(InvalidInput):
    """Trees asked for together hold different versions of one distribution (exit 2): on one import path the
    first would shadow the other, so which version runs would depend on the order they were given in."""


class IsolatedCallError(RepoinstallError):
    """``Repo.call_isolated``: the fresh interpreter died or its result could not be sent back (exit 1).
    An exception the called function raised is re-raised as itself instead."""


@contextlib.contextmanager
def os_errors(root: str, what: object) -> Iterator[None]:
    """Turn a filesystem error of the block into one clear line about ``what`` in the repo ``root``."""
    try:
        yield
    except OSError as error:
        from . import _log

        _log.logger().debug("%s: %s", what, error, exc_info=True)  # -v: where it happened
        raise from_os_error(error, root, what) from None


def from_os_error(error: OSError, root: str, what: object) -> RepoinstallError:
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return InstallError(f"{what}: the repo's filesystem is full ({root}): {error.strerror}")
    if error.errno == errno.EROFS:
        return RepoUnusable(f"repo {root} is read-only: cannot install {what}")
    if error.errno in (errno.EACCES, errno.EPERM):
        return RepoUnusable(f"repo {root}: permission denied at {error.filename or root}")
    return InstallError(f"{what}: {error.strerror or error} ({error.filename or root})")
