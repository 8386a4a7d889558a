"""What every component detector shares: the plug-in contract, the episode row, the data.

A detector is one file with a class that has a `name` (stored in `anomalies.detector`), a
`kind` (the anomaly kind it reports, e.g. `slow_ost`) and `detect(ctx)`. The `Context`
gives it the analysis window and per-minute series of the store, aggregated once in SQL
and shared by all detectors, so adding a detector costs no extra scan of the samples.

Time is handled in whole minutes: a sample with end time `ts` covers `(ts - interval, ts]`
and belongs to minute `floor((ts - 1 us) / 60 s)`. Per-minute series are dense arrays
`[component, minute]` over the loaded range (the window plus a look-back used for
baselines and for the widening-window verdict of Beacon's Table 2).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from iolens.model.schema import ANOMALIES
from iolens.store.base import Store

EPOCH = datetime(1970, 1, 1)
MINUTE_US = 60_000_000
#: How far before the window detectors look for baselines and persistence (Beacon's
#: longest anomaly class is ">= 96 h").
LOOKBACK = timedelta(hours=96)
#: The widening windows of the transient/persistent verdict (Beacon Table 2 classes).
VERDICT_HOURS = (1, 4, 12, 96)


def minute_time(m: int) -> datetime:
    """Naive UTC start of epoch minute `m`."""
    return EPOCH + timedelta(minutes=int(m))


def minute_of(t: datetime) -> int:
    """Epoch minute holding instant `t` (naive UTC)."""
    return int((t - EPOCH) // timedelta(minutes=1))


def iso(t: datetime | None) -> str | None:
    return t.isoformat() + "Z" if t else None


@dataclass
class Episode:
    """One anomaly episode, as stored in `anomalies` (Beacon Table 2 rows)."""

    kind: str
    component_kind: str
    component_id: str
    start: datetime
    end: datetime | None  # None while ongoing (still abnormal at the last sample)
    severity: str  # info | warning | critical
    evidence: dict[str, Any]
    detector: str
    created: datetime = field(default_factory=lambda: datetime.now(UTC).replace(tzinfo=None))

    def row(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "component_kind": self.component_kind,
            "component_id": self.component_id,
            "start": self.start,
            "end": self.end,
            "severity": self.severity,
            "evidence": json.dumps(self.evidence, sort_keys=True, default=_jsonable),
            "detector": self.detector,
            "created": self.created,
        }


def _jsonable(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, datetime):
        return iso(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


@dataclass(frozen=True)
class Gap:
    """What a detector could not assess and why, so silence is never mistaken for health.

    A site reads it as a to-do: `missing` names the real file, field or topology piece
    that is absent (e.g. "service latency: LNet router stats carry none"), `remedy` how
    to provide it.
    """

    detector: str
    component_kind: str
    components: tuple[str, ...]  # the ids concerned; empty when the kind is absent
    missing: str
    remedy: str

    def row(self) -> dict[str, Any]:
        return {
            "detector": self.detector,
            "component_kind": self.component_kind,
            "components": list(self.components),
            "missing": self.missing,
            "remedy": self.remedy,
        }


def episodes_table(episodes: list[Episode]) -> pa.Table:
    return pa.Table.from_pylist([e.row() for e in episodes], schema=ANOMALIES)


@runtime_checkable
class Detector(Protocol):
    """A component anomaly detector plug-in."""

    name: str  # stored in anomalies.detector; stored rows are replaced per detector
    kind: str  # the anomaly kind it reports

    def detect(self, ctx: Context) -> list[Episode]: ...


@dataclass
class Grid:
    """Per-minute totals of every component of one kind: arrays [component, minute].

    Sums are over the samples ending in the minute; `svc` and `wait` are request-weighted
    means (microseconds), `queue` and `threads` time-weighted means, `max_bw` the highest
    per-sample bytes/s. Minutes without samples hold 0 (sums) or NaN (means).
    """

    ids: list[str]
    m0: int  # epoch minute of column 0
    seconds: np.ndarray
    read_bytes: np.ndarray
    write_bytes: np.ndarray
    read_ops: np.ndarray
    write_ops: np.ndarray
    md_ops: np.ndarray
    svc: np.ndarray
    wait: np.ndarray
    queue: np.ndarray
    threads: np.ndarray
    max_bw: np.ndarray

    @property
    def bytes(self) -> np.ndarray:
        return self.read_bytes + self.write_bytes

    @property
    def requests(self) -> np.ndarray:
        return self.read_ops + self.write_ops + self.md_ops

    @property
    def minutes(self) -> int:
        return self.seconds.shape[1] if self.seconds.ndim == 2 else 0

    def time(self, col: int) -> datetime:
        return minute_time(self.m0 + col)


class Context:
    """The analysis window and cached per-minute data every detector reads.

    `start`/`end` bound the window whose episodes are (re)written; data are loaded from
    `load_start` (the window start minus `LOOKBACK`, not before the first sample) so
    baselines and persistence verdicts see history.
    """

    def __init__(
        self, store: Store, start: datetime, end: datetime, open_ended: bool = False
    ) -> None:
        self.store = store
        self.start = start
        self.end = end
        # The window runs up to the newest data: an episode still abnormal at the last
        # sample is ongoing (stored with end NULL) rather than ended.
        self.open_ended = open_ended
        self.m_start = minute_of(start)
        self.m_end = max(minute_of(end - timedelta(microseconds=1)) + 1, self.m_start + 1)
        first = store.query("SELECT min(ts) AS t FROM server_samples").column("t")[0].as_py()
        load = start - LOOKBACK
        if first is not None:
            load = max(load, first - timedelta(minutes=1))
        self.m_load = min(minute_of(load), self.m_start)
        self._grids: dict[str, Grid] = {}
        self._components: dict[str, dict[str, dict[str, Any]]] = {}
        self._memo: dict[str, Any] = {}
        self.gaps: list[Gap] = []

    def gap(
        self,
        detector: str,
        component_kind: str,
        components: list[str] | tuple[str, ...],
        missing: str,
        remedy: str,
    ) -> None:
        """Record that `detector` could not assess `components` (see `Gap`)."""
        g = Gap(detector, component_kind, tuple(components), missing, remedy)
        if g not in self.gaps:
            self.gaps.append(g)

    def memo(self, key: str, make: Callable[[], Any]) -> Any:
        """Compute something once per run and share it between detectors."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    # -- bounds ---------------------------------------------------------------------------
    @property
    def load_start(self) -> datetime:
        return minute_time(self.m_load)

    @property
    def load_end(self) -> datetime:
        return minute_time(self.m_end)

    def bounds(self) -> list[datetime]:
        """SQL parameters selecting samples that end inside the loaded minutes."""
        return [self.load_start, self.load_end]

    # -- topology -------------------------------------------------------------------------
    def components(self, kind: str) -> dict[str, dict[str, Any]]:
        """Topology rows of one kind by id: parent, peak_bw, peak_ops (None when unknown)."""
        if kind not in self._components:
            rows = self.store.query(
                "SELECT component_id, parent, peak_bw, peak_ops FROM components WHERE kind = ? "
                "ORDER BY component_id",
                [kind],
            ).to_pylist()
            self._components[kind] = {r.pop("component_id"): r for r in rows}
        return self._components[kind]

    # -- series ---------------------------------------------------------------------------
    def grid(self, kind: str) -> Grid:
        """Per-minute component totals (samples with job_id null) of one kind, cached."""
        if kind not in self._grids:
            self._grids[kind] = self._load_grid(kind)
        return self._grids[kind]

    def _load_grid(self, kind: str) -> Grid:
        t = self.store.query(
            f"""
            SELECT component_id AS c, (epoch_us(ts) - 1) // {MINUTE_US} AS m,
              sum(interval_s) AS seconds,
              sum(coalesce(read_bytes, 0))::DOUBLE AS read_bytes,
              sum(coalesce(write_bytes, 0))::DOUBLE AS write_bytes,
              sum(coalesce(read_ops, 0))::DOUBLE AS read_ops,
              sum(coalesce(write_ops, 0))::DOUBLE AS write_ops,
              sum(coalesce(md_ops, 0))::DOUBLE AS md_ops,
              sum(service_us * {_REQS}) / nullif(sum({_REQS}) FILTER (service_us IS NOT NULL), 0)
                AS svc,
              sum(wait_us * {_REQS}) / nullif(sum({_REQS}) FILTER (wait_us IS NOT NULL), 0)
                AS wait,
              sum(queue_len * interval_s)
                / nullif(sum(interval_s) FILTER (queue_len IS NOT NULL), 0) AS queue,
              sum(active_threads * interval_s)
                / nullif(sum(interval_s) FILTER (active_threads IS NOT NULL), 0) AS threads,
              max((coalesce(read_bytes, 0) + coalesce(write_bytes, 0)) / interval_s) AS max_bw
            FROM server_samples
            WHERE kind = ? AND job_id IS NULL AND ts > ? AND ts <= ? AND interval_s > 0
            GROUP BY ALL
            """,
            [kind, *self.bounds()],
        )
        ids = sorted(set(t.column("c").to_pylist()) | set(self.components(kind)))
        n_min = self.m_end - self.m_load
        index = {c: i for i, c in enumerate(ids)}
        ci = np.array([index[c] for c in t.column("c").to_pylist()], np.int64)
        mi = t.column("m").to_numpy().astype(np.int64) - self.m_load
        keep = (mi >= 0) & (mi < n_min)
        ci, mi = ci[keep], mi[keep]

        def dense(name: str, fill: float) -> np.ndarray:
            out = np.full((len(ids), n_min), fill)
            values = t.column(name).to_numpy(zero_copy_only=False)
            out[ci, mi] = np.asarray(values, float)[keep]
            return out

        sums = {
            k: np.nan_to_num(dense(k, 0.0))
            for k in ("seconds", "read_bytes", "write_bytes", "read_ops", "write_ops", "md_ops")
        }
        means = {k: dense(k, np.nan) for k in ("svc", "wait", "queue", "threads")}
        return Grid(ids, self.m_load, **sums, **means, max_bw=np.nan_to_num(dense("max_bw", 0.0)))

    def job_shares(self, kind: str, columns: str) -> pa.Table:
        """Per-minute per-component per-job sums of `columns` (SQL aggregate list), from
        the job-attributed samples (jobstats, forwarder request attribution)."""
        return self.store.query(
            f"""
            SELECT component_id, job_id, (epoch_us(ts) - 1) // {MINUTE_US} - {self.m_load} AS col,
              {columns}
            FROM server_samples
            WHERE kind = ? AND job_id IS NOT NULL AND ts > ? AND ts <= ?
            GROUP BY ALL
            """,
            [kind, *self.bounds()],
        )

    def jobs_info(self, job_ids: list[str]) -> dict[str, dict[str, Any]]:
        """app, nprocs, node count and (if analysed) I/O mode of jobs, for evidence."""
        if not job_ids:
            return {}
        self.store.register("_iolens_ep_jobs", pa.table({"job_id": job_ids}))
        try:
            rows = self.store.query(
                "SELECT j.job_id, j.app, j.nprocs, len(j.nodes) AS nodes, s.io_mode "
                "FROM jobs j JOIN _iolens_ep_jobs USING (job_id) "
                "LEFT JOIN job_summaries s USING (job_id)"
            ).to_pylist()
        finally:
            self.store.unregister("_iolens_ep_jobs")
        return {r.pop("job_id"): r for r in rows}


