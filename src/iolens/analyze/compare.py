"""Rank runs of one application over server-side metrics (the K computer's overall
evaluation, section 6.6 and Tables 6.1/6.2).

The K computer's framework judged each I/O configuration of a benchmark by six figures
from the servers and the fabric, ranked the configurations 1 (best) to n on each, and
scored each configuration by the mean of its ranks (lower is better):

==============  ===========================================  ==========  =================
metric          what iolens measures over the job's run      better      paper
==============  ===========================================  ==========  =================
req_qdepth      mean request queue length of the OSSes        lower       req_qdepth
                serving the job's OSTs (`queue_len`)
req_waittime    their mean request wait (`wait_us`)           lower       req_waittime
req_active      their mean busy service threads               higher      req_active
                (`active_threads`)
r_bw            each link's peak rate during the run / its    higher      R_BW
                capacity, mean over the job's links
t_wait          each link's worst wait, mean over links       lower       T_wait^max
ost_mean        the job's bytes per OST over the seconds the  higher      OST_mean
                OST moved them, mean over its OSTs
==============  ===========================================  ==========  =================

Every figure comes from what a real agent collects. The OSS statistics are the `ost_io`
service's (`ost/OSS/ost_io/stats`, kind `oss`) on the servers of the job's OSTs (their
`components` parent, which the agents report); Lustre keeps no request queue per OST, so
there is nothing to fall back on without them. Links are the InfiniBand ports (`metrics`
kind `ib_port`) of the job's nodes, their forwarders and the OSS hosts when the agents
report them (wait in `port_xmit_wait` ticks); without port counters they are the job's
I/O forwarding nodes, the K computer's "I/O nodes" (server samples of kind `forwarder`:
client-facing bytes against the forwarder's `components.peak_bw` from the site topology,
wait in `wait_us`, which a forwarding daemon's `req_waittime` gives and an LNet router
does not). A figure that cannot be had says why, and the metric is skipped with that
reason; a metric is scored only when every run has it from the same source, so the ranks
always compare like with like.

`rank_values` and `mean_rank` are the pure arithmetic (tested against the paper's tables);
`compare` gathers the figures from the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iolens.errors import InputError
from iolens.store.base import Store

LOWER = "lower"
HIGHER = "higher"


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    direction: str  # which is better: lower | higher
    paper: str


METRICS: tuple[Metric, ...] = (
    Metric("req_qdepth", "OSS request queue depth", LOWER, "req_qdepth"),
    Metric("req_waittime", "OSS request wait", LOWER, "req_waittime"),
    Metric("req_active", "OSS active threads", HIGHER, "req_active"),
    Metric("r_bw", "link bandwidth utilisation", HIGHER, "R_BW"),
    Metric("t_wait", "link wait (max)", LOWER, "T_wait^max"),
    Metric("ost_mean", "mean OST bandwidth", HIGHER, "OST_mean"),
)
DIRECTIONS: dict[str, str] = {m.name: m.direction for m in METRICS}


# -- the arithmetic -------------------------------------------------------------------------


def rank_values(values: Sequence[float], direction: str) -> list[float]:
    """Ranks from 1 (best) in `direction` ("lower" or "higher" is better); tied values
    share the mean of the ranks they span (1, 2.5, 2.5, 4)."""
    if direction not in (LOWER, HIGHER):
        raise ValueError(f"direction must be {LOWER!r} or {HIGHER!r}, not {direction!r}")
    sign = 1.0 if direction == LOWER else -1.0
    order = sorted(range(len(values)), key=lambda i: sign * float(values[i]))
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        shared = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = shared
        i = j + 1
    return ranks


@dataclass
class RankTable:
    runs: list[str]  # best score first
    metrics: list[str]  # the metrics ranked
    ranks: dict[str, dict[str, float]]  # run -> metric -> rank
    scores: dict[str, float]  # run -> mean rank
    skipped: dict[str, str] = field(default_factory=dict)  # metric -> why it was not ranked


def mean_rank(
    values: Mapping[str, Mapping[str, float | None]], directions: Mapping[str, str]
) -> RankTable:
    """Rank every run on every metric of `directions` (runs missing a value leave the
    metric out for all), then score each run by the mean of its ranks; lower is better,
    ties in score keep the runs' given order."""
    runs = list(values)
    used: list[str] = []
    skipped: dict[str, str] = {}
    ranks: dict[str, dict[str, float]] = {r: {} for r in runs}
    for metric, direction in directions.items():
        col = [values[r].get(metric) for r in runs]
        missing = [r for r, v in zip(runs, col, strict=True) if v is None]
        if missing:
            skipped[metric] = "no value for " + ", ".join(missing)
            continue
        used.append(metric)
        for r, k in zip(
            runs, rank_values([float(v) for v in col if v is not None], direction), strict=True
        ):
            ranks[r][metric] = k
    scores = {r: sum(ranks[r].values()) / len(used) if used else float("nan") for r in runs}
    order = sorted(runs, key=lambda r: (scores[r] if used else 0.0, runs.index(r)))
    return RankTable(order, used, ranks, scores, skipped)


