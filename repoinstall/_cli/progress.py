"""A one-line progress display on a terminal: which trees are installing and for how long, cropped to the
terminal's width. rich draws it, imported when the first install starts: the warm path never pays for it."""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

from .._results import Event

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

#: The console the live line is drawn on while installs run, so log lines go above it instead of through it.
#: One Progress per command sets it and clears it; a log line racing close() prints through a stopped console,
#: which prints it plainly: no guard needed.
_drawing: Console | None = None


class Progress:
    """Redraws ``installing a==1, b==2 (4s)`` on stderr until every started install is done."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self._stream = stream
        self._active: dict[str, float] = {}
        # Events come from the installing threads, renders from rich's refresh thread: one guard for _active.
        self._guard = threading.Lock()
        self._live: Live | None = None
        self._frame = 0

    def __call__(self, event: Event) -> None:
        with self._guard:
            if event.kind == "start":
                self._active[event.tree] = time.monotonic()
                start = self._live is None
            else:
                self._active.pop(event.tree, None)
                start = False
        if start:
            self._start()

    def _start(self) -> None:
        global _drawing
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self._stream, highlight=False, soft_wrap=False)
        # transient: the line is erased when the last install ends; what stays is the command's own output.
        live = Live(console=console, transient=True, refresh_per_second=8, get_renderable=self.render)
        with self._guard:
            if self._live is not None:
                return  # two installs started at once: the first Live made is the one drawn
            self._live = live
        _drawing = console
        live.start()

    def render(self) -> Text:
        from rich.text import Text

        with self._guard:
            self._frame += 1
            if not self._active:
                return Text("")
            oldest = min(self._active.values())
            names = ", ".join(sorted(self._active))
        line = f"{_FRAMES[self._frame % len(_FRAMES)]} installing {names} ({time.monotonic() - oldest:.0f}s)"
        return Text(line, no_wrap=True, overflow="ellipsis")  # one line, cut with … at the terminal's width

    def close(self) -> None:
        global _drawing
        with self._guard:
            live, self._live = self._live, None
        if live is not None:
            _drawing = None
            live.stop()


class ClearingHandler(logging.StreamHandler[TextIO]):
    """Log lines that go above the progress line while it is drawn, so the two never tangle on a terminal."""

    def emit(self, record: logging.LogRecord) -> None:
        console = _drawing
        if console is None:
            super().emit(record)
            return
        try:
            from rich.text import Text

            console.print(Text(self.format(record)), soft_wrap=True)
        except Exception:
            self.handleError(record)
