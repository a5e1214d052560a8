"""The ``repoinstall`` command line.

No ``from __future__ import annotations`` here: typer would then eval every annotation string on each run.
"""

import json
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from . import _log
from ._errors import RepoinstallError
from ._layout import default_repo
from ._options import HEARTBEAT, INDEX_TTL, INSTALL_TIMEOUT, STALE_AFTER, WAIT_TIMEOUT
from ._repo import Repo
from ._results import EnsureResult

if TYPE_CHECKING:
    from ._options import InstallOptions
    from ._requirements import Requested

EXIT_CODES = """\
Exit codes: 0 ok; 1 install failed (pip error, disk full, not installed);
2 bad input (usage, spec, requirements file, unusable repo path);
3 timed out waiting for a peer's install lock."""

app = typer.Typer(
    help="Install Python packages once into a repo directory shared by many pods.\n\n" + EXIT_CODES,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

RepoOpt = Annotated[
    str | None,
    typer.Option("--repo", envvar="REPOINSTALL_REPO", help="Repo directory (default: a per-user data directory)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
QuietOpt = Annotated[bool, typer.Option("-q", "--quiet", help="Only print errors.")]
VerboseOpt = Annotated[bool, typer.Option("-v", "--verbose", help="Print debugging detail.")]
SpecsArg = Annotated[
    list[str] | None, typer.Argument(metavar="[SPEC]...", help="PEP 508 requirements.", show_default=False)
]
ReqOpt = Annotated[
    list[str] | None,
    typer.Option("-r", "--requirement", metavar="FILE", help="Requirements file (repeatable).", show_default=False),
]


def _fail(error: RepoinstallError | str, code: int | None = None) -> NoReturn:
    message = str(error)
    typer.echo(f"repoinstall: error: {message}", err=True)
    raise typer.Exit(code if code is not None else getattr(error, "exit_code", 1))


def _repo_path(repo: str | None, quiet: bool) -> str:
    if repo is None and os.environ.get("REPOINSTALL_REPO") == "":
        repo = ""  # set but empty (a missing value in a pod spec): an error, never the per-user default
    if repo is not None:
        return repo  # Layout refuses "" and "/" with one line
    path = default_repo()
    if not quiet:
        typer.echo(f"repoinstall: using the default repo {path}", err=True)
    return path


StaleOpt = Annotated[
    float,
    typer.Option(
        "--stale-after",
        envvar="REPOINSTALL_STALE_AFTER",
        metavar="SECONDS",
        help="Take over a lock whose heartbeat stopped this long ago.",
    ),
]
HeartbeatOpt = Annotated[
    float,
    typer.Option(
        "--heartbeat", envvar="REPOINSTALL_HEARTBEAT", metavar="SECONDS", help="How often a holder refreshes its lock."
    ),
]
WaitOpt = Annotated[
    float,
    typer.Option(
        "--wait-timeout",
        envvar="REPOINSTALL_WAIT_TIMEOUT",
        metavar="SECONDS",
        help="Give up waiting for a lock (exit 3).",
    ),
]
NoLockOpt = Annotated[
    bool,
    typer.Option(
        "--no-lock",
        envvar="REPOINSTALL_NO_LOCK",
        help="Take no locks (one node only): staging and atomic publish stay.",
    ),
]
InstallTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--install-timeout", envvar="REPOINSTALL_INSTALL_TIMEOUT", metavar="SECONDS", help="Bound one pip run."
    ),
]
IndexUrlOpt = Annotated[str | None, typer.Option("--index-url", "-i", metavar="URL", help="Passed to pip.")]
ExtraIndexOpt = Annotated[
    list[str] | None, typer.Option("--extra-index-url", metavar="URL", help="Passed to pip.", show_default=False)
]
FindLinksOpt = Annotated[
    list[str] | None, typer.Option("--find-links", "-f", metavar="LOCATION", help="Passed to pip.", show_default=False)
]
NoIndexOpt = Annotated[bool, typer.Option("--no-index", help="Passed to pip.")]
ConstraintOpt = Annotated[
    list[str] | None, typer.Option("--constraint", "-c", metavar="FILE", help="Passed to pip.", show_default=False)
]
InstallerOpt = Annotated[
    str,
    typer.Option(
        "--installer",
        envvar="REPOINSTALL_INSTALLER",
        metavar="pip|uv",
        help="Which installer fills a tree: pip, or uv (pip install 'repoinstall[uv]').",
    ),
]
CacheDirOpt = Annotated[
    str | None,
    typer.Option(
        "--cache-dir",
        envvar="REPOINSTALL_CACHE_DIR",
        metavar="DIR",
        help="The installers' download cache, shared by this host's installs (default: pip's and uv's own).",
    ),
]

JobsOpt = Annotated[
    int, typer.Option("--jobs", "-j", envvar="REPOINSTALL_JOBS", help="Install this many different trees at once.")
]
RefreshOpt = Annotated[
    bool,
    typer.Option(
        "--refresh",
        envvar="REPOINSTALL_REFRESH",
        help="Ask the index for unpinned specs even when an installed tree matches; install a newer match.",
    ),
]
PreOpt = Annotated[bool, typer.Option("--pre", help="Let unpinned specs resolve to pre-releases.")]
IndexTtlOpt = Annotated[
    float,
    typer.Option(
        "--index-ttl",
        envvar="REPOINSTALL_INDEX_TTL",
        metavar="SECONDS",
        help="How long index answers cached on the volume stay fresh (0: always ask).",
    ),
]


def _install_options(
    index_url: str | None,
    extra_index_url: list[str] | None,
    find_links: list[str] | None,
    no_index: bool,
    constraint: list[str] | None,
    install_timeout: float,
    installer: str,
    cache_dir: str | None,
) -> "InstallOptions":
    from ._options import InstallOptions

    # Checked by InstallOptions.validate() when the Repo is made, as for API users.
    return InstallOptions(
        index_url,
        tuple(extra_index_url or ()),
        tuple(find_links or ()),
        no_index,
        tuple(constraint or ()),
        install_timeout,
        installer=installer,
        cache_dir=cache_dir,
    )


def _repo_settings(params: dict[str, Any]) -> dict[str, Any]:
    """``Repo(...)`` keywords from the parameters ``ensure`` and ``run`` share (passed as their ``locals()``)."""
    options = _install_options(
        params["index_url"],
        params["extra_index_url"],
        params["find_links"],
        params["no_index"],
        params["constraint"],
        params["install_timeout"],
        params["installer"],
        params["cache_dir"],
    )
    return {
        "lock": not params["no_lock"],
        "stale_after": params["stale_after"],
        "heartbeat": params["heartbeat"],
        "wait_timeout": params["wait_timeout"],
        "jobs": params["jobs"],
        "install": options,
        "refresh": params["refresh"],
        "pre": params["pre"],
        "index_ttl": params["index_ttl"],
    }


def _ensure_cli(
    specs: list[str] | None, requirement: list[str] | None, repo: str | None, silent: bool, settings: dict[str, Any]
) -> "tuple[list[Requested], str, str, list[EnsureResult | RepoinstallError]]":
    """Parse the specs and files, ensure them all; what was asked, the repo, its env tag and each outcome."""
    from ._requirements import collect

    if not specs and not requirement:
        _fail("nothing to ensure: give SPEC arguments or -r FILE", 2)
    try:
        # Files that list nothing (comments only) are fine: an init container for an empty list is a no-op.
        wanted = collect(specs or [], requirement or [])
    except RepoinstallError as error:
        _fail(error)
    progress = None
    if sys.stderr.isatty() and not silent:
        from ._progress import Progress

        progress = Progress()
    try:
        with Repo(_repo_path(repo, silent), on_event=progress, **settings) as store:
            outcomes = store.ensure_all(wanted, return_exceptions=True)
    except RepoinstallError as error:
        _fail(error)
    finally:
        if progress is not None:
            progress.close()
    return wanted, store.path, store.env, outcomes


@app.command(epilog=EXIT_CODES)
def ensure(
    specs: SpecsArg = None,
    requirement: ReqOpt = None,
    repo: RepoOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    jobs: JobsOpt = 4,
    no_lock: NoLockOpt = False,
    stale_after: StaleOpt = STALE_AFTER,
    heartbeat: HeartbeatOpt = HEARTBEAT,
    wait_timeout: WaitOpt = WAIT_TIMEOUT,
    install_timeout: InstallTimeoutOpt = INSTALL_TIMEOUT,
    installer: InstallerOpt = "pip",
    cache_dir: CacheDirOpt = None,
    index_url: IndexUrlOpt = None,
    extra_index_url: ExtraIndexOpt = None,
    find_links: FindLinksOpt = None,
    no_index: NoIndexOpt = False,
    constraint: ConstraintOpt = None,
    refresh: RefreshOpt = False,
    pre: PreOpt = False,
    index_ttl: IndexTtlOpt = INDEX_TTL,
) -> None:
    """Install what is missing (once, cluster-wide) and print where each tree is.

    Unpinned specs (pkg, pkg>=2,<3) take the highest installed version that matches, with no network; only
    if none matches (or with --refresh) is the index asked, as pip would ask it (pip.conf, PIP_INDEX_URL,
    --index-url, ~/.netrc).
    """
    _log.configure_cli(quiet=quiet, verbose=verbose)
    settings = _repo_settings(locals())
    wanted, root, env, outcomes = _ensure_cli(specs, requirement, repo, quiet or as_json, settings)
    results = [o for o in outcomes if isinstance(o, EnsureResult)]
    errors = [(w, o) for w, o in zip(wanted, outcomes, strict=True) if isinstance(o, RepoinstallError)]
    if as_json:
        document = {
            "repo": root,
            "env": env,
            "packages": [r.as_dict() for r in results if r.action != "skipped"],
            "skipped": [
                {"requirement": r.requirement, "reason": "marker is false"} for r in results if r.action == "skipped"
            ],
        }
        if errors:
            document["errors"] = [{"requirement": w.text, "error": str(e), "exit_code": e.exit_code} for w, e in errors]
        typer.echo(json.dumps(document, indent=2))
    elif not quiet:
        for result in results:
            if result.action == "skipped":
                typer.echo(f"skipped    {result.requirement} (marker is false)")
            else:
                typer.echo(f"{result.action:<10} {result.name}=={result.version}  {result.path}")
    for _, failure in errors:
        typer.echo(f"repoinstall: error: {failure}", err=True)
    if errors:
        raise typer.Exit(errors[0][1].exit_code)


#: ``repoinstall run SPEC... -- COMMAND...``: main() takes the command off before typer parses the rest, since
#: click drops the ``--`` that tells where the specs end.
_run_command: list[str] = []


@app.command(
    epilog="Exit: the command's own code once it runs; 126/127 if it cannot be run; else as for ensure.",
    context_settings={"help_option_names": ["-h", "--help"]},
)
def run(
    specs: SpecsArg = None,
    requirement: ReqOpt = None,
    repo: RepoOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    jobs: JobsOpt = 4,
    no_lock: NoLockOpt = False,
    stale_after: StaleOpt = STALE_AFTER,
    heartbeat: HeartbeatOpt = HEARTBEAT,
    wait_timeout: WaitOpt = WAIT_TIMEOUT,
    install_timeout: InstallTimeoutOpt = INSTALL_TIMEOUT,
    installer: InstallerOpt = "pip",
    cache_dir: CacheDirOpt = None,
    index_url: IndexUrlOpt = None,
    extra_index_url: ExtraIndexOpt = None,
    find_links: FindLinksOpt = None,
    no_index: NoIndexOpt = False,
    constraint: ConstraintOpt = None,
    refresh: RefreshOpt = False,
    pre: PreOpt = False,
    index_ttl: IndexTtlOpt = INDEX_TTL,
) -> None:
    """Ensure SPECs, then run COMMAND (given after --) with their trees first on PYTHONPATH.

    Example: repoinstall run 'adaptor==1.4' -- python -m adaptor.job input.json
    """
    _log.configure_cli(quiet=quiet, verbose=verbose)
    if not _run_command:
        _fail("give the command to run after --, e.g. repoinstall run 'pkg==1.0' -- python -m pkg", 2)
    settings = _repo_settings(locals())
    _, _, _, outcomes = _ensure_cli(specs, requirement, repo, True, settings)
    for outcome in outcomes:
        if isinstance(outcome, RepoinstallError):
            _fail(outcome)
    trees = [o.path for o in outcomes if isinstance(o, EnsureResult) and o.path is not None]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*trees, *filter(None, [env.get("PYTHONPATH")])])
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(_run_command[0], _run_command, env)  # the command's exit code becomes ours
    except OSError as error:
        _fail(f"cannot run {_run_command[0]}: {error.strerror}", 127 if isinstance(error, FileNotFoundError) else 126)


