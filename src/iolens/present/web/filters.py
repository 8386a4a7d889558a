"""Jinja filters of the pages: times in UTC, durations, percentages, numbers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any


def when(t: datetime | str | None) -> str:
    if t is None or t == "":
        return "-"
    if isinstance(t, str):
        try:
            t = datetime.fromisoformat(t.replace("Z", "+00:00"))
        except ValueError:
            return t
    return t.strftime("%Y-%m-%d %H:%M:%S")


def iso(t: datetime | str | None) -> str:
    if t is None:
        return ""
    if isinstance(t, str):
        return t
    return t.strftime("%Y-%m-%dT%H:%M:%S")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = round(float(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def pct(x: float | None, digits: int = 0) -> str:
    return "-" if x is None else f"{100 * float(x):.{digits}f} %"


def num(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "-"
    return f"{float(x):,.{digits}f}"


def si(x: float | None, unit: str = "") -> str:
    """1234567 -> 1.2 M (unit)."""
    if x is None:
        return "-"
    v = float(x)
    for prefix in ("", "k", "M", "G", "T", "P"):
        if abs(v) < 1000 or prefix == "P":
            text = f"{v:.0f}" if prefix == "" else f"{v:.1f}"
            return f"{text} {prefix}{unit}".strip()
        v /= 1000
    return str(x)


FILTERS: dict[str, Callable[..., Any]] = {
    "when": when,
    "iso": iso,
    "duration": duration,
    "pct": pct,
    "num": num,
    "si": si,
}
