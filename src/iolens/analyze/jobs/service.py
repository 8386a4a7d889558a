"""Who occupied each shared server, sample by sample, and how long each job's requests took.

Everything here is read from what a real Lustre agent reports (`collect/sources/
lustre_oss.py`, `lustre_mds.py`):

* per OST and MDT, per job (jobstats): requests, bytes and, from Lustre 2.12 on, the mean
  time the target spent handling one of the job's requests (`job_stats` `[usecs]`
  counters: `server_samples.service_us` of the job row);
* per target: the same for all requests (`obdfilter.*.stats` / `mdt.*.md_stats`
  `[usecs]`), so the target's time not accounted to any scheduler job is what clients
  outside jobs and untagged processes (`procname.uid` entries) occupied;
* per OSS and MDS host: the mean time a request waited for a service thread
  (`ost/OSS/ost_io/stats`, `mds/MDS/mdt/stats` `req_waittime`: kind `oss`/`mds`
  `wait_us`), joined to a target through `components.parent` (which the agents report).

A server without jobstats (a MooseFS chunkserver) has job rows attributed from the jobs'
traces (`source = 'trace'`, `ingest/traced_targets.py`): their handling time is what the
client waited per call, so the load no trace saw is taken from the target's bytes
(`_traced_total`), not from its own time per operation, which counts other units.

From these, per job row: its **busy time** on the target in the sample (requests x mean
handling time: the server time it occupied) and its **latency** per request (handling plus
queue wait). Without per-job latency (Lustre 2.10 jobstats) a job's requests are assumed
to take the target's mean; without any latency (no `[usecs]`), busy time is shared by
request count and latency is unknown, and the samples say so (`latency_known`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iolens.store.base import Store

#: Samples are read up to this far past a window's end: a sample is stamped at the end of
#: its interval, and a window reads every sample whose interval overlaps it.
LOOKAHEAD_S = 120

#: A window [lo, hi) reads every sample whose interval overlaps it (ends after lo, starts
#: before hi): the seconds at its edges are judged against every target that served them,
#: as in one window over the whole span, though servers' clocks put their sample edges
#: at different times. A sample is the window's own (its baseline counts it) when its
#: interval starts in the window, so each sample is owned by exactly one window.
_WINDOW = "epoch({t}) > ? AND floor(epoch({t}) - {dt}) < ?"

_SQL = f"""
WITH tot AS (
  SELECT kind, component_id AS c, ts,
    (CASE WHEN kind = 'mdt' THEN coalesce(md_ops, 0)
          ELSE coalesce(read_ops, 0) + coalesce(write_ops, 0) END)::DOUBLE AS tops,
    service_us AS tsvc,
    (coalesce(read_bytes, 0) + coalesce(write_bytes, 0))::DOUBLE AS tbytes
  FROM server_samples
  WHERE job_id IS NULL AND kind IN ('ost', 'mdt', 'forwarder') AND interval_s > 0
    AND {_WINDOW.format(t="ts", dt="interval_s")}),
lustre AS (
  SELECT s.kind, s.component_id AS c, s.job_id AS j, s.ts, s.interval_s AS dt,
    (CASE WHEN s.kind = 'mdt' THEN coalesce(s.md_ops, 0)
          ELSE coalesce(s.read_ops, 0) + coalesce(s.write_ops, 0) END)::DOUBLE AS ops,
    (coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0))::DOUBLE AS nbytes,
    coalesce(s.read_bytes, 0)::DOUBLE AS rbytes,
    s.service_us AS svc, s.source = 'trace' AS traced
  FROM server_samples s
  WHERE s.job_id IS NOT NULL AND s.kind IN ('ost', 'mdt') AND s.interval_s > 0
    AND {_WINDOW.format(t="s.ts", dt="s.interval_s")}),
placed AS (SELECT job_id, unnest(nodes) AS node, "start", "end" FROM jobs),
clients AS (
  SELECT split_part(s.component_id, ':', 1) AS c, p.job_id AS j, s.ts, s.interval_s AS dt,
    (coalesce(s.read_ops, 0) + coalesce(s.write_ops, 0))::DOUBLE AS ops,
    (coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0))::DOUBLE AS nbytes,
    coalesce(s.read_bytes, 0)::DOUBLE AS rbytes,
    s.service_us AS svc, false AS traced
  FROM server_samples s
  JOIN placed p ON p.node = split_part(s.component_id, ':', 2)
    AND s.ts > p."start" AND s.ts - to_microseconds(CAST(s.interval_s * 1e6 AS BIGINT))
      < coalesce(p."end", s.ts)
  WHERE s.kind = 'fwd_client' AND s.interval_s > 0
    AND {_WINDOW.format(t="s.ts", dt="s.interval_s")}),
