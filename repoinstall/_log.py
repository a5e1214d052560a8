"""The package logger, made on first use: the warm path (everything present) never imports logging."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

#: (how many -q, how many -v, the handler to log with) as the command line asked; ``None`` when used as a
#: library (the host app configures logging).
_cli_settings: tuple[int, int, Callable[[], logging.Handler]] | None = None


def configure_cli(*, quiet: int, verbose: int, handler: Callable[[], logging.Handler] | None = None) -> None:
    """Log to stderr as ``repoinstall: message`` once the first message is logged, through ``handler()`` if
    given (the command line's own, which clears its progress line first)."""
    global _cli_settings
    _cli_settings = (quiet, verbose, handler or _stderr_handler)


def _stderr_handler() -> logging.Handler:
    import logging

    return logging.StreamHandler(sys.stderr)


def logger() -> logging.Logger:
    import logging

    log = logging.getLogger("repoinstall")
    if _redacting not in log.filters:
        log.addFilter(_redacting)
    if _cli_settings is not None and not log.handlers:
        quiet, verbose, make_handler = _cli_settings
        handler = make_handler()
        handler.setFormatter(logging.Formatter("repoinstall: %(message)s"))
        handler.addFilter(_redacting)  # also what the package's child loggers (repoinstall.celery) send here
        log.addHandler(handler)
        # As pip: -q warnings, -qq errors only; -v (or more) everything, the installer's command and output too.
        log.setLevel(
            logging.ERROR if quiet > 1 else logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
        )
        log.propagate = False
    return log


def _redacting(record: logging.LogRecord) -> bool:
    """Every record the package logs, with the credentials of any URL in it hidden: its message and arguments (an
    installer's output, a URL, an exception) and its traceback."""
    import logging

    from ._redact import redact_all

    message = record.getMessage()
    hidden = redact_all(message)
    if hidden != message:
        record.msg, record.args = hidden, None
    if record.exc_info and not record.exc_text:
        record.exc_text = redact_all(logging.Formatter().formatException(record.exc_info))
    return True