@app.command(epilog=EXIT_CODES)
def verify(
    specs: SpecsArg = None,
    all_trees: Annotated[
        bool, typer.Option("--all", help="Every tree in the repo (the default without SPEC).")
    ] = False,
    repair: Annotated[
        bool, typer.Option("--repair", help="Re-record or reinstall what is broken, under its lock.")
    ] = False,
    repo: RepoOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    no_lock: NoLockOpt = False,
    stale_after: StaleOpt = STALE_AFTER,
    heartbeat: HeartbeatOpt = HEARTBEAT,
    wait_timeout: WaitOpt = WAIT_TIMEOUT,
    install_timeout: InstallTimeoutOpt = INSTALL_TIMEOUT,
    installer: InstallerOpt = "pip",
    cache_dir: CacheDirOpt = None,
    index_url: IndexUrlOpt = None,
    extra_index_url: ExtraIndexOpt = None,
    find_links: FindLinksOpt = None,
    no_index: NoIndexOpt = False,
    constraint: ConstraintOpt = None,
) -> None:
    """Check trees file by file against their RECORD hashes and manifest records; exit 1 if any is wrong."""
    _log.configure_cli(quiet=quiet, verbose=verbose)
    from ._requirements import parse_spec

    if specs and all_trees:
        _fail("give SPEC arguments or --all, not both", 2)
    options = _install_options(
        index_url, extra_index_url, find_links, no_index, constraint, install_timeout, installer, cache_dir
    )
    repaired: list[dict[str, str]] = []
    failed: list[str] = []
    try:
        wanted = [parse_spec(spec) for spec in specs or []]
        with Repo(
            _repo_path(repo, True),
            lock=not no_lock,
            stale_after=stale_after,
            heartbeat=heartbeat,
            wait_timeout=wait_timeout,
            install=options,
        ) as store:
            reports = store.verify(wanted)
            for report in reports:
                if repair and not report.ok:
                    try:
                        repaired.append({"tree": report.tid.pin, "env": report.tid.env, "action": store.repair(report)})
                    except RepoinstallError as error:
                        failed.append(str(error))
            root = store.path
    except RepoinstallError as error:
        _fail(error)
    if as_json:
        document = {"repo": root, "trees": [r.as_dict() for r in reports], "repaired": repaired}
        typer.echo(json.dumps(document, indent=2))
    elif not quiet:
        for report in reports:
            detail = report.problems.summary() if report.problems else "; ".join(report.notes)
            line = f"{report.status:<10} {report.tid.pin}  {report.tid.env}  {report.path}"
            typer.echo(f"{line}\n           {detail}" if detail else line)  # an ok tree's notes too
        for done in repaired:
            typer.echo(f"{done['action']:<10} {done['tree']}  (repair)")
    for message in failed:
        typer.echo(f"repoinstall: error: {message}", err=True)
    broken = [r for r in reports if not r.ok]
    if failed or (broken and not repair):
        raise typer.Exit(1)


