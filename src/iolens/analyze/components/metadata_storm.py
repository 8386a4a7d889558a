"""metadata_storm: an MDT overloaded by clients that are not scheduler jobs.

Beacon 4.1 (MDS request priority) and its advice against "using the parallel file system
for metadata-heavy interactive tasks": `ls -R`, `find` or scripts on login nodes flood the
metadata server and every job's opens and stats queue behind them.

What a real MDS shows, and what this reads (`collect/sources/lustre_mds.py`):

| input | real file: field | store |
|---|---|---|
| the MDT's operations | `mdt/<mdt>/md_stats`: every op's samples | `mdt`, `md_ops` |
| per jobstats id | `mdt/<mdt>/job_stats` | `mdt` rows with the raw `job_id` |
| per client NID | `mdt/<mdt>/exports/<nid>/stats` | `mdt_client` `<mdt>:<nid>` |
| MDS queue | `mds/MDS/mdt/stats`: `req_qdepth`, `req_waittime` | `mds` `queue_len`, `wait_us` |
| MDS utilisation (no queue) | MooseFS master chart `cpu` / CPU allowed | `mds` `busy` (metrics) |
| capacity (optional) | the site topology | `components.peak_ops` of the MDT |

Per MDT and minute the operations split three ways: those of jobstats ids that are
scheduler jobs (`iolens.model.ids`), those of ids that are processes outside any job
(`find.1003`), and those no jobstats entry accounts for (clients with jobstats off or an
empty id). The last two are *untagged*. A storm minute is one where the MDT is
overloaded and the untagged clients sent most of its operations.

Overloaded, from what the server says about itself (first of these the MDS reports): the
mean `req_qdepth` of its MDS's
metadata service is at least `queue` (1 request). `req_qdepth` is the number of requests
still waiting for a thread when one is taken up. In the three real MDS captures here
(HPE 2.10, two DDN 2.14) its lifetime mean is 0.001-0.009 with a per-request maximum of
1-3: a healthy MDS hands requests to idle threads at once. A mean of 1 says every request
found another already waiting, i.e. all service threads were busy for the whole minute;
that is saturation whatever the rate, and needs no fitted constant. A metadata server
that serves on one thread and has no queue to read (a MooseFS master) reports `busy`, the
share of the CPU it may use that it used (`collect/sources/moosefs.py`): at least `load`
(0.8) is overload by the same queueing argument as for `peak_ops` below. The MDT is mapped to
its MDS host by the `components` topology (`parent`), else by the agent round that
reported both (an MDS agent stamps its MDTs and its services with the same time). When
no queue is known, a site-given `peak_ops` stands in (rate at least `load` of it: beyond
~80 % utilisation a multi-threaded server's waiting time climbs steeply, Erlang C).
Without either the MDT is not assessed, and the gap says so.

A job-driven overload (an mdtest-like job) is not a storm: that is the job's own finding
(IOL005) and interference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.analyze.components.base import (
    MINUTE_US,
    Context,
    Episode,
    Grid,
    duration_class,
    r,
    runs,
    verdict,
)
from iolens.analyze.jobids import job_scheme, nid_hosts, uid_users
from iolens.model.ids import JobIdScheme


@dataclass(frozen=True)
class StormThresholds:
    queue: float = 1.0  # mean req_qdepth: every request found another waiting for a thread
    load: float = 0.8  # without queue stats: MDS `busy`, else md rate / site peak_ops
    untagged_share: float = 0.5  # the untagged clients sent most of the operations
    min_ops: float = 1000.0  # operations in the minute (~17/s) for its means to count
    max_gap: int = 2
    min_minutes: int = 3  # a storm lasts; a single busy minute is an `ls` burst
    top: int = 5  # clients, processes and jobs named in the evidence


@dataclass
class _Split:
    """Per-minute operations of every MDT, split by who sent them: arrays [mdt, minute]."""

    jobs: np.ndarray
    processes: np.ndarray
    entries: np.ndarray  # minutes with any jobstats entry at all
    shares: pa.Table  # component_id, job_id (raw), col, md_ops


@dataclass
class _Inputs:
    """Everything one run reads, shared by its episodes."""

    ctx: Context
    grid: Grid  # kind `mdt`
    split: _Split
    scheme: JobIdScheme
    names: _Names
    hosts: dict[str, str]  # MDT -> MDS host
    signal: list[str | None]  # per MDT: `mds_queue`, `mds_busy`, `peak_ops` or None
    busy: dict[str, np.ndarray]  # MDS -> `busy` per minute (servers that report it)


@dataclass
class MetadataStorm:
    name: str = "metadata_storm"
    kind: str = "metadata_storm"
    thresholds: StormThresholds = field(default_factory=StormThresholds)

    def detect(self, ctx: Context) -> list[Episode]:
        th = self.thresholds
        g = ctx.grid("mdt")
        if g.minutes == 0 or not g.ids:
            servers = ctx.grid("mds").ids
            if servers:
                ctx.gap(
                    self.name,
                    "mds",
                    servers,
                    "no MDT operation counts (mdt/<mdt>/md_stats): the MDS reports its "
                    "service queue only",
                    "let the lustre_mds source read /proc/fs/lustre/mdt/*/md_stats",
                )
            return []
        scheme = job_scheme(ctx.store)
        split = _split(ctx, g, scheme)
        total = g.md_ops
        untagged = np.maximum(total - split.jobs, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(total > 0, untagged / total, 0.0)
            rate = np.where(g.seconds > 0, total / g.seconds, np.nan)
        valid = (total >= th.min_ops) & (g.seconds > 0)
        busy = _busy(ctx, g)
        overloaded, signal, hosts = self._overload(ctx, g, rate, busy)
        abnormal = valid & overloaded & (share >= th.untagged_share)

        blind = self._gaps(ctx, g, split, signal)
        inputs = _Inputs(ctx, g, split, scheme, _Names(ctx, th.top), hosts, signal, busy)
        out: list[Episode] = []
        for ci, comp in enumerate(g.ids):
            if comp in blind:
                continue
            for a, b in runs(abnormal[ci], valid[ci], th.max_gap, th.min_minutes):
                start, end = g.time(a), g.time(b + 1)
                if end <= ctx.start or start >= ctx.end:
                    continue
                ep = self._episode(inputs, ci, a, b)
                ep.evidence["abnormal_minutes"] = int(abnormal[ci, a : b + 1].sum())
                ep.evidence.update(verdict(abnormal[ci], valid[ci], b))
                out.append(ep)
        return out

    def _gaps(self, ctx: Context, g: Grid, split: _Split, signal: list[str | None]) -> set[str]:
        """Record the MDTs that cannot be judged; returns those that cannot be attributed."""
        busy = g.md_ops.sum(axis=1) > 0
        blind = [c for i, c in enumerate(g.ids) if busy[i] and not split.entries[i].any()]
        if blind:
            ctx.gap(
                self.name,
                "mdt",
                blind,
                "job_stats (mdt/<mdt>/job_stats) had no entry: jobs cannot be told from "
                "untagged clients, so a storm cannot be attributed",
                "enable jobstats on the clients (lctl set_param jobid_var=SLURM_JOB_ID, "
                "jobid_name=%e.%u for processes outside jobs)",
            )
        unjudged = [c for i, c in enumerate(g.ids) if busy[i] and signal[i] is None]
        if unjudged:
            ctx.gap(
                self.name,
                "mdt",
                unjudged,
                "no MDS request queue (mds/MDS/mdt/stats req_qdepth), no MDS utilisation "
                "(busy) and no peak_ops for these MDTs: overload cannot be judged",
                "run the lustre_mds source as root on the MDS (debugfs holds the service "
                "stats from 2.12), or give the MDT's peak_ops in the site topology",
            )
        return set(blind)

    # -- overload ------------------------------------------------------------------------------
    def _overload(
        self, ctx: Context, g: Grid, rate: np.ndarray, busy: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, list[str | None], dict[str, str]]:
        """Per MDT and minute: overloaded? and which signal said so (None: no signal)."""
        th = self.thresholds
        hosts = _mds_hosts(ctx, g.ids)
        mds = ctx.grid("mds")
        row = {c: i for i, c in enumerate(mds.ids)}
        over = np.zeros(g.md_ops.shape, bool)
        signal: list[str | None] = []
        peaks = ctx.components("mdt")
        for ci, comp in enumerate(g.ids):
            host = hosts.get(comp)
            queue = mds.queue[row[host]] if host in row else None
            if queue is not None and np.isfinite(queue).any():
                with np.errstate(invalid="ignore"):
                    over[ci] = queue >= th.queue
                signal.append("mds_queue")
                continue
            if host in busy:
                with np.errstate(invalid="ignore"):
                    over[ci] = busy[host] >= th.load
                signal.append("mds_busy")
                continue
            peak = (peaks.get(comp) or {}).get("peak_ops")
            if peak:
                with np.errstate(invalid="ignore"):
                    over[ci] = rate[ci] >= th.load * peak
                signal.append("peak_ops")
                continue
            signal.append(None)
        return over, signal, hosts

    # -- one episode ---------------------------------------------------------------------------
    def _episode(self, inp: _Inputs, ci: int, a: int, b: int) -> Episode:
        """One storm on MDT `ci` over minutes [a, b]: who sent what, how the MDS coped."""
        ctx, g, split = inp.ctx, inp.grid, inp.split
        comp, signal, host = g.ids[ci], inp.signal[ci], inp.hosts.get(g.ids[ci])
        sl = slice(a, b + 1)
        secs = float(g.seconds[ci, sl].sum()) or 1.0
        total = float(g.md_ops[ci, sl].sum())
        jobs = float(split.jobs[ci, sl].sum())
        untagged = max(total - jobs, 0.0)
        unaccounted = max(untagged - float(split.processes[ci, sl].sum()), 0.0)
        ev: dict[str, Any] = {
            "md_ops_rate": r(total / secs, 1),
            "untagged_ops_rate": r(untagged / secs, 1),
            "untagged_share": r(untagged / total),
            "source_share": r(untagged / total),
            "job_share": r(jobs / total),
            "unaccounted_share": r(unaccounted / total),
            "overload": signal,
            "mds": host,
        }
        means: dict[str, float | None] = {}
        if signal == "mds_queue" and host is not None:
            means = _service_means(ctx, host, a, b)
            ev["queue_len"] = r(means["queue_len"], 2)
            ev["wait_us"] = r(means["wait_us"], 1)
            ev["service_us"] = r(means["service_us"], 1)
            ev["active_threads"] = r(means["active_threads"], 2)
        peak = (ctx.components("mdt").get(comp) or {}).get("peak_ops")
        load = total / secs / peak if peak else None
        ev["peak_ops"] = peak
        ev["load"] = r(load)
        if signal == "mds_busy" and host is not None:
            minutes = inp.busy[host][sl]
            ev["busy"] = r(float(np.nanmean(minutes))) if np.isfinite(minutes).any() else None
        ev["clients"] = inp.names.clients(comp, a, b, total)
        ev["processes"] = inp.names.processes(split.shares, comp, a, b, total, inp.scheme)
        ev["jobs"] = inp.names.jobs(split.shares, comp, a, b, total, inp.scheme)
        ev["operations"] = inp.names.operations(comp, a, b)
        ev["source_candidates"] = sorted(ctx.components("login"))
        if not ev["clients"]:
            ctx.gap(
                self.name,
                "mdt",
                [comp],
                "no per-client counters (mdt/<mdt>/exports/<nid>/stats): the client node "
                "behind the storm cannot be named",
                "collect with the lustre_mds source of this version (it reads exports)",
            )
        ev["source"] = _culprits(ev["clients"], ev["processes"])
        if ev.get("queue_len") is not None:
            why = f"mean MDS queue {ev['queue_len']:.1f} requests"
        elif ev.get("busy") is not None:
            why = f"MDS {ev['busy']:.0%} busy"
        else:
            why = f"{load:.0%} of peak_ops"
        ev["summary"] = (
            f"{comp} overloaded ({why}, {total / secs:,.0f} ops/s): {untagged / total:.0%} "
            f"of its metadata operations came from no scheduler job: {ev['source']}"
        )
        ev["duration_class"] = duration_class(g.time(a), g.time(b + 1))
        wait, svc = means.get("wait_us"), means.get("service_us")
        queueing = wait is not None and svc is not None and wait >= svc
        saturated = ev.get("busy") is not None and ev["busy"] >= 0.95
        severe = queueing or saturated or (load is not None and load >= 1.0)
        last = np.flatnonzero(g.seconds[ci] > 0)
        ongoing = ctx.open_ended and len(last) > 0 and b >= int(last[-1])
        return Episode(
            kind=self.kind,
            component_kind="mdt",
            component_id=comp,
            start=g.time(a),
            end=None if ongoing else g.time(b + 1),
            severity="critical" if severe else "warning",
            evidence=ev,
            detector=self.name,
        )


def _culprits(clients: list[dict[str, Any]], processes: list[dict[str, Any]]) -> str:
    """`client 172.20.20.6@o2ib (99%); find, uid 1003 on login01 (95%)`: the top of each."""
    who = []
    if clients:
        c = clients[0]
        who.append(f"client {c['host'] or c['nid']} ({c['share']:.0%})")
    if processes:
        p = processes[0]
        name = p["process"] or "a process"
        name += f", uid {p['uid']}" if p["uid"] is not None else ""
        name += f" ({p['user']})" if p["user"] else ""
        name += f" on {p['host']}" if p["host"] else ""
        who.append(f"{name} ({p['share']:.0%})")
    return "; ".join(who) or "clients without a job"


def _split(ctx: Context, g: Grid, scheme: JobIdScheme) -> _Split:
    """Per MDT and minute: ops of scheduler jobs, ops of untagged processes, any entry."""
    shares = ctx.job_shares("mdt", "sum(coalesce(md_ops, 0))::DOUBLE AS md_ops")
    jobs = np.zeros_like(g.md_ops)
    procs = np.zeros_like(g.md_ops)
    entries = np.zeros(g.md_ops.shape, bool)
    if shares.num_rows:
        index = {c: i for i, c in enumerate(g.ids)}
        ci = np.array([index.get(c, -1) for c in shares.column("component_id").to_pylist()])
        col = shares.column("col").to_numpy()
        ops = shares.column("md_ops").to_numpy()
        is_job = np.array([scheme.classify(j).is_job for j in shares.column("job_id").to_pylist()])
        ok = (ci >= 0) & (col >= 0) & (col < g.minutes)
        np.add.at(jobs, (ci[ok & is_job], col[ok & is_job]), ops[ok & is_job])
        np.add.at(procs, (ci[ok & ~is_job], col[ok & ~is_job]), ops[ok & ~is_job])
        entries[ci[ok], col[ok]] = True
    return _Split(jobs, procs, entries, shares)


def _service_means(ctx: Context, host: str, a: int, b: int) -> dict[str, float | None]:
    """The MDS metadata service's means over minutes [a, b] of the loaded range, each
    sample weighted by its length (the grid weights by data requests, which the service
    rows do not carry)."""
    cols = ("wait_us", "service_us", "queue_len", "active_threads")
    means = ", ".join(
        f"sum({c} * interval_s) / nullif(sum(interval_s) FILTER ({c} IS NOT NULL), 0) AS {c}"
        for c in cols
    )
    row = ctx.store.query(
        f"""
        SELECT {means} FROM server_samples
        WHERE kind = 'mds' AND component_id = ? AND job_id IS NULL AND interval_s > 0
          AND (epoch_us(ts) - 1) // {MINUTE_US} - {ctx.m_load} BETWEEN ? AND ?
          AND ts > ? AND ts <= ?
        """,
        [host, a, b, *ctx.bounds()],
    ).to_pylist()[0]
    return {c: (None if row[c] is None else float(row[c])) for c in cols}


def _busy(ctx: Context, g: Grid) -> dict[str, np.ndarray]:
    """Per MDS with a `busy` gauge (the utilisation of a single-threaded metadata service,
    e.g. a MooseFS master: its CPU over the CPU it may use), its mean per minute of `g`."""
    t = ctx.store.query(
        f"""
        SELECT component_id AS c, (epoch_us(ts) - 1) // {MINUTE_US} AS m, avg(value) AS v
        FROM metrics WHERE kind = 'mds' AND metric = 'busy' AND job_id IS NULL
          AND ts > ? AND ts <= ?
        GROUP BY ALL
        """,
        ctx.bounds(),
    )
    out: dict[str, np.ndarray] = {}
    for c, m, v in zip(*(t.column(k).to_pylist() for k in ("c", "m", "v")), strict=True):
        col = m - g.m0
        if 0 <= col < g.minutes and v is not None:
            out.setdefault(c, np.full(g.minutes, np.nan))[col] = v
    return out


def _mds_hosts(ctx: Context, mdts: list[str]) -> dict[str, str]:
    """MDT -> MDS host: the topology's `parent`, else the host whose service samples share
    the MDT's sample times (the same agent round), when exactly one does for most of them."""
    out = {m: p for m in mdts if (p := (ctx.components("mdt").get(m) or {}).get("parent"))}
    rest = [m for m in mdts if m not in out]
    if not rest:
        return out
    rows = ctx.store.query(
        """
        WITH t AS (SELECT DISTINCT kind, component_id, ts FROM server_samples
                   WHERE kind IN ('mdt', 'mds') AND job_id IS NULL AND ts > ? AND ts <= ?),
        shared AS (SELECT m.component_id AS mdt, s.component_id AS mds, count(*) AS n
                   FROM t m JOIN t s ON s.ts = m.ts AND s.kind = 'mds'
                   WHERE m.kind = 'mdt' GROUP BY ALL),
        times AS (SELECT component_id AS mdt, count(*) AS n FROM t WHERE kind = 'mdt' GROUP BY ALL)
        SELECT shared.mdt, shared.mds, shared.n, times.n AS of
        FROM shared JOIN times USING (mdt) ORDER BY shared.mdt, shared.n DESC, shared.mds
        """,
        ctx.bounds(),
    ).to_pylist()
    candidates: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        candidates.setdefault(row["mdt"], []).append(row)
    for m in rest:
        c = candidates.get(m, [])
        clear = len(c) == 1 or (len(c) > 1 and c[1]["n"] < c[0]["n"])
        if c and clear and c[0]["n"] >= 0.9 * c[0]["of"]:
            out[m] = c[0]["mds"]
    return out


