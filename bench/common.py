"""Small helpers shared by the benchmarks: repeat, take medians, print markdown."""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    """Wall-clock seconds of `repeat` calls."""
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def child(cmd: list[str], **kw: Any) -> tuple[float, float, int, str]:
    """Wall seconds, peak RSS (MiB, from wait4) and exit status of a child, and its output."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    out = p.stdout.read() if p.stdout else ""
    _, status, usage = os.wait4(p.pid, 0)
    return time.perf_counter() - t0, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), out
