"""The ``repoinstall`` command line.

No ``from __future__ import annotations`` here: typer would then eval every annotation string on each run.
"""

import json
import os
import sys
from typing import Annotated, NoReturn

import typer

from . import _log
from ._errors import RepoinstallError
from ._layout import default_repo
from ._repo import EnsureResult, Repo

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
    if repo:
        return repo
    path = default_repo()
    if not quiet:
        typer.echo(f"repoinstall: using the default repo {path}", err=True)
    return path


@app.command(epilog=EXIT_CODES)
def ensure(
    specs: SpecsArg = None,
    requirement: ReqOpt = None,
    repo: RepoOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", envvar="REPOINSTALL_JOBS", help="Install this many different trees at once.")
    ] = 4,
    no_lock: Annotated[
        bool,
        typer.Option(
            "--no-lock",
            envvar="REPOINSTALL_NO_LOCK",
            help="Take no locks (one node only): staging and atomic publish stay.",
        ),
    ] = False,
    stale_after: Annotated[
        float,
        typer.Option(
            "--stale-after",
            envvar="REPOINSTALL_STALE_AFTER",
            metavar="SECONDS",
            help="Take over a lock whose heartbeat stopped this long ago.",
        ),
    ] = 120.0,
    heartbeat: Annotated[
        float,
        typer.Option(
            "--heartbeat",
            envvar="REPOINSTALL_HEARTBEAT",
            metavar="SECONDS",
            help="How often a holder refreshes its lock.",
        ),
    ] = 20.0,
    wait_timeout: Annotated[
        float,
        typer.Option(
            "--wait-timeout",
            envvar="REPOINSTALL_WAIT_TIMEOUT",
            metavar="SECONDS",
            help="Give up waiting for a lock (exit 3).",
        ),
    ] = 1800.0,
    install_timeout: Annotated[
        float,
        typer.Option(
            "--install-timeout", envvar="REPOINSTALL_INSTALL_TIMEOUT", metavar="SECONDS", help="Bound one pip run."
        ),
    ] = 900.0,
    index_url: Annotated[str | None, typer.Option("--index-url", "-i", help="Passed to pip.")] = None,
    extra_index_url: Annotated[
        list[str] | None, typer.Option("--extra-index-url", help="Passed to pip.", show_default=False)
    ] = None,
    find_links: Annotated[
        list[str] | None, typer.Option("--find-links", "-f", help="Passed to pip.", show_default=False)
    ] = None,
    no_index: Annotated[bool, typer.Option("--no-index", help="Passed to pip.")] = False,
    constraint: Annotated[
        list[str] | None, typer.Option("--constraint", "-c", metavar="FILE", help="Passed to pip.", show_default=False)
    ] = None,
) -> None:
    """Install what is missing (once, cluster-wide) and print where each tree is."""
    _log.configure_cli(quiet=quiet, verbose=verbose)
    from ._requirements import collect

    try:
        wanted = collect(specs or [], requirement or [])
    except RepoinstallError as error:
        _fail(error)
    if not wanted:
        _fail("nothing to ensure: give SPEC arguments or -r FILE", 2)
    for path in constraint or []:
        if not os.path.isfile(path):
            _fail(f"{path}: constraints file not found", 2)
    if install_timeout <= 0:
        _fail(f"--install-timeout must be positive, got {install_timeout}", 2)
    from ._options import InstallOptions

    options = InstallOptions(
        index_url,
        tuple(extra_index_url or ()),
        tuple(find_links or ()),
        no_index,
        tuple(constraint or ()),
        install_timeout,
    )
    progress = None
    if sys.stderr.isatty() and not (quiet or as_json):
        from ._progress import Progress

        progress = Progress()
    try:
        with Repo(
            _repo_path(repo, quiet or as_json),
            lock=not no_lock,
            stale_after=stale_after,
            heartbeat=heartbeat,
            wait_timeout=wait_timeout,
            jobs=jobs,
            install=options,
            on_event=progress,
        ) as store:
            outcomes = store.ensure_all(wanted, return_exceptions=True)
    except RepoinstallError as error:
        _fail(error)
    finally:
        if progress is not None:
            progress.close()
    results = [o for o in outcomes if isinstance(o, EnsureResult)]
    errors = [(w, o) for w, o in zip(wanted, outcomes, strict=True) if isinstance(o, RepoinstallError)]
    if as_json:
        document = {
            "repo": store.path,
            "env": store.env,
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
    # the lock released at once, instead of peers waiting out the stale threshold.
    raise SystemExit(128 + signum)


def main() -> None:
    """Entry point: usage errors are one line and exit 2, like every other bad input."""
    import signal

    from typer.exceptions import Abort, TyperException

    signal.signal(signal.SIGTERM, _terminated)
    try:
        code = app(prog_name="repoinstall", standalone_mode=False)
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
    sys.exit(code if isinstance(code, int) else 0)
