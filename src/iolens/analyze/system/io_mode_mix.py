"""Which I/O modes the jobs use, by volume and by job count (Beacon Table 4, Figure 9).

Beacon's surprise: N-N and 1-1 dominate the volume, and 1-1 writers are not small jobs, so
the mix is shown both ways, total bytes (Fig. 9) and average bytes per job with the job
count (Table 4). The mode is each job's `job_summaries.io_mode`, which the job analysis
derives from its own traced records (`analyze/jobs/iomode.py`); a job not yet analysed,
or with no traced I/O, is counted as "unknown" rather than put in a mode.
"""

from __future__ import annotations

from dataclasses import dataclass

from iolens.model.schema import IO_MODES
from iolens.store.base import Store

UNKNOWN = "unknown"


@dataclass
class ModeRow:
    mode: str
    jobs: int
    read_bytes: int
    write_bytes: int
    avg_read: float | None  # bytes per job
    avg_write: float | None
    read_share: float | None  # of all jobs' read bytes
    write_share: float | None
    job_share: float | None


@dataclass
class IoModeMix:
    modes: list[ModeRow]  # IO_MODES order, then unknown when any
    jobs: int
    read_bytes: int
    write_bytes: int
    min_bytes: int  # jobs moving less were left out (Beacon: 200 MB "non-trivial I/O")


def io_mode_mix(store: Store, min_bytes: int = 0) -> IoModeMix:
    """Per mode: jobs, bytes read and written, averages and shares."""
    rows = store.query(
        """
        SELECT coalesce(s.io_mode, ?) AS mode, count(*) AS jobs,
               sum(coalesce(s.read_bytes, 0))::BIGINT AS r,
               sum(coalesce(s.write_bytes, 0))::BIGINT AS w
        FROM jobs j LEFT JOIN job_summaries s USING (job_id)
        WHERE coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0) >= ?
        GROUP BY 1
        """,
        [UNKNOWN, int(min_bytes)],
    ).to_pylist()
    per = {r["mode"]: r for r in rows}
    total_jobs = sum(r["jobs"] for r in rows)
    total_r = sum(int(r["r"]) for r in rows)
    total_w = sum(int(r["w"]) for r in rows)
    order = [*IO_MODES, *sorted(m for m in per if m not in IO_MODES)]
    out = []
    for mode in order:
        r = per.get(mode)
        if r is None and mode not in IO_MODES:
            continue
        n, rb, wb = (r["jobs"], int(r["r"]), int(r["w"])) if r else (0, 0, 0)
        out.append(
            ModeRow(
                mode=mode,
                jobs=n,
                read_bytes=rb,
                write_bytes=wb,
                avg_read=rb / n if n else None,
                avg_write=wb / n if n else None,
                read_share=rb / total_r if total_r else None,
                write_share=wb / total_w if total_w else None,
                job_share=n / total_jobs if total_jobs else None,
            )
        )
    return IoModeMix(out, total_jobs, total_r, total_w, int(min_bytes))
