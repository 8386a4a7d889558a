"""Fail-slow servers by peer comparison: the engine behind `slow_ost` and `slow_forwarder`.

Beacon (4.2, Appendix B) spots a forwarder or OST that serves "at a much slower pace than
its peers" under homogeneous load. Per minute and component we estimate the mean time a
request spends in service (the request-weighted `service_us`, or by Little's law busy
threads / request rate when a source has no service time) and compare it with the median
of the peers that had demand in the same minute (robust z-score with the median absolute
deviation). Comparing at the same time cancels what all servers share (a busy period,
request mix); with too few peers busy (two forwarders, one MDS) the baseline is the kind's
healthy history instead: a low percentile of its per-minute service times over the
look-back, which a fault covering less than most of the history cannot move.

Only minutes with demand count: a component that serves nothing is not slow, it is idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from iolens.analyze.components.base import (
    Context,
    Episode,
    Grid,
    duration_class,
    nanmedian,
    r,
    runs,
    top_jobs,
    verdict,
)
from iolens.analyze.speed_classes import client_speed_evidence


@dataclass(frozen=True)
class SlowThresholds:
    """When a server counts as slow; the defaults are what the dev simulations support."""

    factor: float = 3.0  # per-request service time at least this many times the baseline
    z_min: float = 3.5  # and this far above the peer median in MADs (when peers vary)
    min_requests: int = 10  # requests in a minute for it to show demand
    min_peers: int = 4  # busy components in the minute for a peer baseline
    history_quantile: float = 10.0  # percentile of the kind's history used without peers
    max_gap: int = 2  # normal minutes tolerated inside one episode
    max_idle: int = 30  # minutes without demand tolerated inside one episode (no evidence)
    min_minutes: int = 2  # abnormal minutes for an episode ...
    min_requests_alone: int = 100  # ... or one minute with this many slow requests
    critical_factor: float = 5.0  # slowdown at which the episode is critical


@dataclass
class Slowness:
    """Per-minute slowness of every component of one kind: arrays [component, minute]."""

    grid: Grid
    service: np.ndarray  # estimated per-request service time, us
    valid: np.ndarray  # minute with demand
    baseline: np.ndarray  # [minute]: expected service time
    from_peers: np.ndarray  # [minute]: baseline is the peer median (else history)
    ratio: np.ndarray
    abnormal: np.ndarray


def slowness(ctx: Context, component_kind: str, th: SlowThresholds) -> Slowness:
    g = ctx.grid(component_kind)
    reqs = g.requests
    with np.errstate(divide="ignore", invalid="ignore"):
        little = g.threads * g.seconds / reqs * 1e6  # busy thread-us per request
    service = np.where(np.isfinite(g.svc), g.svc, little)
    valid = (reqs >= th.min_requests) & np.isfinite(service) & (service > 0)
    values = np.where(valid, service, np.nan)
    n = valid.sum(axis=0)
    med = nanmedian(values, axis=0)
    mad = nanmedian(np.abs(values - med), axis=0)
    hist = np.nanpercentile(values, th.history_quantile) if valid.any() else np.nan
    from_peers = n >= th.min_peers
    baseline = np.where(from_peers, med, hist)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = values / baseline
        z = np.where(mad > 0, (values - med) / (1.4826 * mad), np.inf)
    z = np.where(from_peers, z, np.inf)
    abnormal = valid & (ratio >= th.factor) & (z >= th.z_min)
    return Slowness(g, service, valid, baseline, from_peers, ratio, abnormal)


def slow_episodes(
    ctx: Context,
    component_kind: str,
    kind: str,
    detector: str,
    th: SlowThresholds,
) -> list[Episode]:
    """Episodes of components of `component_kind` slower than their peers."""
    s = slowness(ctx, component_kind, th)
    g = s.grid
    if g.minutes == 0:
        return []
    shares = ctx.memo(
        f"bytes:{component_kind}",
        lambda: ctx.job_shares(
            component_kind,
            "sum(coalesce(read_bytes, 0) + coalesce(write_bytes, 0))::DOUBLE AS bytes",
        ),
    )
    peaks = ctx.components(component_kind)
    last_data = _last_col(g)
    out = []
    for ci, comp in enumerate(g.ids):
        for a, b in runs(s.abnormal[ci], s.valid[ci], th.max_gap, 1, th.max_idle):
            start, end = g.time(a), g.time(b + 1)
            sl = slice(a, b + 1)
            ab = s.abnormal[ci, sl]
            slow_requests = float(g.requests[ci, sl][ab].sum())
            if ab.sum() < th.min_minutes and slow_requests < th.min_requests_alone:
                continue  # too little evidence: one lightly used minute
            if end <= ctx.start or start >= ctx.end:
                continue
            slowdown = float(np.median(s.ratio[ci, sl][ab]))
            secs = g.seconds[ci, sl].sum()
            peak_bw = (peaks.get(comp) or {}).get("peak_bw")
            bw = float(g.bytes[ci, sl].sum() / secs) if secs else 0.0
            peer_bw = _peer_bandwidth(g, s.valid, ci, sl)
            by_peers = bool(s.from_peers[sl][ab].mean() >= 0.5)
            ongoing = b >= last_data and ctx.open_ended
            evidence: dict[str, Any] = {
                "summary": (
                    f"{comp} served requests {slowdown:.1f}x slower than "
                    f"{'its busy peers' if by_peers else 'usual for its kind'}"
                    f" in {int(ab.sum())} busy minutes"
                ),
                "method": "per-request service time vs peer median (median/MAD) or history",
                "slowdown": r(slowdown, 2),
                "service_us": r(float(np.median(s.service[ci, sl][ab])), 1),
                "baseline_service_us": r(float(nanmedian(s.baseline[sl][ab])), 1),
                "baseline": "peers" if by_peers else "history",
                "peers": int(np.median(s.valid[:, sl].sum(axis=0)[ab])),
                "wait_us": r(float(nanmedian(g.wait[ci, sl][ab])), 1),
                "queue_len": r(float(nanmedian(g.queue[ci, sl][ab])), 2),
                "active_threads": r(float(nanmedian(g.threads[ci, sl][ab])), 2),
                "bandwidth": r(bw, 0),
                "peer_bandwidth": r(peer_bw, 0),
                "peak_bw": peak_bw,
                "abnormal_minutes": int(ab.sum()),
                "demand_minutes": int(s.valid[ci, sl].sum()),
                "slow_requests": int(slow_requests),
                "duration_class": duration_class(start, end),
                "jobs": top_jobs(shares, comp, a, b, "bytes"),
                **verdict(s.abnormal[ci], s.valid[ci], b),
            }
            # corroboration from the clients' side (speed classes of the calls through it)
            client = client_speed_evidence(ctx, component_kind, comp, start, end)
            if client is not None:
                evidence["client_speed"] = client
            out.append(
                Episode(
                    kind=kind,
                    component_kind=component_kind,
                    component_id=comp,
                    start=start,
                    end=None if ongoing else end,
                    severity="critical" if slowdown >= th.critical_factor else "warning",
                    evidence=evidence,
                    detector=detector,
                )
            )
    return out


def _peer_bandwidth(g: Grid, valid: np.ndarray, ci: int, sl: slice) -> float | None:
    """Median bandwidth of the other components with demand over the same minutes."""
    others = [i for i in range(len(g.ids)) if i != ci]
    if not others:
        return None
    secs = g.seconds[others, sl].sum(axis=1)
    busy = valid[others, sl].any(axis=1) & (secs > 0)
    if not busy.any():
        return None
    return float(np.median(g.bytes[others, sl].sum(axis=1)[busy] / secs[busy]))


def _last_col(g: Grid) -> int:
    """Last minute column holding any sample of this kind."""
    has = (g.seconds > 0).any(axis=0)
    return int(np.flatnonzero(has)[-1]) if has.any() else -1
