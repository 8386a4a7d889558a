"""The per-job plots of the HTML report and the job page, as inline SVG strings (no network, no JS).

matplotlib's object API (`Figure`, never pyplot) keeps the plots thread-safe for the
server; text stays text in the SVG (`svg.fonttype: none`), so the files stay small.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import datetime

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure

READ, WRITE, META = "#1f77b4", "#d62728", "#7f7f7f"
mpl.rcParams["svg.fonttype"] = "none"
MiB = 2**20


def to_svg(fig: Figure, tight: bool = True) -> str:
    """The figure as an `<svg>` element; `tight=False` for figures that set their own
    margins (a tight bounding box costs an extra draw, ~40 ms)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight" if tight else None)
    svg = buf.getvalue()
    return svg[svg.index("<svg") :]


def bandwidth_timeline(
    offset_s: float,
    read: np.ndarray,
    write: np.ndarray,
    phases: Sequence[tuple[float, float]] = (),
    bin_s: float = 1.0,
) -> str:
    """Read and write MiB/s per bin since the job start, I/O phases shaded.

    `offset_s` is where bin 0 starts, and `phases` are (start, end), in seconds since the
    job start.
    """
    fig = Figure(figsize=(8, 2.6))
    ax = fig.subplots()
    t = offset_s + np.arange(len(read)) * bin_s
    ax.fill_between(t, read / bin_s / MiB, step="post", color=READ, alpha=0.5, label="read")
    ax.fill_between(t, write / bin_s / MiB, step="post", color=WRITE, alpha=0.5, label="write")
    for i, (a, b) in enumerate(phases):
        ax.axvspan(a, b, color="#ffbf00", alpha=0.15, lw=0, label="I/O phase" if i == 0 else None)
    ax.set_xlabel("seconds since job start")
    ax.set_ylabel("MiB/s")
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    ax.margins(x=0)
    ax.set_xlim(left=min(0.0, offset_s))
    fig.subplots_adjust(left=0.09, right=0.99, bottom=0.18, top=0.96)
    return to_svg(fig, tight=False)


def bars(labels: Sequence[str], values: Sequence[float], xlabel: str, ylabel: str) -> str:
    """A plain bar chart (request-size histograms, bytes per OST, ops per type)."""
    fig = Figure(figsize=(8, 2.6))
    ax = fig.subplots()
    ax.bar(range(len(values)), values, color=READ)
    ax.set_xticks(
        range(len(labels)),
        labels,
        rotation=30 if len(labels) > 6 else 0,
        ha="right" if len(labels) > 6 else "center",
        fontsize=8,
    )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return to_svg(fig)


def epoch(t: datetime | str | None) -> float | None:
    if t is None:
        return None
    if isinstance(t, str):
        t = datetime.fromisoformat(t.rstrip("Z"))
    return (t - datetime(1970, 1, 1)).total_seconds()
