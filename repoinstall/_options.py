"""Settings values: how to lock and how to install. Plain immutable data (NamedTuples: cheap to import)."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable
from typing import NamedTuple

#: Defaults shared by the API and every command. The lock's fit NFS attribute caching.
STALE_AFTER = 120.0
HEARTBEAT = 20.0
WAIT_TIMEOUT = 1800.0
INSTALL_TIMEOUT = 900.0
#: Seconds an index answer cached on the volume stays fresh: absorbs a fleet's start, still sees new releases soon.
INDEX_TTL = 60.0
#: After a stop (SIGTERM, Ctrl-C), the longest the interrupted thread waits for the installs it ran to clean up
#: (installer killed, staging dir removed, lock released) before it goes on regardless; it takes milliseconds.
STOP_GRACE = 3.0
#: The installers a tree can be built with; the first is the default.
INSTALLERS = ("pip", "uv")
#: gc leaves debris younger than this: longer than an install may take, so it never races a live installer.
GC_OLDER_THAN = 3600.0
#: Registries (``--from``): bounds on what a pulled image writes, in bytes (files' contents) and files (every
#: entry), per layer and for the whole image. A layer holds one distribution: torch's is about 2.5 GB unpacked,
#: the largest CUDA libraries' a few GB; a data-science tree is a few hundred distributions and tens of GB.
REGISTRY_MAX_LAYER_BYTES = 8 << 30
REGISTRY_MAX_LAYER_FILES = 200_000
REGISTRY_MAX_BYTES = 64 << 30
REGISTRY_MAX_FILES = 2_000_000
#: The most layers an image may have (one per distribution): a few hundred is a large tree.
REGISTRY_MAX_LAYERS = 1_000
#: A blob arriving slower than this many bytes a second, averaged over the window (seconds), is given up, as
#: curl's ``--speed-limit``/``--speed-time`` do: a slow link passes (a 2.5 GB layer at 1 MB/s), a trickle fails.
REGISTRY_MIN_RATE = 16 << 10
REGISTRY_RATE_WINDOW = 60.0
#: The most installers one process runs at once, whatever ``--jobs`` asks (see :func:`max_jobs`).
JOBS_CEILING = 32


def max_jobs() -> int:
    """How many trees one process installs at once at most: twice the CPUs it may run on (an installer waits on
    the network about half its time), at least 2, at most :data:`JOBS_CEILING`. ``--jobs 30`` on two cores ran
    30 installers at once (load 9.7): it runs 4."""
    import os

    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(2, min(JOBS_CEILING, 2 * cpus))


class LockSettings(NamedTuple):
    """Defaults fit NFS attribute caching: a peer may see a heartbeat only seconds after it was written."""

    stale_after: float = STALE_AFTER
    heartbeat: float = HEARTBEAT
    wait_timeout: float = WAIT_TIMEOUT
    enabled: bool = True

    def validate(self) -> str | None:
        """A one-line reason these settings cannot work, or ``None``."""
        for label, value in (("stale-after", self.stale_after), ("heartbeat", self.heartbeat)):
            if not math.isfinite(value) or value <= 0:
                return f"--{label} must be a positive number of seconds, got {value}"
        if not math.isfinite(self.wait_timeout) or self.wait_timeout < 0:
            return f"--wait-timeout must be zero or a positive number of seconds, got {self.wait_timeout}"
        if self.heartbeat >= self.stale_after:
            return f"--heartbeat ({self.heartbeat}s) must be shorter than --stale-after ({self.stale_after}s)"
        return None


class FileIndex(NamedTuple):
    """A requirements file's index option lines (``--index-url``, ``--extra-index-url``, ``--find-links``,
    ``--no-index``, ``--trusted-host``), applied over the run's index settings as pip applies them, to that file's
    trees only (see :func:`repoinstall._pipconfig.index_config`). URLs may carry credentials: redact to show."""

    #: The last ``--index-url``: it replaces every index the run has, pip's configuration's extra indexes included.
    index_url: str | None = None
    #: The ``--extra-index-url`` lines after it (pip drops those before it with the list it replaces): added.
    extra_index_urls: tuple[str, ...] = ()
    #: ``--find-links``, a relative one resolved against the file's directory where it exists there (as pip): added.
    find_links: tuple[str, ...] = ()
    #: ``--no-index``: no index at all, whatever the other lines say (find-links are still read).
    no_index: bool = False
    #: ``--trusted-host``: TLS certificates not checked for these hosts (honoured only when allowed: see
    #: :func:`repoinstall._lockfile.request.read`).
    trusted_hosts: tuple[str, ...] = ()


class InstallOptions(NamedTuple):
    """Index and resolution options passed through to the installer unchanged.

    pip's own configuration (pip.conf, ``PIP_*``) stays in force underneath these.
    """

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    constraints: tuple[str, ...] = ()
    timeout: float = INSTALL_TIMEOUT
    python: str = sys.executable
    #: "pip" or "uv": which installer fills the staging dir (the tree records which one did).
    installer: str = INSTALLERS[0]
    #: The installers' download and wheel cache (``<dir>/pip``, ``<dir>/uv``); ``None``: each one's default.
    cache_dir: str | None = None
    #: pip's ``--no-binary`` and ``--only-binary`` values (``:all:``, ``:none:``, project names), given to pip and uv
    #: in this order, after what pip's configuration says: no-binary first, so ``:all:`` there and a name in
    #: only-binary builds every project from source but that one.
    no_binary: tuple[str, ...] = ()
    only_binary: tuple[str, ...] = ()
    #: pip's ``--trusted-host``: hosts whose TLS certificate is not checked, added to pip's configuration's; a
    #: requirements file's ``--trusted-host`` line is honoured for these.
    trusted_hosts: tuple[str, ...] = ()
    #: The index lines of the requirements file a tree was asked in, set by repoinstall for that tree's install
    #: and resolution, applied as pip applies them; ``None``: the run's settings alone.
    file_index: FileIndex | None = None
    #: Whether trees carry compiled bytecode (hash-based pycs, compiled once into each stored distribution); with
    #: ``False`` (``--no-compile``) they carry none, and are other trees than those with it: see
    #: :data:`repoinstall._disk.identity.NO_BYTECODE`.
    bytecode: bool = True

    def index_allowed(self) -> bool:
        """Whether an installer may look anywhere for artifacts: not ``--no-index`` without ``--find-links``."""
        lines = self.file_index or FileIndex()
        return not (self.no_index or lines.no_index) or bool(self.find_links or lines.find_links)

    def validate(self) -> str | None:
        """A one-line reason these options cannot work, or ``None``: the same checks for the API and the CLI.
        Index URLs are checked where pip's configuration is merged in (:func:`repoinstall._pipconfig.index_config`).
        """
        import os

        if not isinstance(self.bytecode, bool):
            return f"bytecode must be True or False, got {self.bytecode!r}"
        if self.installer not in INSTALLERS:
            return f"--installer must be one of {', '.join(INSTALLERS)}, got {self.installer!r}"
        if not math.isfinite(self.timeout) or self.timeout <= 0:
            return f"--install-timeout must be a positive number of seconds, got {self.timeout}"
        if self.cache_dir is not None and os.path.exists(self.cache_dir) and not os.path.isdir(self.cache_dir):
            return f"--cache-dir {self.cache_dir}: not a directory"
        for flag, values in (("--no-binary", self.no_binary), ("--only-binary", self.only_binary)):
            for value in binary_values(values):
                if (problem := format_control_problem(value)) is not None:
                    return f"{flag} {value!r}: {problem}"
        if not self.constraints:
            return None  # and the warm path never loads the file helpers
        from ._errors import RequirementsFileError
        from ._textfile import check

        for path in self.constraints:
            try:
                check(path, "constraints file")  # a regular file within the cap; opened, not read
            except RequirementsFileError as error:
                return str(error)
        return None


class LockChoice(NamedTuple):
    """Which optional parts of a PEP 751 lock a tree installs: the lock's ``extras`` and ``dependency-groups``
    (``--extra``, ``--group``). A value, so a tree asked with one choice is named, cached and looked up as that
    choice: another choice is another set of packages, hence another tree; the same choice, the same tree.

    ``groups`` ``None``: the lock's ``default-groups``; given, exactly these groups (as packaging's
    ``Pylock.select`` and ``uv pip install --group`` take them: name a default group too to keep it)."""

    #: Normalized (PEP 685) extra names.
    extras: frozenset[str] = frozenset()
    #: Normalized (PEP 735) group names; ``None``: the lock's default groups.
    groups: frozenset[str] | None = None

    @classmethod
    def of(cls, extras: Iterable[str] = (), groups: Iterable[str] | None = None) -> LockChoice:
        """The choice of these extras and groups, names normalized (``Fast_Path`` is ``fast-path``); an empty
        ``groups`` is no group at all, ``None`` the lock's defaults."""
        return cls(frozenset(map(_normalized, extras)), None if groups is None else frozenset(map(_normalized, groups)))

    def chosen(self) -> bool:
        """Whether anything but the lock's defaults is asked."""
        return bool(self.extras) or self.groups is not None

    def flags(self) -> str:
        """The choice as command-line flags, sorted (``--extra fast --group docs``), for a message."""
        groups = sorted(self.groups or ())
        return " ".join([*(f"--extra {e}" for e in sorted(self.extras)), *(f"--group {g}" for g in groups)])


