"""Speed classes (SIOX histogram plug-in): how fast was this call, compared with history?

For each operation type (`read`, `write`, `open`, `stat`, ...), and for data operations
per request-size class as well (Darshan's ten bins: a 4 MiB read is not a slow 4 KiB
read), the model learns a histogram of per-call durations from the stored client records
(`dur_ns / count`: a merged record's calls share its mean). Bins are log-spaced (ten per
decade from 1 ns to 1,000 s), because latencies spread over orders of magnitude. The
5th, 25th, 75th and 95th percentiles of each histogram cut it into five classes:

    very fast < p5 <= fast < p25 <= normal <= p75 < slow <= p95 < very slow

So by construction 5 % of the history is "very slow"; a job, a time window or a server
whose calls are very slow far more often than that is the signal. `speed_profile` gives
each class's share for one job. `client_speed` feeds the component-anomaly analysis:
for a suspected slow OST or forwarder it measures the very-slow share of the client calls
that went through it (files striped over the OST; nodes the forwarder serves) during the
episode, against the same component before it and the 5 % of history, and the slow
detectors (`components/peers.py`) add it to their evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from iolens.model.schema import DATA_OPS
from iolens.store.base import Store

if TYPE_CHECKING:
    from iolens.analyze.components.base import Context

#: Classes from fastest to slowest (index = class code).
CLASSES = ("very fast", "fast", "normal", "slow", "very slow")
#: Quantiles of the history that separate the classes.
CUTS = (0.05, 0.25, 0.75, 0.95)
SLOW = CLASSES.index("slow")
VERY_SLOW = CLASSES.index("very slow")
BINS_PER_DECADE = 10
DECADES = 12  # 1 ns .. 1e12 ns (1,000 s)
NBINS = BINS_PER_DECADE * DECADES
#: Request-size class edges (bytes): Darshan's access-size bins.
SIZE_EDGES = (100, 1024, 10240, 102400, 1048576, 4194304, 10485760, 104857600, 1073741824)
#: Records a histogram needs before it is trusted (else the op's histogram over all sizes).
MIN_RECORDS = 20
#: Client calls through a component needed to judge its share of very slow calls.
MIN_CALLS = 100
#: A very-slow share this many times its baseline counts as clients seeing the slowness,
#: and so does a slow-or-worse share this many times its own.
FAR_ABOVE = 3.0
FAR_ABOVE_SLOW = 2.0


def _size_bin_sql(col: str = "size") -> str:
    cases = " ".join(f"WHEN {col} < {e} THEN {i}" for i, e in enumerate(SIZE_EDGES))
    return f"CASE {cases} ELSE {len(SIZE_EDGES)} END"


def _bin_sql() -> str:
    """Histogram bin of a record's per-call duration (clipped to the range)."""
    per_call = "greatest(dur_ns::DOUBLE / count, 1.0)"
    return f"least(greatest(floor(log10({per_call}) * {BINS_PER_DECADE}), 0), {NBINS - 1})::INT"


def bins_of(per_call_ns: np.ndarray) -> np.ndarray:
    """Histogram bin of per-call durations (ns), as `_bin_sql` computes it."""
    x = np.maximum(np.asarray(per_call_ns, float), 1.0)
    return np.clip(np.floor(np.log10(x) * BINS_PER_DECADE), 0, NBINS - 1).astype(np.int64)


def size_bins(size: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.asarray(SIZE_EDGES), np.asarray(size, np.int64), side="right")