_REQS = "(coalesce(read_ops, 0) + coalesce(write_ops, 0) + coalesce(md_ops, 0))"


# -- helpers shared by detectors -----------------------------------------------------------


def runs(
    abnormal: np.ndarray, valid: np.ndarray, max_gap: int, min_minutes: int, max_idle: int = 15
) -> list[tuple[int, int]]:
    """Episodes as [first, last] abnormal minute indices of one component's series.

    Abnormal minutes are merged when at most `max_gap` valid-but-normal minutes and at
    most `max_idle` minutes in all lie between them (minutes without demand say nothing
    either way). Episodes with fewer than `min_minutes` abnormal minutes are dropped:
    Beacon reports components that *consistently* under-perform, not single samples.
    """
    idx = np.flatnonzero(abnormal)
    if len(idx) == 0:
        return []
    normal_before = np.cumsum(valid & ~abnormal)
    out: list[tuple[int, int]] = []
    first = prev = int(idx[0])
    count = 1
    for i in idx[1:]:
        i = int(i)
        normals = int(normal_before[i] - normal_before[prev])
        if normals <= max_gap and i - prev - 1 <= max_idle:
            prev, count = i, count + 1
            continue
        if count >= min_minutes:
            out.append((first, prev))
        first = prev = i
        count = 1
    if count >= min_minutes:
        out.append((first, prev))
    return out


