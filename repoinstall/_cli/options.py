"""The options commands share, each declared once, and the decorator that gives a command a set of them.

A command names the options it takes (``@takes(*LOCKING, *INSTALLING)``) and receives them packed in one
:class:`Options` value; the API objects (``LockSettings``, ``InstallOptions``, ``Repo``) check the values, so the
command line and API users get the same one-line errors.

No ``from __future__ import annotations`` here: typer reads these annotations as objects.
"""

import functools
import inspect
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, TypeVar

import typer

from .. import _log
from .._options import (
    HEARTBEAT,
    INDEX_TTL,
    INSTALL_TIMEOUT,
    INSTALLERS,
    REGISTRY_MAX_BYTES,
    REGISTRY_MAX_FILES,
    REGISTRY_MAX_LAYER_BYTES,
    REGISTRY_MAX_LAYER_FILES,
    REGISTRY_MAX_LAYERS,
    REGISTRY_MIN_RATE,
    REGISTRY_RATE_WINDOW,
    STALE_AFTER,
    WAIT_TIMEOUT,
)

if TYPE_CHECKING:
    from .._oci.settings import Settings
    from .._options import InstallOptions, LockChoice


#: What --log-format takes: text lines as a person reads them, or one JSON object per line (docs/reference/json.md).
LOG_FORMATS = ("text", "json")


class Options(NamedTuple):
    """Every shared option's value; a command that does not take one gets its default (the API's)."""

    repo: str | None = None
    as_json: bool = False
    quiet: int = 0
    verbose: int = 0
    log_format: str = "text"
    no_lock: bool = False
    stale_after: float = STALE_AFTER
    heartbeat: float = HEARTBEAT
    wait_timeout: float = WAIT_TIMEOUT
    install_timeout: float = INSTALL_TIMEOUT
    installer: str = INSTALLERS[0]
    no_compile: bool = False
    cache_dir: str | None = None
    index_url: str | None = None
    extra_index_url: list[str] | None = None
    find_links: list[str] | None = None
    no_index: bool = False
    trusted_host: list[str] | None = None
    constraint: list[str] | None = None
    jobs: int = 4
    refresh: bool = False
    pre: bool = False
    index_ttl: float = INDEX_TTL
    together: bool = False
    require_hashes: bool = False
    dry_run: bool = False
    no_binary: list[str] | None = None
    only_binary: list[str] | None = None
    from_registry: str | None = None
    push_after: bool = False
    plain_http: bool = False
    registry_ca: str | None = None
    registry_client_cert: str | None = None
    registry_timeout: float = 60.0
    registry_max_layers: int = REGISTRY_MAX_LAYERS
    registry_max_layer_bytes: int = REGISTRY_MAX_LAYER_BYTES
    registry_max_layer_files: int = REGISTRY_MAX_LAYER_FILES
    registry_max_bytes: int = REGISTRY_MAX_BYTES
    registry_max_files: int = REGISTRY_MAX_FILES
    registry_min_rate: int = REGISTRY_MIN_RATE
    registry_rate_window: float = REGISTRY_RATE_WINDOW
    extra: list[str] | None = None
    group: list[str] | None = None

    def registry_settings(self) -> "Settings":
        from .._oci.settings import Settings

        return Settings(
            self.plain_http,
            self.registry_ca,
            self.registry_client_cert,
            self.registry_timeout,
            max_layers=self.registry_max_layers,
            max_layer_bytes=self.registry_max_layer_bytes,
            max_layer_files=self.registry_max_layer_files,
            max_bytes=self.registry_max_bytes,
            max_files=self.registry_max_files,
            min_rate=self.registry_min_rate,
            rate_window=self.registry_rate_window,
        )

    def install_options(self) -> "InstallOptions":
        from .._options import InstallOptions, binary_values

        return InstallOptions(
            self.index_url,
            tuple(self.extra_index_url or ()),
            tuple(self.find_links or ()),
            self.no_index,
            tuple(self.constraint or ()),
            self.install_timeout,
            installer=self.installer,
            cache_dir=self.cache_dir,
            no_binary=binary_values(tuple(self.no_binary or ())),
            only_binary=binary_values(tuple(self.only_binary or ())),
            trusted_hosts=tuple(self.trusted_host or ()),
            bytecode=not self.no_compile,
        )

    def lock_choice(self) -> "LockChoice":
        """``--extra`` and ``--group``: which of a pylock.toml's extras and dependency groups to install."""
        from .._options import LockChoice

        return LockChoice.of(self.extra or (), self.group)

    def tree_keywords(self) -> dict[str, Any]:
        """``Repo(...)`` keywords for a command that only names trees (``path``, ``export``, ``remove``): which
        trees, with bytecode or without (``--no-compile``)."""
        from .._options import InstallOptions

        return {"install": InstallOptions(bytecode=False)} if self.no_compile else {}

    def repo_settings(self) -> dict[str, Any]:
        """``Repo(...)`` keywords: locking, installing and resolving as asked."""
        return {
            "lock": not self.no_lock,
            "stale_after": self.stale_after,
            "heartbeat": self.heartbeat,
            "wait_timeout": self.wait_timeout,
            "jobs": self.jobs,
            "install": self.install_options(),
            "refresh": self.refresh,
            "pre": self.pre,
            "index_ttl": self.index_ttl,
            **(self.registry_keywords() if self.from_registry else {}),
        }

    def registry_keywords(self) -> dict[str, Any]:
        """``Repo(...)`` keywords for ``--from`` (:class:`InvalidInput` for a reference that is not one)."""
        from .._oci.reference import Reference

        return {"pull_from": Reference.parse(self.from_registry or ""), "registry": self.registry_settings()}