@dataclass
class Histogram:
    """Calls per log-spaced duration bin, and the class cut points learned from them."""

    calls: np.ndarray  # [NBINS]
    records: int
    cuts: np.ndarray = field(init=False)  # [len(CUTS)] per-call ns, for reports
    rank: np.ndarray = field(init=False)  # [NBINS] mid-rank of each bin in the history

    def __post_init__(self) -> None:
        self.cuts = quantiles(self.calls, CUTS)
        total = self.calls.sum()
        cum = np.cumsum(self.calls)
        # A call's place in the history: the middle of its bin's share (ties, such as a
        # source that rounds durations, all land on one rank instead of the bin's edge);
        # bins beyond the history's range are at 0 or 1.
        mid = (cum - 0.5 * self.calls) / total if total > 0 else np.full(NBINS, 0.5)
        self.rank = np.where(self.calls > 0, mid, cum / total if total > 0 else 0.5)

    def classify(self, per_call_ns: np.ndarray) -> np.ndarray:
        """Class codes of calls: their history rank against the CUTS quantiles."""
        r = self.rank[bins_of(per_call_ns)]
        c05, c25, c75, c95 = CUTS
        return np.select([r < c05, r < c25, r <= c75, r <= c95], [0, 1, 2, 3], 4).astype(np.int64)

    @property
    def total(self) -> int:
        return int(self.calls.sum())


