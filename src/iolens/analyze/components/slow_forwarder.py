"""slow_forwarder: a forwarding node serving requests far slower than its peers or its history.

Beacon 4.2 (Figure 7): in a 6,000-process LAMMPS run spread over three forwarders, one
was a straggler "serving at a bandwidth much slower than its peak", stretching the
checkpoint 20x. The test is the forwarder's own per-request service time, which only a
forwarding daemon measures: `service_us` of kind `forwarder`, the mean of the `read` and
`write` `[usecs]` counters of `run/iofwd/<svc>/stats` (`docs/forwarder-format.md`), or,
from the same file, busy threads over request rate (`req_active`, Little's law). The
engine and thresholds are the peer comparison of `peers.py`, shared with `slow_ost`.
Queueing is evidence, not the test: a forwarder clogged by N-1 requests (Beacon Table 5)
makes requests wait but still serves each at normal speed.

A forwarder whose collectors report no service time cannot be judged and is said so
(`ctx.gap`): an LNet router (`/proc/sys/lnet/stats` counts bytes and messages only), or
a forwarding node seen only through its Lustre client counters (`llite` bytes and calls).
It is never judged from bandwidth or queue length, which move with demand.

Evidence names who was served in the episode from real data only (`forwarding.py`): the
daemon's per-client counters mapped to jobs through the scheduler's node lists, else the
tracer's records of the nodes behind the forwarder; plus the daemon's back-end service
time, which says whether the forwarder or the file system behind it was slow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from iolens.analyze.components import forwarding
from iolens.analyze.components.base import MINUTE_US, Context, Episode, nanmedian, r
from iolens.analyze.components.peers import (
    Latency,
    SlowThresholds,
    service_latency,
    slow_episodes,
)
from iolens.analyze.components.typical import typical_latency

#: What a site can do when a forwarder reports no service time, by what it does report.
LNET_GAP = (
    "per-request service time: LNet router stats (/proc/sys/lnet/stats) count bytes and "
    "messages only",
    "LNet keeps no per-message latency: compare the RPC round trips (lustre_client osc "
    "wait_us) of the clients behind each router by hand; a forwarding daemon can export "
    "its times (docs/forwarder-format.md)",
)
DAEMON_REMEDY = (
    "have its forwarding daemon write read/write [usecs] counters or its request queue "
    "(req_active) in run/iofwd/<service>/stats (docs/forwarder-format.md)"
)


@dataclass
class SlowForwarder:
    name: str = "slow_forwarder"
    kind: str = "slow_forwarder"
    thresholds: SlowThresholds = field(default_factory=SlowThresholds)

    def detect(self, ctx: Context) -> list[Episode]:
        self._record_gaps(ctx)
        found = slow_episodes(
            ctx,
            "forwarder",
            self.kind,
            self.name,
            self.thresholds,
            latency=forwarder_latency(ctx, self.thresholds.min_requests),
            report_blind=False,  # _record_gaps says what each blind forwarder lacks
        )
        for e in found:
            end = e.end or ctx.load_end
            # peers.py reads per-job forwarder rows, which no real forwarder writes
            e.evidence.update(forwarding.jobs_behind(ctx, e.component_id, e.start, end))
            e.evidence.update(_backend_service(ctx, e.component_id, e.start, end))
        return found

    def _record_gaps(self, ctx: Context) -> None:
        """Say which forwarders have no service time at all in the loaded range, and why."""
        g = ctx.grid("forwarder")
        timed = (np.isfinite(g.svc) | np.isfinite(g.threads)).any(axis=1)
        has = dict(zip(g.ids, timed, strict=True))
        blind = [f for f in forwarding.forwarders(ctx) if not has.get(f, False)]
        if not blind:
            return
        reported = _what_it_reports(ctx, blind)
        routers = [f for f in blind if reported.get(f, set()) & forwarding.LNET_METRICS]
        silent = [f for f in blind if not reported.get(f)]
        others = [f for f in blind if f not in routers and f not in silent]
        if routers:
            ctx.gap(self.name, "forwarder", routers, *LNET_GAP)
        by_what: dict[str, list[str]] = {}
        for f in others:
            by_what.setdefault(", ".join(sorted(reported[f])[:8]), []).append(f)
        for what, fwds in by_what.items():
            ctx.gap(
                self.name,
                "forwarder",
                fwds,
                f"per-request service time: its collectors report only {what}",
                DAEMON_REMEDY,
            )
        if silent:
            ctx.gap(
                self.name,
                "forwarder",
                silent,
                "any sample from these forwarders in the analysed period",
                "run `iolens agent` on them with the iofwd (or lnet_router) source; "
                + DAEMON_REMEDY,
            )


#: The per-client latency needs this many clients with requests in a minute to be used.
MIN_CLIENTS = 2


def forwarder_latency(ctx: Context, min_requests: int) -> Latency:
    """Per forwarder, its typical client's service time when the daemon writes per-client
    files, else the daemon's own mean (`service_us`)."""
    g = ctx.grid("forwarder")
    own = service_latency(g)
    typical = client_latency(ctx, min_requests)
    if typical is None:
        return own
    value, requests, fields = own.value.copy(), own.requests.copy(), list(own.field)
    for i, f in enumerate(typical.field):
        if f:
            value[i], requests[i], fields[i] = typical.value[i], typical.requests[i], f
    return Latency(value, requests, fields)


