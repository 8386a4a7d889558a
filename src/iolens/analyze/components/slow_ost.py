"""slow_ost: a fail-slow OST, found as a sustained shift of its latency against its peers.

Beacon 4.2 (Figure 8, the Shentu run): a few OSTs "significantly lagging behind" their
peers in the same parallel read, traced to failing RAID controllers. A job striped over
several OSTs runs at the pace of the slowest, so an OST twice as slow as the others for
hours costs every such job half its I/O speed, though no single minute looks alarming.

What it reads (all from the `lustre_oss` agent source, docs/sources.md):

- latency per OST and minute: `service_us` of kind `ost` in `server_samples`, the mean
  time per bulk RPC from `obdfilter/<ost>/stats` `read`/`write` `[usecs]` (Lustre 2.12+),
  or per disk operation from a MooseFS chunkserver's charts (`moosefs` source);
  else, for OSTs without it (2.10), the metric `brw_io_time_us` (the mean of the
  `brw_stats` `I/O time (1/1000s)` histogram), over the I/Os its buckets counted
  (`brw_io_time_ms_<n>_read|write`). An OST is compared only with OSTs whose latency
  comes from the same field;
- the work that explains latency without being the disk's fault: bytes per RPC and the
  write share of RPCs, from the same stats (`read_bytes`/`write_bytes` and their samples);
- evidence: the jobs on the OST in the episode and their own latency (`job_stats`), the
  OSS `ost_io` service queue through the OST's parent in the topology (per OSS host,
  never per OST: Lustre has no per-OST queue gauge).

The test (a CUSUM against peers and the OST's own history) is in `peers.py` and `shift.py`.
OSTs with traffic but neither latency field are reported as not assessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from iolens.analyze.components.base import MINUTE_US, Context, Episode, Grid
from iolens.analyze.components.peers import Latency, Missing, SlowThresholds, slow_episodes

#: Where each latency comes from, as the evidence and the gap name it. `service_us` is the
#: mean time per request a server measured itself: Lustre's obdfilter `[usecs]`, a MooseFS
#: chunkserver's chart op times (`collect/sources/moosefs.py`).
USECS = "service_us: server-timed requests (Lustre obdfilter [usecs], MooseFS chunkserver)"
IO_TIME = "brw_stats I/O time (1/1000s)"

NO_LATENCY = Missing(
    "latency per RPC: obdfilter stats have no read/write [usecs] (Lustre < 2.12) and "
    "brw_stats timed too few I/Os (osd-zfs times only reads that miss its cache)",
    "upgrade the OSS to Lustre 2.12+ ([usecs] in obdfilter stats), or use ldiskfs OSTs, "
    "whose brw_stats time every disk I/O",
)


@dataclass
class SlowOst:
    name: str = "slow_ost"
    kind: str = "slow_ost"
    thresholds: SlowThresholds = field(default_factory=SlowThresholds)

    def detect(self, ctx: Context) -> list[Episode]:
        g = ctx.grid("ost")
        if g.minutes == 0 or not g.ids:
            return []
        latency = ost_latency(ctx, g, self.thresholds.min_requests)
        return slow_episodes(
            ctx,
            "ost",
            self.kind,
            self.name,
            self.thresholds,
            latency=latency,
            parent_kind="oss",
            missing=NO_LATENCY,
        )


def ost_latency(ctx: Context, g: Grid, min_requests: int) -> Latency:
    """Per OST, the `[usecs]` service time if it has any, else the brw_stats I/O time.

    The service time is per bulk RPC, so its demand is the OST's data RPCs (not its object
    operations such as `statfs`, which ping every OST all the time)."""
    rpcs = g.read_ops + g.write_ops
    io_mean, ios = io_time_grid(ctx, g)
    value = np.full(g.svc.shape, np.nan)
    requests = np.zeros(g.svc.shape)
    fields = []
    for i in range(len(g.ids)):
        timed = np.isfinite(g.svc[i]) & (rpcs[i] >= min_requests)
        histo = np.isfinite(io_mean[i]) & (ios[i] >= min_requests)
        if timed.any():
            value[i], requests[i] = g.svc[i], rpcs[i]
            fields.append(USECS)
        elif histo.any():
            value[i], requests[i] = io_mean[i], ios[i]
            fields.append(IO_TIME)
        else:
            fields.append("")
    return Latency(value, requests, fields)


def io_time_grid(ctx: Context, g: Grid) -> tuple[np.ndarray, np.ndarray]:
    """Per OST and minute: the brw_stats mean disk I/O time (us) and the I/Os behind it.

    Each sample's mean (`brw_io_time_us`) is weighted by its I/O count, the sum of its
    bucket counters (`brw_io_time_ms_*`, rates x interval)."""
    t = ctx.store.query(
        f"""
        WITH s AS (
          SELECT component_id AS c, ts,
            max(value) FILTER (WHERE metric = 'brw_io_time_us') AS mean_us,
            sum(value * interval_s) FILTER (WHERE starts_with(metric, 'brw_io_time_ms_')) AS ios
          FROM metrics
          WHERE kind = 'ost' AND job_id IS NULL AND ts > ? AND ts <= ?
            AND (metric = 'brw_io_time_us' OR starts_with(metric, 'brw_io_time_ms_'))
          GROUP BY ALL
        )
        SELECT c, (epoch_us(ts) - 1) // {MINUTE_US} AS m,
          sum(mean_us * ios) / nullif(sum(ios) FILTER (WHERE mean_us IS NOT NULL), 0) AS mean_us,
          sum(ios) FILTER (WHERE mean_us IS NOT NULL) AS ios
        FROM s GROUP BY ALL
        """,
        ctx.bounds(),
    )
    mean = np.full(g.svc.shape, np.nan)
    ios = np.zeros(g.svc.shape)
    index = {c: i for i, c in enumerate(g.ids)}
    for c, m, mu, n in zip(
        *(t.column(k).to_pylist() for k in ("c", "m", "mean_us", "ios")), strict=True
    ):
        col = m - g.m0
        if c in index and 0 <= col < g.minutes and mu is not None:
            mean[index[c], col], ios[index[c], col] = mu, n or 0.0
    return mean, ios
