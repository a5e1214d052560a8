"""The ``repoinstall`` command line.

No ``from __future__ import annotations`` here: typer would then eval every annotation string on each run.
"""

import copy
import json
import os
import re
import sys
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from .. import _log
from .._disk.identity import TreeKind, kind_of
from .._errors import InvalidInput, RepoinstallError
from .._repo import Repo
from .._results import EnsureResult
from .options import (
    ENSURING,
    INSTALLING,
    LOCK_CHOICE,
    LOCKING,
    LOG_FORMATS,
    OUTPUT,
    REGISTRY,
    Options,
    repo_path,
    takes,
)

if TYPE_CHECKING:
    import logging
    from collections.abc import Callable

    from .._disk.manifest import TreeEntry
    from .._lockfile.known import Hint
    from .._oci.push import Pushed
    from .._options import InstallOptions, LockChoice
    from .._requirements import Requested

EXIT_CODES = """\
Exit codes: 0 ok; 1 install failed (pip error, disk full, not installed; remove: a tree in use);
2 bad input (usage, spec, requirements file, unusable repo path);
3 timed out waiting for a peer's install lock."""

app = typer.Typer(
    help="Install Python packages once into a repo directory shared by many pods.\n\n" + EXIT_CODES,
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},  # -h on every command, as pip and uv have
)


