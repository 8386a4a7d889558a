"""Fail-slow servers as a sustained shift: the engine behind `slow_ost` and `slow_forwarder`.

Beacon (4.2, Appendix B) looks for a forwarder or OST that serves "at a much slower pace
than its peers" under homogeneous load. A component that is twice as slow as usual for
hours holds back every job that uses it, yet per minute it hides in the noise: a fixed
per-minute ratio either misses it or fires on every noisy minute. So the question asked
here is the one a change-point test answers: has this component's latency, relative to
its busy peers in the same minute (or to its own past when too few are busy), shifted up
and stayed there? The statistics are in `shift.py` (CUSUM on the standardised log-ratio,
threshold from a false-alarm rate); this module feeds it the store's per-minute series and
turns its alarms into episodes with evidence.

Input, per component and minute: a mean latency per request and the requests behind it
(`Latency`). By default that is the request-weighted `service_us` of the kind's samples;
`slow_ost` passes OST latencies with their 2.10 fallback. Components whose latencies come
from different fields are never compared with each other. A component that had demand but
no latency at all is reported as a gap (`ctx.gap`), never judged from other fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.analyze.components.base import (
    Context,
    Episode,
    Grid,
    duration_class,
    iso,
    nanmedian,
    r,
    verdict,
)
from iolens.analyze.components.shift import (
    HISTORY,
    MODE_NAMES,
    PEERS,
    Segment,
    Shift,
    ShiftParams,
    segments,
    standardise,
)
from iolens.analyze.speed_classes import client_speed_evidence


@dataclass(frozen=True)
class SlowThresholds:
    """The test's settings (the statistical ones default to `ShiftParams`'s); what each is
    and why it is set so: docs/diagnosis.md, slow_ost."""

    min_requests: int = 10  # requests in a minute for its mean latency to count
    min_peers: int = ShiftParams.min_peers
    false_alarm_minutes: float = ShiftParams.false_alarm_minutes
    k: float = ShiftParams.k
    clip: float = ShiftParams.clip
    min_sigma: float = ShiftParams.min_sigma
    min_noise_minutes: int = ShiftParams.min_noise_minutes
    max_idle: int = ShiftParams.max_idle
    min_slowdown: float = ShiftParams.min_slowdown
    # An episode needs this many busy minutes: a slowdown seen in fewer is as likely a hot
    # spot (a burst of load on one target: jobs' processes starting together, N-1 lock
    # storms) as a fault; on the simulator's 2x/20-min sweep every false episode held
    # 7-9 busy minutes. The faults worth an operator's time last longer (issue 17: >= 20
    # min); a 5-min fault is missed by design
    min_busy_minutes: int = 10
    # ... and, against peers, a slowdown of at least this much over the episode: servers
    # busy at the same time differ by their share of the load, not only by health. The
    # real LMT series (docs/simulator.md, "Noise") put the spread of one OST against its
    # peers at 0.085 (log) over a minute; a sustained gap under 4 of those (1.4x) is load
    # imbalance as often as a failing disk, and not worth an operator's night
    min_episode_slowdown: float = 1.4
    warning_factor: float = 1.5  # a shift of at least this much is `warning`, less `info`
    critical_factor: float = 4.0  # ... and of at least this much `critical`

    def shift(self) -> ShiftParams:
        return ShiftParams(
            min_peers=self.min_peers,
            false_alarm_minutes=self.false_alarm_minutes,
            k=self.k,
            clip=self.clip,
            min_sigma=self.min_sigma,
            min_noise_minutes=self.min_noise_minutes,
            max_idle=self.max_idle,
            min_slowdown=self.min_slowdown,
        )


@dataclass
class Latency:
    """Per-minute mean latency of every component of a grid, and the real field behind it."""

    value: np.ndarray  # [component, minute] microseconds per request; NaN when unknown
    requests: np.ndarray  # [component, minute] the requests (or I/Os) behind the mean
    field: list[str]  # per component: where its latency comes from; "" when nowhere


def service_latency(g: Grid, what: str = "service_us") -> Latency:
    """The request-weighted `service_us` of the kind's samples (the default latency)."""
    has = np.isfinite(g.svc).any(axis=1)
    return Latency(g.svc, g.requests, [what if h else "" for h in has])