def verdict(abnormal: np.ndarray, valid: np.ndarray, last: int) -> dict[str, Any]:
    """Re-check an episode over widening windows (1, 4, 12, 96 h) ending at its last minute.

    For each window: the share of minutes with demand that were abnormal, and how many
    hours of data it saw. The verdict is the widest window in which the component was
    abnormal most of the time it was asked to work: `transient` (1 h only) or
    `persistent Nh`, which separates a blip from a fail-slow unit (Beacon Table 2).
    """
    windows: dict[str, float | None] = {}
    hours_seen: dict[str, float] = {}
    widest = 0
    for h in VERDICT_HOURS:
        lo = max(0, last + 1 - 60 * h)
        v = valid[lo : last + 1]
        n = int(v.sum())
        frac = float(abnormal[lo : last + 1][v].sum() / n) if n else None
        windows[f"{h}h"] = round(frac, 3) if frac is not None else None
        hours_seen[f"{h}h"] = round((last + 1 - lo) / 60, 2)
        if frac is not None and frac >= 0.5 and (last + 1 - lo) >= 0.9 * 60 * h:
            widest = h
    return {
        "windows": windows,
        "window_data_hours": hours_seen,
        "verdict": "persistent" if widest >= 4 else "transient",
        "persistent_hours": widest,
    }


