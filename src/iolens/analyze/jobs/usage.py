"""Each job's I/O bursts: when it did I/O, what it moved through which shared component.

A burst is one stretch of I/O between two computations, cut from the tracer's open..close
records (`burst_windows`); its work on each OST and metadata target comes from Lustre
jobstats (the `ost` and `mdt` job rows a real OSS/MDS agent reports), and the forwarders it
went through from the static mapping of its processes' nodes (`forwarding`). A job without
tracer records (not traced) still gets bursts, from the samples in which jobstats saw it
working. The bursts give the interference analysis its victims' I/O time and the
neighbours analysis who shared what.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from iolens.store.base import Store

#: Rank intervals closer than this (s) belong to one burst: the tracer merges the records
#: of a metadata phase per flush window, and consecutive windows touch.
WINDOW_SLACK_S = 2
#: A burst is a metadata burst when it issues at least this many metadata ops per data RPC.
META_OPS_PER_UNIT = 2.0
#: Jobstats samples of one job closer than this (s) belong to one burst (untraced jobs).
SAMPLE_SLACK_S = 30


@dataclass(frozen=True)
class Span:
    """A time range [lo, hi) in epoch seconds; None means unbounded."""

    lo: float | None = None
    hi: float | None = None

    def sql(self, column: str) -> tuple[str, list[float]]:
        where, params = [], []
        if self.lo is not None:
            where.append(f"epoch({column}) >= ?")
            params.append(self.lo)
        if self.hi is not None:
            where.append(f"epoch({column}) < ?")
            params.append(self.hi)
        return (" AND " + " AND ".join(where) if where else ""), params


EVERYTHING = Span()


@dataclass
class Burst:
    """One I/O burst of a job: its span, its work per component and its traits."""

    job_id: str
    index: int
    start: int  # epoch second
    end: int  # exclusive
    kind: str  # read | write | meta
    nbytes: float
    requests: float  # data RPCs the OSTs served for it (jobstats)
    md_ops: float  # metadata ops the MDTs served for it
    peak_rps: float  # data RPCs/s in its busiest sample
    fwd_work: dict[str, float] = field(default_factory=dict)  # forwarder -> bytes (by procs)
    ost_work: dict[str, tuple[float, float]] = field(default_factory=dict)  # OST -> (B, RPCs)
    procs: dict[str, int] = field(default_factory=dict)  # processes behind each forwarder
    n1: bool = False

    @property
    def request_size(self) -> float:
        return self.nbytes / self.requests if self.requests else 0.0

    @property
    def nprocs(self) -> int:
        return max(1, sum(self.procs.values()))

    @property
    def duration(self) -> int:
        return self.end - self.start


def job_rows(store: Store, span: Span = EVERYTHING) -> pa.Table:
    """Per-job rows of the OSTs and MDTs (jobstats), one per sample: second the sample's
    interval starts, its length, bytes, data RPCs, read bytes and metadata ops."""
    where, params = span.sql("ts")
    return store.query(
        "SELECT job_id, kind, component_id, "
        "CAST(floor(epoch(ts) - interval_s) AS BIGINT) AS sec, "
        "CAST(ceil(epoch(ts)) AS BIGINT) AS sec_end, "
        "sum(coalesce(read_bytes, 0) + coalesce(write_bytes, 0))::DOUBLE AS nbytes, "
        "sum(coalesce(read_ops, 0) + coalesce(write_ops, 0))::DOUBLE AS ops, "
        "sum(coalesce(read_bytes, 0))::DOUBLE AS rbytes, "
        "sum(coalesce(md_ops, 0))::DOUBLE AS md "
        "FROM server_samples WHERE job_id IS NOT NULL AND interval_s > 0 "
        f"AND kind IN ('ost', 'mdt'){where} "
        "GROUP BY ALL ORDER BY job_id, sec",
        params,
    )


# Every process's open..close interval per data file, and first..last op per
# metadata-only target; islands of overlapping intervals are cut in numpy (DuckDB's
# running window aggregates over ties were not stable enough to number them).
_INTERVALS_SQL = """
WITH oc AS (
  SELECT job_id, node, pid, file_id, op, epoch(t_start) AS t0, epoch(t_end) AS t1,
         row_number() OVER (PARTITION BY job_id, node, pid, file_id, op
                            ORDER BY t_start, t_end) AS k
  FROM client_io WHERE op IN ('open', 'close') {where}),