@dataclass(frozen=True)
class Missing:
    """The gap recorded for components with demand but no latency: what and how to get it."""

    what: str
    remedy: str


def slow_episodes(
    ctx: Context,
    component_kind: str,
    kind: str,
    detector: str,
    th: SlowThresholds,
    *,
    latency: Latency | None = None,
    parent_kind: str | None = None,
    missing: Missing | None = None,
    report_blind: bool = True,
) -> list[Episode]:
    """Episodes of components of `component_kind` whose latency shifted up and stayed there.

    `latency` defaults to `service_latency`; `parent_kind` names the kind of the
    components' topology parent whose queue is evidence (`oss` for OSTs); `missing` words
    the gap for components with demand but no latency (`report_blind=False`: the caller
    says it, in its own words)."""
    g = ctx.grid(component_kind)
    if g.minutes == 0 or not g.ids:
        return []
    lat = latency or service_latency(g)
    data_ops = g.read_ops + g.write_ops
    with np.errstate(divide="ignore", invalid="ignore"):
        size = np.where(data_ops > 0, g.bytes / data_ops, np.nan)
        writes = np.where(data_ops > 0, g.write_ops / data_ops, np.nan)
    demand = (g.requests >= th.min_requests).any(axis=1)
    blind = [c for i, c in enumerate(g.ids) if demand[i] and not lat.field[i]]
    if blind and report_blind:
        gap = missing or Missing(
            f"latency: no `service_us` in the {component_kind} samples",
            "collect a source that reports the time per request (docs/sources.md)",
        )
        ctx.gap(detector, component_kind, blind, gap.what, gap.remedy)

    p = th.shift()
    out: list[Episode] = []
    for source in sorted({f for f in lat.field if f}):
        rows = np.array([i for i, f in enumerate(lat.field) if f == source])
        busy = lat.requests[rows] >= th.min_requests
        with np.errstate(divide="ignore", invalid="ignore"):
            load = np.where(g.seconds[rows] > 0, data_ops[rows] / g.seconds[rows], np.nan)
        sh = standardise(lat.value[rows], busy, size[rows], writes[rows], p, load)
        for mode, n in sh.unassessed.items():
            ctx.gap(
                detector,
                component_kind,
                [g.ids[ci] for j, ci in enumerate(rows) if (sh.mode[j] == mode).any()],
                f"noise model ({MODE_NAMES[mode]} reference): {n} busy minutes of {source}, "
                f"need {th.min_noise_minutes}",
                "let more history accumulate (the detectors look back 96 h)",
            )
        found = segments(sh.u, p.k, p.h, p.max_idle)
        out += _episodes(
            ctx, g, lat, rows, sh, found, source, kind, component_kind, detector, th, parent_kind
        )
    return out


