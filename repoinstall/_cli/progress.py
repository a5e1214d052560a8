"""A one-line progress display on a terminal: which trees are installing and for how long."""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import TextIO

from .._results import Event

_FRAMES = "|/-\\"
_CLEAR = "\r\x1b[K"


class Progress:
    """Redraws ``installing a==1, b==2 (4s)`` on stderr until every started install is done."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self._stream = stream
        self._active: dict[str, float] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self, event: Event) -> None:
        with self._guard:
            if event.kind == "start":
                self._active[event.tree] = time.monotonic()
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="repoinstall-progress", daemon=True)
                    self._thread.start()
            else:
                self._active.pop(event.tree, None)

    def _run(self) -> None:
        frame = 0
        while not self._stop.wait(0.1):
            self.draw(_FRAMES[frame % len(_FRAMES)])
            frame += 1

    def draw(self, spinner: str) -> None:
        with self._guard:
            if not self._active:
                line = ""
            else:
                oldest = min(self._active.values())
                names = ", ".join(sorted(self._active))
                line = f"{spinner} installing {names} ({time.monotonic() - oldest:.0f}s)"
            self._stream.write(_CLEAR + line[:200])
            self._stream.flush()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._stream.write(_CLEAR)
            self._stream.flush()


class ClearingHandler(logging.StreamHandler[TextIO]):
    """Log lines that first clear the progress line, so the two never tangle on a terminal."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream.write(_CLEAR)
        super().emit(record)
