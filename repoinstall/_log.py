"""The package logger, made on first use: the warm path (everything present) never imports logging."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

#: (quiet, verbose) as the command line asked; ``None`` when used as a library (the host app configures logging).
_cli_settings: tuple[bool, bool] | None = None


def configure_cli(*, quiet: bool, verbose: bool) -> None:
    """Log to stderr as ``repoinstall: message`` once the first message is logged."""
    global _cli_settings
    _cli_settings = (quiet, verbose)


def logger() -> logging.Logger:
    import logging

    log = logging.getLogger("repoinstall")
    if _cli_settings is not None and not log.handlers:
        quiet, verbose = _cli_settings
        if sys.stderr.isatty():
            from ._progress import ClearingHandler

            handler: logging.Handler = ClearingHandler(sys.stderr)
        else:
            handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("repoinstall: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)
        log.propagate = False
    return log
