"""The monitored state as it stands: what `/metrics/site` exports, read from the store.

Sites watch their file systems in Prometheus, which wants "the value now" of each series.
A snapshot is that, for every forwarder, OST, MDT, OSS and MDS:

- each component's **latest sample** (`server_samples`, the component total, `job_id`
  null). An agent's batch loads in one transaction, so a component's latest sample is never
  half-loaded; agents report at their own offsets, so "now" is per component. A component
  whose latest sample ended more than `max_age_s` before the newest sample in the store is
  left out: it stopped reporting, or (the OSS's `ost_io` service) had nothing to report,
  and repeating its last rate would show load that is gone. The newest sample, not the wall
  clock, is the reference, so a replayed capture or a simulation exports like a live feed;
  `newest` says how current the feed is.
- the jobs doing I/O in those same samples (Lustre jobstats rows of OSTs and MDTs), as
  rates per job: bytes and data requests from the OSTs, metadata requests from the MDTs.
  Raw jobstats ids go through the site's `JobIdScheme`, so `find.1003` on a login node is
  untagged I/O and not a job. Only the busiest `top_jobs` by bytes/s and by metadata ops/s
  keep their own rows; the rest add up into one `OTHER_JOBS` row, untagged processes into
  `UNTAGGED`, so the number of series stays bounded whatever the site runs.
- component anomaly episodes open, or ended within `recent_s` of the newest sample.

Cost: one statement over the recent part of `server_samples` (a constant time bound, the
last snapshot's newest time as `hint`, prunes DuckDB row groups and Parquet files; only the
first snapshot looks for the newest sample first), one over `anomalies`, and key lookups
in `meta` (the site's job-id formats) and, rarely, `jobs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from iolens.analyze.jobids import job_scheme
from iolens.store.base import Store

#: The component kinds exported, along the I/O path.
KINDS = ("forwarder", "oss", "ost", "mds", "mdt")
#: `job_id` of the row that adds up the jobs beyond the top ones.
OTHER_JOBS = "_other"
#: `job_id` of the row of I/O that Lustre tagged with a process outside any job.
UNTAGGED = "_untagged"

_EPOCH = datetime(1970, 1, 1)
_END = datetime(9999, 1, 1)

_KINDS_SQL = ", ".join(f"'{k}'" for k in KINDS)

_NEWEST_SQL = f"""
SELECT max(ts) AS t FROM server_samples
WHERE ts >= ? AND ts <= ? AND kind IN ({_KINDS_SQL}) AND interval_s > 0
"""

# The scan's time bounds are constants, so DuckDB's zone maps (and a dataset's file pruning)
# skip older data; a bound computed inside the statement would scan every row. Within the
# scan, rows older than `max_age_s` before its newest row are dropped.
_SAMPLES_SQL = f"""
WITH scan AS (
    SELECT * FROM server_samples
    WHERE ts > ? AND ts <= ? AND kind IN ({_KINDS_SQL}) AND interval_s > 0),
newest AS (SELECT max(ts) AS t FROM scan),
recent AS (
    SELECT scan.* FROM scan, newest WHERE scan.ts > newest.t - to_microseconds(?)),
latest AS (
    SELECT kind, component_id, max(ts) AS ts FROM recent GROUP BY ALL)
SELECT r.kind, r.component_id, r.job_id, r.ts, r.interval_s, r.read_bytes, r.write_bytes,
       r.read_ops, r.write_ops, r.md_ops, r.wait_us, r.service_us, r.queue_len,
       r.active_threads, c.peak_bw, c.peak_ops, j."user", (SELECT t FROM newest) AS newest
FROM recent r JOIN latest USING (kind, component_id, ts)
LEFT JOIN components c ON c.component_id = r.component_id
LEFT JOIN jobs j ON j.job_id = r.job_id
"""

_ANOMALIES_SQL = """
SELECT kind, component_kind, component_id, severity, count(*) AS episodes
FROM anomalies WHERE "end" IS NULL OR "end" > ?
GROUP BY ALL ORDER BY ALL
"""


@dataclass(frozen=True)
class ComponentNow:
    """A component's latest sample as rates and means; None where its source has no such
    figure (an OSS has no bytes, an OST no queue length, an idle target no service time)."""

    kind: str
    component_id: str
    ts: datetime
    interval_s: float
    read_bps: float | None = None
    write_bps: float | None = None
    read_iops: float | None = None
    write_iops: float | None = None
    md_ops: float | None = None
    service_s: float | None = None
    wait_s: float | None = None
    queue_len: float | None = None
    active_threads: float | None = None
    peak_bw: float | None = None
    peak_ops: float | None = None


@dataclass
class JobNow:
    """A job's I/O rates summed over the components that saw it in their latest sample."""

    job_id: str
    user: str = ""
    read_bps: float = 0.0
    write_bps: float = 0.0
    read_iops: float = 0.0
    write_iops: float = 0.0
    md_ops: float = 0.0

    @property
    def bytes_rate(self) -> float:
        return self.read_bps + self.write_bps

    @property
    def busy(self) -> bool:
        return self.bytes_rate + self.read_iops + self.write_iops + self.md_ops > 0

    def add(self, other: JobNow) -> None:
        self.read_bps += other.read_bps
        self.write_bps += other.write_bps
        self.read_iops += other.read_iops
        self.write_iops += other.write_iops
        self.md_ops += other.md_ops


@dataclass(frozen=True)
class AnomalyNow:
    kind: str
    component_kind: str
    component_id: str
    severity: str
    episodes: int