data AS (
  SELECT DISTINCT c.job_id, c.file_id FROM client_io c
  SEMI JOIN (SELECT DISTINCT job_id, file_id FROM oc) f USING (job_id, file_id)
  WHERE c.op IN ('read', 'write') {where_c}),
paired AS (
  SELECT o.job_id, o.node, o.pid, o.t0 AS s, c.t1 AS e
  FROM oc o JOIN oc c USING (job_id, node, pid, file_id, k)
  SEMI JOIN data USING (job_id, file_id)
  WHERE o.op = 'open' AND c.op = 'close'),
spanned AS (
  SELECT job_id, node, pid, min(t0) AS s, max(t1) AS e FROM oc
  ANTI JOIN data USING (job_id, file_id)
  GROUP BY job_id, node, pid, file_id)
SELECT iv.job_id, iv.s, iv.e, hash(iv.node, iv.pid) AS proc, f.forwarder
FROM (SELECT * FROM paired UNION ALL SELECT * FROM spanned) iv
LEFT JOIN forwarding f ON iv.node = f.compute_node
ORDER BY iv.job_id, iv.s, iv.e
"""


@dataclass
class Window:
    """A burst's span [start, end) in epoch seconds and its processes behind each forwarder."""

    start: int
    end: int
    procs: dict[str, int]


def burst_windows(store: Store, span: Span = EVERYTHING) -> dict[str, list[Window]]:
    """Each job's bursts, from its processes' open/close pairs.

    A process opens its data file at its first request of a phase and closes it after its
    last, so the union of overlapping open..close intervals is one burst, however long the
    job was stalled inside it (a throttled phase can go minutes without a completed
    request). Metadata-only targets (the directories of a create/stat/unlink phase, whose
    records the tracer merges per flush window) count from their first to their last op.
    """
    where, params = span.sql("t_start")
    where_c, params_c = span.sql("c.t_start")
    t = store.query(_INTERVALS_SQL.format(where=where, where_c=where_c), params + params_c)
    out: dict[str, list[Window]] = {}
    if t.num_rows == 0:
        return out
    job = t.column("job_id").to_numpy(zero_copy_only=False)
    s, e = t.column("s").to_numpy(), t.column("e").to_numpy()
    proc = t.column("proc").to_numpy()
    fwd = t.column("forwarder").to_numpy(zero_copy_only=False)
    cut = np.nonzero(job[1:] != job[:-1])[0] + 1
    for a, b in zip(np.r_[0, cut], np.r_[cut, len(job)], strict=True):
        js, je = s[a:b], e[a:b]
        # A new island where an interval starts after everything before it has ended.
        reach = np.maximum.accumulate(je)
        new = np.r_[True, js[1:] > reach[:-1] + WINDOW_SLACK_S]
        isl = np.cumsum(new) - 1
        wins = []
        for k in range(int(isl[-1]) + 1):
            m = isl == k
            procs: dict[str, set[int]] = {}
            for f, p in zip(fwd[a:b][m], proc[a:b][m], strict=True):
                if f is not None:
                    procs.setdefault(str(f), set()).add(int(p))
            lo, hi = int(np.floor(js[m].min())), int(np.ceil(je[m].max()))
            wins.append(Window(lo, max(hi, lo + 1), {f: len(v) for f, v in procs.items()}))
        out[str(job[a])] = wins
    return out