def quantiles(calls: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """Per-call ns at quantiles `qs` of a histogram, log-interpolated inside the bin."""
    total = calls.sum()
    if total <= 0:
        return np.full(len(qs), np.nan)
    cum = np.cumsum(calls)
    out = []
    for q in qs:
        target = q * total
        b = int(np.searchsorted(cum, target, side="left"))
        b = min(b, len(calls) - 1)
        below = cum[b - 1] if b > 0 else 0.0
        frac = (target - below) / calls[b] if calls[b] > 0 else 0.0
        out.append(10 ** ((b + float(np.clip(frac, 0.0, 1.0))) / BINS_PER_DECADE))
    return np.array(out)


@dataclass
class SpeedModel:
    """Histograms per (op, size class) and per op (size class None), learned from history."""

    hist: dict[tuple[str, int | None], Histogram]

    def histogram(self, op: str, size_bin: int | None) -> Histogram | None:
        h = self.hist.get((op, size_bin)) if op in DATA_OPS else None
        if h is not None and h.records >= MIN_RECORDS:
            return h
        h = self.hist.get((op, None))
        return h if h is not None and h.records > 0 else None

    def classify(self, ops: Sequence[str], size: np.ndarray, per_call_ns: np.ndarray) -> np.ndarray:
        """Class codes (index into CLASSES) per call; -1 where history knows no such op."""
        x = np.asarray(per_call_ns, float)
        out = np.full(len(x), -1, np.int64)
        if len(x) == 0:
            return out
        names, op_code = np.unique(np.asarray(ops, dtype=object).astype(str), return_inverse=True)
        nsize = len(SIZE_EDGES) + 1
        keys = op_code.astype(np.int64) * nsize + size_bins(size)
        for key in np.unique(keys):
            h = self.histogram(str(names[key // nsize]), int(key % nsize))
            if h is None:
                continue
            m = keys == key
            out[m] = h.classify(x[m])
        return out

    def to_dict(self) -> dict[str, Any]:
        """Cut points per op (all sizes): what 'slow' means, in microseconds."""
        return {
            op: {
                "calls": h.total,
                "cuts_us": {
                    f"p{round(q * 100)}": round(c / 1e3, 3)
                    for q, c in zip(CUTS, h.cuts, strict=True)
                },
            }
            for (op, b), h in sorted(self.hist.items(), key=lambda kv: kv[0][0])
            if b is None
        }


def learn(
    store: Store,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    exclude_job: str | None = None,
) -> SpeedModel:
    """Learn the histograms from the client records in [since, until), minus one job."""
    where = ["count > 0", "dur_ns IS NOT NULL", "dur_ns >= 0"]
    params: list[Any] = []
    if since is not None:
        where.append("t_start >= ?")
        params.append(since)
    if until is not None:
        where.append("t_start < ?")
        params.append(until)
    if exclude_job is not None:
        where.append("job_id <> ?")
        params.append(exclude_job)
    t = store.query(
        f"""
        SELECT op, {_size_bin_sql()} AS sb, {_bin_sql()} AS bin,
          sum(count)::BIGINT AS calls, count(*)::BIGINT AS records
        FROM client_io WHERE {" AND ".join(where)}
        GROUP BY ALL
        """,
        params,
    )
    return _model(t)


def _model(t: pa.Table) -> SpeedModel:
    ops = t.column("op").to_pylist()
    sb = t.column("sb").to_numpy()
    bins = t.column("bin").to_numpy()
    calls = t.column("calls").to_numpy().astype(float)
    recs = t.column("records").to_numpy()
    acc: dict[tuple[str, int | None], tuple[np.ndarray, list[int]]] = {}
    for i, op in enumerate(ops):
        keys: list[tuple[str, int | None]] = [(op, None)]
        if op in DATA_OPS:
            keys.append((op, int(sb[i])))
        for key in keys:
            h, n = acc.setdefault(key, (np.zeros(NBINS), [0]))
            h[int(bins[i])] += calls[i]
            n[0] += int(recs[i])
    return SpeedModel({k: Histogram(h, n[0]) for k, (h, n) in acc.items()})


def _shares(codes: np.ndarray, calls: np.ndarray) -> dict[str, float]:
    known = codes >= 0
    tot = calls[known].sum()
    counts = np.bincount(codes[known], weights=calls[known], minlength=len(CLASSES))
    return {c: (round(float(counts[i] / tot), 4) if tot else 0.0) for i, c in enumerate(CLASSES)}


def speed_profile(store: Store, job_id: str, model: SpeedModel | None = None) -> dict[str, Any]:
    """Each speed class's share of the job's calls, overall and per op.

    The model defaults to one learned from every other job's records. Keys: `job_id`,
    `calls` (classified), `unknown` (calls of ops the history has never seen), `classes`
    ({class: share of calls}), `very_slow_ratio` (very-slow share / the 5 % of history),
    `by_op` ({op: {"calls", "classes"}}).
    """
    model = model or learn(store, exclude_job=job_id)
    t = store.query(
        "SELECT op, size, count, dur_ns FROM client_io "
        "WHERE job_id = ? AND count > 0 AND dur_ns IS NOT NULL AND dur_ns >= 0",
        [job_id],
    )
    ops = t.column("op").to_pylist()
    calls = t.column("count").to_numpy().astype(float)
    per_call = t.column("dur_ns").to_numpy().astype(float) / np.maximum(calls, 1)
    codes = model.classify(ops, t.column("size").to_numpy(), per_call)
    by_op = {}
    ops_a = np.asarray(ops, dtype=object)
    for op in sorted(set(ops)):
        m = ops_a == op
        by_op[op] = {
            "calls": int(calls[m & (codes >= 0)].sum()),
            "classes": _shares(codes[m], calls[m]),
        }
    overall = _shares(codes, calls)
    return {
        "job_id": job_id,
        "calls": int(calls[codes >= 0].sum()),
        "unknown": int(calls[codes < 0].sum()),
        "classes": overall,
        "very_slow_ratio": round(overall["very slow"] / (1 - CUTS[-1]), 2),
        "by_op": by_op,
    }


# -- feeding the component analysis -------------------------------------------------------


def _component_records(
    store: Store, component_kind: str, component_id: str, start: datetime, end: datetime
) -> pa.Table:
    """Client records through one OST (files striped on it) or forwarder (its nodes)."""
    if component_kind == "ost":  # data only: opens, stats... go to the MDS
        path = (
            "JOIN files f USING (file_id) WHERE list_contains(f.osts, ?) "
            "AND c.op IN ('read', 'write')"
        )
    elif component_kind == "forwarder":
        path = "JOIN forwarding w ON w.compute_node = c.node WHERE w.forwarder = ?"
    else:
        raise ValueError(f"no client path through a {component_kind}")
    return store.query(
        f"""
        SELECT c.job_id, c.op, c.size, c.count, c.dur_ns, c.t_start < ? AS before
        FROM client_io c {path}
          AND c.t_end > ? AND c.t_start < ? AND c.count > 0
          AND c.dur_ns IS NOT NULL AND c.dur_ns >= 0
        """,
        [start, component_id, start - HISTORY, end],
    )


#: How far before an episode the component's own baseline reaches.
HISTORY = timedelta(hours=24)


def _share(calls: np.ndarray, mask: np.ndarray, of: np.ndarray, minimum: float) -> float | None:
    n = calls[of].sum()
    return float(calls[mask & of].sum() / n) if n >= minimum and n > 0 else None


def client_speed(
    store: Store,
    model: SpeedModel,
    component_kind: str,
    component_id: str,
    start: datetime,
    end: datetime,
) -> dict[str, Any] | None:
    """How slow the client calls through a component were in [start, end), vs before.

    Two shares of the calls: `slow_share` (slower than 75 % of history: slow or very slow)
    and `very_slow_share` (slower than 95 %), each with the component's own share in the
    24 h before. None when too few classified calls went through it in the window.
    `seen_by_clients` is true when either share is far above its baseline (the larger of
    the component's share before and the share that defines the class, 25 % / 5 %):
    `FAR_ABOVE_SLOW` (2x) or `FAR_ABOVE` (3x) times. Sources with coarse durations (the
    simulator rounds a slow call to at most one second) show slowness in `slow_share`
    rather than in the extreme class.
    """
    t = _component_records(store, component_kind, component_id, start, end)
    if t.num_rows == 0:
        return None
    calls = t.column("count").to_numpy().astype(float)
    per_call = t.column("dur_ns").to_numpy().astype(float) / np.maximum(calls, 1)
    codes = model.classify(t.column("op").to_pylist(), t.column("size").to_numpy(), per_call)
    before = np.asarray(t.column("before").to_numpy(zero_copy_only=False), bool)
    known = codes >= 0
    now, then = known & ~before, known & before
    n_now = calls[now].sum()
    if n_now < MIN_CALLS:
        return None
    slow, very = codes >= SLOW, codes == VERY_SLOW
    s_now, s_then = _share(calls, slow, now, 1), _share(calls, slow, then, MIN_CALLS)
    v_now, v_then = _share(calls, very, now, 1), _share(calls, very, then, MIN_CALLS)
    assert s_now is not None and v_now is not None
    s_base = max(s_then or 0.0, 1 - CUTS[2])
    v_base = max(v_then or 0.0, 1 - CUTS[3])
    jobs = t.column("job_id").to_numpy(zero_copy_only=False)
    per_job = []
    for j in np.unique(jobs[now]):
        m = now & (jobs == j)
        per_job.append(
            {
                "job_id": str(j),
                "calls": int(calls[m].sum()),
                "slow_share": round(_share(calls, slow, m, 1) or 0.0, 3),
                "very_slow_share": round(_share(calls, very, m, 1) or 0.0, 3),
            }
        )
    per_job.sort(key=lambda d: (-d["slow_share"] * d["calls"], d["job_id"]))

    def rnd(x: float | None) -> float | None:
        return None if x is None else round(x, 3)

    return {
        "calls": int(n_now),
        "slow_share": rnd(s_now),
        "slow_share_before": rnd(s_then),
        "very_slow_share": rnd(v_now),
        "very_slow_share_before": rnd(v_then),
        "slow_ratio": round(s_now / s_base, 2),
        "very_slow_ratio": round(v_now / v_base, 2),
        "seen_by_clients": bool(s_now >= FAR_ABOVE_SLOW * s_base or v_now >= FAR_ABOVE * v_base),
        "jobs": per_job[:5],
    }


def client_speed_evidence(
    ctx: Context, component_kind: str, component_id: str, start: datetime, end: datetime
) -> dict[str, Any] | None:
    """`client_speed` for a detector's episode, with the model learned once per run over
    the context's loaded range (the look-back plus the window)."""
    if component_kind not in ("ost", "forwarder"):
        return None
    model = ctx.memo(
        "speed_model", lambda: learn(ctx.store, since=ctx.load_start, until=ctx.load_end)
    )
    if not model.hist:
        return None
    return client_speed(ctx.store, model, component_kind, component_id, start, end)


__all__ = [
    "CLASSES",
    "SpeedModel",
    "client_speed",
    "client_speed_evidence",
    "learn",
    "speed_profile",
]
