"""What a Darshan finding's fix would save: seconds and core-hours, with a range.

The store's findings get this from `iolens.analyze.savings`; a Darshan log has what the
same model needs, so every Darshan finding that recommends a change gets it here, from one
set of arithmetic (not one per rule). The model is `iolens.analyze.savings`'s:

* a fix changes ONE cost of the job: per-call overhead (small requests), a bandwidth
  (striping, aggregators), a byte or op count (redundant or amplified bytes, zero-byte
  reads, metadata calls) or the wait for the slowest rank (imbalance);
* the time that cost takes now is read from the log's own timing counters, as the job
  felt it: per rank, the `*_F_{READ,WRITE,META}_TIME` of its own records, plus, for a
  record shared by all ranks, the slowest rank's time (`*_F_SLOWEST_RANK_TIME`) split
  over read/write/meta in the record's proportions; the slowest rank's total, capped at
  the run time. A saving never exceeds that time;
* where the fix reaches a ceiling (a bandwidth `factor` times faster, all calls at
  1 MiB, every rank at the mean), the estimate is the log-midpoint between the job's
  current rate and the ceiling, the range from nothing gained to the ceiling;
* core-hours are seconds x the log's process count (`nprocs`) / 3600: every process
  waits for the I/O of the slowest (Darshan does not record cores per node).

Findings that recommend nothing (a pointer, the file system's weather, "keep it") and
fixes no counter times get no gain and say why in `evidence["saving"]`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from iolens.analyze.savings import TARGET_REQUEST, Saving, saving_of
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding

PREFIX = {"POSIX": "POSIX", "MPI-IO": "MPIIO", "STDIO": "STDIO"}
#: Metadata calls a metadata fix removes at best (open once, cache stat): one in ten left.
META_CUT = 10.0
#: A misaligned request touches two blocks (stripes, pages) where an aligned one touches one.
MISALIGNED_COST = 2.0
#: Histogram bins below 1 MiB and their upper edges (bytes), for the small-request model.
SMALL_BINS = (("0_100", 100), ("100_1K", 2**10), ("1K_10K", 10 * 2**10),
              ("10K_100K", 100 * 2**10), ("100K_1M", 2**20))  # fmt: skip


@dataclass(frozen=True)
class LayerTimes:
    """One module's timing counters, per rank (rank's own records) and shared records."""

    module: str
    per_rank: pd.DataFrame  # index rank, columns READ/WRITE/META seconds
    shared: pd.DataFrame  # one row per shared record: READ/WRITE/META, SLOWEST
    nprocs: int
    run_time: float

    def wall(self, kinds: tuple[str, ...]) -> float:
        """Seconds the slowest rank spent on `kinds` (READ, WRITE, META), <= run time."""
        own = float(self.per_rank[list(kinds)].sum(axis=1).max()) if len(self.per_rank) else 0.0
        sh = 0.0
        if len(self.shared):
            total = self.shared[["READ", "WRITE", "META"]].sum(axis=1)
            part = self.shared[list(kinds)].sum(axis=1)
            share = (part / total.where(total > 0)).fillna(0.0)
            sh = float((self.shared["SLOWEST"] * share).sum())
        return min(own + sh, self.run_time) if self.run_time > 0 else own + sh

    def mean(self, kinds: tuple[str, ...]) -> float:
        """Seconds the mean rank spent on `kinds`: all ranks' time / nprocs."""
        t = float(self.per_rank[list(kinds)].to_numpy().sum())
        t += float(self.shared[list(kinds)].to_numpy().sum())
        return t / max(self.nprocs, 1)


def layer_times(job: DarshanJob, module: str) -> LayerTimes | None:
    """The module's timing counters, or None when the log has none (read once per job)."""
    return job.derived(("savings.layer_times", module), lambda: _layer_times(job, module))


def _layer_times(job: DarshanJob, module: str) -> LayerTimes | None:
    if not job.has(module):
        return None
    p = PREFIX[module]
    fc = job.fcounters(module)
    cols = {k: f"{p}_F_{k}_TIME" for k in ("READ", "WRITE", "META")}
    if fc is None or not len(fc) or not all(c in fc.columns for c in cols.values()):
        return None
    t = pd.DataFrame({k: fc[c].clip(lower=0).astype(float) for k, c in cols.items()})
    t["rank"] = fc["rank"].to_numpy()
    shared = t[t["rank"] < 0].copy()
    slow = f"{p}_F_SLOWEST_RANK_TIME"
    if slow in fc.columns:
        shared["SLOWEST"] = fc.loc[shared.index, slow].clip(lower=0).astype(float)
    else:  # no slowest rank recorded (STDIO): the mean rank's share, a lower bound
        shared["SLOWEST"] = shared[["READ", "WRITE", "META"]].sum(axis=1) / max(job.nprocs, 1)
    per_rank = t[t["rank"] >= 0].groupby("rank")[["READ", "WRITE", "META"]].sum()
    return LayerTimes(module, per_rank, shared, int(job.nprocs or 1), float(job.run_time or 0))


