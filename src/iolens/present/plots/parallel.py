"""The application view: a parallel-coordinates plot of jobs' factors, coloured by user.

As the zoom-in paper's Figures 5, 8, 13, 15-17 and 20: one line per job across one axis
per factor. Each axis is scaled to its own range (log10 for the factors spanning orders of
magnitude), so its bottom and top are labelled with the raw minimum and maximum; a job
missing a factor has a gap there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.lines import Line2D

from iolens.analyze.darshan.zoomin.platform import APP_FACTORS
from iolens.present.plots._svg import figure, to_svg
from iolens.present.plots.heatmap import LABELS

#: Factors drawn on a log axis.
LOG_AXES = frozenset({"bandwidth", "datasize", "nprocs", "nnodes", "ost_count", "ost_io_mb"})


def _rows(app_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Accept `application_view` groups (rows nested under "rows") or flat factor rows."""
    out: list[dict[str, Any]] = []
    for item in app_rows:
        if "rows" in item:
            out.extend({**r, "user": item.get("user", "")} for r in item["rows"])
        else:
            out.append(dict(item))
    return out


def _fmt(v: float) -> str:
    if v == 0 or 1e-2 <= abs(v) < 1e4:
        return f"{v:.3g}"
    return f"{v:.2e}"


def parallel_coordinates(
    app_rows: Sequence[Mapping[str, Any]],
    factors: Sequence[str] = APP_FACTORS,
    color_by: str = "user",
    title: str | None = None,
) -> str:
    """SVG with one line per job (id `job-<job_id>`), coloured by `color_by`."""
    rows = _rows(app_rows)
    axes = list(factors)
    raw = np.array(
        [[np.nan if r.get(f) is None else float(r[f]) for f in axes] for r in rows], dtype=float
    ).reshape(len(rows), len(axes))
    scaled = raw.copy()
    bounds = []
    for k, f in enumerate(axes):
        col = raw[:, k]
        if f in LOG_AXES:
            col = np.where(col > 0, np.log10(np.where(col > 0, col, 1.0)), np.nan)
        ok = col[np.isfinite(col)]
        lo, hi = (float(ok.min()), float(ok.max())) if len(ok) else (0.0, 1.0)
        scaled[:, k] = (
            (col - lo) / (hi - lo) if hi > lo else np.where(np.isfinite(col), 0.5, np.nan)
        )
        raw_ok = raw[:, k][np.isfinite(raw[:, k])]
        bounds.append((float(raw_ok.min()), float(raw_ok.max())) if len(raw_ok) else None)
    groups = sorted({str(r.get(color_by, "")) for r in rows})
    fig = figure(max(6.0, 0.9 * len(axes) + 1.5), 4.0)
    ax = fig.add_subplot()
    palette = [f"C{i % 10}" for i in range(len(groups))]
    color = dict(zip(groups, palette, strict=True))
    x = np.arange(len(axes))
    for r, y in zip(rows, scaled, strict=True):
        ax.add_line(
            Line2D(
                x,
                y,
                color=color[str(r.get(color_by, ""))],
                alpha=0.8,
                linewidth=1.2,
                gid=f"job-{r.get('job_id', '')}",
            )
        )
    for k in x:
        ax.axvline(k, color="0.6", linewidth=0.8)
        b = bounds[k]
        if b is not None:
            ax.annotate(_fmt(b[0]), (k, -0.02), ha="center", va="top", fontsize=6)
            ax.annotate(_fmt(b[1]), (k, 1.02), ha="center", va="bottom", fontsize=6)
    ax.set_xlim(-0.3, len(axes) - 0.7)
    ax.set_ylim(-0.1, 1.1)
    ax.set_yticks([])
    ax.set_xticks(
        x,
        [LABELS.get(f, f) + (" (log)" if f in LOG_AXES else "") for f in axes],
        rotation=30,
        ha="right",
        fontsize=7,
    )
    ax.legend(
        handles=[Line2D([], [], color=color[g], label=f"{color_by} {g}") for g in groups],
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
    )
    ax.set_title(title or f"{len(rows)} jobs by {color_by}", fontsize=9)
    return to_svg(fig)