def duration_class(start: datetime, end: datetime) -> str:
    """Beacon Table 2 duration class of an episode."""
    hours = (end - start).total_seconds() / 3600
    for lo, hi, label in ((0, 1, "(0,1)"), (1, 4, "[1,4)"), (4, 12, "[4,12)"), (12, 96, "[12,96)")):
        if lo <= hours < hi:
            return f"{label} h"
    return ">=96 h"


def nanmedian(a: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """np.nanmedian without the all-NaN warning (such slices are simply NaN)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(a, axis=axis)


def r(x: float | None, digits: int = 3) -> float | None:
    """Round for evidence; NaN/inf become None (JSON has no NaN)."""
    if x is None or not np.isfinite(x):
        return None
    return round(float(x), digits)


def top_jobs(
    shares: pa.Table, component: str, c0: int, c1: int, value: str, most: int = 5
) -> list[dict[str, Any]]:
    """The jobs with the largest `value` on `component` in columns [c0, c1]."""
    if shares.num_rows == 0:
        return []
    comp = shares.column("component_id").to_numpy(zero_copy_only=False)
    col = shares.column("col").to_numpy()
    mask = (comp == component) & (col >= c0) & (col <= c1)
    if not mask.any():
        return []
    jobs = shares.column("job_id").to_numpy(zero_copy_only=False)[mask]
    vals = np.asarray(shares.column(value).to_numpy(zero_copy_only=False), float)[mask]
    uniq, inv = np.unique(jobs, return_inverse=True)
    tot = np.bincount(inv, weights=vals)
    order = np.argsort(-tot, kind="stable")[:most]
    total = tot.sum() or 1.0
    return [
        {"job_id": str(uniq[i]), value: int(tot[i]), "share": round(float(tot[i] / total), 3)}
        for i in order
        if tot[i] > 0
    ]