def _print_version(asked: bool) -> None:
    if asked:
        from .. import __version__

        typer.echo(f"repoinstall {__version__} (Python {sys.version.split()[0]})")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Install Python packages once into a repo directory shared by many pods."""


SpecsArg = Annotated[
    list[str] | None, typer.Argument(metavar="[SPEC]...", help="PEP 508 requirements.", show_default=False)
]
ReqOpt = Annotated[
    list[str] | None,
    typer.Option("-r", "--requirement", metavar="FILE", help="Requirements file (repeatable).", show_default=False),
]


def _clearing_handler() -> "logging.Handler":
    """On a terminal, log lines clear the progress line first (elsewhere _log's plain stderr lines)."""
    from .progress import ClearingHandler

    return ClearingHandler(sys.stderr)


def _configure_log(opts: Options) -> None:
    if opts.log_format not in LOG_FORMATS:
        _fail(f"--log-format {opts.log_format!r}: give text or json", 2)
    as_json = opts.log_format == "json"
    handler = _clearing_handler if sys.stderr.isatty() and not as_json else None
    _log.configure_cli(quiet=opts.quiet, verbose=opts.verbose, handler=handler, as_json=as_json)


#: The layout version of every --json document (its "schema" field): bumped when a field changes meaning or goes.
JSON_SCHEMA = 1
#: Whether this run's command was asked for --json: then an error is a JSON document on stdout too.
_json_output = False


def _use_json(opts: Options) -> None:
    global _json_output
    _json_output = opts.as_json


def _print_json(document: dict[str, Any]) -> None:
    typer.echo(json.dumps({"schema": JSON_SCHEMA, **document}, indent=2))


def _fail(error: RepoinstallError | str, code: int | None = None) -> NoReturn:
    message = str(error)
    exit_code = code if code is not None else getattr(error, "exit_code", 1)
    if _json_output:
        _print_json({"error": message, "exit_code": exit_code})
    _log.say_error(message, exit_code=exit_code)
    raise typer.Exit(exit_code)


def _ensure_cli(
    specs: list[str] | None,
    requirement: list[str] | None,
    opts: Options,
    silent: bool,
    push_to: str | None = None,
    pushed: "list[Pushed] | None" = None,
    *,
    live: bool | None = None,
) -> "tuple[list[Requested], str, str, list[EnsureResult | RepoinstallError]]":
    """Parse the specs and files, ensure them all; what was asked, the repo, its env tag and each outcome.
    ``push_to``: then push the trees ensured there, into ``pushed`` (``--push``: those installed from an index).
    ``live``: draw the phases on a terminal (default: unless ``silent``)."""
    if not specs and not requirement:
        _fail("nothing to ensure: give SPEC arguments or -r FILE", 2)
    if opts.push_after and not opts.from_registry:
        _fail("--push pushes to the registry --from names: give --from HOST[:PORT]/REPOSITORY", 2)
    install = opts.install_options()
    # Each -r file is read once for its key (see _lockfile.known): one whose tree an earlier ensure named is parsed
    # only if that tree is not there; the others are parsed here, so bad input fails before the repo is touched.
    hints = _lock_hints(requirement or [], install, opts.from_registry is None, opts.lock_choice())
    try:
        # Files that list nothing (comments only) are fine: an init container for an empty list is a no-op.
        wanted = _specs(specs or [], opts, require_hashes=opts.require_hashes, files=bool(requirement))
        read_file = _reader(opts, opts.require_hashes, installing=True)
        read: list[list[Requested] | Hint] = [
            hint if hint is not None and hint.tree is not None else read_file(path)
            for path, hint in zip(requirement or [], hints, strict=True)
        ]
    except RepoinstallError as error:
        _fail(error)
    progress = None
    if sys.stderr.isatty() and (not silent if live is None else live) and not _log.json_lines():
        from .progress import Progress

        progress = Progress()
    try:
        path = repo_path(opts, announce=not silent)
        settings = opts.repo_settings()
        if push_to is not None:
            settings["registry"] = opts.registry_settings()
        with Repo(path, on_event=progress, **settings) as repo:
            wanted, known, origins = _gathered(repo, wanted, read, hints, read_file)
            wanted, outcomes = _ensured(repo, wanted, known, origins, opts.together)
            if push_to is not None and pushed is not None:
                from .._oci.reference import Reference

                done = [o for o in outcomes if isinstance(o, EnsureResult)]
                if opts.push_after:  # ensure --push: what was installed here from an index, not what came from it
                    done = [o for o in done if o.action == "installed"]
                pushed += repo.push(done, Reference.parse(push_to), skip_pulled=opts.push_after)
    except RepoinstallError as error:
        _fail(error)
    finally:
        if progress is not None:
            progress.close()
    return wanted, repo.path, repo.env, outcomes


def _gathered(
    repo: Repo,
    wanted: "list[Requested]",
    read: "list[list[Requested] | Hint]",
    hints: "list[Hint | None]",
    read_file: "Callable[[str], list[Requested]]",
) -> "tuple[list[Requested], dict[int, EnsureResult], dict[int, Hint]]":
    """Every request in order, the specs' then each file's; by index in it, the result of each file whose
    remembered tree is there (nothing parsed), and the hint of each lock file that was parsed (to remember its
    tree once ensured)."""
    known: dict[int, EnsureResult] = {}
    origins: dict[int, Hint] = {}
    for one, hint in zip(read, hints, strict=True):
        if isinstance(one, list):
            requests = one
        else:
            if (settled := repo._settled_lock(one)) is not None:
                known[len(wanted)] = settled
                wanted.append(_known_request(one, settled))
                continue
            try:
                requests = read_file(one.path)  # its tree is not there: parsed after all
            except RepoinstallError as error:
                _fail(error)
        if hint is not None and len(requests) == 1 and requests[0].locked:
            origins[len(wanted)] = hint
        wanted.extend(requests)
    return wanted, known, origins


def _ensured(
    repo: Repo,
    wanted: "list[Requested]",
    known: dict[int, EnsureResult],
    origins: "dict[int, Hint]",
    together: bool,
) -> "tuple[list[Requested], list[EnsureResult | RepoinstallError]]":
    """What was asked and each outcome, in order: the ``known`` results as they are, the rest ensured (the plain
    specs as one set with ``together``); each parsed lock file's tree remembered for its hint."""
    # A lock file is one tree already, exactly as locked: --together sets the other specs only.
    plain = [one for index, one in enumerate(wanted) if not one.locked and index not in known]
    order = list(range(len(wanted)))
    the_set = None
    if together and len(plain) > 1:
        the_set = _together(repo, plain)
        order = [index for index, one in enumerate(wanted) if one.locked or index in known]
    ensured = iter(repo.ensure_all([wanted[i] for i in order if i not in known], return_exceptions=True))
    outcomes = [known[i] if i in known else next(ensured) for i in order]
    for index, hint in origins.items():
        repo._remember_lock(hint, outcomes[order.index(index)])
    if the_set is None:
        return wanted, outcomes
    # One outcome for the set: what was asked, as one entry, is every spec.
    merged = plain[0]._replace(text=" ".join(one.text for one in plain))
    return [merged, *(wanted[i] for i in order)], [the_set, *outcomes]


def _collect(
    specs: list[str], files: list[str], opts: Options, *, require_hashes: bool, installing: bool = False
) -> "list[Requested]":
    """The specs, then each file's requirements, in order; a lock file (a pylock.toml, or every line pinned and
    hashed) is one request, for its one tree, with ``--extra`` and ``--group`` as chosen. ``installing``: read to
    be installed with ``opts``' install options (else only to name trees)."""
    wanted = _specs(specs, opts, require_hashes=require_hashes, files=bool(files))
    read_file = _reader(opts, require_hashes, installing)
    for path in files:
        wanted.extend(read_file(path))
    return wanted


def _specs(specs: list[str], opts: Options, *, require_hashes: bool, files: bool) -> "list[Requested]":
    """The specs parsed; refused: ``--extra``/``--group`` without a file (``files``) to choose from, and
    ``--require-hashes`` with a spec (which cannot carry a hash)."""
    from .._requirements import parse_spec

    choice = opts.lock_choice()
    if choice.chosen() and not files:
        raise InvalidInput(f"{choice.flags()}: they choose among a pylock.toml's extras and groups: give -r FILE")
    wanted = [parse_spec(spec) for spec in specs]
    if require_hashes and wanted:
        raise InvalidInput(
            f"--require-hashes: {wanted[0].text} has no hash (a spec on the command line cannot carry one); "
            "give a requirements file with --hash lines, or a pylock.toml"
        )
    return wanted


def _reader(opts: Options, require_hashes: bool, installing: bool) -> "Callable[[str], list[Requested]]":
    """How a -r file is read: a lock file's one request, or its lines'; a pylock.toml's extras and groups as
    ``--extra`` and ``--group`` choose, for the tree's interpreter. ``installing``: read to be installed with
    ``opts``' install options (else only to name trees)."""
    choice = opts.lock_choice()
    install = opts.install_options() if installing else None

    def read_file(path: str) -> "list[Requested]":
        # Deferred, here and in Repo: the parsers (tomllib, pip's grammar, markers, wheel tags, the index for hashed
        # pins' artifacts) load only when a file is parsed, which a lock file whose remembered tree is there never is.
        from .._install.markerenv import lock_environment
        from .._lockfile.request import read

        environment = lock_environment(opts.install_options().python)
        found = read(path, require_hashes=require_hashes, install=install, choice=choice, environment=environment)
        return found if isinstance(found, list) else [found]

    return read_file


def _lock_hints(
    files: list[str], install: "InstallOptions", look_up_artifacts: bool, choice: "LockChoice"
) -> "list[Hint | None]":
    """Each file read for its key, with the tree an earlier ensure named for it (see :mod:`.._lockfile.known`), as
    :meth:`Repo.ensure_lock` reads it."""
    if not files:
        return []
    from .._disk.identity import environment_tag
    from .._lockfile.known import look

    env = environment_tag()
    return [
        look(
            path,
            env=env,
            install=install,
            look_up_artifacts=look_up_artifacts,
            extras=choice.extras,
            groups=choice.groups,
        )
        for path in files
    ]


def _known_request(hint: "Hint", result: EnsureResult) -> "Requested":
    """What a file whose remembered tree is there asked for, as its parsed request would say it (no pins)."""
    from .._requirements import Requested

    return Requested(result.requirement, result.name, (), None, source=hint.path)


def _set_members(name: str, requirement: str) -> str:
    """`` (a==1, b==2)`` after the name of a tree that holds a set installed together, `` (lock FILE)`` after a
    lock file's tree, else nothing."""
    kind = kind_of(name)
    if kind is TreeKind.SET:
        return f" ({', '.join(requirement.split())})"
    return f" (lock {requirement})" if kind is TreeKind.LOCKED else ""


def _together(repo: Repo, wanted: "list[Requested]") -> "EnsureResult | RepoinstallError":
    """The set's one tree, or why it failed; bad input (exit 2) ends the command as it does for ensure_all."""
    try:
        return repo.ensure_together(wanted)
    except RepoinstallError as error:
        if error.exit_code == 2:
            raise
        return error


@app.command(epilog=EXIT_CODES, short_help="Install what is missing (once, cluster-wide) and print the paths.")
@takes(*OUTPUT, *LOCKING, *INSTALLING, *ENSURING, *LOCK_CHOICE, "dry_run", "from_registry", "push_after", *REGISTRY)
def ensure(specs: SpecsArg = None, requirement: ReqOpt = None, *, opts: Options) -> None:
    """Install what is missing (once, cluster-wide) and print where each tree is.

    Unpinned specs (pkg, pkg>=2,<3) take the highest installed version that matches, with no network; only
    if none matches (or with --refresh) is the index asked, as pip would ask it (pip.conf, PIP_INDEX_URL,
    --index-url, ~/.netrc). With --from, a missing tree's image in that registry comes first: only the layers
    the store lacks are fetched, no installer runs; --push then pushes the trees installed from an index.
    With --dry-run nothing in the repo changes: it says what would be installed, stored and downloaded.
    """
    _use_json(opts)
    _configure_log(opts)
    if opts.dry_run:
        _dry_run(specs, requirement, opts)
        return
    pushed: list[Pushed] = []
    push_to = opts.from_registry if opts.push_after else None
    wanted, root, env, outcomes = _ensure_cli(
        specs, requirement, opts, bool(opts.quiet) or opts.as_json, push_to, pushed
    )
    results = [o for o in outcomes if isinstance(o, EnsureResult)]
    errors = [(w, o) for w, o in zip(wanted, outcomes, strict=True) if isinstance(o, RepoinstallError)]
    if opts.as_json:
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
        if opts.push_after:
            document["pushed"] = [one.as_dict() for one in pushed]
        _print_json(document)
    elif not opts.quiet:
        _print_pushed(pushed)
        for result in results:
            if result.action == "skipped":
                typer.echo(f"skipped    {result.requirement} (marker is false)")
            else:
                extras = f"[{','.join(result.extras)}]" if result.extras else ""
                members = _set_members(result.name, result.requirement)
                typer.echo(f"{result.action:<10} {result.name}{extras}=={result.version}{members}  {result.path}")
    for _, failure in errors:
        _log.say_error(str(failure), exit_code=failure.exit_code)
    if errors:
        raise typer.Exit(errors[0][1].exit_code)


def _dry_run(specs: list[str] | None, requirement: list[str] | None, opts: Options) -> None:
    """``ensure --dry-run``: what ensure would do, nothing done (see repoinstall._ops.plan); exit 1 if a missing
    tree could not be resolved."""
    if not specs and not requirement:
        _fail("nothing to ensure: give SPEC arguments or -r FILE", 2)
    if opts.together or opts.from_registry:
        flag = "--together" if opts.together else "--from"
        _fail(f"--dry-run plans each tree from the indexes alone; it cannot plan {flag}: run without one of them", 2)
    try:
        wanted = _collect(specs or [], requirement or [], opts, require_hashes=opts.require_hashes, installing=True)
        with Repo(repo_path(opts, announce=not (opts.quiet or opts.as_json)), **opts.repo_settings()) as repo:
            planned = repo.plan(wanted)
            root, env = repo.path, repo.env
    except RepoinstallError as error:
        _fail(error)
    missing = [one for one in planned if one.action == "install"]
    to_store = {(d.name, d.version, d.sha256): d for one in missing for d in one.dists if not d.stored}
    downloads = [d for d in to_store.values() if d.download]
    if opts.as_json:
        _print_json(
            {
                "repo": root,
                "env": env,
                "dry_run": True,
                "trees": [one.as_dict() for one in planned],
                "install": [one.requirement for one in missing],
                "store": [d.as_dict() for d in to_store.values()],
                "download": [d.as_dict() for d in downloads],
            }
        )
    elif not opts.quiet:
        for one in planned:
            if one.action == "present":
                typer.echo(f"{'present':<14} {one.requirement}  {one.path}")
            elif one.action == "skipped":
                typer.echo(f"{'skipped':<14} {one.requirement} (marker is false)")
            elif one.action == "install":
                new = sum(not d.stored for d in one.dists)
                typer.echo(f"{'would install':<14} {one.requirement}  ({len(one.dists)} distributions, {new} to store)")
                for dist in one.dists:
                    how = "stored" if dist.stored else "download" if dist.download else "local file"
                    typer.echo(f"{'':<14} {'link' if dist.stored else 'store':<6} {dist.name} {dist.version}  ({how})")
        typer.echo(
            f"dry run: {len(missing)} tree(s) to install, {len(to_store)} distribution(s) to store, "
            f"{len(downloads)} to download; nothing changed"
        )
    for one in planned:
        if one.action == "unresolved":
            _log.say_error(f"{one.requirement}: {one.reason}", exit_code=1)
    if any(one.action == "unresolved" for one in planned):
        raise typer.Exit(1)


def _print_pushed(pushed: "list[Pushed]") -> None:
    for one in pushed:
        sent = f"{one.uploaded} of {one.layers} layers uploaded, {one.uploaded_bytes / 1e6:.1f} MB"
        sent += f"; wheels: {one.wheels_uploaded} of {one.wheels} uploaded, {one.wheels_uploaded_bytes / 1e6:.1f} MB"
        typer.echo(f"{'pushed':<10} {one.tree}  {one.tag}  {one.reference}  ({sent})")


@app.command(epilog=EXIT_CODES, short_help="Ensure trees, then push each as an OCI image to a registry.")
@takes(*OUTPUT, *LOCKING, *INSTALLING, *ENSURING, *LOCK_CHOICE, *REGISTRY)
def push(
    reference: Annotated[
        str, typer.Argument(metavar="HOST[:PORT]/REPOSITORY", help="Where the images go.", show_default=False)
    ],
    specs: SpecsArg = None,
    requirement: ReqOpt = None,
    *,
    opts: Options,
) -> None:
    """Ensure the trees as ensure does, then push one image per tree and print its reference by tag and by
    digest.

    Each stored distribution is one reproducible layer (the same digest from any repo), and a blob the registry
    has is not uploaded again. Every stored distribution is first hashed against its RECORD, as verify does: a
    damaged one stops the push before any upload (exit 1; `verify --repair` installs it afresh). The tag is the
    tree's name, extras, version, interpreter and ABI (pandas-2.2.3-cp311-cp311); it names an index with one
    manifest per platform. Credentials come from REGISTRY_AUTH_FILE, Docker's config.json (DOCKER_CONFIG,
    credential helpers) or a netrc.
    """
    _use_json(opts)
    _configure_log(opts)
    try:
        from .._oci.reference import Reference

        Reference.parse(reference)
    except RepoinstallError as error:
        _fail(error)
    pushed: list[Pushed] = []
    live = not (opts.quiet or opts.as_json)  # its layers' bytes as they go up, on a terminal
    wanted, root, env, outcomes = _ensure_cli(specs, requirement, opts, True, reference, pushed, live=live)
    errors = [(w, o) for w, o in zip(wanted, outcomes, strict=True) if isinstance(o, RepoinstallError)]
    if opts.as_json:
        document: dict[str, Any] = {"repo": root, "env": env, "images": [one.as_dict() for one in pushed]}
        if errors:
            document["errors"] = [{"requirement": w.text, "error": str(e), "exit_code": e.exit_code} for w, e in errors]
        _print_json(document)
    elif not opts.quiet:
        _print_pushed(pushed)
    for _, failure in errors:
        _log.say_error(str(failure), exit_code=failure.exit_code)
    if errors:
        raise typer.Exit(errors[0][1].exit_code)


#: ``repoinstall run SPEC... -- COMMAND...``: main() takes the command off before typer parses the rest, since
#: click drops the ``--`` that tells where the specs end.
_run_command: list[str] = []


@app.command(
    epilog="Exit: the command's own code once it runs; 126/127 if it cannot be run; else as for ensure.",
    short_help="Ensure SPECs, then run a command with their trees on PYTHONPATH.",
)
@takes("repo", "quiet", "verbose", *LOCKING, *INSTALLING, *ENSURING, *LOCK_CHOICE)
def run(specs: SpecsArg = None, requirement: ReqOpt = None, *, opts: Options) -> None:
    """Ensure SPECs, then run COMMAND (given after --) with their trees first on PYTHONPATH.

    Example: repoinstall run 'python-dateutil==2.9.0.post0' -- python -c 'import dateutil; print(dateutil.__version__)'
    """
    _configure_log(opts)
    if not _run_command:
        _fail("give the command to run after --, e.g. repoinstall run 'pkg==1.0' -- python -m pkg", 2)
    _, _, _, outcomes = _ensure_cli(specs, requirement, opts, True)
    for outcome in outcomes:
        if isinstance(outcome, RepoinstallError):
            _fail(outcome)
    labelled = [(o.requirement, o.path) for o in outcomes if isinstance(o, EnsureResult) and o.path is not None]
    if len(labelled) > 1:  # one tree cannot disagree with itself: _activate stays unimported
        from .._activate import check_together

        try:
            check_together(labelled)
        except RepoinstallError as error:
            _fail(error)
    trees = [path for _, path in labelled]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*trees, *filter(None, [env.get("PYTHONPATH")])])
    # The trees' console scripts come first on PATH, as a venv's would.
    bins = [os.path.join(tree, "bin") for tree in trees if os.path.isdir(os.path.join(tree, "bin"))]
    env["PATH"] = os.pathsep.join([*bins, *filter(None, [env.get("PATH")])])
    command = _run_command
    if (script := _tree_script(command[0], bins)) is not None:
        # Its shebang names the interpreter that installed the tree, maybe of another image: run it with ours.
        command = [sys.executable, script, *command[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command[0], command, env)  # the command's exit code becomes ours
    except OSError as error:
        _fail(f"cannot run {_run_command[0]}: {error.strerror}", 127 if isinstance(error, FileNotFoundError) else 126)


def _tree_script(name: str, bins: list[str]) -> str | None:
    """The Python script ``name`` in one of the trees' ``bin`` dirs (the first that has it), else ``None``."""
    if os.sep in name:
        return None
    for directory in bins:
        path = os.path.join(directory, name)
        try:
            with open(path, "rb") as script:
                head = script.read(512)
        except OSError:
            continue
        # pip's and uv's scripts: "#!/path/to/python", or "#!/bin/sh" with an exec of python for long paths.
        if head.startswith(b"#!") and b"python" in head:
            return path
    return None


@app.command(epilog=EXIT_CODES, short_help="Check trees file by file against their RECORD hashes.")
@takes(*OUTPUT, *LOCKING, *INSTALLING, *LOCK_CHOICE)
def verify(
    specs: SpecsArg = None,
    requirement: ReqOpt = None,
    all_trees: Annotated[
        bool, typer.Option("--all", help="Every tree in the repo (the default without SPEC).")
    ] = False,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Re-record or reinstall what is broken, under its lock (a damaged stored distribution is set "
            "aside first, and installed afresh).",
        ),
    ] = False,
    *,
    opts: Options,
) -> None:
    """Check trees file by file against their RECORD hashes and manifest records, and the stored distributions
    they are composed from against theirs; exit 1 if any is wrong.

    The trees SPECs and -r FILEs name (a requirements file's trees, a lock file's one tree), else every tree."""
    from .._ops.checkup import Verification

    _use_json(opts)
    _configure_log(opts)
    if (specs or requirement) and all_trees:
        _fail("give SPEC arguments or -r FILE, or --all, not both", 2)
    try:
        wanted = _collect(specs or [], requirement or [], opts, require_hashes=False)
        with Repo(repo_path(opts, announce=False), **opts.repo_settings()) as repo:
            named = bool(specs or requirement)  # files that name no tree (comments only): nothing to verify
            obstacles = repo.obstacles()  # in the store's, its locks' or the trees' locks' way: a person looks
            # With --repair, the store's damaged distributions are set aside before the trees are: Repo.verify's rule.
            found = repo.verify(wanted, repair=repair) if wanted or not named else Verification((), ())
            root = repo.path
    except RepoinstallError as error:
        _fail(error)
    reports, stored = found.trees, found.store
    repaired = [done.as_dict() for done in found.repaired if done.error is None]
    failed = [str(done.error) for done in found.failed]
    if opts.as_json:
        stored_rows = [d.as_dict() for d in stored]
        document = {"repo": root, "trees": [r.as_dict() for r in reports], "store": stored_rows, "repaired": repaired}
        _print_json({**document, "obstacles": [o.as_dict() for o in obstacles]})
    elif not opts.quiet:
        for report in reports:
            detail = report.problems.summary() if report.problems else "; ".join(report.notes)
            line = f"{report.status:<10} {report.tid.pin}  {report.tid.env}  {report.path}"
            typer.echo(f"{line}\n           {detail}" if detail else line)  # an ok tree's notes too
        for dist in stored:
            if not dist.ok:  # a whole store would be a line per distribution: only the damaged ones
                detail = dist.problems.summary() if dist.problems else "; ".join(dist.notes)
                held = ", ".join(t.pin for t in dist.trees) or "no tree"
                typer.echo(f"{dist.status:<10} {dist}  {dist.path}\n           {detail}; held by {held}")
        if stored:
            typer.echo(f"{'store':<10} {len(stored)} stored distribution(s), {sum(not d.ok for d in stored)} damaged")
        for obstacle in obstacles:
            typer.echo(f"{'obstacle':<10} {obstacle.path}\n           {obstacle.describe()}; left alone")
        for done in repaired:
            typer.echo(f"{done['action']:<10} {done.get('tree') or done['dist']}  (repair)")
        if not (reports or stored or obstacles or repaired or failed):
            typer.echo("nothing to verify")  # an empty repo, or files that name no tree: not silence
    for message in failed:
        _log.say_error(message, exit_code=1)
    broken = any(not r.ok for r in reports) or any(not d.ok for d in stored)
    if failed or obstacles or (broken and not repair):
        raise typer.Exit(1)


