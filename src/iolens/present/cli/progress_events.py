"""A progress bar that a server-side command feeds to its client as events.

Commands run by `iolens serve` for the CLI (`hosted.py`) call `progress()` as they do
locally; there it yields this object, with the calls of rich's `Progress` they use, and
each change becomes `{"progress": {"task", "description", "total", "completed"}}` on the
stream. The client draws those with a real rich bar (`forward.py`). Events are throttled
to ten a second per task, except the last, so an import of 10^5 files does not send 10^5.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from iolens.present.cli.progress_tasks import TaskProgress

MIN_INTERVAL_S = 0.1


class EventProgress(TaskProgress):
    def __init__(self, emit: Callable[[dict[str, Any]], None]) -> None:
        super().__init__()
        self._emit = emit
        self._sent: dict[int, float] = {}

    def _added(self, state: dict[str, Any]) -> None:
        self._send(state, force=True)

    def _changed(self, state: dict[str, Any], force: bool) -> None:
        self._send(state, force)

    def _send(self, state: dict[str, Any], force: bool = False) -> None:
        task = state["task"]
        now = time.monotonic()
        done = state["total"] is not None and state["completed"] >= state["total"]
        if force or done or now - self._sent.get(task, 0.0) >= MIN_INTERVAL_S:
            self._sent[task] = now
            self._emit({"progress": dict(state)})