# ---- the models: each returns a Saving or a reason it cannot ---------------------------


def _ceiling(now_s: float, factor: float, model: str, inputs: dict[str, Any]) -> Saving | str:
    """`now_s` of a cost that the fix makes up to `factor` x faster: log-midpoint."""
    if now_s <= 0:
        return "the log times none of the cost this fix removes"
    if factor <= 1:
        return "the fix's ceiling is no faster than now"
    est, lo, hi = saving_of(now_s, (now_s / math.sqrt(factor), now_s, now_s / factor))
    return Saving(est, lo, hi, model, {"now_s": round(now_s, 3), "factor": factor, **inputs})


def _kinds(op: str) -> tuple[str, ...]:
    return {"read": ("READ",), "write": ("WRITE",), "data": ("READ", "WRITE"),
            "meta": ("META",), "all": ("READ", "WRITE", "META")}[op]  # fmt: skip


def _counter(job: DarshanJob, module: str, name: str) -> float:
    c = job.counters(module)
    return float(c[name].clip(lower=0).sum()) if c is not None and name in c.columns else 0.0


def requests(job: DarshanJob, f: Finding, t: LayerTimes, op: str) -> Saving | str:
    """Small requests merged into 1 MiB ones: the small calls' share of the direction's
    time (each call taken to cost the same: a bound) made faster by calls-now/calls-after."""
    p = PREFIX[t.module]
    verbs = ("READ", "WRITE") if op == "data" else (op.upper(),)
    g = f.gain or {}
    if g.get("current") and g.get("at_1MiB"):
        small, after = float(g["current"]), float(g["at_1MiB"])
    else:  # the histogram: bin counts, their bytes bounded by the bins' upper edges
        bins = [(_counter(job, t.module, f"{p}_SIZE_{v}_{b}"), edge)
                for v in verbs for b, edge in SMALL_BINS]  # fmt: skip
        small = sum(n for n, _ in bins)
        after = max(1.0, math.ceil(sum(n * edge for n, edge in bins) / TARGET_REQUEST))
    if t.module == "MPI-IO":
        kinds = ("INDEP", "COLL", "NB")
        ops = sum(_counter(job, t.module, f"MPIIO_{k}_{v}S") for k in kinds for v in verbs)
    else:
        ops = sum(_counter(job, t.module, f"{p}_{v}S") for v in verbs)
    if not small or not ops:
        return f"the log counts no small {op} requests"
    now_s = t.wall(_kinds(op)) * min(small / ops, 1.0)
    model = (f"{small:.0f} of {ops:.0f} {t.module} {op}s are < 1 MiB; their share of the "
             f"slowest rank's {op} time, in {after:.0f} requests of 1 MiB instead")  # fmt: skip
    return _ceiling(now_s, small / after, model, {"small_requests": small, "requests": ops})


def share(frac: float, cut: float, what: str) -> Callable[..., Saving | str]:
    """A fraction of the direction's time that the fix makes `cut` x cheaper."""

    def model(job: DarshanJob, f: Finding, t: LayerTimes, op: str) -> Saving | str:
        """A share of the direction's time (the rule's fraction) made cheaper."""
        fr = float((f.gain or {}).get("fraction") or frac)
        now_s = t.wall(_kinds(op)) * min(max(fr, 0.0), 1.0)
        text = f"{fr:.0%} of the slowest rank's {t.module} {op} time is {what}"
        return _ceiling(now_s, cut, text + f", up to {cut:g}x cheaper", {"fraction": fr})

    return model