@dataclass
class Snapshot:
    """Everything `/metrics/site` exports, at one instant."""

    newest: datetime | None = None
    components: list[ComponentNow] = field(default_factory=list)
    jobs: list[JobNow] = field(default_factory=list)  # top jobs, then OTHER_JOBS, UNTAGGED
    jobs_busy: int = 0  # jobs doing I/O, before the top-N cut
    anomalies: list[AnomalyNow] = field(default_factory=list)


def _rate(value: Any, interval_s: float) -> float | None:
    return None if value is None else float(value) / interval_s


def _us(value: Any) -> float | None:
    return None if value is None else float(value) / 1e6


def _component(r: dict[str, Any]) -> ComponentNow:
    iv = float(r["interval_s"])
    return ComponentNow(
        kind=r["kind"],
        component_id=r["component_id"],
        ts=r["ts"],
        interval_s=iv,
        read_bps=_rate(r["read_bytes"], iv),
        write_bps=_rate(r["write_bytes"], iv),
        read_iops=_rate(r["read_ops"], iv),
        write_iops=_rate(r["write_ops"], iv),
        md_ops=_rate(r["md_ops"], iv),
        service_s=_us(r["service_us"]),
        wait_s=_us(r["wait_us"]),
        queue_len=r["queue_len"],
        active_threads=r["active_threads"],
        peak_bw=r["peak_bw"],
        peak_ops=r["peak_ops"],
    )


def _job_share(r: dict[str, Any], job_id: str) -> JobNow:
    """What one jobstats row adds to its job: data from OSTs, metadata from MDTs."""
    iv = float(r["interval_s"])
    if r["kind"] == "mdt":
        return JobNow(job_id, md_ops=(r["md_ops"] or 0) / iv)
    return JobNow(
        job_id,
        read_bps=(r["read_bytes"] or 0) / iv,
        write_bps=(r["write_bytes"] or 0) / iv,
        read_iops=(r["read_ops"] or 0) / iv,
        write_iops=(r["write_ops"] or 0) / iv,
    )


def _top_jobs(jobs: dict[str, JobNow], untagged: JobNow, top: int) -> list[JobNow]:
    """The `top` busiest by bytes/s and by metadata ops/s, then the rest as one row."""
    busy = [j for j in jobs.values() if j.busy]
    by_bytes = sorted(busy, key=lambda j: (-j.bytes_rate, j.job_id))[:top]
    by_md = sorted(busy, key=lambda j: (-j.md_ops, j.job_id))[:top]
    keep = {j.job_id for j in by_bytes if j.bytes_rate > 0} | {
        j.job_id for j in by_md if j.md_ops > 0
    }
    out = sorted((j for j in busy if j.job_id in keep), key=lambda j: j.job_id)
    other = JobNow(OTHER_JOBS)
    for j in busy:
        if j.job_id not in keep:
            other.add(j)
    return [*out, other, untagged]


def snapshot(
    store: Store,
    *,
    max_age_s: float = 120.0,
    recent_s: float = 900.0,
    top_jobs: int = 20,
    hint: datetime | None = None,
    until: datetime | None = None,
) -> Snapshot:
    """The monitored state at the newest sample; `hint`: a time at or before the newest
    sample (the last snapshot's `newest`), so finding it skips older data; `until`: the
    state as it stood then (samples after it ignored), for replays and tests."""
    end, age = until or _END, timedelta(seconds=max_age_s)
    max_age_us = int(max_age_s * 1e6)
    rows = []
    if hint is not None and hint <= end:  # one statement: scan from the hint on
        rows = store.query(_SAMPLES_SQL, [hint - age, end, max_age_us]).to_pylist()
    if not rows:  # first snapshot, or the hint was wrong (data deleted): find the newest
        newest = store.query(_NEWEST_SQL, [_EPOCH, end]).column("t")[0].as_py()
        if newest is not None:
            rows = store.query(_SAMPLES_SQL, [newest - age, newest, max_age_us]).to_pylist()
    newest = rows[0]["newest"] if rows else None
    snap = Snapshot(newest=newest)
    scheme = job_scheme(store)
    jobs: dict[str, JobNow] = {}
    untagged = JobNow(UNTAGGED)
    for r in rows:
        if r["job_id"] is None:
            snap.components.append(_component(r))
            continue
        if r["kind"] not in ("ost", "mdt"):
            continue  # only Lustre targets know jobs
        job_id = scheme.job_id(r["job_id"])
        if job_id is None:
            untagged.add(_job_share(r, UNTAGGED))
            continue
        mine = jobs.setdefault(job_id, JobNow(job_id))
        mine.add(_job_share(r, job_id))
        if r["user"] and r["job_id"] == job_id:
            mine.user = r["user"]
    snap.components.sort(key=lambda c: (KINDS.index(c.kind), c.component_id))
    snap.jobs_busy = sum(1 for j in jobs.values() if j.busy)
    snap.jobs = _top_jobs(jobs, untagged, top_jobs)
    _fill_users(store, snap.jobs)
    now = snap.newest or datetime.now(UTC).replace(tzinfo=None)
    for r in store.query(_ANOMALIES_SQL, [now - timedelta(seconds=recent_s)]).to_pylist():
        snap.anomalies.append(AnomalyNow(**r))
    return snap


def _fill_users(store: Store, jobs: list[JobNow]) -> None:
    """Owners of top jobs whose raw jobstats id was not the scheduler's id (`123.c001`)."""
    missing = [j for j in jobs if not j.user and j.job_id not in (OTHER_JOBS, UNTAGGED)]
    if not missing:
        return
    marks = ", ".join("?" for _ in missing)
    rows = store.query(
        f'SELECT job_id, "user" FROM jobs WHERE job_id IN ({marks})', [j.job_id for j in missing]
    ).to_pylist()
    users = {r["job_id"]: r["user"] or "" for r in rows}
    for j in missing:
        j.user = users.get(j.job_id, "")
