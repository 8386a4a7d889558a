"""A server's latency as its typical user saw it: what a slow server does to everyone.

A server gone slow serves every job (or client) slower; a job whose own requests are slow
(N-1 writes to one shared file wait for extent locks, Beacon 4.1 and Table 5; tiny or
random requests) moves the server's mean latency with the job mix, not with the server's
health. So each job's latency in a minute is first put against what such requests usually
take: the median over every server of the kind in the loaded range, per application of
the job, power-of-two request size and direction (an N-1 application's requests are always
slow: that is its nature, not the server's). The server's minute is then the
request-weighted median of those ratios over the jobs it served, times one constant (the
kind's median latency) so it reads in microseconds. The mix drops out; a slowdown every
user shares stays.

Per-job latency is real data: Lustre job_stats `read`/`write` `[usecs]` (2.12+) on OSTs, a
forwarding daemon's per-client `[usecs]` (docs/forwarder-format.md) on forwarders.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from iolens.analyze.components.base import Grid
from iolens.analyze.components.peers import Latency


def typical_latency(
    g: Grid, rows: pa.Table, source: str, min_requests: int, min_users: int = 1
) -> Latency | None:
    """Per component and minute of `g`, the typical user's latency.

    `rows` has one row per (component `c`, minute column `col` of the grid, user): `app`
    (what says which requests are alike), `ops`, `nbytes`, `writes` (write requests) and
    `busy` (ops x mean latency, us). None when there is nothing to go on."""
    if rows.num_rows == 0:
        return None
    comp = rows.column("c").to_numpy(zero_copy_only=False)
    col = rows.column("col").to_numpy().astype(np.int64)
    ops = rows.column("ops").to_numpy().astype(float)
    svc = rows.column("busy").to_numpy().astype(float) / ops
    size = np.round(np.log2(np.maximum(rows.column("nbytes").to_numpy() / ops, 1.0)))
    writing = rows.column("writes").to_numpy() * 2 > ops
    app = rows.column("app").to_numpy(zero_copy_only=False).astype(str)
    key = np.char.add(np.char.add(app, "|"), (size * 2 + writing).astype(int).astype(str))
    usual = np.full(len(svc), np.nan)
    for k in np.unique(key):
        m = key == k
        usual[m] = np.median(svc[m])
    ratio = svc / usual
    scale = float(np.median(svc))
    index = {c: i for i, c in enumerate(g.ids)}
    ci = np.array([index.get(c, -1) for c in comp], np.int64)
    ok = (ci >= 0) & (col >= 0) & (col < g.minutes) & np.isfinite(ratio)
    value = np.full(g.svc.shape, np.nan)
    count = np.zeros(g.svc.shape)
    cell = ci * g.minutes + col
    order = np.lexsort((ratio, cell))
    order = order[ok[order]]
    cells, starts = np.unique(cell[order], return_index=True)
    ends = np.r_[starts[1:], len(order)]
    for c, a, b in zip(cells, starts, ends, strict=True):
        if b - a < min_users:
            continue
        idx = order[a:b]  # this cell's rows, by ratio
        w = np.cumsum(ops[idx])
        med = ratio[idx][np.searchsorted(w, w[-1] / 2)]
        fi, mi = divmod(int(c), g.minutes)
        value[fi, mi] = med * scale
        count[fi, mi] = w[-1]
    has = np.isfinite(value).any(axis=1)
    if not has.any():
        return None
    count = np.where(count >= min_requests, count, 0.0)
    return Latency(value, count, [source if h else "" for h in has])