def fewer_bytes(job: DarshanJob, f: Finding, t: LayerTimes, op: str) -> Saving | str:
    """Redundant or amplified bytes not moved: their share of the direction's time, at the
    job's own rate (up to), nothing when they came from cache (low)."""
    g = f.gain or {}
    p = PREFIX[t.module]
    moved = _counter(job, t.module, f"{p}_BYTES_{'READ' if op == 'read' else 'WRITTEN'}")
    extra = float(g.get("saved_bytes") or 0)
    if not extra and g.get("factor"):
        extra = moved * (1 - 1 / float(g["factor"]))
    if f.code == "X02":
        above = _counter(job, "MPI-IO", f"MPIIO_BYTES_{'READ' if op == 'read' else 'WRITTEN'}")
        extra = max(moved - above, 0.0) if above else 0.0
    if not moved or extra <= 0:
        return f"the log does not count the {op} bytes this fix removes"
    fr = min(extra / moved, 1.0)
    text = f"{extra / 2**20:.0f} MiB of {moved / 2**20:.0f} MiB {t.module} {op} bytes not moved"
    return _ceiling(t.wall(_kinds(op)), 1 / max(1 - fr, 1e-3), text, {"extra_bytes": extra})


def balance(job: DarshanJob, f: Finding, t: LayerTimes, op: str) -> Saving | str:
    """Every rank at the mean rank's time instead of the slowest's."""
    kinds = _kinds(op)
    slow, mean = t.wall(kinds), t.mean(kinds)
    if not (slow > mean > 0):
        return "the log shows no rank slower than the mean"
    what = "I/O" if op == "all" else op
    text = f"the slowest rank's {t.module} {what} time {slow:.3g} s against the mean rank's"
    return _ceiling(slow, slow / mean, text, {"mean_s": round(mean, 3)})


def faster_by_factor(job: DarshanJob, f: Finding, t: LayerTimes, op: str) -> Saving | str:
    """The rule's own bandwidth factor (stripes, aggregators) on the direction's time."""
    factor = float((f.gain or {}).get("factor") or 0)
    if factor <= 1:
        return "the rule states no bandwidth factor for this log"
    return _ceiling(t.wall(_kinds(op)), factor,
                    f"the slowest rank's {t.module} {op} time at up to {factor:g}x the bandwidth",
                    {})  # fmt: skip


def overlap(job: DarshanJob, f: Finding, t: LayerTimes, op: str) -> Saving | str:
    """Non-blocking I/O hides I/O behind the compute around it: at most the direction's
    time or the time not spent in I/O, whichever is less."""
    now_s = t.wall(_kinds(op))
    rest = max(t.run_time - t.wall(_kinds("all")), 0.0)
    hidden = min(now_s, rest)
    if hidden <= 0:
        return "no compute time to overlap the I/O with"
    est, lo, hi = saving_of(now_s, (now_s - hidden / 2, now_s, now_s - hidden))
    text = f"the slowest rank's {op} time hidden behind up to {rest:.3g} s of non-I/O time"
    return Saving(est, lo, hi, text, {"now_s": round(now_s, 3), "compute_s": round(rest, 3)})


def metadata(job: DarshanJob, f: Finding, t: LayerTimes, op: str) -> Saving | str:
    return _ceiling(t.wall(("META",)), META_CUT,
                    f"the slowest rank's {t.module} metadata time with up to {META_CUT:g}x "
                    "fewer metadata calls", {})  # fmt: skip


def stdio(job: DarshanJob, f: Finding, t: LayerTimes, op: str) -> Saving | str:
    """STDIO data moved at the rate the job's POSIX calls reached, when that is faster."""
    posix = layer_times(job, "POSIX")
    s_b = _counter(job, "STDIO", "STDIO_BYTES_READ") + _counter(job, "STDIO", "STDIO_BYTES_WRITTEN")
    p_b = _counter(job, "POSIX", "POSIX_BYTES_READ") + _counter(job, "POSIX", "POSIX_BYTES_WRITTEN")
    s_t, p_t = t.wall(_kinds("data")), posix.wall(_kinds("data")) if posix else 0.0
    if not (s_b and s_t and p_b and p_t):
        return "no POSIX rate in the log to compare the STDIO rate with"
    factor = (p_b / p_t) / (s_b / s_t)
    return _ceiling(s_t, factor, "the slowest rank's STDIO data time at the job's POSIX rate",
                    {"stdio_bw": s_b / s_t, "posix_bw": p_b / p_t})  # fmt: skip