@app.command(epilog=EXIT_CODES)
def locks(
    repo: RepoOpt = None,
    as_json: JsonOpt = False,
    stale_after: StaleOpt = STALE_AFTER,
) -> None:
    """Every install lock: holder host and pid, seconds since its last heartbeat, stale or not."""
    try:
        with Repo(_repo_path(repo, True), stale_after=stale_after, heartbeat=stale_after / 4) as store:
            found = store.locks()
            root = store.path
    except RepoinstallError as error:
        _fail(error)
    if as_json:
        typer.echo(
            json.dumps({"repo": root, "stale_after": stale_after, "locks": [i.as_dict() for i in found]}, indent=2)
        )
        return
    for info in found:
        if not info.held:
            state = "free"
        else:
            age = "?" if info.heartbeat_age is None else f"{info.heartbeat_age:.0f}s"
            state = f"held by {info.host} pid {info.pid}, heartbeat {age} ago{' (STALE)' if info.stale else ''}"
        waiting = f", {info.waiters} waiting" if info.waiters else ""
        problem = f"  [{info.problem}]" if info.problem else ""
        typer.echo(f"{info.tid.pin}  {info.tid.env}  {state}{waiting}{problem}")


@app.command(epilog=EXIT_CODES)
def gc(
    repo: RepoOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would be removed.")] = False,
    older_than: Annotated[
        str, typer.Option("--older-than", metavar="DURATION", help="Leave debris younger than this (e.g. 30m).")
    ] = "1h",
    unused_for: Annotated[
        str | None,
        typer.Option("--unused-for", metavar="DURATION", help="Also remove trees nobody has ensured for this long."),
    ] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    no_lock: NoLockOpt = False,
    stale_after: StaleOpt = STALE_AFTER,
    heartbeat: HeartbeatOpt = HEARTBEAT,
) -> None:
    """Remove crashed installers' staging dirs, lock debris, set-aside trees and, on request, unused trees."""
    _log.configure_cli(quiet=quiet, verbose=verbose)
    from ._options import parse_duration

    try:
        older = parse_duration(older_than)
        unused = None if unused_for is None else parse_duration(unused_for)
    except ValueError as error:
        _fail(str(error), 2)
    try:
        with Repo(_repo_path(repo, True), lock=not no_lock, stale_after=stale_after, heartbeat=heartbeat) as store:
            removed = store.gc(older_than=older, unused_for=unused, dry_run=dry_run)
            root = store.path
    except RepoinstallError as error:
        _fail(error)
    if as_json:
        typer.echo(json.dumps({"repo": root, "dry_run": dry_run, "removed": [r.as_dict() for r in removed]}, indent=2))
    elif not quiet:
        for item in removed:
            verb = "removed" if item.done else "would remove" if dry_run else "kept"
            typer.echo(f"{verb:<12} {item.kind:<8} {item.path}  ({item.reason})")
    if any(not item.done for item in removed) and not dry_run:
        raise typer.Exit(1)