#: No extras, the lock's default groups.
DEFAULT_CHOICE = LockChoice()


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def for_file(install: InstallOptions | None, index: FileIndex | None) -> InstallOptions | None:
    """``install`` for a tree asked in a requirements file with index lines ``index`` (``None``: as they are)."""
    if index is None:
        return install
    return (install or InstallOptions())._replace(file_index=index)


def binary_values(values: tuple[str, ...]) -> tuple[str, ...]:
    """``--only-binary``/``--no-binary`` values as pip reads them: each may be a comma-separated list."""
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def format_control_problem(value: str) -> str | None:
    """Why ``value`` is not one of pip's format-control values (``:all:``, ``:none:``, a project name), or ``None``."""
    import re

    if value in (":all:", ":none:") or re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?", value):
        return None
    return "not :all:, :none: or a project name (a comma-separated list of them as in pip)"


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``15m``, ``2h``, ``7d`` or ``1w``; ``ValueError`` with a clear message otherwise."""
    value = text.strip().lower()
    unit = _UNITS.get(value[-1:]) if value else None
    number = value[:-1] if unit is not None else value
    try:
        seconds = float(number) * (unit or 1.0)
    except ValueError:
        raise ValueError(f"{text!r} is not a duration (examples: 90, 90s, 15m, 2h, 7d)") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{text!r} is not a duration (examples: 90, 90s, 15m, 2h, 7d)")
    return seconds


def options_problem(settings: LockSettings, jobs: int, install: InstallOptions | None, index_ttl: float) -> str | None:
    """Why a :class:`~repoinstall.Repo` with these options cannot work (one line), or ``None``; nothing is opened."""
    if (problem := settings.validate()) is not None:
        return problem
    if not isinstance(jobs, int) or jobs < 1:
        return f"--jobs must be at least 1, got {jobs}"
    if install is not None and (problem := install.validate()) is not None:
        return problem
    if not index_ttl >= 0:
        return f"--index-ttl must be zero or a positive number of seconds, got {index_ttl}"
    return None
