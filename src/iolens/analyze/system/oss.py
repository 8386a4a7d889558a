"""Request statistics of the object storage servers over time (the K computer, 3.2 and 6.3).

The K computer's framework judged how well I/O suited the file system by three Lustre
`ost_io` service statistics per OSS: `req_qdepth` (requests queued), `req_waittime` (how
long they waited) and `req_active` (service threads busy). A deep queue with long waits
means the servers are the bottleneck; many active threads with short waits means they are
being used well. The agent stores them as `queue_len`, `wait_us` and `active_threads` on
the component totals of the servers whose services count them (`SERVICE_STATS`): kind
`oss` from `ost/OSS/ost_io/stats` (`lustre_oss`), `mds` from `mds/MDS/mdt/stats`
(`lustre_mds`), `forwarder` from a forwarding daemon's `run/iofwd/<svc>/stats` (`iofwd`).
Lustre keeps no queue per OST or MDT: a view asked for one is empty and says so
(`OssView.missing`), as is one whose servers reported no statistics.

Means are weighted by each sample's interval, so a 60 s sample counts six times a 10 s one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from iolens.analyze.system._common import window_sql
from iolens.store.base import Store

#: Kinds whose agent source reports request statistics -> (file, source) they come from.
SERVICE_STATS: dict[str, tuple[str, str]] = {
    "oss": ("ost/OSS/ost_io/stats", "lustre_oss"),
    "mds": ("mds/MDS/mdt/stats", "lustre_mds"),
    "forwarder": ("run/iofwd/<svc>/stats", "iofwd"),
}


@dataclass
class OssStats:
    component_id: str
    kind: str
    seconds: float  # sampled time with request statistics
    queue_len_mean: float | None  # req_qdepth
    queue_len_max: float | None
    wait_us_mean: float | None  # req_waittime
    wait_us_max: float | None
    active_threads_mean: float | None  # req_active
    active_threads_max: float | None
    service_us_mean: float | None


@dataclass
class OssBin:
    start: datetime
    component_id: str
    queue_len: float | None
    wait_us: float | None
    active_threads: float | None
    service_us: float | None


@dataclass
class OssView:
    bin_s: int
    kinds: list[str]
    servers: list[OssStats]  # deepest mean queue first
    bins: list[OssBin]  # per server and bin, in time order
    missing: str | None = None  # why `servers` is empty, when it is


def _why_empty(kinds: tuple[str, ...]) -> str:
    """What an empty view lacks: a kind Lustre keeps no queue for, or the source's files."""
    unknown = [k for k in kinds if k not in SERVICE_STATS]
    if unknown:
        return (
            f"no request statistics for kind {', '.join(unknown)}: req_qdepth, req_waittime "
            "and req_active are counted per service of a server (kinds "
            f"{', '.join(SERVICE_STATS)}), not per target"
        )
    files = "; ".join(f"{k}: {SERVICE_STATS[k][0]} ({SERVICE_STATS[k][1]})" for k in kinds)
    return (
        f"no request statistics in this window ({files}): run the source as root on the "
        "server (Lustre 2.12+ keeps service stats in debugfs)"
    )


def _wmean(col: str) -> str:
    return (
        f"sum({col} * interval_s) FILTER (WHERE {col} IS NOT NULL) / "
        f"nullif(sum(interval_s) FILTER (WHERE {col} IS NOT NULL), 0)"
    )


def oss_requests(
    store: Store,
    start: datetime | None = None,
    end: datetime | None = None,
    bin_s: int = 600,
    kinds: tuple[str, ...] = ("oss",),
    components: list[str] | None = None,
) -> OssView:
    """Per-server means and maxima of queue depth, wait and active threads, and per bin."""
    if bin_s <= 0:
        raise ValueError("bin_s must be positive")
    where, params = window_sql(start, end)
    marks = ", ".join("?" for _ in kinds)
    params = [*kinds, *params]
    if components is not None:
        if not components:
            return OssView(int(bin_s), list(kinds), [], [], "no servers given")
        where += f" AND component_id IN ({', '.join('?' for _ in components)})"
        params += components
    base = (
        f"FROM server_samples WHERE job_id IS NULL AND kind IN ({marks}) AND interval_s > 0 "
        "AND (queue_len IS NOT NULL OR wait_us IS NOT NULL OR active_threads IS NOT NULL)"
        f"{where}"
    )
    servers = [
        OssStats(**r)
        for r in store.query(
            f"""
            SELECT component_id, any_value(kind) AS kind, sum(interval_s) AS seconds,
                   {_wmean("queue_len")} AS queue_len_mean, max(queue_len) AS queue_len_max,
                   {_wmean("wait_us")} AS wait_us_mean, max(wait_us) AS wait_us_max,
                   {_wmean("active_threads")} AS active_threads_mean,
                   max(active_threads) AS active_threads_max,
                   {_wmean("service_us")} AS service_us_mean
            {base} GROUP BY component_id
            ORDER BY queue_len_mean DESC NULLS LAST, component_id
            """,
            params,
        ).to_pylist()
    ]
    step = int(bin_s) * 1_000_000
    bins = [
        OssBin(**r)
        for r in store.query(
            f"""
            SELECT make_timestamp((epoch_us(ts) - 1) // {step} * {step}) AS start, component_id,
                   {_wmean("queue_len")} AS queue_len, {_wmean("wait_us")} AS wait_us,
                   {_wmean("active_threads")} AS active_threads,
                   {_wmean("service_us")} AS service_us
            {base} GROUP BY ALL ORDER BY start, component_id
            """,
            params,
        ).to_pylist()
    ]
    return OssView(int(bin_s), list(kinds), servers, bins, None if servers else _why_empty(kinds))


def job_oss_requests(store: Store, job_id: str, bin_s: int = 60) -> OssView:
    """What the K computer's framework showed for one job: the servers of the OSTs the job
    used (their OSS, from the topology), over the job's run."""
    from iolens.store import queries

    job = queries.job(store, job_id)
    osts = queries.osts_with_job_samples(store, job_id)
    if not osts:
        return OssView(
            int(bin_s),
            ["oss"],
            [],
            [],
            "the job has no OST jobstats rows (obdfilter/<ost>/job_stats): which servers "
            "it used is unknown",
        )
    marks = ", ".join("?" for _ in osts)
    servers = (
        store.query(
            f"SELECT DISTINCT parent FROM components WHERE component_id IN ({marks}) "
            "AND parent IS NOT NULL ORDER BY parent",
            osts,
        )
        .column("parent")
        .to_pylist()
    )
    if not servers:
        return OssView(
            int(bin_s),
            ["oss"],
            [],
            [],
            "the topology names no OSS for the job's OSTs (components.parent: reported by "
            "the OSS agent, or the site topology)",
        )
    return oss_requests(store, job.get("start"), job.get("end"), bin_s, ("oss",), servers)
