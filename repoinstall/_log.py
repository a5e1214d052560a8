"""The package logger, made on first use: the warm path (everything present) never imports logging."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import logging

    from ._events import Figure

#: (how many -q, how many -v, the handler to log with, whether as JSON lines) as the command line asked; ``None``
#: when used as a library (the host app configures logging).
_cli_settings: tuple[int, int, Callable[[], logging.Handler], bool] | None = None


def configure_cli(
    *, quiet: int, verbose: int, handler: Callable[[], logging.Handler] | None = None, as_json: bool = False
) -> None:
    """Log to stderr as ``repoinstall: message`` once the first message is logged, through ``handler()`` if
    given (the command line's own, which clears its progress line first); ``as_json``: as one JSON object per
    line instead (``--log-format json``: see docs/reference/json.md)."""
    global _cli_settings
    _cli_settings = (quiet, verbose, handler or _stderr_handler, as_json)


def json_lines() -> bool:
    """Whether the command line logs JSON lines (``--log-format json``)."""
    return _cli_settings is not None and _cli_settings[3]


def say_error(text: str, *, exit_code: int | None = None, tree: str = "") -> None:
    """The command line's ``repoinstall: error: text`` on stderr, whatever -q; the event ``error`` instead with
    ``--log-format json`` (``text`` is already redacted where it can hold a URL, as every error's is)."""
    if json_lines():
        emit("error", "error: %s", text, level=40, tree=tree, reason=text, exit_code=exit_code)
    else:
        print(f"repoinstall: error: {text}", file=sys.stderr, flush=True)


def _stderr_handler() -> logging.Handler:
    import logging

    return logging.StreamHandler(sys.stderr)


def logger() -> logging.Logger:
    import logging

    log = logging.getLogger("repoinstall")
    if _redacting not in log.filters:
        log.addFilter(_redacting)
    if _cli_settings is not None and not log.handlers:
        quiet, verbose, make_handler, as_json = _cli_settings
        handler = make_handler()
        handler.setFormatter(_json_formatter() if as_json else logging.Formatter("repoinstall: %(message)s"))
        handler.addFilter(_redacting)  # also what the package's child loggers (repoinstall.celery) send here
        log.addHandler(handler)
        # As pip: -q warnings, -qq errors only; -v (or more) everything, the installer's command and output too.
        log.setLevel(
            logging.ERROR if quiet > 1 else logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
        )
        log.propagate = False
    return log


def _json_formatter() -> logging.Formatter:
    """One JSON object per record, on one line: ``time`` (UTC), ``level``, ``event``, ``tree``, the event's
    figures and ``message`` (and ``traceback``, with -v), every text with a URL's credentials hidden."""
    import json
    import logging
    from datetime import UTC, datetime

    from ._events import BASE, name
    from ._redact import redact_all

    class JsonLines(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            name(record)
            when = datetime.fromtimestamp(record.created, tz=UTC)
            document: dict[str, object] = {
                "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "level": record.levelname.lower(),
                "event": getattr(record, "event", "log"),
                "tree": getattr(record, "tree", ""),
                "message": redact_all(record.getMessage()),
            }
            for key, value in getattr(record, "figures", {}).items():
                if key not in BASE:
                    document[key] = value
            if record.exc_text:
                document["traceback"] = record.exc_text
            elif record.exc_info:
                document["traceback"] = redact_all(self.formatException(record.exc_info))
            return json.dumps(document, default=str)

    return JsonLines()


def _redacting(record: logging.LogRecord) -> bool:
    """Every record the package logs, with the credentials of any URL in it hidden: its message and arguments (an
    installer's output, a URL, an exception) and its traceback."""
    import logging

    from ._events import name
    from ._redact import redact_all

    name(record)  # its event and figures first, from its arguments, which a redacted message drops
    message = record.getMessage()
    hidden = redact_all(message)
    if hidden != message:
        record.msg, record.args = hidden, None
    if record.exc_info and not record.exc_text:
        record.exc_text = redact_all(logging.Formatter().formatException(record.exc_info))
    return True


# ---- events with figures of their own, and phases --------------------------------------------------------


def emit(name: str, message: str, *args: object, level: int = 20, tree: str = "", **figures: Figure) -> None:
    """Log ``message % args`` as the event ``name`` about ``tree`` with ``figures`` (``level``: logging's number,
    20 is INFO)."""
    _emit(name, level, tree, figures, message, *args)


def _emit(name: str, level: int, tree: str, figures: Mapping[str, Figure], message: str, *args: object) -> None:
    logger().log(level, message, *args, extra={"event": name, "tree": tree, "figures": figures})


class Phase:
    """One phase under way: what it is (``label``, e.g. ``storing 3 distributions``), since when, and how far it
    got of its ``total`` (bytes or files: ``unit``), which the thread doing it advances and a display reads."""

    def __init__(self, event: str, label: str, tree: str, total: int | None, unit: str) -> None:
        self.event = event
        self.label = label
        self.tree = tree
        self.total = total
        self.unit = unit
        self.done = 0  # written by the one thread running the phase; a display reads a value a moment old
        self.started = time.monotonic()
        #: Figures known once it ran (files compiled, say), for the event that ends it.
        self.figures: dict[str, Figure] = {}
        #: Cleared by a phase whose failure is found without an exception (an installer that exited non-zero):
        #: it logs nothing either, and the error that follows says what happened.
        self.succeeded = True

    def advance(self, amount: int) -> None:
        self.done += amount


class Change(NamedTuple):
    """What a watcher is told: a phase began or ended."""

    kind: str  # "begin" or "end"
    phase: Phase


#: Who is told of phases (the command line's display). Changed by the main thread around a command's work, read by
#: the threads doing it: a tuple, replaced whole, so a reader never sees one half changed.
_watchers: tuple[Callable[[Change], None], ...] = ()
_watch_guard = threading.Lock()


def watch(watcher: Callable[[Change], None]) -> None:
    global _watchers
    with _watch_guard:
        _watchers = (*_watchers, watcher)


def unwatch(watcher: Callable[[Change], None]) -> None:
    global _watchers
    with _watch_guard:
        _watchers = tuple(one for one in _watchers if one is not watcher)


def shown(running: Phase, *, ended: bool = False) -> None:
    """Tell the watchers ``running`` began (or ``ended``), for a phase whose end is not one block's (a lock's wait:
    see :mod:`repoinstall._lock.wait`), which logs its own event."""
    for watcher in _watchers:
        watcher(Change("end" if ended else "begin", running))


@contextmanager
def phase(
    event: str,
    label: str,
    done: str,
    *args: object,
    tree: str = "",
    total: int | None = None,
    unit: str = "",
    level: int = 20,
    **figures: Figure,
) -> Iterator[Phase]:
    """A phase that can last over a second: watchers see it begin (``label``), advance and end; once it ends
    without an error the event ``event`` is logged, ``done % args`` with `` (N.Ns)`` after it, its ``seconds``, its
    ``total`` (as ``bytes`` or ``files``, by ``unit``) and ``figures``, at ``level`` (INFO, or DEBUG for one that
    only prepares another, whose own line follows). One that fails logs nothing here: its error says what
    happened."""
    running = Phase(event, label, tree, total, unit)
    shown(running)
    try:
        yield running
    finally:
        shown(running, ended=True)
    if not running.succeeded:
        return
    seconds = time.monotonic() - running.started
    if total is not None and unit:
        figures = {unit: total, **figures}
    figures.update(running.figures)
    figures["seconds"] = round(seconds, 3)
    _emit(event, level, tree, figures, done + " (%.1fs)", *args, seconds)