@app.command(epilog=EXIT_CODES, short_help="Every install lock: holder, heartbeat age, stale or not.")
@takes("repo", "as_json", "stale_after")
def locks(*, opts: Options) -> None:
    """Every install lock: holder host and pid, seconds since its last heartbeat, stale or not; exit 1 if anything
    stands where a lock's directory belongs."""
    _use_json(opts)
    try:
        with Repo(
            repo_path(opts, announce=False), stale_after=opts.stale_after, heartbeat=opts.stale_after / 4
        ) as repo:
            found = repo.locks()
            obstacles = repo.obstacles()  # a FIFO where a lock's directory belongs: every install refuses it
            root = repo.path
    except RepoinstallError as error:
        _fail(error)
    if opts.as_json:
        document = {"repo": root, "stale_after": opts.stale_after, "locks": [i.as_dict() for i in found]}
        _print_json({**document, "obstacles": [o.as_dict() for o in obstacles]})
        raise typer.Exit(1 if obstacles else 0)
    for info in found:
        if not info.held:
            state = "unusable" if info.problem else "free"
        else:
            age = "?" if info.heartbeat_age is None else f"{info.heartbeat_age:.0f}s"
            # The holder's own lease, where it is longer than ours: a waiter here honours it too.
            lease = f" (its lease {info.lease:g}s)" if info.lease is not None and info.lease > opts.stale_after else ""
            state = f"held by {info.host} pid {info.pid}, heartbeat {age} ago{lease}{' (STALE)' if info.stale else ''}"
        waiting = f", {info.waiters} waiting" if info.waiters else ""
        problem = f"  [{info.problem}]" if info.problem else ""
        typer.echo(f"{info.tid.pin}  {info.tid.env}  {state}{waiting}{problem}")
    for obstacle in obstacles:
        typer.echo(f"{obstacle.path}  [{obstacle.describe()}: every install that needs it refuses it]")
    if obstacles:
        raise typer.Exit(1)