def client_latency(ctx: Context, min_requests: int) -> Latency | None:
    """Per forwarder and minute, the service time its typical client saw (`typical.py`),
    from the daemon's per-client `[usecs]`; None without per-client counters (the
    daemon's own mean is then used)."""
    rows = ctx.store.query(
        f"""
        WITH placed AS (SELECT app, unnest(nodes) AS node, "start", "end" FROM jobs)
        SELECT split_part(s.component_id, ':', 1) AS c,
          (epoch_us(s.ts) - 1) // {MINUTE_US} - {ctx.m_load} AS col,
          coalesce(any_value(p.app), '') AS app,
          sum(coalesce(s.read_ops, 0) + coalesce(s.write_ops, 0))::DOUBLE AS ops,
          sum(coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0))::DOUBLE AS nbytes,
          sum(coalesce(s.write_ops, 0))::DOUBLE AS writes,
          sum(s.service_us * (coalesce(s.read_ops, 0) + coalesce(s.write_ops, 0)))::DOUBLE
            AS busy
        FROM server_samples s
        LEFT JOIN placed p ON p.node = split_part(s.component_id, ':', 2)
          AND s.ts > p."start" AND s.ts <= coalesce(p."end", s.ts)
        WHERE s.kind = 'fwd_client' AND s.service_us IS NOT NULL AND s.ts > ? AND s.ts <= ?
        GROUP BY split_part(s.component_id, ':', 1), s.component_id, col
        HAVING sum(coalesce(s.read_ops, 0) + coalesce(s.write_ops, 0)) > 0
        """,
        ctx.bounds(),
    )
    return typical_latency(
        ctx.grid("forwarder"),
        rows,
        "fwd_client service_us (typical client)",
        min_requests,
        MIN_CLIENTS,
    )


def _what_it_reports(ctx: Context, fwds: list[str]) -> dict[str, set[str]]:
    """Metrics each forwarder's collectors reported (`metrics`), plus the traffic columns
    its samples carry (stores filled without `metrics` rows, e.g. a simulator's)."""
    known = forwarding.reported_metrics(ctx)
    g = ctx.grid("forwarder")
    index = {c: i for i, c in enumerate(g.ids)}
    columns = {"read_bytes": g.read_bytes, "write_bytes": g.write_bytes, "md_ops": g.md_ops}
    out = {}
    for f in fwds:
        have = set(known.get(f, ()))
        if f in index:
            i = index[f]
            have |= {name for name, a in columns.items() if a[i].any()}
            if np.isfinite(g.queue[i]).any():
                have.add("queue_len")
        out[f] = have
    return out


def _backend_service(ctx: Context, fwd: str, start: datetime, end: datetime) -> dict[str, Any]:
    """The daemon's back-end time per request in the episode and before it (`iofwd`
    `backend_read`/`backend_write`): up with the service time means the file system was
    slow, flat means the forwarder itself was."""
    rows = ctx.store.query(
        """
        SELECT ts > ? AS during, value FROM metrics
        WHERE kind = 'forwarder' AND component_id = ? AND metric = 'backend_service_us'
          AND ts > ? AND ts <= ?
        """,
        [start, fwd, ctx.load_start, end],
    ).to_pylist()
    during = [x["value"] for x in rows if x["during"]]
    before = [x["value"] for x in rows if not x["during"]]
    if not during:
        return {}
    return {
        "backend_service_us": r(float(np.median(during)), 1),
        "backend_service_us_before": r(float(nanmedian(np.array(before))), 1) if before else None,
    }
