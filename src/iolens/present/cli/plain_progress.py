"""Progress as plain lines, for output that is not a terminal (a batch job's log, a pipe).

A rich bar is off there, which left a long command silent (`iolens simulate`: 88 s of
nothing). This stands in for rich's `Progress` (the calls the commands use) and prints
one line per unfinished task every `every` seconds from a timer thread, so a bulk step
that reports nothing still shows it is alive; a command done within the first interval
prints nothing. Once it has printed, a task's end (its count reached, its step renamed,
the command over) gets a last line too, so a log shows where each step finished.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, TextIO

from iolens.present.cli.progress_tasks import TaskProgress

#: Seconds between lines; `IOLENS_PROGRESS_EVERY` overrides (a log wants fewer).
DEFAULT_EVERY_S = 10.0


def interval() -> float:
    try:
        return max(0.1, float(os.environ.get("IOLENS_PROGRESS_EVERY", DEFAULT_EVERY_S)))
    except ValueError:
        return DEFAULT_EVERY_S


class PlainProgress(TaskProgress):
    def __init__(self, stream: TextIO, console: Any = None, every: float | None = None) -> None:
        super().__init__()
        self.console = console  # what commands print messages through (as rich's bar's)
        self._out = stream
        self._every = every or interval()
        self._printed: set[int] = set()
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._timer = threading.Thread(target=self._tick, name="iolens-progress", daemon=True)

    def __enter__(self) -> PlainProgress:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._timer.join()
        with self._lock:
            for task, state in self._tasks.items():
                if task in self._printed and not state["ended"]:
                    self._line(state, "done")

    def _added(self, state: dict[str, Any]) -> None:
        state["ended"] = False

    def _renaming(self, state: dict[str, Any]) -> None:
        self._end(state)
        state["ended"] = False  # the next step has not ended

    # -- the lines ---------------------------------------------------------------------------
    def _end(self, state: dict[str, Any]) -> None:
        """A step that was shown gets its last count before the next one starts."""
        if state["task"] in self._printed and not state["ended"]:
            self._line(state, "done")
        state["ended"] = True

    def _tick(self) -> None:
        while not self._stop.wait(self._every):
            with self._lock:
                for state in self._tasks.values():
                    if state["total"] and state["completed"] >= state["total"]:
                        self._end(state)  # finished: its last line, once
                    elif not state["ended"]:
                        self._line(state)
                        self._printed.add(state["task"])

    def _line(self, state: dict[str, Any], end: str = "") -> None:
        total, done = state["total"], state["completed"]
        count = f" {done:,.0f}/{total:,.0f} ({100 * done / total:.0f} %)" if total else ""
        elapsed = time.monotonic() - self._t0
        tail = f", {end}" if end else ""
        self._out.write(f"iolens: {state['description']}{count}, {elapsed:.0f} s{tail}\n")
        self._out.flush()
