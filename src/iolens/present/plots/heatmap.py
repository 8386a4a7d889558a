"""The platform view: the factor correlation matrix as a heatmap (zoom-in Figure 2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from iolens.present.plots._svg import figure, to_svg

LABELS = {
    "datasize": "Datasize",
    "nprocs": "nprocs",
    "nnodes": "nnodes",
    "mtime_pct": "MTime",
    "collective": "Col",
    "ost_count": "OST #",
    "small_pct": "Small",
    "seq_pct": "Seq",
    "max_rank_io": "MaxRankIO",
    "max_rank_req": "MaxRankReq",
    "max_ost_io": "MaxOSTIO",
    "max_ost_req": "MaxOSTReq",
    "oss_cpu_pct": "ossAvgCPU",
    "mds_cpu_pct": "mdsAvgCPU",
    "ost_io_mb": "ostAvgIO",
    "bandwidth": "BW",
}


def correlation_heatmap(matrix: Mapping[str, Any], title: str | None = None) -> str:
    """SVG of `platform.correlation(...)`'s result: one annotated cell per pair (text ids
    `cell-i-j`), blank where a coefficient is undefined."""
    cols = list(matrix["columns"])
    m = np.array(
        [[np.nan if v is None else v for v in row] for row in matrix["matrix"]], dtype=float
    )
    n = len(cols)
    size = 1.0 + 0.55 * n
    fig = figure(size + 1.2, size)
    ax = fig.add_subplot()
    img = ax.imshow(m, cmap="RdBu_r", vmin=-1.0, vmax=1.0, gid="heatmap")
    labels = [LABELS.get(c, c) for c in cols]
    ax.set_xticks(range(n), labels, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(n), labels, fontsize=8)
    for i in range(n):
        for j in range(n):
            v = m[i, j]
            if np.isfinite(v):
                ax.text(
                    j,
                    i,
                    f"{v:.2f}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if abs(v) > 0.6 else "black",
                    gid=f"cell-{i}-{j}",
                )
    fig.colorbar(img, ax=ax, shrink=0.8, label="Pearson r")
    ax.set_title(title or f"factor correlations over {matrix.get('n', '?')} jobs", fontsize=9)
    return to_svg(fig)