_SECONDS = "SECONDS"

#: name -> its type with typer's declaration. The defaults are Options' own.
DECLARED: dict[str, Any] = {
    "repo": Annotated[
        str | None,
        typer.Option(
            "--repo",
            envvar="REPOINSTALL_REPO",
            metavar="DIR",
            help="Repo directory (default: a per-user data directory).",
        ),
    ],
    "as_json": Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")],
    "quiet": Annotated[
        int, typer.Option("-q", "--quiet", count=True, help="Print less: -q warnings and errors, -qq errors only.")
    ],
    "verbose": Annotated[
        int,
        typer.Option("-v", "--verbose", count=True, help="Print more: the installer's command line and output."),
    ],
    "log_format": Annotated[
        str,
        typer.Option(
            "--log-format",
            envvar="REPOINSTALL_LOG_FORMAT",
            metavar="|".join(LOG_FORMATS),
            help="How stderr's log lines are written: text, or json (one object per line, for a log collector).",
        ),
    ],
    "no_lock": Annotated[
        bool,
        typer.Option(
            "--no-lock",
            envvar="REPOINSTALL_NO_LOCK",
            help="Take no locks (one node only): staging and atomic publish stay.",
        ),
    ],
    "stale_after": Annotated[
        float,
        typer.Option(
            "--stale-after",
            envvar="REPOINSTALL_STALE_AFTER",
            metavar=_SECONDS,
            help="Take over a lock whose heartbeat stopped this long ago.",
        ),
    ],
    "heartbeat": Annotated[
        float,
        typer.Option(
            "--heartbeat",
            envvar="REPOINSTALL_HEARTBEAT",
            metavar=_SECONDS,
            help="How often a holder refreshes its lock.",
        ),
    ],
    "wait_timeout": Annotated[
        float,
        typer.Option(
            "--wait-timeout",
            envvar="REPOINSTALL_WAIT_TIMEOUT",
            metavar=_SECONDS,
            help="Give up waiting for a lock (exit 3).",
        ),
    ],
    "install_timeout": Annotated[
        float,
        typer.Option(
            "--install-timeout",
            envvar="REPOINSTALL_INSTALL_TIMEOUT",
            metavar=_SECONDS,
            help="Give up on a tree's install after this long: all the installer's runs for it (pip, or uv's lock "
            "and install).",
        ),
    ],
    "installer": Annotated[
        str,
        typer.Option(
            "--installer",
            envvar="REPOINSTALL_INSTALLER",
            metavar="pip|uv",
            help="Which installer fills a tree: pip, or uv (pip install 'repoinstall[uv]').",
        ),
    ],
    "no_compile": Annotated[
        bool,
        typer.Option(
            "--no-compile",
            envvar="REPOINSTALL_NO_COMPILE",
            help="Trees without bytecode (as pip's --no-compile, uv's default): other trees than those with it, "
            "never one replacing the other. Every process then compiles what it imports, in memory, unless "
            "PYTHONPYCACHEPREFIX names a writable directory.",
        ),
    ],
    "cache_dir": Annotated[
        str | None,
        typer.Option(
            "--cache-dir",
            envvar="REPOINSTALL_CACHE_DIR",
            metavar="DIR",
            help="The installers' download cache, shared by this host's installs (default: pip's and uv's own).",
        ),
    ],
    # The index and format options: as pip's, merged with pip's configuration; each is used where the version of
    # an unpinned spec is chosen (repoinstall's own resolution, and --dry-run's plan) and given to the installer,
    # pip or uv (index URLs in its environment, never on its command line).
    "index_url": Annotated[
        str | None,
        typer.Option(
            "--index-url",
            "-i",
            metavar="URL",
            help="As pip: the package index (default: pip's configuration, else PyPI). Read to resolve unpinned "
            "specs, and by pip or uv to install.",
        ),
    ],
    "extra_index_url": Annotated[
        list[str] | None,
        typer.Option(
            "--extra-index-url",
            metavar="URL",
            help="As pip: one more index, searched too (repeatable). Read to resolve unpinned specs, and by pip or "
            "uv to install.",
            show_default=False,
        ),
    ],
    "find_links": Annotated[
        list[str] | None,
        typer.Option(
            "--find-links",
            "-f",
            metavar="LOCATION",
            help="As pip: a directory or page of links to archives, searched too (repeatable). Read to resolve "
            "unpinned specs, and by pip or uv to install.",
            show_default=False,
        ),
    ],
    "no_index": Annotated[
        bool,
        typer.Option(
            "--no-index",
            help="As pip: no index, only --find-links, both to resolve unpinned specs and for pip or uv.",
        ),
    ],
    "trusted_host": Annotated[
        list[str] | None,
        typer.Option(
            "--trusted-host",
            envvar="REPOINSTALL_TRUSTED_HOST",
            metavar="HOST",
            help="As pip: do not check this host's TLS certificate (repeatable; the variable: hosts separated by "
            "spaces), to resolve and for pip or uv; also allows a requirements file's --trusted-host line for it.",
            show_default=False,
        ),
    ],
    "constraint": Annotated[
        list[str] | None,
        typer.Option(
            "--constraint",
            "-c",
            metavar="FILE",
            help="As pip: a constraints file (repeatable), obeyed to resolve unpinned specs and by pip or uv.",
            show_default=False,
        ),
    ],
    "jobs": Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            envvar="REPOINSTALL_JOBS",
            metavar="N",
            help="Install this many different trees at once (at most twice the CPUs this process may use, and 32).",
        ),
    ],
    "refresh": Annotated[
        bool,
        typer.Option(
            "--refresh",
            "-U",
            "--upgrade",
            envvar="REPOINSTALL_REFRESH",
            help="Ask the index for unpinned specs even when an installed tree matches; install a newer match "
            "(-U/--upgrade as in pip: the same).",
        ),
    ],
    "pre": Annotated[bool, typer.Option("--pre", help="Let unpinned specs resolve to pre-releases.")],
    "index_ttl": Annotated[
        float,
        typer.Option(
            "--index-ttl",
            envvar="REPOINSTALL_INDEX_TTL",
            metavar=_SECONDS,
            help="How long index answers cached on the volume stay fresh (0: always ask).",
        ),
    ],
    "together": Annotated[
        bool,
        typer.Option(
            "--together",
            help="Install the SPECs as one tree, their dependencies resolved in one go: one version of each.",
        ),
    ],
    "require_hashes": Annotated[
        bool,
        typer.Option(
            "--require-hashes",
            help="As pip: refuse input that is not pinned and hashed (a -r FILE of hashed lines, or a pylock.toml).",
        ),
    ],
    "dry_run": Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Change nothing, only say what would be done: removed (gc, remove); installed, stored and "
            "downloaded (ensure).",
        ),
    ],
    "no_binary": Annotated[
        list[str] | None,
        typer.Option(
            "--no-binary",
            metavar=":all:|:none:|NAME[,NAME]",
            help="As pip: build these projects from source distributions; obeyed to resolve unpinned specs and by "
            "pip or uv.",
            show_default=False,
        ),
    ],
    "only_binary": Annotated[
        list[str] | None,
        typer.Option(
            "--only-binary",
            metavar=":all:|:none:|NAME[,NAME]",
            help="As pip: only wheels for these projects, never a build; obeyed to resolve unpinned specs and by pip "
            "or uv.",
            show_default=False,
        ),
    ],
    "from_registry": Annotated[
        str | None,
        typer.Option(
            "--from",
            envvar="REPOINSTALL_FROM",
            metavar="HOST[:PORT]/REPOSITORY",
            help="Look for each missing tree's image there first: store only the layers the store lacks, no installer.",
        ),
    ],
    "push_after": Annotated[
        bool,
        typer.Option("--push", envvar="REPOINSTALL_PUSH", help="With --from: push the trees installed here to it."),
    ],
    "plain_http": Annotated[
        bool,
        typer.Option(
            "--plain-http", envvar="REPOINSTALL_PLAIN_HTTP", help="Talk HTTP to the registry (a private network)."
        ),
    ],
    "registry_ca": Annotated[
        str | None,
        typer.Option(
            "--registry-ca", envvar="REPOINSTALL_REGISTRY_CA", metavar="FILE", help="CA bundle for the registry."
        ),
    ],
    "registry_client_cert": Annotated[
        str | None,
        typer.Option(
            "--registry-client-cert",
            envvar="REPOINSTALL_REGISTRY_CLIENT_CERT",
            metavar="FILE",
            help="PEM with the client key and certificate for the registry.",
        ),
    ],
    "registry_timeout": Annotated[
        float,
        typer.Option(
            "--registry-timeout",
            envvar="REPOINSTALL_REGISTRY_TIMEOUT",
            metavar=_SECONDS,
            help="Give up on a registry that answers nothing for this long.",
        ),
    ],
    "registry_max_layers": Annotated[
        int,
        typer.Option(
            "--registry-max-layers",
            envvar="REPOINSTALL_REGISTRY_MAX_LAYERS",
            metavar="N",
            help="Refuse an image of more layers (one per distribution), before fetching any.",
        ),
    ],
    "registry_max_layer_bytes": Annotated[
        int,
        typer.Option(
            "--registry-max-layer-bytes",
            envvar="REPOINSTALL_REGISTRY_MAX_LAYER_BYTES",
            metavar="BYTES",
            help="Refuse a layer that claims or writes more bytes than this.",
        ),
    ],
    "registry_max_layer_files": Annotated[
        int,
        typer.Option(
            "--registry-max-layer-files",
            envvar="REPOINSTALL_REGISTRY_MAX_LAYER_FILES",
            metavar="N",
            help="Refuse a layer that writes more files than this.",
        ),
    ],
    "registry_max_bytes": Annotated[
        int,
        typer.Option(
            "--registry-max-bytes",
            envvar="REPOINSTALL_REGISTRY_MAX_BYTES",
            metavar="BYTES",
            help="Refuse an image whose layers claim or write more bytes than this in all.",
        ),
    ],
    "registry_max_files": Annotated[
        int,
        typer.Option(
            "--registry-max-files",
            envvar="REPOINSTALL_REGISTRY_MAX_FILES",
            metavar="N",
            help="Refuse an image whose layers write more files than this in all.",
        ),
    ],
    "registry_min_rate": Annotated[
        int,
        typer.Option(
            "--registry-min-rate",
            envvar="REPOINSTALL_REGISTRY_MIN_RATE",
            metavar="BYTES_PER_SECOND",
            help="Give up on a transfer slower than this over --registry-rate-window (as curl's --speed-limit).",
        ),
    ],
    "registry_rate_window": Annotated[
        float,
        typer.Option(
            "--registry-rate-window",
            envvar="REPOINSTALL_REGISTRY_RATE_WINDOW",
            metavar=_SECONDS,
            help="The window --registry-min-rate is averaged over (as curl's --speed-time).",
        ),
    ],
    "extra": Annotated[
        list[str] | None,
        typer.Option(
            "--extra",
            metavar="EXTRA",
            help="Of a -r pylock.toml: install this extra too (PEP 751 extras; repeatable). Another choice is "
            "another tree.",
            show_default=False,
        ),
    ],
    "group": Annotated[
        list[str] | None,
        typer.Option(
            "--group",
            metavar="GROUP",
            help="Of a -r pylock.toml: install this dependency group (repeatable); given, these groups replace the "
            "lock's default-groups (as uv pip install --group; name a default group to keep it).",
            show_default=False,
        ),
    ],
}

