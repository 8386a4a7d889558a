"""What the system views share: the time window filter and JSON-ready dataclasses."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any


def window_sql(start: datetime | None, end: datetime | None, col: str = "ts") -> tuple[str, list]:
    """` AND ...` conditions keeping samples whose interval ends in (start, end].

    A sample covers (ts - interval_s, ts], so one ending exactly at `start` belongs to the
    period before; the same rule everywhere keeps hour cells from counting a sample twice.
    """
    sql, params = "", []
    if start is not None:
        sql += f" AND {col} > ?"
        params.append(start)
    if end is not None:
        sql += f" AND {col} <= ?"
        params.append(end)
    return sql, params


def to_plain(obj: Any) -> Any:
    """Dataclasses (nested in lists and dicts) as dicts, for `render.to_json`."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_plain(v) for v in obj]
    return obj