@app.command(epilog=EXIT_CODES)
def doctor(repo: RepoOpt = None, as_json: JsonOpt = False) -> None:
    """Probe the repo's filesystem and say what repoinstall can rely on there; exit 1 where it cannot be safe."""
    try:
        with Repo(_repo_path(repo, True)) as store:
            findings = store.doctor()
            root = store.path
    except RepoinstallError as error:
        _fail(error)
    if as_json:
        typer.echo(json.dumps({"repo": root, "findings": [f.as_dict() for f in findings]}, indent=2))
    else:
        for finding in findings:
            mark = "ok  " if finding.ok else "FAIL"
            tail = f"\n      -> {finding.consequence}" if finding.consequence else ""
            typer.echo(f"{mark}  {finding.check}: {finding.result}{tail}")
    unsafe = [f for f in findings if not f.ok]
    if unsafe:
        typer.echo(f"repoinstall: error: {root}: {unsafe[0].check}: {unsafe[0].consequence}", err=True)
        raise typer.Exit(1)


@app.command(epilog=EXIT_CODES)
def path(
    specs: Annotated[list[str], typer.Argument(metavar="SPEC...", help="PEP 508 requirements.")],
    repo: RepoOpt = None,
) -> None:
    """Print the installed trees' paths joined for PYTHONPATH; exit 1 if one is not installed."""
    from ._requirements import parse_spec

    try:
        wanted = [parse_spec(spec) for spec in specs]
        with Repo(_repo_path(repo, True)) as store:
            paths = [store.tree_path(w) for w in wanted]
    except RepoinstallError as error:
        _fail(error)
    typer.echo(os.pathsep.join(paths))


