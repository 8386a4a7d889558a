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

MIN_INTERVAL_S = 0.1


class EventProgress:
    def __init__(self, emit: Callable[[dict[str, Any]], None]) -> None:
        self._emit = emit
        self._tasks: dict[int, dict[str, Any]] = {}
        self._sent: dict[int, float] = {}

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        task = len(self._tasks)
        self._tasks[task] = {
            "task": task,
            "description": description,
            "total": total,
            "completed": 0,
        }
        self._send(task, force=True)
        return task

    def advance(self, task: int, advance: float = 1) -> None:
        self._tasks[task]["completed"] += advance
        self._send(task)

    def update(
        self,
        task: int,
        *,
        total: float | None = None,
        completed: float | None = None,
        advance: float | None = None,
        description: str | None = None,
        **_: Any,
    ) -> None:
        state = self._tasks[task]
        if total is not None:
            state["total"] = total
        if completed is not None:
            state["completed"] = completed
        if advance is not None:
            state["completed"] += advance
        if description is not None:
            state["description"] = description
        self._send(task, force=total is not None or description is not None)

    def _send(self, task: int, force: bool = False) -> None:
        state = self._tasks[task]
        now = time.monotonic()
        done = state["total"] is not None and state["completed"] >= state["total"]
        if force or done or now - self._sent.get(task, 0.0) >= MIN_INTERVAL_S:
            self._sent[task] = now
            self._emit({"progress": dict(state)})