Model = Callable[[DarshanJob, Finding, LayerTimes, str], "Saving | str"]
#: code -> (module timed, direction, model); a code absent here recommends no change.
MODELS: dict[str, tuple[str, str, Model]] = {
    "DP05": ("POSIX", "read", requests),
    "DP06": ("POSIX", "write", requests),
    "DP15": ("POSIX", "read", requests),
    "DP16": ("POSIX", "write", requests),
    "Z05": ("POSIX", "data", requests),
    "DM02": ("MPI-IO", "read", requests),
    "DM03": ("MPI-IO", "write", requests),
    "DP07": ("POSIX", "data", share(0.0, MISALIGNED_COST, "misaligned in memory")),
    "DP08": ("POSIX", "data", share(0.0, MISALIGNED_COST, "misaligned in the file")),
    "DP11": ("POSIX", "read", share(0.0, 4.0, "random reads")),
    "DP13": ("POSIX", "write", share(0.0, 4.0, "random writes")),
    "DP09": ("POSIX", "read", fewer_bytes),
    "DP10": ("POSIX", "write", fewer_bytes),
    "X01": ("POSIX", "read", share(0.0, 10.0, "zero-byte or re-read requests")),
    "X02": ("POSIX", "write", fewer_bytes),
    "DP17": ("POSIX", "meta", metadata),
    "DP18": ("POSIX", "data", balance),
    "DP19": ("POSIX", "all", balance),
    "DP21": ("POSIX", "write", balance),
    "DP22": ("POSIX", "read", balance),
    "DD01": ("POSIX", "data", balance),
    "DD02": ("POSIX", "data", balance),
    "Z04": ("POSIX", "data", balance),
    "X03": ("POSIX", "write", balance),
    "X04": ("MPI-IO", "data", balance),
    "DM06": ("MPI-IO", "read", overlap),
    "DM07": ("MPI-IO", "write", overlap),
    "Z01": ("POSIX", "data", faster_by_factor),
    "Z02": ("POSIX", "data", faster_by_factor),
    "Z06": ("POSIX", "data", faster_by_factor),
    "X05": ("MPI-IO", "write", faster_by_factor),
    "DS01": ("STDIO", "data", stdio),
}
#: Why codes without a model get no saving.
NO_CHANGE = "it recommends no change to the job (a pointer, the system's state, or 'keep it')"


def estimate(job: DarshanJob, f: Finding) -> Saving | str:
    """The saving of `f`'s fix on `job`, or why there is none."""
    if f.code not in MODELS:
        return NO_CHANGE
    module, op, model = MODELS[f.code]
    t = layer_times(job, module)
    if t is None and module == "MPI-IO":  # the MPI-IO fix of a POSIX-only job: POSIX time
        t = layer_times(job, "POSIX")
    if t is None:
        return f"the log has no {module} timing counters"
    s = model(job, f, t, op)
    if isinstance(s, str):
        return s
    return replace(s, inputs={**s.inputs, "module": t.module, "times": "/".join(_kinds(op))})


def attach(job: DarshanJob, findings: list[Finding]) -> list[Finding]:
    """Each finding's gain in seconds (keeping the rule's own factor under `factor`), in
    place; findings pointing to a root cause (no gain) are left as they are."""
    cores = max(int(job.nprocs or 1), 1)
    for f in findings:
        if "root_cause" in f.evidence:
            continue
        s = estimate(job, f)
        if isinstance(s, str):
            f.gain = None
            f.evidence = {**f.evidence, "saving": f"not estimated: {s}"}
            continue
        rule = {k: v for k, v in (f.gain or {}).items() if k in ("metric", "factor", "basis")}
        module, op, _m = MODELS[f.code]
        g = s.gain(cores)
        g["cores_basis"] = "nprocs (Darshan records no cores per node)"
        g["basis"] = (f"{_basis(module, op)}; model: {_model_name(f.code)}"
                      + (f"; rule: {rule['basis']}" if "basis" in rule else ""))  # fmt: skip
        if "factor" in rule:
            g["rule_factor"] = {"metric": rule.get("metric"), "factor": rule["factor"]}
        f.gain = g
    return findings


def _basis(module: str, op: str) -> str:
    p = PREFIX[module]
    kinds = "/".join(_kinds(op))
    return (f"{p}_F_{{{kinds}}}_TIME per rank, {p}_F_SLOWEST_RANK_TIME for shared records, "
            "run time, nprocs")  # fmt: skip


def _model_name(code: str) -> str:
    fn = MODELS[code][2]
    return (fn.__doc__ or fn.__name__).strip().split("\n")[0].rstrip(":")


def saved_seconds(f: Finding | dict[str, Any]) -> float:
    """The order key: a finding's (or its JSON's) estimated saving, -1 without one."""
    g = f.get("gain") if isinstance(f, dict) else f.gain
    return float(g["seconds"]) if g and g.get("seconds") is not None else -1.0


def ordered(findings: list[Finding]) -> list[Finding]:
    """Largest estimated saving first; findings without one after, in their order."""
    return sorted(findings, key=lambda f: -saved_seconds(f))
