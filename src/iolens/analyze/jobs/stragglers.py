"""A straggler server within one job (Beacon Fig. 7 / Appendix B): among the OSTs (or
forwarders) one large job spread its I/O over, the one serving it much slower than its
peers, and the I/O time the job lost to it.

The servers are compared on what they did *for this job*: its per-job rows in
`server_samples` (Lustre jobstats give per-job OST rows with the `[usecs]` time per RPC;
for servers with no per-job statistics the ingest attributes the job's traced calls to
them through the files' layouts, `source = 'trace'`). Per server: the job's request time
per MiB (Beacon clusters phases on duration and volume; per MiB is the two in one).
DBSCAN (scikit-learn) clusters the servers in log space, `EPS` apart at most (2x); the
largest cluster (a majority) is the peers, and a server outside it that took longer per
MiB is a straggler, unless other jobs loaded it meanwhile (over 2x the peers' median of
their bytes, and at least a quarter of this job's own there): that is interference,
which `interference.py` assigns to culprits, not a slow server.

What the job lost to a straggler is counted per collection interval (a slow server may
be slow for part of the run only): the job kept requests outstanding on every server, so
(Little's law) its time on a server is proportional to the request time the server spent
on it, the most loaded server taking the whole interval. The straggler's time beyond what
its bytes took at the peers' median time per byte is the loss, capped by the job's run
time. The simulator's ground truth (`truth["fault_losses"]`) checks it: the OST is found
exactly, the seconds within an order of magnitude (`docs/accuracy.md`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.analyze.jobreport import JobReport
from iolens.store.base import Store

#: Kinds of server a job spreads its data over, with per-job rows.
KINDS = ("ost", "forwarder")
#: Fewer servers than this have no peers to compare with.
MIN_SERVERS = 3
#: DBSCAN neighbourhood in log10 units: servers within 2x of each other are peers.
EPS = math.log10(2.0)
MIB = 2**20
#: Other jobs' bytes on a slow server, as a share of this job's, that make it contention.
OTHERS_SHARE = 0.25


def find(store: Store, reports: list[JobReport]) -> dict[str, list[dict[str, Any]]]:
    """Per job: its straggler servers, slowest loss first ({kind, component, lost_s,
    slowdown, bytes, peers, peer_us_per_mib, us_per_mib, intervals})."""
    spans = {r.job_id: r for r in reports if r.start is not None}
    if not spans:
        return {}
    store.register("_iolens_straggler_jobs", pa.table({"job_id": list(spans)}))
    try:
        rows = store.query(
            """
            SELECT s.job_id, s.kind, s.component_id AS comp, epoch(s.ts) AS t, s.interval_s AS dt,
              coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0) AS bytes,
              coalesce(s.read_ops, 0) + coalesce(s.write_ops, 0) AS ops, s.service_us
            FROM server_samples s JOIN _iolens_straggler_jobs USING (job_id)
            WHERE s.kind IN (SELECT unnest(?)) AND s.service_us > 0
              AND coalesce(s.read_ops, 0) + coalesce(s.write_ops, 0) > 0
              AND coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0) > 0
            ORDER BY s.job_id, s.kind, s.ts
            """,
            [list(KINDS)],
        ).to_pylist()
    finally:
        store.unregister("_iolens_straggler_jobs")
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by[(r["job_id"], r["kind"])].append(r)
    load = _load(store, rows) if rows else {}
    out: dict[str, list[dict[str, Any]]] = {}
    for (job, kind), rs in by.items():
        found = judge(kind, rs, load)
        cap = spans[job].runtime_s or 0.0
        for f in found:  # a straggler cannot cost more than the job's whole run
            if cap > 0 and f["lost_s"] > cap:
                f["lost_s"] = round(cap * (1 - 1 / max(f["slowdown"], 1.0)), 1)
        if found:
            out.setdefault(job, []).extend(found)
    for v in out.values():
        v.sort(key=lambda s: -s["lost_s"])
    return out


def _load(store: Store, rows: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
    """Bytes each server moved for every job (its per-job rows summed), per interval,
    over the analysed jobs' span."""
    lo = min(r["t"] - r["dt"] for r in rows)
    hi = max(r["t"] for r in rows)
    got = store.query(
        "SELECT component_id AS comp, epoch(ts) AS t, interval_s AS dt, "
        "coalesce(read_bytes, 0) + coalesce(write_bytes, 0) AS bytes FROM server_samples "
        "WHERE kind IN (SELECT unnest(?)) AND job_id IS NOT NULL "
        "AND epoch(ts) BETWEEN ? AND ?",
        [list(KINDS), lo, hi],
    ).to_pylist()
    load: dict[tuple[str, int], float] = defaultdict(float)
    for r in got:
        load[(r["comp"], _bin(r))] += r["bytes"]
    return load


