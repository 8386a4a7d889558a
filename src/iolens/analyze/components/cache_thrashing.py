"""cache_thrashing: a forwarder reading far more from the file system than its clients asked.

Beacon 4.1 (Figure 4b): comparing read volume across layers showed forwarders pulling
much more data from the back end than they returned to compute nodes. The cause was N-N
sequential reads with more streams than the forwarder's page cache holds 40 MB read-ahead
windows for: prefetched data is evicted before use and read again (3.5x for a
1,024-process Shentu run). Fix: a smaller per-file read-ahead, or N-M aggregation.

Per forwarder and minute, what the clients read against what was read for them from the
file system, from the first of these the store holds for that forwarder:

1. `daemon`: the forwarding daemon's own counters (`iofwd` source, `run/iofwd/<svc>/stats`):
   client-facing `read_bytes` (kind `forwarder`) against `backend_read_bytes` (`metrics`);
2. `lustre client`: a forwarder that is a Lustre client (`lustre_client` with role
   `forwarder`, as Beacon's were): its `llite` `read_bytes` (what the daemon read, kind
   `forwarder`) against its `osc` `read_bytes` (the RPCs sent to the OSTs, read-ahead
   included; kind `osc`, component `<forwarder>:<osc>`);
3. `tracer and jobstats`: the tracer's `client_io` reads of the nodes behind it (the
   `forwarding` map), each record spread over the minutes it spans, against the OSTs'
   per-job `read_bytes` (`obdfilter/*/job_stats`, kind `ost` rows with a job), a job's
   OST bytes split over forwarders by its nodes' share of its traced reads.

Without any of them for a forwarder, a gap says which piece is missing. Writes are not
compared: they match across layers (Beacon). Thresholds come from what a healthy ratio
can do, not from a fault's size (`ThrashThresholds`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.analyze.components import forwarding
from iolens.analyze.components.base import (
    MINUTE_US,
    Context,
    Episode,
    duration_class,
    minute_time,
    r,
    runs,
    verdict,
)


@dataclass(frozen=True)
class ThrashThresholds:
    """When back-end reads count as amplified, and the reasoning behind each default.

    A healthy forwarder reads each byte its clients use once (ratio 1) or less (cache
    hits). What moves a healthy ratio above 1: (a) timing: a server sample covers the
    `interval` before its time stamp while client records carry their own times, so at a
    steady rate a window of W minutes gains at most 2 x (interval + `clock_skew_s`) of
    traffic at its edges: 2 x (10 + 2) / 420 = 6 % for 10 s samples and 7-minute windows
    (the `timing_tolerance` of the evidence; the limit is 1 + the larger of it and
    `min_excess`); bursts at a window's edge can do more, which is why the window is 7
    minutes and an abnormal minute must also be amplified on its own: on bursty healthy
    reads (a job's bursts alternating between nodes behind two forwarders, 20 s samples
    with some missing, clocks 1.5 s apart; 12 random seeds) the 5-minute window peaked at
    1.25, the 7-minute one at 1.18 (median 1.09), and no minute-and-window pair reached
    the limit; (b) page granularity: a 100-byte read costs a 4 KiB page, so the clients'
    side is counted in whole pages (`page_bytes`); (c) read-ahead left unused when a
    stream stops early: at most one window (`readahead_bytes`, Lustre's default
    max_read_ahead_per_file_mb = 64) per stream, so a window must carry at least
    `abandoned_streams` read-ahead windows over `min_excess` of reads (1 GiB) before a few
    files read in part can tip it.
    """

    min_excess: float = 0.25  # back-end reads >= 1.25x the pages asked for (or the timing bound)
    window_minutes: int = 7  # ratio over a centred window, so timing noise averages out
    clock_skew_s: float = 2.0  # between client record times and server sample times
    page_bytes: int = 4096  # client page size (64 KiB on some aarch64 kernels)
    readahead_bytes: float = 64 * 2**20  # largest unused read-ahead one stream can leave
    abandoned_streams: int = 4  # streams allowed to stop early within one window
    max_gap: int = 2  # normal minutes tolerated inside one episode
    min_minutes: int = 2  # amplified minutes for an episode
    critical_ratio: float = 2.0  # half the back-end reads wasted

    @property
    def min_bytes(self) -> float:
        """Pages asked for in a window before it is judged (1 GiB with the defaults)."""
        return self.abandoned_streams * self.readahead_bytes / self.min_excess


@dataclass
class Series:
    """Per-minute read volumes of one forwarder, over the loaded minutes.

    `window_pages`/`window_backend` are the same over the centred window; None means plain
    sums of the minutes. The traced path sets them itself: a job on several forwarders has
    its OST bytes split by its reads' share in the same window, which is exact whatever
    its nodes do, whereas a share taken minute by minute or over the whole run is not."""

    basis: str
    asked: np.ndarray  # bytes the clients read
    pages: np.ndarray  # the same, in whole pages
    backend: np.ndarray  # bytes read from the file system for them
    interval_s: float  # longest sample interval behind `backend`
    jobs: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # (pages, backend)
    window_pages: np.ndarray | None = None
    window_backend: np.ndarray | None = None


@dataclass
class CacheThrashing:
    name: str = "cache_thrashing"
    kind: str = "cache_thrashing"
    thresholds: ThrashThresholds = field(default_factory=ThrashThresholds)

    def detect(self, ctx: Context) -> list[Episode]:
        th = self.thresholds
        fwds = forwarding.forwarders(ctx)
        if not fwds:
            return []
        n_min = ctx.m_end - ctx.m_load
        series = _own_counters(ctx, fwds, n_min, th)
        traced = _traced(ctx, [f for f in fwds if f not in series], n_min, th)
        series.update(traced)
        self._record_gaps(ctx, [f for f in fwds if f not in series])
        out = []
        for fwd, s in sorted(series.items()):
            out += self._episodes(ctx, fwd, s)
        return out

    def _episodes(self, ctx: Context, fwd: str, s: Series) -> list[Episode]:
        th = self.thresholds
        pages_w = s.window_pages if s.window_pages is not None else window(s.pages, th)
        back_w = s.window_backend if s.window_backend is not None else window(s.backend, th)
        tolerance = 2 * (s.interval_s + th.clock_skew_s) / (60 * th.window_minutes)
        limit = 1 + max(th.min_excess, tolerance)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio_w = np.where(pages_w > 0, back_w / pages_w, 0.0)
            ratio = np.where(s.pages > 0, s.backend / s.pages, 0.0)
        valid = s.asked > 0
        abnormal = valid & (pages_w >= th.min_bytes) & (ratio_w >= limit) & (ratio >= limit)
        out = []
        for a, b in runs(abnormal, valid, th.max_gap, th.min_minutes):
            start, end = minute_time(ctx.m_load + a), minute_time(ctx.m_load + b + 1)
            if end <= ctx.start or start >= ctx.end:
                continue
            sl = slice(a, b + 1)
            asked, pages = float(s.asked[sl].sum()), float(s.pages[sl].sum())
            back = float(s.backend[sl].sum())
            amp = back / pages if pages else 0.0
            evidence: dict[str, Any] = {
                "basis": s.basis,
                "ratio": r(amp, 2),
                "requested_bytes": int(asked),
                "requested_page_bytes": int(pages),
                "backend_bytes": int(back),
                "excess_bytes": int(back - pages),
                "peak_minute_ratio": r(float(ratio[sl][abnormal[sl]].max()), 2),
                "threshold": r(limit, 3),
                "timing_tolerance": r(tolerance, 3),
                "abnormal_minutes": int(abnormal[sl].sum()),
                "duration_class": duration_class(start, end),
                "advice": "lower the per-file read-ahead on the forwarder (Lustre "
                "max_read_ahead_per_file_mb, e.g. 40 -> 2 MiB, Beacon 4.1), or aggregate "
                "N-N reads into N-M",
                **verdict(abnormal, valid, b),
            }
            jobs = _job_amplification(s, sl, limit) if s.jobs else []
            if not jobs:
                behind = forwarding.jobs_behind(ctx, fwd, start, end, most=10)
                jobs = behind["jobs"]
                evidence["jobs_basis"] = behind["jobs_basis"]
                if behind.get("other_clients"):
                    evidence["other_clients"] = behind["other_clients"]
            _describe(ctx, fwd, jobs, start, end)
            names = ", ".join(j["job_id"] for j in jobs[:3]) or "no job identified"
            evidence["summary"] = (
                f"{fwd} read {amp:.1f}x from the file system what its clients asked for ({names})"
            )
            evidence["jobs"] = jobs
            out.append(
                Episode(
                    kind=self.kind,
                    component_kind="forwarder",
                    component_id=fwd,
                    start=start,
                    end=end,
                    severity="critical" if amp >= th.critical_ratio else "warning",
                    evidence=evidence,
                    detector=self.name,
                )
            )
        return out

    def _record_gaps(self, ctx: Context, fwds: list[str]) -> None:
        """Forwarders no data path covers, grouped by the piece that is missing."""
        if not fwds:
            return
        behind = forwarding.nodes_behind(ctx)
        unmapped = [f for f in fwds if not behind.get(f)]
        if unmapped:
            ctx.gap(
                self.name,
                "forwarder",
                unmapped,
                "back-end read bytes (no backend_read_bytes from a forwarding daemon, no osc "
                "stats from a Lustre client on it) and the compute nodes behind it "
                "(`forwarding` table) to set its clients' traced reads against OST jobstats",
                "export backend_read_bytes (docs/forwarder-format.md), run lustre_client on "
                "the forwarder, or load the site topology with the nodes behind each forwarder",
            )
        mapped = [f for f in fwds if behind.get(f)]
        if mapped and not _has_ost_job_reads(ctx):
            ctx.gap(
                self.name,
                "forwarder",
                mapped,
                "per-job OST read bytes (Lustre obdfilter job_stats) to compare with the "
                "reads its clients' jobs made",
                "enable Lustre jobstats (lctl set_param jobid_var=SLURM_JOB_ID) and run "
                "lustre_oss on the OSSs",
            )
        elif mapped:
            untraced = _untraced(ctx, mapped)
            if untraced:
                ctx.gap(
                    self.name,
                    "forwarder",
                    untraced,
                    "the clients' read volumes: jobs ran on the nodes behind it but the "
                    "tracer recorded nothing there",
                    "trace the jobs with the iolens LD_PRELOAD tracer (docs/deploy-slurm.md)",
                )


# -- the three data paths ---------------------------------------------------------------------


def _own_counters(
    ctx: Context, fwds: list[str], n_min: int, th: ThrashThresholds
) -> dict[str, Series]:
    """Paths 1 and 2: the forwarder's own client-facing and back-end counters."""
    ctx.store.register("_iolens_fwds", pa.table({"fwd": fwds}))
    try:
        back = ctx.store.query(
            f"""
            SELECT component_id AS fwd, 'daemon' AS basis,
              (epoch_us(ts) - 1) // {MINUTE_US} - {ctx.m_load} AS col,
              sum(value * interval_s) AS b, max(interval_s) AS iv
            FROM metrics JOIN _iolens_fwds ON fwd = component_id
            WHERE kind = 'forwarder' AND metric = 'backend_read_bytes' AND ts > ? AND ts <= ?
            GROUP BY ALL
            UNION ALL
            SELECT split_part(component_id, ':', 1) AS fwd, 'lustre client' AS basis,
              (epoch_us(ts) - 1) // {MINUTE_US} - {ctx.m_load} AS col,
              sum(value * interval_s) AS b, max(interval_s) AS iv
            FROM metrics JOIN _iolens_fwds ON fwd = split_part(component_id, ':', 1)
            WHERE kind = 'osc' AND metric = 'read_bytes' AND ts > ? AND ts <= ?
            GROUP BY ALL
            """,
            [*ctx.bounds(), *ctx.bounds()],
        ).to_pylist()
    finally:
        ctx.store.unregister("_iolens_fwds")
    basis: dict[str, str] = {}
    for row in back:  # the daemon's counters win over its Lustre client's
        if basis.get(row["fwd"]) != "daemon":
            basis[row["fwd"]] = row["basis"]
    if not basis:
        return {}
    asked = _client_facing(ctx, sorted(basis), n_min, th)
    out: dict[str, Series] = {}
    for fwd, how in basis.items():
        if fwd not in asked:
            continue  # back-end traffic but no client-facing counters: nothing to compare
        backend = np.zeros(n_min)
        iv = 0.0
        for row in back:
            if row["fwd"] == fwd and row["basis"] == how and 0 <= row["col"] < n_min:
                backend[row["col"]] += row["b"]
                iv = max(iv, row["iv"])
        raw, pages = asked[fwd]
        out[fwd] = Series(how, raw, pages, backend, iv)
    return out