def _activity_windows(sec: np.ndarray, sec_end: np.ndarray) -> list[Window]:
    """Bursts of a job without tracer records: runs of samples that saw it working."""
    order = np.argsort(sec, kind="stable")
    s, e = sec[order], sec_end[order]
    reach = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > reach[:-1] + SAMPLE_SLACK_S]
    isl = np.cumsum(new) - 1
    return [
        Window(int(s[isl == k].min()), int(e[isl == k].max()), {}) for k in range(int(isl[-1]) + 1)
    ]


def bursts(
    rows: pa.Table, windows: dict[str, list[Window]], n1_jobs: set[str]
) -> dict[str, list[Burst]]:
    """Every job's bursts with its work on each OST/MDT (a sample counts in the burst that
    overlaps its interval most) and its traits."""
    cols = {n: rows.column(n).to_numpy(zero_copy_only=False) for n in rows.column_names}
    job = cols["job_id"]
    out: dict[str, list[Burst]] = {}
    cut = np.nonzero(job[1:] != job[:-1])[0] + 1 if len(job) else np.zeros(0, int)
    bounds = zip(np.r_[0, cut], np.r_[cut, len(job)], strict=True) if len(job) else []
    seen: set[str] = set()
    for a, b in bounds:
        j = str(job[a])
        seen.add(j)
        c = {k: v[a:b] for k, v in cols.items()}
        wins = windows.get(j) or _activity_windows(c["sec"], c["sec_end"])
        found = _cut(j, c, wins, j in n1_jobs)
        if found:
            out[j] = found
    for j, wins in windows.items():  # traced, but no jobstats (no Lustre, or jobstats off)
        if j not in seen:
            empty = {k: v[:0] for k, v in cols.items()}
            found = _cut(j, empty, wins, j in n1_jobs)
            if found:
                out[j] = found
    return dict(sorted(out.items()))


def _cut(job: str, c: dict[str, np.ndarray], wins: list[Window], n1: bool) -> list[Burst]:
    mid = (c["sec"] + c["sec_end"]) / 2.0
    found: list[Burst] = []
    for w in wins:
        inside = (mid >= w.start) & (mid < w.end)
        osts = inside & (c["kind"] == "ost")
        nbytes = float(c["nbytes"][osts].sum())
        reqs = float(c["ops"][osts].sum())
        md = float(c["md"][inside & (c["kind"] == "mdt")].sum())
        ost_work: dict[str, tuple[float, float]] = {}
        if osts.any():
            names, inv = np.unique(c["component_id"][osts], return_inverse=True)
            nb = np.bincount(inv, c["nbytes"][osts], len(names))
            ops = np.bincount(inv, c["ops"][osts], len(names))
            ost_work = {
                str(n): (float(x), float(y)) for n, x, y in zip(names, nb, ops, strict=True)
            }
            secs, sinv = np.unique(c["sec"][osts], return_inverse=True)
            length = np.maximum(1, c["sec_end"][osts] - c["sec"][osts])
            ops_at = np.bincount(sinv, c["ops"][osts], len(secs))
            len_at = np.bincount(sinv, length, len(secs)) / np.bincount(sinv, None, len(secs))
            peak = float((ops_at / len_at).max())
        else:
            peak = 0.0
        meta = md >= META_OPS_PER_UNIT * max(reqs, 1.0)
        rb = float(c["rbytes"][osts].sum())
        total_procs = sum(w.procs.values()) or 1
        found.append(
            Burst(
                job_id=job,
                index=len(found),
                start=w.start,
                end=w.end,
                kind="meta" if meta else ("read" if rb > nbytes / 2 else "write"),
                nbytes=nbytes,
                requests=reqs,
                md_ops=md,
                peak_rps=peak,
                fwd_work={f: nbytes * n / total_procs for f, n in w.procs.items()},
                ost_work={} if meta else ost_work,
                procs=dict(w.procs),
                n1=n1 and not meta,
            )
        )
    return found