@app.command(epilog=EXIT_CODES, short_help="Remove crashed installs' debris and, on request, unused trees.")
@takes(*OUTPUT, "dry_run", "no_lock", "stale_after", "heartbeat")
def gc(
    older_than: Annotated[
        str, typer.Option("--older-than", metavar="DURATION", help="Leave debris younger than this (e.g. 30m).")
    ] = "1h",
    unused_for: Annotated[
        str | None,
        typer.Option("--unused-for", metavar="DURATION", help="Also remove trees nobody has ensured for this long."),
    ] = None,
    *,
    opts: Options,
) -> None:
    """Remove crashed installers' staging dirs, lock debris, set-aside trees, stored distributions no tree holds
    (older than --older-than and --stale-after) and, on request, unused trees."""
    _use_json(opts)
    _configure_log(opts)
    from .._options import parse_duration

    dry_run = opts.dry_run
    try:
        older = parse_duration(older_than)
        unused = None if unused_for is None else parse_duration(unused_for)
    except ValueError as error:
        _fail(str(error), 2)
    try:
        path = repo_path(opts, announce=False)
        with Repo(path, lock=not opts.no_lock, stale_after=opts.stale_after, heartbeat=opts.heartbeat) as repo:
            removed = repo.gc(older_than=older, unused_for=unused, dry_run=dry_run)
            root = repo.path
    except RepoinstallError as error:
        _fail(error)
    if opts.as_json:
        _print_json({"repo": root, "dry_run": dry_run, "removed": [r.as_dict() for r in removed]})
    elif not opts.quiet:
        for item in removed:
            verb = "removed" if item.done else "would remove" if dry_run else "kept"
            typer.echo(f"{verb:<12} {item.kind:<8} {item.path}  ({item.reason})")
        if not removed:
            typer.echo("nothing to do")
    if any(not item.done for item in removed) and not dry_run:
        raise typer.Exit(1)