class _Names:
    """Who sent the operations of an episode: clients, processes, jobs, operation mix."""

    def __init__(self, ctx: Context, top: int) -> None:
        self.ctx = ctx
        self.top = top
        self._clients: pa.Table | None = None
        self._users: dict[int, str] | None = None
        self._hosts: dict[str, str] | None = None

    def _client_table(self) -> pa.Table:
        if self._clients is None:
            self._clients = self.ctx.store.query(
                f"""
                SELECT component_id, (epoch_us(ts) - 1) // {MINUTE_US} - {self.ctx.m_load} AS col,
                  sum(coalesce(md_ops, 0))::DOUBLE AS md_ops
                FROM server_samples
                WHERE kind = 'mdt_client' AND job_id IS NULL AND ts > ? AND ts <= ?
                GROUP BY ALL
                """,
                self.ctx.bounds(),
            )
        return self._clients

    def clients(self, mdt: str, a: int, b: int, total: float) -> list[dict[str, Any]]:
        t = self._client_table()
        if t.num_rows == 0:
            return []
        comp = np.array(t.column("component_id").to_pylist(), dtype=object)
        col = t.column("col").to_numpy()
        prefix = mdt + ":"
        mine = np.array([c.startswith(prefix) for c in comp]) & (col >= a) & (col <= b)
        if not mine.any():
            return []
        ops: dict[str, float] = {}
        for c, v in zip(comp[mine], t.column("md_ops").to_numpy()[mine], strict=True):
            nid = c[len(prefix) :]
            ops[nid] = ops.get(nid, 0.0) + float(v)
        if self._hosts is None:
            self._hosts = nid_hosts(self.ctx.store)
        hosts = self._hosts
        ranked = sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))[: self.top]
        return [
            {
                "nid": nid,
                "host": hosts.get(nid) or hosts.get(nid.split("@")[0]),
                "md_ops": int(v),
                "share": round(v / total, 3) if total else None,
            }
            for nid, v in ranked
            if v > 0
        ]

    def _by_id(self, shares: pa.Table, mdt: str, a: int, b: int) -> dict[str, float]:
        if shares.num_rows == 0:
            return {}
        comp = np.array(shares.column("component_id").to_pylist(), dtype=object)
        col = shares.column("col").to_numpy()
        mask = (comp == mdt) & (col >= a) & (col <= b)
        out: dict[str, float] = {}
        ids = np.array(shares.column("job_id").to_pylist(), dtype=object)[mask]
        for j, v in zip(ids, shares.column("md_ops").to_numpy()[mask], strict=True):
            out[j] = out.get(j, 0.0) + float(v)
        return out

    def processes(
        self, shares: pa.Table, mdt: str, a: int, b: int, total: float, scheme: JobIdScheme
    ) -> list[dict[str, Any]]:
        if self._users is None:
            self._users = uid_users(self.ctx.store)
        tags = [
            (scheme.classify(j), v)
            for j, v in self._by_id(shares, mdt, a, b).items()
            if not scheme.classify(j).is_job and v > 0
        ]
        tags.sort(key=lambda tv: (-tv[1], tv[0].raw))
        return [
            {
                "job_id": t.raw,
                "process": t.process,
                "uid": t.uid,
                "user": self._users.get(t.uid) if t.uid is not None else None,
                "host": t.host,
                "md_ops": int(v),
                "share": round(v / total, 3) if total else None,
            }
            for t, v in tags[: self.top]
        ]

    def jobs(
        self, shares: pa.Table, mdt: str, a: int, b: int, total: float, scheme: JobIdScheme
    ) -> list[dict[str, Any]]:
        per: dict[str, float] = {}
        for j, v in self._by_id(shares, mdt, a, b).items():
            job = scheme.job_id(j)
            if job is not None:
                per[job] = per.get(job, 0.0) + v
        ranked = sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))[: self.top]
        return [
            {"job_id": j, "md_ops": int(v), "share": round(v / total, 3) if total else None}
            for j, v in ranked
            if v > 0
        ]

    def operations(self, mdt: str, a: int, b: int) -> dict[str, float]:
        """Share of each operation (`getattr`: 0.95) in the MDT's md_stats over the episode."""
        lo, hi = self.ctx.load_start, self.ctx.load_end
        rows = self.ctx.store.query(
            f"""
            SELECT metric, sum(value * interval_s) AS n FROM metrics
            WHERE kind = 'mdt' AND component_id = ? AND job_id IS NULL
              AND starts_with(metric, 'md_') AND metric != 'md_ops'
              AND (epoch_us(ts) - 1) // {MINUTE_US} - {self.ctx.m_load} BETWEEN ? AND ?
              AND ts > ? AND ts <= ?
            GROUP BY metric ORDER BY n DESC
            """,
            [mdt, a, b, lo, hi],
        ).to_pylist()
        total = sum(float(x["n"] or 0) for x in rows)
        if not total:
            return {}
        shares = {x["metric"][3:]: round(float(x["n"] or 0) / total, 3) for x in rows}
        return {op: v for op, v in list(shares.items())[: self.top] if v > 0}