def scores_of(ranks: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Mean rank per run, from ranks already given (the paper's tables)."""
    return {r: sum(m.values()) / len(m) for r, m in ranks.items()}


# -- the figures of a job -------------------------------------------------------------------


@dataclass
class Figure:
    value: float | None
    source: str | None  # where it came from: oss, ib_port, forwarder, ost_jobstats
    unit: str | None
    why: str | None = None  # when value is None: what is missing


def _oss_figures(store: Store, job_id: str) -> dict[str, Figure]:
    from iolens.analyze.system import oss

    view = oss.job_oss_requests(store, job_id)

    def figure(attr: str, unit: str) -> Figure:
        got = [(getattr(s, attr), s.seconds) for s in view.servers if getattr(s, attr) is not None]
        total = sum(w for _, w in got)
        if total:
            return Figure(sum(v * w for v, w in got) / total, "oss", unit)
        why = "no ost_io service statistics (kind oss) from the servers of its OSTs"
        return Figure(None, None, None, why)

    return {
        "req_qdepth": figure("queue_len_mean", "requests"),
        "req_waittime": figure("wait_us_mean", "us"),
        "req_active": figure("active_threads_mean", "threads"),
    }


def _ost_mean(store: Store, job_id: str) -> Figure:
    row = store.query(
        """
        SELECT avg(bytes / secs) AS bw FROM (
            SELECT component_id, sum(bytes) AS bytes,
                   sum(dt) FILTER (WHERE bytes > 0) AS secs
            FROM (  -- a sample's rows (a trace's processes, reads, writes) count it once
                SELECT component_id, ts, max(interval_s) AS dt,
                       sum(coalesce(read_bytes, 0) + coalesce(write_bytes, 0))::DOUBLE AS bytes
                FROM server_samples WHERE job_id = ? AND kind = 'ost' AND interval_s > 0
                GROUP BY component_id, ts)
            GROUP BY component_id)
        WHERE secs > 0
        """,
        [job_id],
    ).to_pylist()
    bw = row[0]["bw"] if row else None
    if bw is None:
        return Figure(None, None, None, "no OST job_stats traffic of the job")
    return Figure(bw, "ost_jobstats", "bytes/s")


def _link_figures(store: Store, job_id: str, tick_ns: float | None) -> dict[str, Figure]:
    from iolens.analyze.system import network
    from iolens.store import queries

    ports = network.job_interconnect(store, job_id, tick_ns)
    if ports:
        utils = [p.r_bw for p in ports if p.r_bw is not None]
        if tick_ns:
            waits = [p.t_wait_max_s for p in ports if p.t_wait_max_s is not None]
            wait_unit = "s"
        else:
            waits = [p.xmit_wait_max for p in ports if p.xmit_wait_max is not None]
            wait_unit = "ticks"
        return {
            "r_bw": _or_why(_mean(utils), "ib_port", "ratio", "no port rate_gbps"),
            "t_wait": _or_why(_mean(waits), "ib_port", wait_unit, "no port_xmit_wait"),
        }
    job = queries.job(store, job_id)
    fwds = queries.forwarders_of(store, list(job.get("nodes") or []))
    if not fwds:
        why = (
            "no InfiniBand port counters of its hosts, and its nodes map to no forwarder "
            "(iolens site topology)"
        )
        return {"r_bw": Figure(None, None, None, why), "t_wait": Figure(None, None, None, why)}
    if job.get("start") is None or job.get("end") is None:
        why = "the job has no start and end"
        return {"r_bw": Figure(None, None, None, why), "t_wait": Figure(None, None, None, why)}
    marks = ", ".join("?" for _ in fwds)
    rows = store.query(
        f"""
        WITH c AS (SELECT component_id, max(peak_bw) AS cap FROM components GROUP BY ALL)
        SELECT s.component_id,
               max((coalesce(read_bytes, 0) + coalesce(write_bytes, 0)) / interval_s) AS peak,
               max(wait_us) AS wait, any_value(c.cap) AS cap
        FROM server_samples s LEFT JOIN c USING (component_id)
        WHERE s.kind = 'forwarder' AND s.job_id IS NULL AND interval_s > 0
              AND s.component_id IN ({marks}) AND ts > ? AND ts <= ?
        GROUP BY s.component_id
        """,
        [*fwds, job["start"], job["end"]],
    ).to_pylist()
    if not rows:
        why = f"no samples of its forwarders ({', '.join(fwds)}) during its run"
        return {"r_bw": Figure(None, None, None, why), "t_wait": Figure(None, None, None, why)}
    utils = [float(r["peak"]) / r["cap"] for r in rows if r["cap"] and r["peak"] is not None]
    waits = [r["wait"] for r in rows if r["wait"] is not None]
    return {
        "r_bw": _or_why(
            _mean(utils),
            "forwarder",
            "ratio",
            "no peak bandwidth of its forwarders (peak_bw in the site topology)",
        ),
        "t_wait": _or_why(
            _mean(waits),
            "forwarder",
            "us",
            "its forwarders export no request wait (an LNet router has none; a forwarding "
            "daemon's req_waittime gives it)",
        ),
    }


def _or_why(value: float | None, source: str, unit: str, why: str) -> Figure:
    return Figure(value, source, unit) if value is not None else Figure(None, None, None, why)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def job_figures(store: Store, job_id: str, tick_ns: float | None = None) -> dict[str, Figure]:
    """The six figures of one job over its run."""
    figs = _oss_figures(store, job_id)
    figs |= _link_figures(store, job_id, tick_ns)
    figs["ost_mean"] = _ost_mean(store, job_id)
    return figs


# -- comparing jobs -------------------------------------------------------------------------


def jobs_with_tag(store: Store, tag: str) -> list[str]:
    """Jobs whose application (scheduler job name) is `tag`, oldest first."""
    return (
        store.query('SELECT job_id FROM jobs WHERE app = ? ORDER BY "start", job_id', [tag])
        .column("job_id")
        .to_pylist()
    )


def compare(store: Store, job_ids: Sequence[str], tick_ns: float | None = None) -> dict[str, Any]:
    """Rank `job_ids` on the six metrics and by mean rank (JSON-ready)."""
    from iolens.store import queries

    ids = list(dict.fromkeys(job_ids))
    if len(ids) < 2:
        raise InputError("compare", "give at least two jobs to compare")
    jobs = {j: queries.job(store, j) for j in ids}  # NotFound names an unknown job
    figs = {j: job_figures(store, j, tick_ns) for j in ids}
    warnings = []
    apps = sorted({str(jobs[j].get("app")) for j in ids})
    if len(apps) > 1:
        warnings.append(
            f"the jobs are of different applications ({', '.join(apps)}): "
            "the ranking compares configurations of one application"
        )
    values: dict[str, dict[str, float | None]] = {}
    skipped: dict[str, str] = {}
    for m in METRICS:
        sources = {figs[j][m.name].source for j in ids if figs[j][m.name].value is not None}
        if len(sources) > 1:
            skipped[m.name] = "measured from different sources: " + ", ".join(sorted(sources))
    for m in METRICS:
        why: dict[str | None, list[str]] = {}  # the reason -> the runs it applies to
        for j in ids:
            if figs[j][m.name].value is None:
                why.setdefault(figs[j][m.name].why, []).append(j)
        if why and m.name not in skipped:
            skipped[m.name] = "; ".join(
                f"no value for {', '.join(runs)}" + (f": {reason}" if reason else "")
                for reason, runs in why.items()
            )
    for j in ids:
        values[j] = {m.name: None if m.name in skipped else figs[j][m.name].value for m in METRICS}
    table = mean_rank(values, {m.name: m.direction for m in METRICS if m.name not in skipped})
    skipped |= table.skipped
    if not table.metrics:
        raise InputError(
            "compare", "no server-side metric is available for every job: nothing to rank"
        )
    runs = []
    for pos, j in enumerate(table.runs, start=1):
        job = jobs[j]
        runs.append(
            {
                "job_id": j,
                "app": job.get("app"),
                "user": job.get("user"),
                "nprocs": job.get("nprocs"),
                "nodes": len(job.get("nodes") or []),
                "start": job.get("start"),
                "end": job.get("end"),
                "position": pos,
                "score": table.scores[j],
                "metrics": {m.name: figs[j][m.name].value for m in METRICS},
                "ranks": table.ranks[j],
            }
        )
    metrics = []
    for m in METRICS:
        src = next((figs[j][m.name] for j in ids if figs[j][m.name].value is not None), None)
        metrics.append(
            {
                "name": m.name,
                "label": m.label,
                "paper": m.paper,
                "better": m.direction,
                "unit": src.unit if src else None,
                "source": src.source if src else None,
                "ranked": m.name in table.metrics,
                "skipped": skipped.get(m.name),
            }
        )
    return {
        "runs": runs,
        "metrics": metrics,
        "best": table.runs[0],
        "worst": table.runs[-1],
        "apps": apps,
        "warnings": warnings,
    }
