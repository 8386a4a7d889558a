"""low_bandwidth: the site rule Beacon used for its Table 2 anomaly counts.

"Such identification adopted a minimum threshold of measured maximum bandwidth under 30 %
of the known peak value, as well as a minimum duration of 60 minutes" (Beacon 4.2). Taken
literally the rule fires on every idle server, so it is applied only while the server has
demand: samples whose mean request queue is at least `queue` (queued requests mean the
clients wanted more than they got). An OST has no queue gauge of its own: Lustre queues
bulk requests per OSS (`ost/OSS/ost_io/stats` `req_qdepth`), so an OST counts as asked for
more when its OSS (`components.parent`, reported by the OSS agent) queues. Throughput
counts requests too when the component has a benchmarked `peak_ops`, so a server
saturated by small requests (IOPS-bound, not slow) does not qualify. Idle samples
neither extend nor break an episode; a busy sample at normal throughput ends it.

The peak is the site's: no collector measures it. Components sampled without one
(`components.peak_bw`, from `iolens site topology` or an imported IO500 run) cannot be
assessed, and are reported as a gap per kind rather than passed over in silence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np

from iolens.analyze.components.base import EPOCH, Context, Episode, duration_class, r
from iolens.analyze.topology import REMEDY_PEAKS


@dataclass(frozen=True)
class LowBandwidthThresholds:
    percent: float = 30.0  # X: max throughput under X % of the benchmarked peak ...
    minutes: float = 60.0  # Y: ... for at least Y minutes
    queue: float = 1.0  # demand: mean queued requests in the sample
    max_idle_minutes: float = 15.0  # longer silences split an episode
    kinds: tuple[str, ...] = ("forwarder", "oss", "ost")
    critical_minutes: float = 96 * 60.0  # Beacon alerted after 96 h


@dataclass
class LowBandwidth:
    name: str = "low_bandwidth"
    kind: str = "low_bandwidth"
    thresholds: LowBandwidthThresholds = field(default_factory=LowBandwidthThresholds)

    def detect(self, ctx: Context) -> list[Episode]:
        th = self.thresholds
        kinds = ", ".join(f"'{k}'" for k in th.kinds)
        self._gaps(ctx, kinds)
        t = ctx.store.query(
            f"""
            SELECT s.component_id AS c, any_value(s.kind) AS kind, epoch_us(s.ts) AS t1,
              max(s.interval_s) AS dur,
              sum(coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0))::DOUBLE
                / max(s.interval_s) AS bw,
              sum(coalesce(s.read_ops, 0) + coalesce(s.write_ops, 0))::DOUBLE / max(s.interval_s)
                AS ops,
              coalesce(max(s.queue_len), max(p.queue_len)) AS queue,
              max(c.peak_bw) AS peak_bw, max(c.peak_ops) AS peak_ops
            FROM server_samples s JOIN components c USING (component_id)
            LEFT JOIN server_samples p
              ON p.component_id = c.parent AND p.ts = s.ts AND p.job_id IS NULL
                AND p.kind = 'oss'
            WHERE s.job_id IS NULL AND s.kind IN ({kinds}) AND c.peak_bw > 0
              AND s.interval_s > 0 AND s.ts > ? AND s.ts <= ?
            GROUP BY s.component_id, s.ts
            ORDER BY s.component_id, s.ts
            """,
            ctx.bounds(),
        )
        if t.num_rows == 0:
            return []
        col = {name: t.column(name).to_numpy(zero_copy_only=False) for name in t.column_names}
        comp = col["c"]
        bounds = np.flatnonzero(comp[1:] != comp[:-1]) + 1
        out = []
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(comp)], strict=True):
            out += self._component(ctx, {k: v[lo:hi] for k, v in col.items()})
        return out

    def _gaps(self, ctx: Context, kinds: str) -> None:
        """Sampled components without a benchmarked peak: the rule cannot judge them."""
        lacking = ctx.store.query(
            f"""
            SELECT kind, list(DISTINCT component_id ORDER BY component_id) AS ids
            FROM server_samples s
            WHERE s.job_id IS NULL AND s.kind IN ({kinds}) AND s.ts > ? AND s.ts <= ?
              AND NOT EXISTS (SELECT 1 FROM components c
                              WHERE c.component_id = s.component_id AND c.peak_bw > 0)
            GROUP BY kind ORDER BY kind
            """,
            ctx.bounds(),
        ).to_pylist()
        for row in lacking:
            ctx.gap(
                self.name,
                row["kind"],
                row["ids"],
                "peak bandwidth (components.peak_bw): the 30 %-of-peak rule needs the "
                "benchmarked peak, which no collector measures",
                REMEDY_PEAKS,
            )

    def _component(self, ctx: Context, s: dict[str, np.ndarray]) -> list[Episode]:
        th = self.thresholds
        peak_bw = float(s["peak_bw"][0])
        peak_ops = s["peak_ops"][0]
        norm = s["bw"].astype(float) / peak_bw
        if peak_ops is not None and np.isfinite(peak_ops) and peak_ops > 0:
            norm = np.maximum(norm, s["ops"].astype(float) / float(peak_ops))
        queue = np.asarray(s["queue"], float)
        demand = np.where(np.isfinite(queue), queue >= th.queue, s["ops"] > 0)
        idx = np.flatnonzero(demand)
        if len(idx) == 0:
            return []
        bad = norm[idx] < th.percent / 100
        t1 = s["t1"][idx].astype(np.int64)
        t0 = t1 - (s["dur"][idx] * 1e6).astype(np.int64)
        # New group at every busy-normal sample and after long silences between samples.
        silence = np.r_[False, t0[1:] - t1[:-1] > th.max_idle_minutes * MINUTE_US_F]
        group = np.cumsum(~bad | silence)
        out = []
        for g in np.unique(group[bad]):
            m = bad & (group == g)
            first, last = int(np.argmax(m)), len(m) - 1 - int(np.argmax(m[::-1]))
            span_us = t1[last] - t0[first]
            if span_us < th.minutes * MINUTE_US_F:
                continue
            start = EPOCH + timedelta(microseconds=int(t0[first]))
            end = EPOCH + timedelta(microseconds=int(t1[last]))
            if end <= ctx.start or start >= ctx.end:
                continue
            sel = idx[first : last + 1][m[first : last + 1]]
            minutes = span_us / MINUTE_US_F
            evidence: dict[str, Any] = {
                "summary": (
                    f"{s['c'][0]} delivered at most {norm[sel].max():.0%} of its peak for "
                    f"{minutes:.0f} minutes while requests queued"
                ),
                "rule": f"max throughput < {th.percent:g}% of peak for >= {th.minutes:g} min "
                "with queued requests",
                "max_bandwidth": r(float(s["bw"][sel].max()), 0),
                "max_percent_of_peak": r(float(norm[sel].max()) * 100, 1),
                "peak_bw": peak_bw,
                "peak_ops": None if peak_ops is None else float(peak_ops),
                "queue_len": r(float(np.median(queue[sel])), 2),
                "busy_samples": int(m.sum()),
                "minutes": r(minutes, 1),
                "duration_class": duration_class(start, end),
            }
            ongoing = ctx.open_ended and idx[last] == len(norm) - 1
            out.append(
                Episode(
                    kind=self.kind,
                    component_kind=str(s["kind"][0]),
                    component_id=str(s["c"][0]),
                    start=start,
                    end=None if ongoing else end,
                    severity="critical" if minutes >= th.critical_minutes else "warning",
                    evidence=evidence,
                    detector=self.name,
                )
            )
        return out


MINUTE_US_F = 60e6
