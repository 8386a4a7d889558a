"""The zoom-in paper's two wide views over many jobs' factor rows (`job_factors` rows or
the `job_factors` table).

- Platform view (§IV-A, Figure 2): Pearson correlation of the factors with bandwidth and
  with each other over all jobs, with how many jobs each coefficient rests on; jobs miss
  some factors (no Lustre, no server data), so each pair uses the jobs that have both.
- Application view (§IV-B, Figure 5): jobs grouped by executable and user, each with its
  factor values and bandwidth class, the data of a parallel-coordinates plot.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from iolens.model.schema import ZOOMIN_FACTORS

#: The paper's platform-wide factors: 1-8 and 13-15 (9-12 describe one application's
#: internals and are for the application view), then bandwidth.
PLATFORM_FACTORS = (
    *(f for f in ZOOMIN_FACTORS if not f.startswith(("max_rank", "max_ost"))),
    "bandwidth",
)

#: The axes of the paper's parallel-coordinates plots (Figures 5, 8, 13, 15-17, 20).
APP_FACTORS = (
    "bandwidth",
    "datasize",
    "nprocs",
    "ost_count",
    "seq_pct",
    "small_pct",
    "mtime_pct",
    "max_rank_io",
    "oss_cpu_pct",
    "mds_cpu_pct",
    "ost_io_mb",
)

#: Bandwidth classes of the paper (Figure 4, Table III), upper bounds in bytes/s.
BW_CLASSES = (
    (1e9, "(0, 1] GB/s"),
    (1e10, "(1, 10] GB/s"),
    (1e11, "(10, 100] GB/s"),
    (math.inf, ">100 GB/s"),
)

Rows = pa.Table | pd.DataFrame | Iterable[Mapping[str, Any]]


def _frame(rows: Rows) -> pd.DataFrame:
    if isinstance(rows, pa.Table):
        return rows.to_pandas()
    if isinstance(rows, pd.DataFrame):
        return rows
    return pd.DataFrame(list(rows))


def _num(v: Any) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def correlation(rows: Rows, columns: Sequence[str] = PLATFORM_FACTORS) -> dict[str, Any]:
    """{"columns", "matrix", "pairs", "n", "method"}: Pearson coefficients (None where a
    pair has under 2 jobs or a constant column), and the job count behind each."""
    df = _frame(rows)
    cols = list(columns)
    data = pd.DataFrame(
        {c: pd.to_numeric(df[c], errors="coerce") if c in df else np.nan for c in cols},
        index=df.index,
        dtype=float,
    )
    corr = data.corr(method="pearson", min_periods=2)
    present = data.notna().to_numpy(dtype=float)
    pairs = (present.T @ present).astype(int)
    return {
        "columns": cols,
        "matrix": [[_num(corr.loc[a, b]) for b in cols] for a in cols],
        "pairs": pairs.tolist(),
        "n": len(data),
        "method": "pearson",
    }


def bw_class(bandwidth: float | None) -> str | None:
    """The paper's bandwidth class of a job (bytes/s), e.g. "(1, 10] GB/s"."""
    if bandwidth is None or pd.isna(bandwidth) or bandwidth <= 0:
        return None
    return next(name for bound, name in BW_CLASSES if bandwidth <= bound)


def application_view(
    rows: Rows, factors: Sequence[str] = APP_FACTORS, app: str | None = None
) -> list[dict[str, Any]]:
    """Jobs grouped by (app, user), biggest groups first; optionally one application.

    Each group: {"app", "user", "jobs" (count), "classes" (jobs per bandwidth class),
    "rows": [{"job_id", "bw_class", <factor>: value...}]}.
    """
    df = _frame(rows)
    if not len(df):
        return []
    df = df.assign(app=df["app"].fillna(""), user=df["user"].fillna(""))
    if app is not None:
        df = df[df["app"] == app]
    out = []
    for (a, u), g in df.groupby(["app", "user"], sort=False):
        recs = []
        for r in g.to_dict("records"):
            row: dict[str, Any] = {"job_id": r["job_id"], "bw_class": bw_class(r.get("bandwidth"))}
            row.update({k: _num(r.get(k)) for k in factors})
            recs.append(row)
        classes: dict[str, int] = {}
        for r in recs:
            if r["bw_class"]:
                classes[r["bw_class"]] = classes.get(r["bw_class"], 0) + 1
        out.append({"app": a, "user": u, "jobs": len(recs), "classes": classes, "rows": recs})
    out.sort(key=lambda grp: (grp["app"], -grp["jobs"], grp["user"]))
    return out