@app.command(epilog=EXIT_CODES, short_help="Remove the installed trees SPECs name (record first, as gc).")
@takes(*OUTPUT, "dry_run", "no_lock", "stale_after", "heartbeat", *LOCK_CHOICE, "no_compile")
def remove(
    specs: SpecsArg = None,
    requirement: ReqOpt = None,
    forget: Annotated[
        bool,
        typer.Option(
            "--forget", help="Also drop each tree's kept closure: its next install resolves afresh (newer deps)."
        ),
    ] = False,
    *,
    opts: Options,
) -> None:
    """Remove the installed trees SPECs name, as gc removes unused ones: under each tree's lock, record first,
    then the tree renamed into trash/ and deleted there.

    name==version names one tree; a bare name or a range every installed version of it that matches (extras
    are part of a tree's name: pkg[fast] names those trees). A spec that names no installed tree is skipped with
    a warning (exit 0, as pip uninstall). A tree in use (a process holds its lock, or a process on this host
    has it as working directory, on PYTHONPATH or on its command line, or a file of it open or mapped) is left
    whole: exit 1 naming it and the process, the other trees still go.
    """
    _use_json(opts)
    _configure_log(opts)
    if not specs and not requirement:
        _fail("nothing to remove: give SPEC arguments or -r FILE", 2)
    try:
        wanted = _collect(specs or [], requirement or [], opts, require_hashes=False)
        path = repo_path(opts, announce=False)
        with Repo(
            path, lock=not opts.no_lock, stale_after=opts.stale_after, heartbeat=opts.heartbeat, **opts.tree_keywords()
        ) as repo:
            outcomes = repo.remove(wanted, dry_run=opts.dry_run, forget=forget)
            root, env = repo.path, repo.env
    except RepoinstallError as error:
        _fail(error)
    kept = [o for o in outcomes if not o.ok]
    if opts.as_json:
        document: dict[str, Any] = {
            "repo": root,
            "env": env,
            "dry_run": opts.dry_run,
            "trees": [o.as_dict() for o in outcomes],
        }
        if kept:
            document["errors"] = [{"tree": o.tree, "error": o.reason, "exit_code": 1} for o in kept]
        _print_json(document)
    elif not opts.quiet:
        for outcome in outcomes:
            if outcome.action in ("removed", "would-remove"):
                verb = outcome.action.replace("-", " ")
                note = f"  ({outcome.reason})" if outcome.reason else ""
                typer.echo(f"{verb:<12} {outcome.tree}  {outcome.path}{note}")
        if all(outcome.action == "skipped" for outcome in outcomes):
            typer.echo("nothing to remove")  # each spec's warning said why
    for outcome in kept:
        _log.say_error(f"{outcome.tree}: not removed: {outcome.reason}", exit_code=1, tree=outcome.tree)
    if kept:
        raise typer.Exit(1)