jr AS (
  SELECT *, false AS forwarded FROM lustre
  UNION ALL
  SELECT 'forwarder', c, j, ts, any_value(dt), sum(ops), sum(nbytes), sum(rbytes),
    sum(svc * ops) / nullif(sum(ops) FILTER (WHERE svc IS NOT NULL), 0), false, true
  FROM clients GROUP BY c, j, ts),
par AS (
  SELECT component_id AS c, any_value(parent) AS parent FROM components
  WHERE kind IN ('ost', 'mdt') GROUP BY ALL
  UNION ALL  -- a forwarder queues its own requests
  SELECT DISTINCT component_id, component_id FROM server_samples
  WHERE kind = 'forwarder' AND job_id IS NULL AND {_WINDOW.format(t="ts", dt="interval_s")}),
w AS (
  SELECT component_id AS p, ts, avg(wait_us) AS wait FROM server_samples
  WHERE job_id IS NULL AND kind IN ('oss', 'mds', 'forwarder') AND wait_us IS NOT NULL
    AND {_WINDOW.format(t="ts", dt="interval_s")}
  GROUP BY ALL)
SELECT jr.kind, jr.c, jr.j, epoch(jr.ts) AS t, floor(epoch(jr.ts) - jr.dt) AS t0, jr.dt,
  jr.ops, jr.nbytes, jr.rbytes, jr.svc, coalesce(jr.traced, false) AS traced,
  k.job_id IS NOT NULL AS known, tot.tops, tot.tsvc, tot.tbytes, w.wait,
  par.parent IS NOT NULL AS has_parent