def _client_facing(
    ctx: Context, fwds: list[str], n_min: int, th: ThrashThresholds
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per-minute client-facing read bytes of forwarders (kind `forwarder` totals), and the
    same in whole pages (each sample's mean request rounded up to pages)."""
    p = th.page_bytes
    ctx.store.register("_iolens_fwds", pa.table({"fwd": fwds}))
    try:
        rows = ctx.store.query(
            f"""
            SELECT component_id AS fwd, (epoch_us(ts) - 1) // {MINUTE_US} - {ctx.m_load} AS col,
              sum(read_bytes)::DOUBLE AS b,
              sum(CASE WHEN read_ops > 0 THEN read_ops * ceil(read_bytes / read_ops / {p}) * {p}
                  ELSE read_bytes END)::DOUBLE AS pb
            FROM server_samples JOIN _iolens_fwds ON fwd = component_id
            WHERE kind = 'forwarder' AND job_id IS NULL AND read_bytes > 0 AND ts > ? AND ts <= ?
            GROUP BY ALL
            """,
            ctx.bounds(),
        ).to_pylist()
    finally:
        ctx.store.unregister("_iolens_fwds")
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for row in rows:
        if 0 <= row["col"] < n_min:
            raw, pages = out.setdefault(row["fwd"], (np.zeros(n_min), np.zeros(n_min)))
            raw[row["col"]] += row["b"]
            pages[row["col"]] += row["pb"]
    return out


def _traced(ctx: Context, fwds: list[str], n_min: int, th: ThrashThresholds) -> dict[str, Series]:
    """Path 3: traced client reads per forwarder against the OSTs' per-job read bytes."""
    behind = forwarding.nodes_behind(ctx)
    fwds = [f for f in fwds if behind.get(f)]
    if not fwds or not _has_ost_job_reads(ctx):
        return {}
    client = _traced_reads(ctx, th.page_bytes)
    ost = ctx.store.query(
        f"""
        SELECT job_id, (epoch_us(ts) - 1) // {MINUTE_US} - {ctx.m_load} AS col,
          sum(read_bytes)::DOUBLE AS ob, max(interval_s) AS iv
        FROM server_samples
        WHERE kind = 'ost' AND job_id IS NOT NULL AND read_bytes > 0 AND ts > ? AND ts <= ?
        GROUP BY ALL
        """,
        ctx.bounds(),
    ).to_pylist()
    # per job: pages read through each forwarder (None: a node outside the map), OST bytes
    per_job: dict[str, dict[str | None, tuple[np.ndarray, np.ndarray]]] = {}
    for row in client:
        if 0 <= row["col"] < n_min:
            by_fwd = per_job.setdefault(row["job_id"], {})
            raw, pages = by_fwd.setdefault(row["fwd"], (np.zeros(n_min), np.zeros(n_min)))
            raw[row["col"]] += row["b"]
            pages[row["col"]] += row["pb"]
    ost_of: dict[str, np.ndarray] = {}
    iv = 0.0
    for row in ost:
        if 0 <= row["col"] < n_min and row["job_id"] in per_job:
            ost_of.setdefault(row["job_id"], np.zeros(n_min))[row["col"]] += row["ob"]
            iv = max(iv, row["iv"])
    out: dict[str, Series] = {}
    for job, by_fwd in sorted(per_job.items()):
        ob = ost_of.get(job, np.zeros(n_min))
        total = sum(pages for _raw, pages in by_fwd.values())
        total_w, ob_w = window(total, th), window(ob, th)
        for fwd, (raw, pages) in by_fwd.items():
            if fwd not in fwds:
                continue
            pages_w = window(pages, th)
            with np.errstate(divide="ignore", invalid="ignore"):
                backend = np.where(total > 0, ob * pages / total, 0.0)
                backend_w = np.where(total_w > 0, ob_w * pages_w / total_w, 0.0)
            s = out.setdefault(fwd, _empty("tracer and jobstats", n_min, iv))
            s.asked += raw
            s.pages += pages
            s.backend += backend
            s.window_pages += pages_w  # type: ignore[operator]
            s.window_backend += backend_w  # type: ignore[operator]
            s.jobs[job] = (pages, backend)
    return out


def _empty(basis: str, n_min: int, interval_s: float) -> Series:
    z = [np.zeros(n_min) for _ in range(5)]
    return Series(basis, z[0], z[1], z[2], interval_s, window_pages=z[3], window_backend=z[4])


def window(a: np.ndarray, th: ThrashThresholds) -> np.ndarray:
    """Sums over the centred window of `th.window_minutes` minutes."""
    return np.convolve(a, np.ones(th.window_minutes), "same")


def _traced_reads(ctx: Context, page: int) -> list[dict[str, Any]]:
    """(fwd, job_id, col, b, pb): traced read bytes per forwarder (null: node not in the
    map), job and minute, spread over each record's span; `pb` counts whole pages touched
    (a contiguous run once, strided or unaligned reads page by page). Only jobs that
    Lustre jobstats saw reading count: reads of other file systems never reach an OST."""
    return ctx.store.query(
        f"""
        WITH seen AS (
          SELECT DISTINCT job_id FROM server_samples
          WHERE kind = 'ost' AND job_id IS NOT NULL AND read_bytes > 0 AND ts > ? AND ts <= ?),
        r AS (
          SELECT w.forwarder AS fwd, c.job_id, epoch_us(c.t_start) AS u0,
            greatest(epoch_us(c.t_end), epoch_us(c.t_start) + 1) AS u1,
            (c.size * c.count)::DOUBLE AS b,
            (CASE WHEN c."offset" >= 0 AND c.stride = c.size
                    THEN (c."offset" + c.count * c.size - 1) // {page} - c."offset" // {page} + 1
                  WHEN c."offset" >= 0
                    THEN c.count * ((c."offset" % {page} + c.size - 1) // {page} + 1)
                  ELSE c.count * ((c.size + {page} - 1) // {page}) END * {page})::DOUBLE AS pb
          FROM client_io c JOIN seen USING (job_id)
          LEFT JOIN forwarding w ON w.compute_node = c.node
          WHERE c.op = 'read' AND c.size > 0 AND c.count > 0 AND c.t_end >= ? AND c.t_start < ?),
        m AS (SELECT *, unnest(range(u0 // {MINUTE_US}, (u1 - 1) // {MINUTE_US} + 1)) AS m FROM r)
        SELECT fwd, job_id, m - {ctx.m_load} AS col,
          sum(b * f) AS b, sum(pb * f) AS pb
        FROM (SELECT *, (least(u1, (m + 1) * {MINUTE_US}) - greatest(u0, m * {MINUTE_US}))::DOUBLE
                / (u1 - u0) AS f FROM m)
        GROUP BY ALL
        """,
        [*ctx.bounds(), *ctx.bounds()],
    ).to_pylist()


def _has_ost_job_reads(ctx: Context) -> bool:
    return ctx.memo(
        "thrash:ost-job-reads",
        lambda: bool(
            ctx.store.query(
                "SELECT count(*) AS n FROM (SELECT 1 FROM server_samples WHERE kind = 'ost' "
                "AND job_id IS NOT NULL AND read_bytes > 0 AND ts > ? AND ts <= ? LIMIT 1)",
                ctx.bounds(),
            ).to_pylist()[0]["n"]
        ),
    )


def _untraced(ctx: Context, fwds: list[str]) -> list[str]:
    """Forwarders whose nodes ran jobs in the window but left no tracer record there."""
    rows = ctx.store.query(
        """
        WITH busy AS (
          SELECT DISTINCT w.forwarder FROM jobs j, forwarding w
          WHERE list_contains(j.nodes, w.compute_node) AND j.start < ?
            AND (j."end" IS NULL OR j."end" > ?)),
        traced AS (
          SELECT DISTINCT w.forwarder FROM client_io c JOIN forwarding w
            ON w.compute_node = c.node
          WHERE c.t_end >= ? AND c.t_start < ?)
        SELECT forwarder FROM busy WHERE forwarder NOT IN (SELECT forwarder FROM traced)
        """,
        [ctx.end, ctx.start, ctx.start, ctx.end],
    ).to_pylist()
    return sorted(set(fwds) & {row["forwarder"] for row in rows})


# -- evidence ---------------------------------------------------------------------------------


def _job_amplification(s: Series, sl: slice, limit: float) -> list[dict[str, Any]]:
    """Per job behind the forwarder in the episode: pages asked, back-end bytes, ratio;
    the amplified jobs first (most excess bytes), else the biggest reader."""
    rows = []
    for job, (pages, backend) in s.jobs.items():
        req, back = float(pages[sl].sum()), float(backend[sl].sum())
        if req <= 0 and back <= 0:
            continue
        rows.append(
            {
                "job_id": job,
                "requested_bytes": int(req),
                "backend_bytes": int(back),
                "ratio": round(back / req, 2) if req else None,
            }
        )
    rows.sort(key=lambda j: (-(j["backend_bytes"] - j["requested_bytes"]), j["job_id"]))
    amplified = [j for j in rows if j["ratio"] is not None and j["ratio"] >= limit]
    return (amplified or rows[:1])[:10]


def _describe(
    ctx: Context, fwd: str, jobs: list[dict[str, Any]], start: datetime, end: datetime
) -> None:
    """Add app, I/O mode and the read streams behind `fwd` (client records) to each job."""
    if not jobs:
        return
    ids = [j["job_id"] for j in jobs]
    info = ctx.jobs_info(ids)
    ctx.store.register("_iolens_ep_jobs", pa.table({"job_id": ids}))
    try:
        streams = ctx.store.query(
            """
            SELECT c.job_id,
              count(DISTINCT (c.node, c.pid, c.file_id)) AS streams,
              count(DISTINCT (c.node, c.pid, c.file_id)) FILTER (c.stride = c.size) AS seq,
              count(DISTINCT (c.node, c.pid)) AS procs,
              count(DISTINCT c.file_id) AS files
            FROM client_io c JOIN _iolens_ep_jobs USING (job_id)
            JOIN forwarding w ON w.compute_node = c.node
            WHERE c.op = 'read' AND w.forwarder = ? AND c.t_end >= ? AND c.t_start < ?
            GROUP BY c.job_id
            """,
            [fwd, start, end],
        ).to_pylist()
    finally:
        ctx.store.unregister("_iolens_ep_jobs")
    by_job = {s.pop("job_id"): s for s in streams}
    for j in jobs:
        meta = info.get(j["job_id"], {})
        st = by_job.get(j["job_id"], {})
        j.update(
            app=meta.get("app"),
            io_mode=meta.get("io_mode"),
            nprocs=meta.get("nprocs"),
            read_processes=st.get("procs", 0),
            read_streams=st.get("streams", 0),
            sequential_read_streams=st.get("seq", 0),
        )
        seq = st.get("seq", 0)
        mode = meta.get("io_mode") or _read_mode(st.get("procs", 0), st.get("files", 0))
        j["pattern"] = (
            f"{mode} sequential read, {seq} streams" if seq else "no sequential reads recorded"
        )


def _read_mode(procs: int, files: int) -> str:
    """File sharing of the reads when the job has no analysed I/O mode yet."""
    if procs > 1 and files >= procs:
        return "N-N"
    if procs > 1 and files == 1:
        return "N-1"
    return "N-M" if procs > 1 else "1-1"