@app.command(epilog=EXIT_CODES, short_help="Probe the repo's filesystem for what repoinstall relies on.")
@takes("repo", "as_json", "stale_after", "heartbeat")
def doctor(*, opts: Options) -> None:
    """Probe the repo's filesystem and say what repoinstall can rely on there; exit 1 where it cannot be safe.

    With --json: {"repo", "findings": [{"check", "result", "ok", "consequence"}], "store": {"distributions",
    "bytes", "tree_bytes", "bytes_saved"}} (bytes are file sizes, each inode once; see list)."""
    _use_json(opts)
    try:
        with Repo(repo_path(opts, announce=False), stale_after=opts.stale_after, heartbeat=opts.heartbeat) as repo:
            findings = repo.doctor()
            usage = repo.store_usage() if opts.as_json else None
            root = repo.path
    except RepoinstallError as error:
        _fail(error)
    if opts.as_json:
        _print_json({"repo": root, "findings": [f.as_dict() for f in findings], "store": usage and usage.as_dict()})
    else:
        for finding in findings:
            mark = "ok  " if finding.ok else "FAIL"
            tail = f"\n      -> {finding.consequence}" if finding.consequence else ""
            typer.echo(f"{mark}  {finding.check}: {finding.result}{tail}")
    unsafe = [f for f in findings if not f.ok]
    if unsafe:
        _log.say_error(f"{root}: {unsafe[0].check}: {unsafe[0].consequence}", exit_code=1)
        raise typer.Exit(1)


@app.command(epilog=EXIT_CODES, short_help="Print the installed trees' paths joined for PYTHONPATH.")
@takes("repo", *LOCK_CHOICE, "no_compile")
def path(specs: SpecsArg = None, requirement: ReqOpt = None, *, opts: Options) -> None:
    """Print the installed trees' paths joined for PYTHONPATH; exit 1 if one is not installed.

    A lock file given with -r (a pylock.toml, or requirements with hashes) names its one tree."""
    if not specs and not requirement:
        _fail("nothing to look up: give SPEC arguments or -r FILE", 2)
    try:
        wanted = _collect(specs or [], requirement or [], opts, require_hashes=False)
        with Repo(repo_path(opts, announce=False), **opts.tree_keywords()) as repo:
            paths = [repo.tree_path(w) for w in wanted]
    except RepoinstallError as error:
        _fail(error)
    typer.echo(os.pathsep.join(paths))