FROM jr JOIN tot USING (kind, c, ts)
LEFT JOIN (SELECT DISTINCT job_id FROM jobs) k ON k.job_id = jr.j
LEFT JOIN par USING (c)
LEFT JOIN w ON w.p = par.parent AND w.ts = jr.ts
WHERE jr.ops > 0
ORDER BY jr.c, jr.ts, jr.j
"""

#: The smallest share of a target's bytes traced jobs are taken to move: below it a trace
#: gap (a job not yet shipped) would make the untraced rest look unbounded.
UNTRACED_FLOOR = 0.05

#: Direction codes of a row: what most of its requests were.
READ, WRITE, META = 0, 1, 2
DIRECTIONS = ("read", "write", "md")


@dataclass
class Samples:
    """Job rows of the targets over one window, with what was derived from them.

    Arrays are aligned, one entry per job row of a target's sample; `group` numbers the
    (target, sample) pairs, so the jobs sharing a target at one time share a group. A job
    may have several rows in one group (a trace attributes each process's calls, and its
    reads and writes, apart); `holder` numbers the (group, job) pairs, and a job's share
    and requests in flight are its rows' together.
    """

    component: np.ndarray  # target id
    kind: np.ndarray  # ost | mdt
    job: np.ndarray  # job id as jobstats printed it
    known: np.ndarray  # a scheduler job (in `jobs`), else an untagged client
    t_end: np.ndarray  # epoch seconds, end of the sample's interval
    dt: np.ndarray  # interval length, s
    ops: np.ndarray  # requests (data RPCs on an OST, metadata ops on an MDT)
    nbytes: np.ndarray
    direction: np.ndarray  # READ | WRITE | META
    busy: np.ndarray  # server time the job occupied in the sample, us (or requests)
    handling: np.ndarray  # time a thread spent on one of its requests, us (NaN: unknown)
    latency: np.ndarray  # handling + queue wait per request, us (NaN when unknown)
    group: np.ndarray
    group_busy: np.ndarray  # per group: the target's whole busy time in the sample
    group_other: np.ndarray  # per group: busy time of no scheduler job
    holder: np.ndarray  # per row: its (group, job) pair
    owned: np.ndarray  # the sample's interval starts in the window (see `_WINDOW`)
    latency_known: bool  # any row had a latency
    waits_known: bool  # queue waits were found for targets with a parent
    lo: int = 0  # the window's seconds [lo, hi), epoch
    hi: int = 0

    @property
    def size(self) -> np.ndarray:
        """Mean request size per row, bytes (0 for metadata)."""
        return np.where(self.ops > 0, self.nbytes / np.maximum(self.ops, 1e-9), 0.0)

    @property
    def in_flight(self) -> np.ndarray:
        """Each row's job's mean requests in flight at the target (Little's law: rate x
        latency, over all of the job's rows in the sample)."""
        mine = np.bincount(self.holder, self.ops * np.nan_to_num(self.latency))
        return mine[self.holder] / np.maximum(self.dt * 1e6, 1e-9)

    @property
    def group_threads(self) -> np.ndarray:
        """Per group, the target's mean busy threads in the sample (busy time / interval)."""
        first = np.unique(self.group, return_index=True)[1]
        return self.group_busy / np.maximum(self.dt[first] * 1e6, 1e-9)

    @property
    def job_busy(self) -> np.ndarray:
        """Each row's job's busy time on the target in the sample (all its rows)."""
        return np.bincount(self.holder, self.busy)[self.holder]

    @property
    def share(self) -> np.ndarray:
        """Each row's job's share of its target's busy time in the sample."""
        return self.job_busy / np.maximum(self.group_busy[self.group], 1e-12)

    def __len__(self) -> int:
        return len(self.job)


def load(store: Store, lo: int, hi: int) -> Samples:
    """The target samples whose intervals overlap [lo, hi) (epoch seconds); those starting
    in it are `owned`."""
    t = store.query(_SQL, [lo, hi] * 5)
    c = {n: t.column(n).to_numpy(zero_copy_only=False) for n in t.column_names}
    n = t.num_rows
    ops = c["ops"].astype(float)
    svc = _floats(c["svc"], n)
    tsvc = _floats(c["tsvc"], n)
    wait = _floats(c["wait"], n)
    handling = np.where(np.isfinite(svc), svc, tsvc)
    latency_known = bool(np.isfinite(handling).any())
    # Busy time in us where latencies exist; else requests (a share only).
    busy = ops * handling if latency_known else ops.copy()
    busy = np.where(np.isfinite(busy), busy, ops * np.nanmedian(handling) if latency_known else ops)
    latency = handling + np.nan_to_num(wait, nan=0.0)
    rb = c["rbytes"].astype(float)
    nb = c["nbytes"].astype(float)
    direction = np.where(c["kind"] == "mdt", META, np.where(rb >= nb - rb, READ, WRITE))
    keys = np.char.add(c["c"].astype(str), np.char.add("@", c["t"].astype(str))) if n else c["c"]
    _, first, group = np.unique(keys, return_index=True, return_inverse=True)
    n_groups = len(first)
    known = c["known"].astype(bool)
    total = c["tops"].astype(float)[first] * (tsvc[first] if latency_known else 1.0)
    jobs_busy = np.bincount(group, busy, n_groups)
    group_busy = np.where(np.isfinite(total) & (total >= jobs_busy), total, jobs_busy)
    traced = np.bincount(group, c["traced"].astype(float), n_groups) > 0
    if traced.any():  # client-side busy time: the untraced rest scaled by bytes, not time
        group_busy = np.where(traced, _traced_total(jobs_busy, group, nb, c, first), group_busy)
    other = group_busy - np.bincount(group, np.where(known, busy, 0.0), n_groups)
    jobs = np.unique(c["j"].astype(str), return_inverse=True)[1].reshape(-1) if n else group
    holder = np.unique(group.astype(np.int64) * (n + 1) + jobs, return_inverse=True)[1]
    holder = holder.reshape(-1)
    return Samples(
        component=c["c"],
        kind=c["kind"],
        job=c["j"],
        known=known,
        t_end=c["t"].astype(float),
        dt=c["dt"].astype(float),
        ops=ops,
        nbytes=nb,
        direction=direction,
        busy=busy,
        handling=handling,
        latency=latency,
        group=group,
        group_busy=group_busy,
        group_other=np.maximum(other, 0.0),
        holder=holder,
        owned=c["t0"].astype(float) >= lo,
        latency_known=latency_known,
        waits_known=bool(np.isfinite(wait).any()) or not bool(c["has_parent"].any()),
        lo=lo,
        hi=hi,
    )


def _traced_total(
    jobs_busy: np.ndarray, group: np.ndarray, nbytes: np.ndarray, c: dict, first: np.ndarray
) -> np.ndarray:
    """A target's whole busy time where its job rows come from traces (`source = 'trace'`):
    their busy time is what the clients waited, which the server's own time per operation
    does not measure, so the load of what no trace saw (other clients, untraced jobs) is
    taken in proportion to the bytes the server moved beyond the traced ones."""
    traced_b = np.bincount(group, nbytes, len(first))
    server_b = _floats(c["tbytes"], len(c["tbytes"]))[first] if len(first) else np.zeros(0)
    share = np.where(
        np.isfinite(server_b) & (server_b > 0),
        np.clip(traced_b / np.maximum(server_b, 1e-9), UNTRACED_FLOOR, 1.0),
        1.0,
    )
    return jobs_busy / share


def _floats(a: np.ndarray, n: int) -> np.ndarray:
    """A nullable numeric column as floats with NaN for null."""
    if n == 0:
        return np.zeros(0)
    return (
        np.array([np.nan if x is None else float(x) for x in a], float)
        if a.dtype == object
        else a.astype(float)
    )
