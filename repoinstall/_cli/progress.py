"""A live progress display on a terminal: which trees are installing and for how long, and each phase under way
(an installer's run, storing, compiling, a layer pulled or pushed, with its bytes), one line each, cropped to the
terminal's width. rich draws it, imported when the first install or phase starts: the warm path never pays for
it."""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

from .. import _log
from .._redact import shown
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
    """Redraws ``installing a==1, b==2 (4s)`` and a line per phase under way (``uv: a==1 (3s)``, ``pulling
    sha256:0123abcd 1.2/4.5 MB (2s)``) on stderr until every started install and phase is done. It watches
    the phases (see :mod:`repoinstall._events`) from when it is made until :meth:`close`."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self._stream = stream
        self._active: dict[str, float] = {}
        self._phases: list[_log.Phase] = []
        # Events come from the installing threads, renders from rich's refresh thread: one guard for _active.
        self._guard = threading.Lock()
        self._live: Live | None = None
        self._frame = 0
        _log.watch(self.phase)

    def phase(self, change: _log.Change) -> None:
        """A phase began or ended, on the thread running it."""
        with self._guard:
            if change.kind == "begin":
                self._phases.append(change.phase)
            elif change.phase in self._phases:
                self._phases.remove(change.phase)
            start = change.kind == "begin" and self._live is None
        if start:
            self._start()

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

        now = time.monotonic()
        with self._guard:
            self._frame += 1
            frame = _FRAMES[self._frame % len(_FRAMES)]
            lines = []
            if self._active:
                oldest = min(self._active.values())
                lines.append(f"{frame} installing {', '.join(sorted(self._active))} ({now - oldest:.0f}s)")
            # Under a tree's line, its phases are its details: indented, the spinner drawn once.
            mark = "  " if self._active else f"{frame} "
            lines += [f"{mark}{_shown(one, now)}" for one in self._phases]
        # one line each, cut with … at the terminal's width
        return Text("\n".join(lines), no_wrap=True, overflow="ellipsis")

    def close(self) -> None:
        global _drawing
        _log.unwatch(self.phase)
        with self._guard:
            live, self._live = self._live, None
        if live is not None:
            _drawing = None
            live.stop()


def _shown(phase: _log.Phase, now: float) -> str:
    """A phase's line: what, how far (``1.2/4.5 MB``, when its total is bytes) and for how long."""
    amount = ""
    if phase.unit == "bytes" and phase.total:
        amount = f" {phase.done / 1e6:.1f}/{phase.total / 1e6:.1f} MB"
    elif phase.total:
        amount = f" {phase.done}/{phase.total} {phase.unit}"
    # Escaped: a label can quote what a peer wrote (a lock's holder note), which must not move the cursor.
    return f"{shown(phase.label)}{amount} ({now - phase.started:.0f}s)"


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