#: The sets commands take.
OUTPUT = ("repo", "as_json", "quiet", "verbose", "log_format")
LOCKING = ("no_lock", "stale_after", "heartbeat", "wait_timeout")
INSTALLING = (
    "install_timeout",
    "installer",
    "no_compile",
    "cache_dir",
    "index_url",
    "extra_index_url",
    "find_links",
    "no_index",
    "trusted_host",
    "constraint",
    "no_binary",
    "only_binary",
)
RESOLVING = ("jobs", "refresh", "pre", "index_ttl")
#: Which of a pylock.toml's extras and dependency groups: for every command that takes -r and names a tree by it.
LOCK_CHOICE = ("extra", "group")
ENSURING = (*RESOLVING, "together", "require_hashes")
REGISTRY = (
    "plain_http",
    "registry_ca",
    "registry_client_cert",
    "registry_timeout",
    "registry_max_layers",
    "registry_max_layer_bytes",
    "registry_max_layer_files",
    "registry_max_bytes",
    "registry_max_files",
    "registry_min_rate",
    "registry_rate_window",
)

F = TypeVar("F", bound=Callable[..., None])


def takes(*names: str) -> Callable[[F], F]:
    """Give a command the shared options ``names`` (after its own parameters), passed to it as ``opts``."""
    assert set(names) <= set(DECLARED), set(names) - set(DECLARED)
    defaults = Options()

    def decorate(command: F) -> F:
        signature = inspect.signature(command)
        own = [p for p in signature.parameters.values() if p.name != "opts"]
        shared = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=getattr(defaults, name), annotation=kind)
            for name, kind in ((n, DECLARED[n]) for n in names)
        ]

        @functools.wraps(command)
        def with_options(**values: Any) -> None:
            opts = Options(**{name: values.pop(name) for name in names})
            command(opts=opts, **values)

        parameters = [*own, *shared]
        with_options.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        with_options.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_options  # type: ignore[return-value]

    return decorate


def repo_path(opts: Options, *, announce: bool) -> str:
    """The repo to use: ``--repo``/``REPOINSTALL_REPO``, else the per-user default (said on stderr if asked)."""
    from .._disk.layout import default_repo

    repo = opts.repo
    if repo is None and os.environ.get("REPOINSTALL_REPO") == "":
        repo = ""  # set but empty (a missing value in a pod spec): an error, never the per-user default
    if repo is not None:
        return repo  # Layout refuses "" and "/" with one line
    path = default_repo()
    if announce and _log.json_lines():
        _log.emit("repo.default", "using the default repo %s", path, path=path)
    elif announce:
        typer.echo(f"repoinstall: using the default repo {path}", err=True)
    return path
