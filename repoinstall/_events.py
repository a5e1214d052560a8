"""What the package logs, as events: each with a stable name, the tree it is about and its figures, so a log
collector can select and compare them (``--log-format json``) where a person reads the text line.

A message logged through :func:`repoinstall._log.logger` is named by its format string (:data:`NAMED`), its
arguments by the names listed there: no call site has to change for its line to be an event. The events with
figures of their own (:func:`repoinstall._log.emit`) pass them as ``extra``. Either way the record carries
``event``, ``tree`` and ``figures`` attributes, which a library user's own logging config sees too.

What logs them (:func:`repoinstall._log.emit`, and :func:`repoinstall._log.phase` for a phase that can last
over a second) is in :mod:`repoinstall._log`, above this table. Nothing here imports logging: the warm path never
pays for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

#: A figure's value in an event: what JSON holds as is.
Figure = str | int | float | bool | None

#: Each message the package logs (its format string) -> (its event's name, the names of its arguments in order).
#: ``tree`` is the tree the event is about (the ``tree`` field); ``_`` is an argument not kept as a figure (a text
#: the message already shows). A test checks that every message in the package is here, and every name is in the
#: reference (docs/reference/json.md).
NAMED: Mapping[str, tuple[str, tuple[str, ...]]] = {
    # the trees an ensure installs
    "%s %s (%.1fs%s%s)": ("install.done", ("action", "tree", "seconds", "_", "_")),
    "skipped %s: its marker is false here": ("ensure.skipped", ("requirement",)),
    "%s: hashed; installing it as without --from": ("pull.skipped", ("tree",)),
    "%s: no image in %s; installing it": ("pull.missing", ("tree", "registry")),
    "%s; installing %s from the index instead": ("pull.refused", ("reason", "tree")),
    "stored the distributions of %d trees in one run (%.1fs)": ("batch.done", ("trees", "seconds")),
    "storing the batch first failed (%s); installing tree by tree": ("batch.failed", ("reason",)),
    "%d to install, %d at a time": ("ensure.plan", ("trees", "jobs")),
    "%s; keeping installed %s": ("choose.kept", ("reason", "tree")),
    "%s: resolved with its batch it would hold an older %s; resolving it alone": (
        "batch.behind",
        ("tree", "distribution"),
    ),
    "%s: storing them together failed (%s); one by one": ("store.split", ("what", "reason")),
    # the installer
    "installing %s with %s": ("install.start", ("what", "installer")),
    "%s: running %s": ("installer.command", ("what", "command")),
    "%s: %s said:\n%s": ("installer.output", ("what", "installer", "output")),
    "%s: no resolution together (%s); installing one by one": ("resolve.split", ("what", "reason")),
    "%s: some artifact of the resolution has no hash; installing one by one": ("resolve.unhashed", ("what",)),
    "%s: installing its kept closure: %s": ("install.closure", ("tree", "members")),
    "%s: could not keep its closure (%s); a reinstall resolves it afresh": ("install.closure_lost", ("tree", "reason")),
    "%s: a peer published it first; using theirs": ("install.peer", ("tree",)),
    "could not remove %s: %s": ("staging.left", ("path", "reason")),
    # the store
    "%s: installing %d distribution(s) into the store": ("store.start", ("what", "distributions")),
    "%s: a peer stored it first; using theirs": ("store.peer", ("distribution",)),
    "%s: %s %s has no known artifact; not stored": ("store.unknown", ("what", "distribution", "version")),
    "%s: every distribution is in the store; composing it": ("compose.start", ("tree",)),
    "%s: %d files copied where the filesystem refused hard links": ("compose.copied", ("tree", "files")),
    (
        "%s: %s was taken out of the store (by gc) while this tree was composed from it; storing it again and "
        "composing anew, holding the lock of each distribution"
    ): ("compose.again", ("what", "path")),
    "moved a damaged stored distribution aside (%s): %s": ("store.damaged", ("reason", "path")),
    "%s: its RECORD digest is not kept (%s)": ("store.digest_lost", ("distribution", "reason")),
    "set aside %s where a stored distribution belongs: %s": ("store.stray", ("what", "path")),
    "left %d unreadable dir(s) out of the store's figures (uid %d may not read them), first %s": (
        "store.unreadable",
        ("dirs", "uid", "path"),
    ),
    # trees on disk
    "moved a broken tree aside, to install it again: %s": ("tree.broken", ("path",)),
    "put back the broken tree, as it could not be installed again: %s": ("tree.restored", ("path",)),
    "moved a broken tree aside: %s": ("tree.broken", ("path",)),
    "%s does not match its RECORDs (%s); reinstalling": ("tree.damaged", ("path", "problems")),
    "%s: a handle went stale (%s); looking the repo up again": ("repo.stale", ("path", "reason")),
    # locks
    "waiting for %s: %s": ("lock.wait", ("lock", "holder")),
    "still waiting for %s after %.0fs: %s": ("lock.wait", ("lock", "seconds", "holder")),
    "waited %.1fs for %s (%s): %s": ("lock.waited", ("seconds", "lock", "outcome", "holder")),
    "lost the lock %s (%s); will not publish over a peer's tree": ("lock.lost", ("lock", "reason")),
    "%s: its directory was removed (or its handle went stale); looking it up again": ("lock.stale", ("lock",)),
    "%s: its state was set aside by its holder (%s)": ("lock.set_aside", ("lock", "reason")),
    "could not release %s cleanly (%s); it expires on its own": ("lock.release_failed", ("lock", "reason")),
    "could not set aside %s: %s": ("lock.set_aside_failed", ("lock", "reason")),
    "%s: a record went away while read (%s); trying again": ("lock.reread", ("lock", "reason")),
    "%s": ("message", ("text",)),
    # the index
    "index cache entry %s is garbled: a miss": ("index.cache_garbled", ("key",)),
    "index cache not written (%s)": ("index.cache_unwritten", ("reason",)),
    "wheel cache not written (%s)": ("wheels.cache_unwritten", ("reason",)),
    "%s: the kept wheel cannot be copied (%s); fetching it": ("wheels.uncopied", ("wheel", "reason")),
    "%s: the repo's cached copy is damaged (sha256 %s); fetching it": ("wheels.damaged", ("wheel", "sha256")),
    "%s: %s; retrying in %.1fs": ("index.retry", ("what", "reason", "pause")),
    "skipping %s %s: Requires-Python %s": ("index.skipped", ("project", "version", "requires_python")),
    "%s: no source lists a file its hashes name; the installer picks it": ("index.unlisted", ("distribution",)),
    "%s: its artifact is not known (%s); the installer picks it": ("index.unknown", ("distribution", "reason")),
    "cannot read pip's configuration (%s): using pip's defaults": ("pipconfig.unreadable", ("reason",)),
    # registries
    "%s: %d of %d layers stored from %s (%d bytes, %.1fs)": (
        "pull.done",
        ("tree", "layers", "of", "image", "bytes", "seconds"),
    ),
    "%s: %s has no wheel of %s; installing it as without --from": ("pull.no_wheel", ("tree", "registry", "pin")),
    "%s: %s was not installed from a wheel it can name: not pushed": ("push.skipped", ("tree", "distribution")),
    "%s: the wheel of %s is not at its URL any more: not pushed": ("push.wheel_gone", ("tree", "distribution")),
    # operator commands
    "kept %s: its installer (pid %s) is running": ("gc.kept", ("path", "pid")),
    "kept %s: heartbeat %.0fs ago": ("gc.kept", ("path", "seconds")),
    (
        "kept %s (%s): not proven unused yet (something in it changed within --stale-after, a lease declared in "
        "it or --older-than)"
    ): ("gc.kept", ("path", "reason")),
    "kept %s: %s": ("gc.kept", ("path", "reason")),
    (
        "left %d lock state(s) %s alone: this is uid %d, which cannot read them (filelock keeps them private), so "
        "it cannot tell whether anyone is in them. Run gc as that uid; better, run every pod with one runAsUser "
        "(and one fsGroup)"
    ): ("gc.unreadable", ("count", "whose", "uid")),
    "left %d stored distribution lock state(s) alone: this is uid %d, which cannot read them": (
        "gc.unreadable",
        ("count", "uid"),
    ),
    (
        "left the store alone: a record cannot be read by uid %d (%s), so no stored distribution can be proven "
        "unused; run gc as the repo's owner"
    ): ("gc.store_unreadable", ("uid", "path")),
    "%s; left out": ("list.unreadable", ("reason",)),
    "skipping %s: not installed in %s (%s)": ("remove.missing", ("requirement", "repo", "env")),
    "stopping: installs still cleaning up after %gs; going on (gc removes what they leave)": (
        "stop.late",
        ("seconds",),
    ),
    "%s: %s": ("error.detail", ("what", "reason")),
    # the engine adapters' child loggers
    "repoinstall: %s": ("worker.error", ("reason",)),
    "repoinstall: error: %s": ("worker.error", ("reason",)),
}

#: The names of the events of :func:`repoinstall._log.phase` and the command line's, for the reference as
#: :data:`NAMED`'s.
OWN = (
    "resolve.done",
    "installer.done",
    "store.done",
    "pull.layer",
    "push.layer",
    "lock.waited",
    "lock.unusable",
    "install.done",
    "compile.done",
    "error",
    "interrupted",
    "repo.default",
    "COMMAND.done",
)

#: The fields every event has; a figure of one of these names would be hidden by them, so none is called so.
BASE = ("time", "level", "event", "tree", "message")


def name(record: logging.LogRecord) -> None:
    """Give ``record`` its ``event``, ``tree`` and ``figures`` (from :data:`NAMED` unless ``emit`` gave them),
    each text figure with a URL's credentials hidden. Done once per record, before its message is redacted (which
    drops its arguments)."""
    if getattr(record, "_named", False):
        return
    from ._redact import redact_all

    figures: dict[str, Figure]
    if isinstance(getattr(record, "event", None), str):
        figures = dict(getattr(record, "figures", None) or {})
        tree = str(getattr(record, "tree", "") or "")
    else:
        event, names = NAMED.get(str(record.msg), ("log", ()))
        args = record.args if isinstance(record.args, tuple) else ()
        figures = {key: _value(arg) for key, arg in zip(names, args, strict=False) if key != "_"}
        tree = str(figures.pop("tree", "") or "")
        record.event = event
    record.tree = redact_all(tree)
    record.figures = {key: _shown(value, redact_all) for key, value in figures.items()}
    record._named = True


def _shown(value: Figure, redact_all: Callable[[str], str]) -> Figure:
    """A figure as an event carries it: a text with a URL's credentials hidden, seconds to the millisecond."""
    if isinstance(value, str):
        return redact_all(value)
    return round(value, 3) if isinstance(value, float) else value


def _value(arg: object) -> Figure:
    """An argument as a figure: numbers, booleans and ``None`` as they are, anything else as its text."""
    if arg is None or isinstance(arg, bool | int | float):
        return arg
    return str(arg)
