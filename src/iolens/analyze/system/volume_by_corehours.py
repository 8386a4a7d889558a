"""Average I/O volume per job by the job's core-hours (Beacon Table 3).

Beacon found bigger consumers write far more (40 TB per job above 1M core-hours) and
small ones lean to reads: the table shows where a site's bytes come from. A job's
core-hours are `jobs.nprocs` x its run time (`end - start`), one core per process as the
scheduler allocates tasks; its bytes are the job analysis's `job_summaries` totals. A job
with no process count, no start or no end (still running) cannot be placed and is counted
under "unknown" instead of guessed into a class.
"""

from __future__ import annotations

from dataclasses import dataclass

from iolens.store.base import Store

#: Beacon Table 3's classes, core-hours: (low, high].
COREHOUR_CLASSES: tuple[tuple[float, float], ...] = (
    (0.0, 1e3),
    (1e3, 1e4),
    (1e4, 1e5),
    (1e5, 1e6),
    (1e6, float("inf")),
)
UNKNOWN = "unknown"


def _k(x: float) -> str:
    if x == float("inf"):
        return "inf"
    return f"{x / 1e3:g}K" if x else "0"


def class_label(low: float, high: float) -> str:
    """`(1K,10K]` style labels, as in Beacon's table."""
    return f"({_k(low)},{_k(high)}]" if high != float("inf") else f"({_k(low)},inf)"


@dataclass
class CorehourClass:
    label: str
    low: float | None
    high: float | None
    jobs: int
    core_hours: float
    read_bytes: int
    write_bytes: int
    avg_read: float | None  # bytes per job
    avg_write: float | None


@dataclass
class VolumeByCorehours:
    classes: list[CorehourClass]  # COREHOUR_CLASSES order, then unknown when any
    min_bytes: int  # jobs moving less were left out (Beacon: 200 MB "non-trivial I/O")


def volume_by_corehours(store: Store, min_bytes: int = 0) -> VolumeByCorehours:
    """Jobs, core-hours and average bytes read/written per core-hour class."""
    rows = store.query(
        """
        SELECT j.nprocs * epoch(j."end" - j."start") / 3600.0 AS ch,
               coalesce(s.read_bytes, 0) AS r, coalesce(s.write_bytes, 0) AS w
        FROM jobs j LEFT JOIN job_summaries s USING (job_id)
        WHERE coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0) >= ?
        """,
        [int(min_bytes)],
    ).to_pylist()
    bounds: list[tuple[str, float | None, float | None]] = [
        (class_label(lo, hi), lo, hi) for lo, hi in COREHOUR_CLASSES
    ]
    acc = {label: [0, 0.0, 0, 0] for label, _, _ in bounds}
    unknown = [0, 0.0, 0, 0]
    for r in rows:
        ch = r["ch"]
        slot = unknown
        if ch is not None and ch > 0:
            slot = next(acc[lb] for lb, lo, hi in bounds if lo < ch <= hi)  # type: ignore[operator]
        slot[0] += 1
        slot[1] += float(ch or 0.0)
        slot[2] += int(r["r"])
        slot[3] += int(r["w"])
    if unknown[0]:
        bounds.append((UNKNOWN, None, None))
        acc[UNKNOWN] = unknown
    classes = [
        CorehourClass(
            label=lb,
            low=lo,
            high=None if hi == float("inf") else hi,
            jobs=int(acc[lb][0]),
            core_hours=float(acc[lb][1]),
            read_bytes=int(acc[lb][2]),
            write_bytes=int(acc[lb][3]),
            avg_read=acc[lb][2] / acc[lb][0] if acc[lb][0] else None,
            avg_write=acc[lb][3] / acc[lb][0] if acc[lb][0] else None,
        )
        for lb, lo, hi in bounds
    ]
    return VolumeByCorehours(classes, int(min_bytes))