def _episodes(
    ctx: Context,
    g: Grid,
    lat: Latency,
    rows: np.ndarray,
    sh: Shift,
    found: list[list[Segment]],
    source: str,
    kind: str,
    component_kind: str,
    detector: str,
    th: SlowThresholds,
    parent_kind: str | None,
) -> list[Episode]:
    """Episodes with their evidence from the CUSUM segments of one group."""
    p = th.shift()
    h = p.h
    shares = ctx.memo(f"slow:{component_kind}", lambda: _job_shares(ctx, component_kind))
    peaks = ctx.components(component_kind)
    out = []
    for r_i, ci in enumerate(rows):
        comp = g.ids[ci]
        busy = np.isfinite(sh.u[r_i])  # busy minutes the test assessed
        abnormal = np.zeros_like(busy)
        for seg in found[r_i]:
            abnormal[seg.start : seg.end + 1] = True
        abnormal &= busy
        for seg in found[r_i]:
            start, end = g.time(seg.start), g.time(seg.end + 1)
            if end <= ctx.start or start >= ctx.end:
                continue
            sl = slice(seg.start, seg.end + 1)
            ab = busy[sl]
            if int(ab.sum()) < th.min_busy_minutes:
                continue
            ratio = sh.log_ratio[r_i, sl][ab]
            slowdown = float(np.exp(np.median(ratio)))
            svc = lat.value[ci, sl][ab]
            modes = sh.mode[r_i, sl][ab]
            by_peers = bool((modes == PEERS).mean() >= 0.5)
            if by_peers and slowdown < th.min_episode_slowdown:
                continue  # load imbalance between peers as often as a failing server
            noise = sh.noise[PEERS if by_peers else HISTORY]
            secs = g.seconds[ci, sl].sum()
            bw = float(g.bytes[ci, sl].sum() / secs) if secs else 0.0
            peer_bw = _peer_bandwidth(g, rows, sh.busy, r_i, sl)
            evidence: dict[str, Any] = {
                "summary": (
                    f"{comp} served requests {slowdown:.1f}x slower than "
                    f"{'usual against its busy peers' if by_peers else 'its own usual'}"
                    f" for {int(ab.sum())} busy minutes"
                ),
                "method": (
                    "one-sided CUSUM on the log-ratio of latency to the median of busy peers "
                    "(else the component's own latency) against its usual level, "
                    "pre-whitened and standardised by a robust noise scale; threshold from "
                    "the false-alarm rate"
                ),
                "latency_source": source,
                "slowdown": r(slowdown, 2),
                "service_us": r(float(np.median(svc)), 1),
                "baseline_service_us": r(float(np.median(svc / np.exp(ratio))), 1),
                "baseline": "peers" if by_peers else "history",
                "peers": int(np.median(sh.peers[r_i, sl][ab])) if by_peers else 0,
                "detected": iso(g.time(seg.alarm + 1)),
                "detect_minutes": seg.alarm + 1 - seg.start,
                "cusum_peak": r(seg.peak, 1),
                "test": {
                    "k": p.k,
                    "h": r(h, 2),
                    "false_alarm_minutes": p.false_alarm_minutes,
                    "noise_sigma": r(noise.sigma, 4),
                    "noise_ar1": r(noise.ar1, 3),
                    "noise_stretch": r(noise.long_run, 3),
                    "size_elasticity": r(sh.size_elasticity, 3),
                    "write_factor": r(sh.write_factor, 3),
                    "load_elasticity": r(sh.load_elasticity, 3),
                },
                "bandwidth": r(bw, 0),
                "peer_bandwidth": r(peer_bw, 0),
                "peak_bw": (peaks.get(comp) or {}).get("peak_bw"),
                "busy_minutes": int(ab.sum()),
                "slow_requests": int(lat.requests[ci, sl][ab].sum()),
                "duration_class": duration_class(start, end),
                "jobs": _jobs(shares, comp, seg.start, seg.end),
                # a component's own queue where its source has one (a forwarder daemon);
                # an OST's queue is its server's, below
                **(_queue(g, ci, sl) if parent_kind is None else {}),
                **verdict(abnormal, busy, seg.end),
            }
            parent = _parent_queue(ctx, peaks.get(comp), parent_kind, start, end)
            if parent:
                evidence["parent"] = parent
            client = client_speed_evidence(ctx, component_kind, comp, start, end)
            if client is not None:
                evidence["client_speed"] = client
            out.append(
                Episode(
                    kind=kind,
                    component_kind=component_kind,
                    component_id=comp,
                    start=start,
                    end=None if seg.ongoing and ctx.open_ended else end,
                    severity=_severity(slowdown, th),
                    evidence=evidence,
                    detector=detector,
                )
            )
    return out


def _severity(slowdown: float, th: SlowThresholds) -> str:
    if slowdown >= th.critical_factor:
        return "critical"
    return "warning" if slowdown >= th.warning_factor else "info"


def _queue(g: Grid, ci: int, sl: slice) -> dict[str, Any]:
    """The component's own queue gauges over the episode, where its source reports them."""
    out = {}
    for name, series in (
        ("wait_us", g.wait),
        ("queue_len", g.queue),
        ("active_threads", g.threads),
    ):
        v = series[ci, sl]
        if np.isfinite(v).any():
            out[name] = r(float(nanmedian(v)), 2)
    return out