@app.command("list", epilog=EXIT_CODES)
def list_(repo: RepoOpt = None, as_json: JsonOpt = False) -> None:
    """List every installed tree in the repo (all environments)."""
    try:
        with Repo(_repo_path(repo, True)) as store:
            records = store.list()
            root = store.path
    except RepoinstallError as error:
        _fail(error)
    rows = [
        {
            "name": record.name,
            "version": record.version,
            "extras": list(record.extras),
            "env": record.env,
            "installed_at": record.installed_at,
            "installer": record.installer,
            "path": tree,
        }
        for record, tree in records
    ]
    if as_json:
        typer.echo(json.dumps({"repo": root, "trees": rows}, indent=2))
        return
    for row in rows:
        extras = f"[{','.join(row['extras'])}]" if row["extras"] else ""
        typer.echo(f"{row['name']}{extras}=={row['version']}  {row['env']}  {row['installed_at']}  {row['path']}")


def _terminated(signum: int, frame: object) -> None:
    # Kubernetes stops a pod with SIGTERM: unwind like Ctrl-C, so pip is killed, the staging dir removed and
    # the lock released at once, instead of peers waiting out the stale threshold. Installers that worker
    # threads (--jobs) run are killed too, so their ensures fail and clean up just as fast.
    if "repoinstall._installer" in sys.modules:
        sys.modules["repoinstall._installer"].stop_all()
    raise SystemExit(128 + signum)