@app.command("check-trees", epilog=EXIT_CODES, short_help="Check tree paths (image volumes) before a worker imports.")
def check_trees(
    paths: Annotated[
        list[str],
        typer.Argument(metavar="PATH...", help="Tree directories; each may be PYTHONPATH-joined.", show_default=False),
    ],
) -> None:
    """Check each tree directory as a worker will import from it: exit 2 with one line for the first that is on
    a filesystem mounted noexec (no C extension loads from it: "failed to map segment") or holds no *.dist-info
    (an image volume that mounted empty); nothing printed when all are fine.

    Repo.activate checks its trees the same way. The Helm chart runs this in an init container of the workers
    that mount trees as image volumes: `repoinstall check-trees "$PYTHONPATH"`."""
    from .._activate import check_mounts

    try:
        check_mounts([tree for joined in paths for tree in joined.split(os.pathsep) if tree])
    except RepoinstallError as error:
        _fail(error)


@app.command(epilog=EXIT_CODES, short_help="Write installed trees as a PEP 751 lock file (pylock.toml).")
@takes("repo", *LOCK_CHOICE, "no_compile")
def export(
    specs: SpecsArg = None,
    requirement: ReqOpt = None,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write it here (pylock.toml or pylock.<name>.toml)."),
    ] = None,
    *,
    opts: Options,
) -> None:
    """Write the installed trees of SPECs (or -r FILE) as a PEP 751 lock file: every distribution they hold, with
    the URL and sha256 of the artifact installed. pip (pip install -r pylock.toml), uv and repoinstall ensure -r
    install exactly those artifacts from it. To stdout unless -o."""
    if not specs and not requirement:
        _fail("nothing to export: give SPEC arguments or -r FILE", 2)
    if output is not None and not re.fullmatch(r"pylock\.([^.]+\.)?toml", os.path.basename(output)):
        _fail(f"{output}: PEP 751 names a lock file pylock.toml or pylock.<name>.toml; pip and uv go by the name", 2)
    if output is not None and not os.path.isdir(os.path.dirname(os.path.abspath(output))):
        _fail(f"{output}: its directory {os.path.dirname(os.path.abspath(output))} does not exist", 2)
    try:
        wanted = _collect(specs or [], requirement or [], opts, require_hashes=False)
        with Repo(repo_path(opts, announce=False), **opts.tree_keywords()) as repo:
            text = repo.export(wanted)
    except RepoinstallError as error:
        _fail(error)
    if output is None:
        typer.echo(text, nl=False)
        return
    from .._textfile import write_text

    try:
        write_text(output, text)
    except OSError as error:
        import errno

        # A path that cannot be a file here is bad input; a full or failing disk is not.
        bad = error.errno in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EROFS)
        _fail(f"{output}: cannot write it: {error.strerror}", 2 if bad else 1)


@app.command("list", epilog=EXIT_CODES, short_help="List every installed tree in the repo (all environments).")
@takes("repo", "as_json")
def list_(
    long: Annotated[
        bool, typer.Option("--long", "-l", help="One full line per tree: environment, install time, path, members.")
    ] = False,
    *,
    opts: Options,
) -> None:
    """List every installed tree in the repo (all environments), under its environment: one line each, at most
    100 columns (its install time and what it holds; --long adds the path, --json everything).

    With --json: {"repo", "trees": [...], "store": {"distributions", "bytes", "tree_bytes", "bytes_saved"}}: the
    distributions stored once each, their bytes (file sizes, each inode once), the trees' bytes as if each had
    its own copies, and what hard links save of those."""
    from .._disk.manifest import recorded_dists

    _use_json(opts)
    try:
        with Repo(repo_path(opts, announce=False)) as repo:
            records = repo.list()
            usage = repo.store_usage() if opts.as_json else None
            root = repo.path
    except RepoinstallError as error:
        _fail(error)
    rows = [
        {
            "name": record.name,
            "version": record.version,
            "extras": list(record.extras),
            "requirement": record.requirement,
            "env": record.env,
            "installed_at": record.installed_at,
            "installer": record.installer,
            "installer_version": record.installer_version,
            "path": tree,
            # The closure: each distribution and the file it came from (null where the record does not say).
            # provenance: "wheel" (named by the sha256 of a wheel repoinstall hashed), "registry" (by its layer's
            # diff_id; "claimed": the wheel sha256 the registry said, unchecked), or null (not stored).
            "dists": [
                {
                    **{key: row.get(key) for key in ("name", "version", "dist_info", "sha256", "url")},
                    **({"diff_id": row["diff_id"], "claimed": row.get("claimed")} if row.get("diff_id") else {}),
                    "provenance": "registry" if row.get("diff_id") else "wheel" if row.get("sha256") else None,
                }
                for row in recorded_dists(record)
            ],
            **(
                {"lock": {"source": record.requirement, "members": _lock_members(record)}}
                if kind_of(record.name) is TreeKind.LOCKED
                else {}
            ),
        }
        for record, tree in records
    ]
    if opts.as_json:
        _print_json({"repo": root, "trees": rows, "store": usage and usage.as_dict()})
        return
    if long:
        from .._oci.pull import INSTALLER as OCI_INSTALLER

        for record, path in records:
            extras = f"[{','.join(record.extras)}]" if record.extras else ""
            members = _set_members(record.name, record.requirement)
            if kind_of(record.name) is TreeKind.LOCKED:
                members = f" (lock {record.requirement}: {', '.join(_lock_members(record))})"
            source = "  from a registry (unchecked against any wheel)" if record.installer == OCI_INSTALLER else ""
            typer.echo(
                f"{record.name}{extras}=={record.version}{members}  {record.env}  {record.installed_at}  {path}{source}"
            )
        return
    from .listing import short_lines

    for line in short_lines([(record, _held(record)) for record, _ in records]):
        typer.echo(line)


def _held(record: "TreeEntry") -> list[str]:
    """What a tree holds, as its short line names it: a set's pins, a lock's packages, else its distributions'
    names other than its own."""
    from .._disk.manifest import recorded_dists

    kind = kind_of(record.name)
    if kind is TreeKind.SET:
        return record.requirement.split()
    if kind is TreeKind.LOCKED:
        return _lock_members(record)
    return sorted({str(row.get("name")) for row in recorded_dists(record)} - {record.name})