def _parent_queue(
    ctx: Context, topo: dict[str, Any] | None, parent_kind: str | None, start: Any, end: Any
) -> dict[str, Any] | None:
    """The parent server's service queue over the episode (the OSS `ost_io` service of an
    OST): per host, not per target, so it is evidence, never the test. Time-weighted:
    service rows carry no request counts to weight by."""
    if not parent_kind or not topo or not topo.get("parent"):
        return None
    rows = ctx.store.query(
        """
        SELECT sum(wait_us * interval_s) / nullif(sum(interval_s) FILTER (wait_us IS NOT NULL), 0)
            AS wait_us,
          sum(queue_len * interval_s)
            / nullif(sum(interval_s) FILTER (queue_len IS NOT NULL), 0) AS queue_len,
          sum(active_threads * interval_s)
            / nullif(sum(interval_s) FILTER (active_threads IS NOT NULL), 0) AS active_threads
        FROM server_samples
        WHERE kind = ? AND component_id = ? AND job_id IS NULL AND ts > ? AND ts <= ?
        """,
        [parent_kind, topo["parent"], start, end],
    ).to_pylist()
    found = {k: r(v, 2) for k, v in (rows[0] if rows else {}).items() if v is not None}
    return {"kind": parent_kind, "id": topo["parent"], **found} if found else None


def _peer_bandwidth(
    g: Grid, rows: np.ndarray, busy: np.ndarray, r_i: int, sl: slice
) -> float | None:
    """Median bandwidth of the other busy components of the group over the same minutes."""
    others = [j for j in range(len(rows)) if j != r_i and busy[j, sl].any()]
    if not others:
        return None
    idx = rows[others]
    secs = g.seconds[idx, sl].sum(axis=1)
    ok = secs > 0
    if not ok.any():
        return None
    return float(np.median(g.bytes[idx, sl].sum(axis=1)[ok] / secs[ok]))


def _job_shares(ctx: Context, component_kind: str) -> pa.Table:
    """Per job, component and minute: bytes, and the job's own latency where its rows have
    one (Lustre 2.12+ job_stats `read`/`write` [usecs])."""
    return ctx.job_shares(
        component_kind,
        "sum(coalesce(read_bytes, 0) + coalesce(write_bytes, 0))::DOUBLE AS bytes, "
        "sum(service_us * (coalesce(read_ops, 0) + coalesce(write_ops, 0)))::DOUBLE AS svc_w, "
        "sum(coalesce(read_ops, 0) + coalesce(write_ops, 0)) "
        "FILTER (WHERE service_us IS NOT NULL)::DOUBLE AS svc_n",
    )


def _jobs(
    shares: pa.Table, component: str, c0: int, c1: int, most: int = 5
) -> list[dict[str, Any]]:
    """The jobs that moved the most bytes on `component` in columns [c0, c1]: bytes, share
    of the component's job bytes, and their own mean latency there when known."""
    if shares.num_rows == 0:
        return []
    comp = shares.column("component_id").to_numpy(zero_copy_only=False)
    col = shares.column("col").to_numpy()
    mask = (comp == component) & (col >= c0) & (col <= c1)
    if not mask.any():
        return []
    jobs = shares.column("job_id").to_numpy(zero_copy_only=False)[mask]

    def column(name: str) -> np.ndarray:
        values = shares.column(name).to_numpy(zero_copy_only=False)[mask]
        return np.nan_to_num(np.asarray(values, float))

    uniq, inv = np.unique(jobs, return_inverse=True)
    total = np.bincount(inv, weights=column("bytes"))
    svc_w = np.bincount(inv, weights=column("svc_w"))
    svc_n = np.bincount(inv, weights=column("svc_n"))
    order = np.argsort(-total, kind="stable")[:most]
    whole = total.sum() or 1.0
    out = []
    for i in order:
        if total[i] <= 0:
            continue
        row: dict[str, Any] = {
            "job_id": str(uniq[i]),
            "bytes": int(total[i]),
            "share": round(float(total[i] / whole), 3),
        }
        if svc_n[i] > 0:
            row["service_us"] = round(float(svc_w[i] / svc_n[i]), 1)
        out.append(row)
    return out


__all__ = [
    "Latency",
    "Missing",
    "SlowThresholds",
    "service_latency",
    "slow_episodes",
]
