"""The calls of rich's `Progress` that commands make, kept as plain task states.

Two stand-ins for a rich bar share them: `PlainProgress` (lines in a log) and
`EventProgress` (events to a remote client). Each says what a change shows through the
hooks; the counting lives here once.
"""

from __future__ import annotations

import threading
from typing import Any


class TaskProgress:
    def __init__(self) -> None:
        self._tasks: dict[int, dict[str, Any]] = {}
        self._lock = threading.RLock()  # PlainProgress's timer thread reads the tasks

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        with self._lock:
            task = len(self._tasks)
            self._tasks[task] = {
                "task": task,
                "description": description,
                "total": total,
                "completed": 0,
            }
            self._added(self._tasks[task])
            return task

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, advance=advance)

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
        with self._lock:
            state = self._tasks[task]
            if description is not None and description != state["description"]:
                self._renaming(state)
                state["description"] = description
            if total is not None:
                state["total"] = total
            if completed is not None:
                state["completed"] = completed
            if advance is not None:
                state["completed"] += advance
            self._changed(state, force=total is not None or description is not None)

    # -- what a subclass shows ---------------------------------------------------------------
    def _added(self, state: dict[str, Any]) -> None:
        """A task was added."""

    def _renaming(self, state: dict[str, Any]) -> None:
        """A task's step is about to be renamed (its old step is over)."""

    def _changed(self, state: dict[str, Any], force: bool) -> None:
        """A task changed; `force` when its total or description was set."""