def main() -> None:
    """Entry point: usage errors are one line and exit 2, like every other bad input."""
    import signal

    from typer.exceptions import Abort, TyperException

    signal.signal(signal.SIGTERM, _terminated)
    args = sys.argv[1:]
    if args[:1] == ["run"] and "--" in args:
        split = args.index("--")
        _run_command[:] = args[split + 1 :]
        args = args[:split]
    try:
        code = app(args=args, prog_name="repoinstall", standalone_mode=False)
    except RepoinstallError as error:  # raised outside a command's own handling (e.g. while reading options)
        typer.echo(f"repoinstall: error: {error}", err=True)
        sys.exit(error.exit_code)
    except Abort:
        typer.echo("repoinstall: interrupted", err=True)
        sys.exit(130)
    except TyperException as error:
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        if type(error).__name__ == "NoArgsIsHelpError":
            typer.echo(message)
            sys.exit(0)
        context = getattr(error, "ctx", None)
        where = f" (see {context.command_path} --help)" if context is not None else ""
        typer.echo(f"repoinstall: error: {message}{where}", err=True)
        sys.exit(getattr(error, "exit_code", 2))
    except Exception as error:  # the last net: a bug is one line (its traceback with -v)
        _internal_error(error, verbose=any(a in ("-v", "--verbose") for a in args))
    sys.exit(code if isinstance(code, int) else 0)


def _internal_error(error: Exception, *, verbose: bool) -> NoReturn:
    """A bug or an unforeseen failure: one line naming it, exit 1; credentials in URLs are redacted."""
    import traceback

    from ._urls import redact_all as hide

    if verbose:
        typer.echo(hide("".join(traceback.format_exception(error))).rstrip(), err=True)
    first = str(error).splitlines()[0] if str(error) else ""
    detail = f": {hide(first)}" if first else ""
    typer.echo(
        f"repoinstall: error: internal error: {type(error).__name__}{detail} (run with -v for details)", err=True
    )
    sys.exit(1)
