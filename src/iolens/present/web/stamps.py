"""Stamps of cached page data (`cache.py`): cheap fingerprints of what a page was computed
from, so a new batch or analysis recomputes it and nothing else does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from iolens.store.base import Store


def store_stamp(store: Store) -> tuple[Any, ...]:
    """Changes whenever a batch lands or an analysis writes: the cache key of system views."""
    row = store.query(
        "SELECT (SELECT count(*) FROM ingested) AS n, (SELECT max(loaded_at) FROM ingested) AS t, "
        "(SELECT max(created) FROM anomalies) AS a, (SELECT max(analyzed) FROM job_summaries) AS s,"
        ' (SELECT count(*) FROM jobs) AS j, (SELECT max("end") FROM jobs) AS e'
    ).to_pylist()[0]
    return tuple(row.values())


def job_stamp(store: Store, job_id: str) -> tuple[Any, ...]:
    rows = store.query(
        'SELECT j.state, j."end", s.analyzed FROM jobs j LEFT JOIN job_summaries s USING (job_id) '
        "WHERE j.job_id = ?",
        [job_id],
    ).to_pylist()
    if not rows:
        return ("missing",)
    r = rows[0]
    live = r["end"] is None or (r["state"] or "").upper() in ("RUNNING", "PENDING")
    # A running job changes with every batch: recompute at most every 10 s.
    tick = int(datetime.now(UTC).timestamp() // 10) if live else 0
    return (r["state"], r["end"], r["analyzed"], tick)
