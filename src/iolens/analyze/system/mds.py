"""Metadata server load over time, and who causes it (Beacon section 4.3, Figure 10).

Beacon found the single MDS busy above 75 % of its peak a quarter of the time, and that
most of the load came not from jobs but from users working on login nodes straight on the
scratch file system. The same split here, from what the Lustre agent reports per MDT
(kind `mdt`, `collect/sources/lustre_mds.py`):

- **total**: `mdt/<mdt>/md_stats`, every metadata operation of the target;
- **jobs**: the `mdt/<mdt>/job_stats` entries whose id is a scheduler job (`12345`,
  `12345.c001`; `iolens.model.ids`);
- **untagged processes**: the entries Lustre named after a process outside any job
  (`find.1003`: `procname_uid`, or 2.13+'s `%e.%u` fallback) — login nodes, data movers,
  interactive use;
- **no entry**: the rest, operations of clients whose jobstats are off or whose job id
  came out empty.

`other = total - jobs = untagged + no entry` exactly, so the split adds up to the total;
a negative `no entry` would mean jobstats counted more than md_stats (two snapshots taken
at slightly different times). Over the window, the clients (`exports/<nid>/stats`, kind
`mdt_client`) that sent the most operations are listed too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa

from iolens.analyze.jobids import job_scheme, nid_hosts, uid_users
from iolens.analyze.system._common import window_sql
from iolens.analyze.system.load import DEFAULT_RESOLUTION_S, level_of
from iolens.store.base import Store

MDS_KINDS = ("mdt",)
#: Load brackets of the distribution over time (Figure 10(a)), as fractions of capacity.
BRACKETS = ((0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, float("inf")))
_TAGS = "_iolens_mds_jobtags"


@dataclass
class MdsBin:
    start: datetime
    total_ops: int
    job_ops: int  # jobstats entries of scheduler jobs
    other_ops: int  # total - job_ops: untagged processes and operations without an entry
    untagged_ops: int  # jobstats entries of processes outside any job (`find.1003`)
    unattributed_ops: int  # other_ops - untagged_ops: no jobstats entry at all
    other_share: float | None
    mean_rate: float  # ops/s over the seconds the samples cover
    peak_rate: float  # highest one-minute mean rate, ops/s (as `load.hourly_peaks`)
    peak_load: float | None  # peak_rate / capacity
    level: str | None  # `load.level_of(peak_load)`: the level `iolens load` gives the hour


@dataclass
class MdsView:
    components: list[str]
    capacity: float | None  # ops/s: summed peak_ops, else the highest rate seen
    capacity_source: str | None  # "benchmark" | "observed"
    bin_s: int
    total_ops: int
    job_ops: int
    other_ops: int
    untagged_ops: int
    unattributed_ops: int
    job_share: float | None
    other_share: float | None
    untagged_share: float | None
    bins: list[MdsBin]
    load_levels: dict[str, float]  # share of sampled time per load bracket
    time_above_75: float | None  # Beacon: 26.8 % of the time on TaihuLight
    top_jobs: list[dict[str, object]]  # job_id (the scheduler's), ops, share of the total
    top_untagged: list[dict[str, object]]  # job_id (raw), process, uid, user, host, ops, share
    top_clients: list[dict[str, object]]  # nid, host, ops, share


def _label(lo: float, hi: float) -> str:
    return f">= {lo:.0%}" if hi == float("inf") else f"{lo:.0%}-{hi:.0%}"


def _share(part: float, total: float) -> float | None:
    return part / total if total else None


def mds_load(
    store: Store,
    start: datetime | None = None,
    end: datetime | None = None,
    bin_s: int = 3600,
    top: int = 10,
) -> MdsView:
    """MDS load per `bin_s` bin split into jobs and untagged clients, plus its distribution."""
    if bin_s <= 0:
        raise ValueError("bin_s must be positive")
    where, params = window_sql(start, end)
    step = int(bin_s) * 1_000_000
    bin_of = f"make_timestamp((epoch_us(ts) - 1) // {step} * {step})"
    base = (
        f"FROM server_samples WHERE kind = 'mdt' AND md_ops IS NOT NULL AND interval_s > 0{where}"
    )
    scheme = job_scheme(store)
    raw = store.query(f"SELECT DISTINCT job_id {base} AND job_id IS NOT NULL", params)
    ids = raw.column("job_id").to_pylist()
    tags = [scheme.classify(j) for j in ids]
    store.register(
        _TAGS,
        pa.table(
            {
                "job_id": pa.array(ids, pa.string()),
                "sched": pa.array([t.job_id if t.is_job else None for t in tags], pa.string()),
            }
        ),
    )
    try:
        bins = store.query(
            f"""
            SELECT {bin_of} AS bin,
                   sum(md_ops) FILTER (WHERE s.job_id IS NULL) AS total,
                   sum(md_ops) FILTER (WHERE t.sched IS NOT NULL) AS jobs,
                   sum(md_ops) FILTER (WHERE s.job_id IS NOT NULL AND t.sched IS NULL) AS untagged,
                   sum(interval_s) FILTER (WHERE s.job_id IS NULL) AS secs,
                   count(DISTINCT component_id) FILTER (WHERE s.job_id IS NULL) AS comps
            FROM server_samples s LEFT JOIN {_TAGS} t USING (job_id)
            WHERE kind = 'mdt' AND md_ops IS NOT NULL AND interval_s > 0{where}
            GROUP BY bin ORDER BY bin
            """,
            params,
        ).to_pylist()
        top_jobs = store.query(
            f"""
            SELECT t.sched AS job_id, sum(md_ops) AS ops
            FROM server_samples s JOIN {_TAGS} t USING (job_id)
            WHERE kind = 'mdt' AND md_ops IS NOT NULL AND interval_s > 0 AND t.sched IS NOT NULL
              {where}
            GROUP BY t.sched HAVING sum(md_ops) > 0 ORDER BY ops DESC, t.sched LIMIT {int(top)}
            """,
            params,
        ).to_pylist()
        top_untagged = store.query(
            f"""
            SELECT s.job_id, sum(md_ops) AS ops
            FROM server_samples s JOIN {_TAGS} t USING (job_id)
            WHERE kind = 'mdt' AND md_ops IS NOT NULL AND interval_s > 0 AND t.sched IS NULL
              {where}
            GROUP BY s.job_id HAVING sum(md_ops) > 0 ORDER BY ops DESC, s.job_id LIMIT {int(top)}
            """,
            params,
        ).to_pylist()
    finally:
        store.unregister(_TAGS)
    # The rate of each slot (a minute, as `load.hourly_peaks`: one definition of "peak
    # load" for the MDS hour and its level), summed over the MDTs (several serve together).
    res = min(DEFAULT_RESOLUTION_S, int(bin_s)) * 1_000_000
    per_ts = store.query(
        f"""
        WITH m AS (
            SELECT component_id, (epoch_us(ts) - 1) // {res} AS slot,
                   sum(md_ops) / sum(interval_s) AS rate, sum(interval_s) AS secs
            {base} AND job_id IS NULL GROUP BY ALL)
        SELECT make_timestamp(slot * {res} // {step} * {step}) AS bin, sum(rate) AS rate,
               max(secs) AS secs
        FROM m GROUP BY slot ORDER BY slot
        """,
        params,
    ).to_pylist()
    comps = store.query(
        f"SELECT DISTINCT component_id {base} AND job_id IS NULL ORDER BY component_id", params
    )
    components = comps.column("component_id").to_pylist()
    capacity, source = _capacity(store, components, per_ts)
    peaks: dict[datetime, float] = {}
    for r in per_ts:
        peaks[r["bin"]] = max(peaks.get(r["bin"], 0.0), float(r["rate"]))
    out: list[MdsBin] = []
    for b in bins:
        total, jobs, untagged = (int(b[k] or 0) for k in ("total", "jobs", "untagged"))
        secs = float(b["secs"] or 0.0) / max(1, int(b["comps"] or 0))
        peak = peaks.get(b["bin"], 0.0)
        out.append(
            MdsBin(
                start=b["bin"],
                total_ops=total,
                job_ops=jobs,
                other_ops=total - jobs,
                untagged_ops=untagged,
                unattributed_ops=total - jobs - untagged,
                other_share=_share(total - jobs, total),
                mean_rate=total / secs if secs else 0.0,
                peak_rate=peak,
                peak_load=peak / capacity if capacity else None,
                level=level_of(peak / capacity) if capacity else None,
            )
        )
    weights = [0.0] * len(BRACKETS)
    for r in per_ts:
        load = float(r["rate"]) / capacity if capacity else 0.0
        for i, (lo, hi) in enumerate(BRACKETS):
            if lo <= load < hi:
                weights[i] += float(r["secs"] or 0.0)
    covered = sum(weights)
    levels = {
        _label(lo, hi): (w / covered if covered else 0.0)
        for (lo, hi), w in zip(BRACKETS, weights, strict=True)
    }
    total = sum(b.total_ops for b in out)
    jobs = sum(b.job_ops for b in out)
    untagged = sum(b.untagged_ops for b in out)
    users = uid_users(store) if top_untagged else {}
    untagged_rows: list[dict[str, object]] = []
    for r in top_untagged:
        t = scheme.classify(r["job_id"])
        untagged_rows.append(
            {
                "job_id": t.raw,
                "process": t.process,
                "uid": t.uid,
                "user": users.get(t.uid) if t.uid is not None else None,
                "host": t.host,
                "ops": int(r["ops"]),
                "share": _share(int(r["ops"]), total),
            }
        )
    return MdsView(
        components=components,
        capacity=capacity,
        capacity_source=source,
        bin_s=int(bin_s),
        total_ops=total,
        job_ops=jobs,
        other_ops=total - jobs,
        untagged_ops=untagged,
        unattributed_ops=total - jobs - untagged,
        job_share=_share(jobs, total),
        other_share=_share(total - jobs, total),
        untagged_share=_share(untagged, total),
        bins=out,
        load_levels=levels,
        time_above_75=weights[-1] / covered if covered else None,
        top_jobs=[
            {"job_id": r["job_id"], "ops": int(r["ops"]), "share": _share(int(r["ops"]), total)}
            for r in top_jobs
        ],
        top_untagged=untagged_rows,
        top_clients=_top_clients(store, where, params, total, top),
    )


def _capacity(
    store: Store, components: list[str], per_ts: list[dict[str, object]]
) -> tuple[float | None, str | None]:
    """Summed `peak_ops` of the MDTs when every one has it, else the highest rate seen."""
    if not components:
        return None, None
    caps = store.query(
        "SELECT sum(peak_ops) AS cap, count(peak_ops) AS n FROM components "
        f"WHERE component_id IN ({', '.join('?' for _ in components)}) AND peak_ops > 0",
        components,
    ).to_pylist()[0]
    if caps["n"] == len(components):
        return float(caps["cap"]), "benchmark"
    if per_ts:
        return max(float(r["rate"]) for r in per_ts) or None, "observed"  # type: ignore[arg-type]
    return None, None


def _top_clients(
    store: Store, where: str, params: list, total: int, top: int
) -> list[dict[str, object]]:
    """Client NIDs by metadata operations, from the MDTs' per-export counters."""
    rows = store.query(
        f"""
        SELECT substr(component_id, strpos(component_id, ':') + 1) AS nid, sum(md_ops) AS ops
        FROM server_samples WHERE kind = 'mdt_client' AND job_id IS NULL AND md_ops IS NOT NULL
          {where}
        GROUP BY ALL HAVING sum(md_ops) > 0
        """,
        params,
    ).to_pylist()
    per = {r["nid"]: int(r["ops"]) for r in rows}
    hosts = nid_hosts(store) if per else {}
    ranked = sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [
        {
            "nid": nid,
            "host": hosts.get(nid) or hosts.get(nid.split("@")[0]),
            "ops": ops,
            "share": _share(ops, total),
        }
        for nid, ops in ranked
    ]