def _lock_members(record: "TreeEntry") -> list[str]:
    """``name==version`` of each package a lock file's tree holds, as its record lists them (its own metapackage
    left out)."""
    from .._disk.manifest import recorded_dists

    rows = recorded_dists(record)
    return sorted(f"{row.get('name')}=={row.get('version')}" for row in rows if row.get("name") != record.name)


def _stop_installs() -> None:
    # Everything stops at once: no installer starts from now on, running ones are killed, queued specs are
    # dropped and lock waits end, so the installs' threads clean up (staging dir removed, lock released) in
    # milliseconds, while this thread unwinds through the wait for them (see _batch). Safe here: it takes no lock.
    # Done on every signal, so a second one, landing in that wait or in the clean-up, still ends the run at once.
    stop = sys.modules.get("repoinstall._stop")  # not loaded: nothing was being installed
    if stop is not None:
        stop.PROCESS.stop()


def _terminated(signum: int, frame: object) -> None:
    # Kubernetes stops a pod with SIGTERM, once, to PID 1: unwind like Ctrl-C (exit 143), instead of peers waiting
    # out the stale threshold of locks left held.
    _stop_installs()
    raise SystemExit(128 + signum)


def _interrupted(signum: int, frame: object) -> None:
    # Ctrl-C: as Python's own handler (KeyboardInterrupt: "interrupted", exit 130), after stopping the installs.
    _stop_installs()
    raise KeyboardInterrupt


def _app_for(args: list[str]) -> typer.Typer:
    """The app with only the command ``args`` names: typer turns every registered command into click's objects
    on each run (a few ms for all nine, more than the warm ensure itself) and a run uses one. Help, version,
    completion and a name that is no command get the whole app, so they list and suggest every command."""
    if not args or "_REPOINSTALL_COMPLETE" in os.environ:  # typer's shell completion: its words are elsewhere
        return app
    chosen = [info for info in app.registered_commands if _command_name(info) == args[0]]
    if not chosen:
        return app
    one = copy.copy(app)  # the same settings and callback (the group's own options)
    one.registered_commands = chosen
    return one


def _command_name(info: "typer.models.CommandInfo") -> str:
    """A command's name as typer derives it: its own, else its function's (``_`` as ``-``)."""
    if info.name is not None:
        return info.name
    return typer.main.get_command_name(getattr(info.callback, "__name__", ""))


def main() -> None:
    """Entry point: usage errors are one line and exit 2, like every other bad input. With ``--log-format json``
    the last line on stderr is the event ``COMMAND.done`` with its exit code and seconds."""
    import time

    started = time.monotonic()
    try:
        _run()
    except SystemExit as done:
        if _log.json_lines():
            code = done.code if isinstance(done.code, int) else 0 if done.code is None else 1
            command = next((a for a in sys.argv[1:] if not a.startswith("-")), "repoinstall")
            seconds = round(time.monotonic() - started, 3)
            _log.emit(f"{command}.done", "exit %d (%.1fs)", code, seconds, exit_code=code, seconds=seconds)
        raise


def _run() -> None:
    """The command line, ended by sys.exit with its exit code."""
    import gc as collector
    import signal

    # What is loaded by now (typer, click, our modules) lives as long as the process. Frozen, it is left out of
    # the cyclic collector's scans, during the command and at exit: close to a tenth of a warm run's instructions.
    collector.freeze()

    from typer.exceptions import Abort, TyperException

    signal.signal(signal.SIGTERM, _terminated)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where it is ignored (`cmd &` in a script)
        signal.signal(signal.SIGINT, _interrupted)
    args = sys.argv[1:]
    if args[:1] == ["run"] and "--" in args:
        split = args.index("--")
        _run_command[:] = args[split + 1 :]
        args = args[:split]
    try:
        code = _app_for(args)(args=args, prog_name="repoinstall", standalone_mode=False)
    except RepoinstallError as error:  # raised outside a command's own handling (e.g. while reading options)
        if "--json" in args:
            _print_json({"error": str(error), "exit_code": error.exit_code})
        _log.say_error(str(error), exit_code=error.exit_code)
        sys.exit(error.exit_code)
    except (Abort, KeyboardInterrupt):  # click turns a Ctrl-C inside a command into Abort; one outside it is as is
        if _log.json_lines():
            _log.emit("interrupted", "interrupted", level=40, exit_code=130)
        else:
            typer.echo("repoinstall: interrupted", err=True)
        sys.exit(130)
    except TyperException as error:
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        if type(error).__name__ == "NoArgsIsHelpError":
            typer.echo(message)
            sys.exit(0)
        context = getattr(error, "ctx", None)
        where = f" (see {context.command_path} --help)" if context is not None else ""
        if type(error).__name__ == "NoSuchOption" and getattr(error, "option_name", "") in ("-e", "--editable"):
            from .._requirements import editable_refused

            message, where = editable_refused(), ""  # pip's habit: say what to do instead, not "no such option"
        code = getattr(error, "exit_code", 2)
        if "--json" in args:  # a usage error of a --json run is a JSON document on stdout too
            _print_json({"error": f"{message}{where}", "exit_code": code})
        typer.echo(f"repoinstall: error: {message}{where}", err=True)
        sys.exit(code)
    except Exception as error:  # the last net: a bug is one line (its traceback with -v)
        _internal_error(error, verbose=any(a == "--verbose" or re.fullmatch(r"-v+", a) for a in args))
    sys.exit(code if isinstance(code, int) else 0)


def _internal_error(error: Exception, *, verbose: bool) -> NoReturn:
    """A bug or an unforeseen failure: one line naming it, exit 1; credentials in URLs are redacted."""
    import traceback

    from .._redact import redact_all as hide

    if verbose and not _log.json_lines():
        typer.echo(hide("".join(traceback.format_exception(error))).rstrip(), err=True)
    first = str(error).splitlines()[0] if str(error) else ""
    detail = f": {hide(first)}" if first else ""
    _log.say_error(f"internal error: {type(error).__name__}{detail} (run with -v for details)", exit_code=1)
    sys.exit(1)