def judge(
    kind: str, rows: list[dict[str, Any]], load: dict[tuple[str, int], float] | None = None
) -> list[dict[str, Any]]:
    """Stragglers among one kind of server from the job's rows (t, dt, comp, bytes, ops,
    service_us), with the seconds lost to each.

    `load` (bytes per server and interval, every job's) tells a slow server from a busy
    one: a server other jobs loaded (`_busier`) while it served this one was slow because
    of them (interference, `interference.py`), not a straggler (Beacon: slow "without
    answering to other applications")."""
    from sklearn.cluster import DBSCAN

    comps = sorted({r["comp"] for r in rows})
    if len(comps) < MIN_SERVERS:
        return []
    us = dict.fromkeys(comps, 0.0)
    nbytes = dict.fromkeys(comps, 0.0)
    for r in rows:
        us[r["comp"]] += r["service_us"] * r["ops"]
        nbytes[r["comp"]] += r["bytes"]
    per_mib = np.array([us[c] / (nbytes[c] / MIB) for c in comps])
    x = np.log10(per_mib)[:, None]
    labels = DBSCAN(eps=EPS, min_samples=2).fit(x).labels_
    clusters = [lb for lb in set(labels) if lb >= 0]
    if not clusters:
        return []
    peers_label = max(
        clusters, key=lambda lb: (int((labels == lb).sum()), -per_mib[labels == lb].mean())
    )
    peers = [c for c, lb in zip(comps, labels, strict=True) if lb == peers_label]
    if len(peers) < 2 or len(peers) * 2 <= len(comps):
        return []  # no clear majority to call normal
    peer_us = float(np.median([us[c] / (nbytes[c] / MIB) for c in peers]))
    slow = [
        c
        for c, lb, pm in zip(comps, labels, per_mib, strict=True)
        if lb != peers_label and pm > peer_us
    ]
    if load is not None:
        slow = [c for c in slow if not _busier(c, peers, rows, load)]
    if not slow:
        return []
    lost = _losses(rows, slow, set(peers))
    return [
        {
            "kind": kind,
            "component": c,
            "lost_s": round(lost[c][0], 1),
            "intervals": lost[c][1],
            "slowdown": round(us[c] / (nbytes[c] / MIB) / peer_us, 1),
            "us_per_mib": round(us[c] / (nbytes[c] / MIB), 1),
            "peer_us_per_mib": round(peer_us, 1),
            "bytes": int(nbytes[c]),
            "peers": len(peers),
            "servers": len(comps),
        }
        for c in slow
        if lost[c][0] > 0
    ]


def _busier(
    c: str, peers: list[str], rows: list[dict[str, Any]], load: dict[tuple[str, int], float]
) -> bool:
    """Did other jobs load `c` (while it served this one) more than 2x its peers' median
    and with at least a quarter of this job's own bytes there?"""
    bins = {_bin(r) for r in rows if r["comp"] == c}
    own = {x: 0.0 for x in [c, *peers]}
    for r in rows:
        if r["comp"] in own and _bin(r) in bins:
            own[r["comp"]] += r["bytes"]

    def others(x: str) -> float:
        return max(0.0, sum(load.get((x, b), 0.0) for b in bins) - own[x])

    ref = float(np.median([others(p) for p in peers]))
    mine = others(c)
    return mine > ref * 10**EPS and mine >= OTHERS_SHARE * own[c]


def _bin(r: dict[str, Any]) -> int:
    """The collection interval a row covers: servers of one round differ by a little."""
    return round(r["t"] / r["dt"])


def _losses(
    rows: list[dict[str, Any]], slow: list[str], peers: set[str]
) -> dict[str, tuple[float, int]]:
    """Per straggler: (seconds lost, intervals it cost time in)."""
    bins: dict[int, dict[str, tuple[float, float]]] = defaultdict(dict)
    width: dict[int, float] = {}
    for r in rows:
        b = _bin(r)
        us, nb = bins[b].get(r["comp"], (0.0, 0.0))
        bins[b][r["comp"]] = (us + r["service_us"] * r["ops"], nb + r["bytes"])
        width[b] = r["dt"]
    out = {c: [0.0, 0] for c in slow}
    for b, servers in bins.items():
        ref = [us / nb for c, (us, nb) in servers.items() if c in peers and nb > 0]
        if not ref:
            continue
        peer = float(np.median(ref))  # request us per byte at the peers, this interval
        top = max(us for us, _nb in servers.values())
        for c in slow:
            if c not in servers:
                continue
            us, nb = servers[c]
            # the job's time on c (the busiest server: the whole interval) beyond what
            # its bytes took at the peers' pace
            extra = width[b] * (us - nb * peer) / top
            if extra > 0:
                out[c][0] += extra
                out[c][1] += 1
    return {c: (v[0], int(v[1])) for c, v in out.items()}
