"""The data behind each page and its REST twin, as JSON-ready dicts (and server-drawn SVG).

Each function reads the store through the analyses that already exist (`views`,
`analyze.jobs`, `analyze.system`, the component detectors' episodes) and shapes the result
for a chart: time series become `{"x": [epoch s], "series": [...]}` for uPlot, categorical
views become SVG (`svg.py`). None of them knows who asks: the routes apply `scope` first
and filter what depends on the caller (other users' jobs) after.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from iolens.model.schema import ZOOMIN_FACTORS
from iolens.present.web import svg
from iolens.store.base import Store

MiB = 2**20
MAX_POINTS = 2000  # per time series sent to the browser
LAYER_COLOURS = {"compute": "#2ca02c", "forwarder": "#ff7f0e", "ost": "#1f77b4", "mds": "#9467bd"}
SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}


# -- helpers ----------------------------------------------------------------------------------
def epoch(t: datetime | str | None) -> float | None:
    if t is None:
        return None
    if isinstance(t, str):
        t = datetime.fromisoformat(t.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.timestamp()


def naive(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


def _clean(values: Any) -> list[float | None]:
    out: list[float | None] = []
    for v in values:
        f = float(v) if v is not None else None
        out.append(f if f is not None and math.isfinite(f) else None)
    return out


def downsample(x0: float, step: float, arrays: list[np.ndarray]) -> tuple[list[float], list[Any]]:
    """Means over groups of bins so at most MAX_POINTS remain; x at each group's start."""
    n = len(arrays[0]) if arrays else 0
    k = max(1, math.ceil(n / MAX_POINTS))
    m = math.ceil(n / k) if n else 0
    out = []
    for a in arrays:
        pad = np.zeros(m * k)
        pad[:n] = a
        out.append((pad.reshape(m, k).sum(axis=1) / (k * step)).round(3).tolist())
    return [x0 + i * k * step for i in range(m)], out


def store_stamp(store: Store) -> tuple[Any, ...]:
    """Changes whenever a batch lands or an analysis writes: the cache key of system views."""
    row = store.query(
        "SELECT (SELECT count(*) FROM ingested) AS n, (SELECT max(loaded_at) FROM ingested) AS t, "
        "(SELECT max(created) FROM anomalies) AS a, (SELECT max(analyzed) FROM job_summaries) AS s,"
        ' (SELECT count(*) FROM jobs) AS j, (SELECT max("end") FROM jobs) AS e'
    ).to_pylist()[0]
    return tuple(row.values())


def job_stamp(store: Store, job_id: str) -> tuple[Any, ...]:
    rows = store.query(
        'SELECT j.state, j."end", s.analyzed FROM jobs j LEFT JOIN job_summaries s USING (job_id) '
        "WHERE j.job_id = ?",
        [job_id],
    ).to_pylist()
    if not rows:
        return ("missing",)
    r = rows[0]
    live = r["end"] is None or (r["state"] or "").upper() in ("RUNNING", "PENDING")
    # A running job changes with every batch: recompute at most every 10 s.
    tick = int(datetime.now(UTC).timestamp() // 10) if live else 0
    return (r["state"], r["end"], r["analyzed"], tick)


def is_live(job: dict[str, Any]) -> bool:
    return job.get("end") is None or (job.get("state") or "").upper() in ("RUNNING", "PENDING")


# -- one job ----------------------------------------------------------------------------------
def job_page(store: Store, job_id: str) -> dict[str, Any]:
    """Everything the job page shows that does not depend on who asks (cached per job)."""
    from iolens.analyze import report
    from iolens.analyze.catalog import catalog
    from iolens.analyze.jobs.crosslayer import layer_series
    from iolens.analyze.jobs.interference import culprits
    from iolens.present import html_report, views
    from iolens.store.darshan import load_jobs

    full = report.build(store, job_id, with_series=True)  # the series are for the plots
    job = views.job(store, job_id, built=full)  # the object `iolens job ID --json` prints
    bands = [[epoch(p["start"]), epoch(p["end"]), bool(p.get("anomalous"))] for p in job["phases"]]
    timeline = None
    if full.series is not None and len(full.series.read):
        s = full.series
        x, (rd, wr, md) = downsample(s.origin, 1.0, [s.read / MiB, s.write / MiB, s.md])
        timeline = {
            "title": "Client bandwidth (per second, I/O phases shaded)",
            "x": x,
            "bands": bands,
            "yLabel": "MiB/s",
            "series": [
                {"label": "read MiB/s", "color": svg.READ, "values": rd},
                {"label": "write MiB/s", "color": svg.WRITE, "values": wr},
                {"label": "metadata ops/s", "color": svg.META, "values": md, "scale": "ops"},
            ],
        }
    layers = layer_series(store, job_id)
    cross = None
    if layers["bins"] and layers["layers"]:
        t0 = epoch(layers["start"]) or 0.0
        names = [n for n in ("compute", "forwarder", "ost", "mds") if n in layers["layers"]]
        arrays = []
        for n in names:
            lay = layers["layers"][n]
            arrays.append(
                (np.array(lay.get("read_bytes", [])) + np.array(lay.get("write_bytes", []))) / MiB
            )
        md = np.array(layers["layers"].get("mds", {}).get("md_ops", [0.0] * layers["bins"]))
        x, vals = downsample(t0, float(layers["bin_s"]), [*arrays, md])
        cross = {
            "title": f"The job at every layer (bytes per {layers['bin_s']} s bin, as MiB/s)",
            "x": x,
            "bands": bands,
            "yLabel": "MiB/s",
            "series": [
                {"label": f"{n} MiB/s", "color": LAYER_COLOURS[n], "values": v}
                for n, v in zip(names, vals[:-1], strict=True)
                if n != "mds"
            ]
            + [
                {
                    "label": "MDS ops/s",
                    "color": LAYER_COLOURS["mds"],
                    "values": vals[-1],
                    "scale": "ops",
                }
            ],
        }
    logs = list(load_jobs(store, job_id))
    sizes = html_report._size_histogram(store, job_id, logs)
    sizes_svg = html_report.size_bars(sizes, width=520.0) if sizes else None
    ops = store.query(
        "SELECT op, sum(count)::DOUBLE AS n FROM client_io WHERE job_id = ? GROUP BY op "
        "ORDER BY n DESC",
        [job_id],
    ).to_pylist()
    ops_svg = (
        svg.bars(
            [r["op"] for r in ops],
            [("operations", svg.OTHER, [r["n"] for r in ops])],
            ylabel="operations (log scale)",
            label="operations",
            log=True,
            width=520.0,
        )
        if ops
        else None
    )
    heat = ost_heatmap_svg(store, job_id)
    docs = catalog()
    for f in job["findings"]:
        doc = docs.get(f["code"])
        f["doc"] = doc.to_dict() if doc else None
    comps = {
        "forwarder": job["forwarders"],
        "ost": layers.get("path", {}).get("osts", job["osts"]),
        "mds": layers.get("path", {}).get("mds", []),
    }
    return {
        "job": job,
        "timeline": timeline,
        "cross": cross,
        "sizes_svg": sizes_svg,
        "ops_svg": ops_svg,
        "heatmap_svg": heat,
        "covering": html_report._darshan_figures(logs),
        "culprits": culprits(store, job_id),
        "components": comps,
        # kinds whose empty list is a topology gap ("unknown"), not "none"
        "unknown": {
            {"forwarders": "forwarder", "osts": "ost"}.get(g["piece"], g["piece"])
            for g in job.get("gaps") or []
        },
        "episodes": episodes_during(store, [c for ids in comps.values() for c in ids], job),
    }


def ost_heatmap_svg(store: Store, job_id: str) -> str | None:
    """The job's bytes per OST and time bin; rows link to the OST seen through the job."""
    from iolens.analyze.system import ost_heatmap
    from iolens.errors import NotFound

    try:
        h = ost_heatmap(store, job_id)
    except NotFound:
        return None
    if not h.osts:
        return None
    rates = h.rates()
    top = max((v for row in rates for v in row), default=0.0) or 1.0
    cols = [b.strftime("%H:%M" if h.bin_s >= 60 else "%H:%M:%S") for b in h.bins]
    return svg.heatmap(
        h.osts,
        cols,
        lambda i, j: svg.ramp(rates[i][j] / top) if rates[i][j] > 0 else "#f5f5f5",
        lambda i, j: f"{h.osts[i]} {cols[j]}: {rates[i][j] / MiB:,.1f} MiB/s",
        row_href=lambda i: f"/jobs/{job_id}/components/{h.osts[i]}",
        label="bytes per OST over time",
        legend=[("0", "#f5f5f5"), (f"{top / MiB:,.0f} MiB/s", svg.ramp(1.0))],
    )


def episodes_during(
    store: Store, components: list[str], job: dict[str, Any]
) -> list[dict[str, Any]]:
    """Anomaly episodes on the job's components that overlapped its run."""
    if not components:
        return []
    start, end = job.get("start"), job.get("end")
    rows = store.query(
        'SELECT kind, component_kind, component_id, "start", "end", severity, evidence '
        "FROM anomalies WHERE component_id IN (SELECT unnest(?)) "
        'AND (? IS NULL OR "end" IS NULL OR "end" > ?) AND (? IS NULL OR "start" < ?) '
        'ORDER BY "start"',
        [components, naive_t(start), naive_t(start), naive_t(end), naive_t(end)],
    ).to_pylist()
    for r in rows:
        ev = json.loads(r.pop("evidence") or "{}")
        r["summary"] = ev.get("summary", "")
        r["key"] = episode_key(r["kind"], r["component_id"], r["start"])
    return rows


def naive_t(t: str | datetime | None) -> datetime | None:
    if t is None:
        return None
    if isinstance(t, str):
        return naive(datetime.fromisoformat(t.replace("Z", "+00:00")))
    return naive(t)


def history(store: Store, job: dict[str, Any], user: str | None) -> dict[str, Any]:
    """UMAMI-style context: this run's figures against earlier runs of the same application
    (the caller's own runs when `user` is given), as percentiles."""
    if not job.get("app"):
        return {"runs": 0, "metrics": []}
    where = 'j.app = ? AND j.job_id <> ? AND j."start" < ?'
    params: list[Any] = [job["app"], job["job_id"], naive_t(job["start"]) or datetime.max]
    if user:
        where += ' AND j."user" = ?'
        params.append(user)
    rows = store.query(
        f"""
        SELECT j.job_id, j."start", date_diff('second', j."start", j."end") AS runtime_s,
               len(j.nodes) AS nodes, s.io_time_s, s.read_bw_avg, s.write_bw_avg, s.iops_avg,
               s.md_ops_rate, coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0) AS bytes
        FROM jobs j JOIN job_summaries s USING (job_id) WHERE {where}
        ORDER BY j."start" DESC LIMIT 200
        """,
        params,
    ).to_pylist()
    metrics = (
        ("runtime_s", "run time", "s", "lower"),
        ("io_time_s", "I/O time", "s", "lower"),
        ("write_bw_avg", "write bandwidth", "B/s", "higher"),
        ("read_bw_avg", "read bandwidth", "B/s", "higher"),
        ("iops_avg", "IOPS", "ops/s", "higher"),
        ("md_ops_rate", "metadata rate", "ops/s", "lower"),
        ("bytes", "bytes moved", "B", None),
    )
    me = dict(job)
    me["bytes"] = (job.get("read_bytes") or 0) + (job.get("write_bytes") or 0)
    out = []
    for key, name, unit, better in metrics:
        vals = [float(r[key]) for r in rows if r[key] is not None]
        mine = me.get(key)
        if mine is None or not vals:
            continue
        mine = float(mine)
        pct = 100.0 * sum(v <= mine for v in vals) / len(vals)
        out.append(
            {
                "metric": key,
                "name": name,
                "unit": unit,
                "value": mine,
                "percentile": pct,
                "median": float(np.median(vals)),
                "min": min(vals),
                "max": max(vals),
                "better": better,
                "values": vals,
            }
        )
    same_scale = sum(1 for r in rows if r["nodes"] == job.get("nodes"))
    return {
        "runs": len(rows),
        "same_scale": same_scale,
        "jobs": [r["job_id"] for r in rows[:20]],
        "metrics": out,
    }


def component_series(
    store: Store,
    component_id: str,
    start: datetime | None,
    end: datetime | None,
    job_id: str | None = None,
    bands: list[list[Any]] | None = None,
) -> dict[str, Any] | None:
    """A component's load over [start, end): bytes/s (ops/s for metadata servers), its
    request service time and, with `job_id`, that job's share. None without samples."""
    cond, params = "component_id = ?", [component_id]
    if start is not None:
        cond += " AND ts > ?"
        params.append(start)
    if end is not None:
        cond += " AND ts <= ?"
        params.append(end)
    span = store.query(
        f"SELECT min(ts) AS t0, max(ts) AS t1, any_value(kind) AS kind FROM server_samples "
        f"WHERE {cond} AND job_id IS NULL",
        params,
    ).to_pylist()[0]
    if span["t0"] is None:
        return None
    seconds = max(1.0, (span["t1"] - span["t0"]).total_seconds())
    step = max(1, math.ceil(seconds / 720))
    meta = span["kind"] in ("mds", "mdt")
    amount = "md_ops" if meta else "coalesce(read_bytes, 0) + coalesce(write_bytes, 0)"
    scale = 1.0 if meta else float(MiB)
    t0 = epoch(span["t0"]) or 0.0
    job_cond = "job_id = ?" if job_id else "false"
    rows = store.query(
        f"""
        SELECT CAST(floor((epoch(ts) - ?) / ?) AS BIGINT) AS b,
               sum({amount}) FILTER (WHERE job_id IS NULL)::DOUBLE AS total,
               sum(interval_s) FILTER (WHERE job_id IS NULL) AS secs,
               sum({amount}) FILTER (WHERE {job_cond})::DOUBLE AS mine,
               avg(service_us) FILTER (WHERE job_id IS NULL) AS service_us,
               avg(wait_us) FILTER (WHERE job_id IS NULL) AS wait_us
        FROM server_samples WHERE {cond}
        GROUP BY b ORDER BY b
        """,
        [t0, step, *([job_id] if job_id else []), *params],
    ).to_pylist()
    n = (rows[-1]["b"] + 1) if rows else 0
    total, mine, service, wait = (np.full(n, np.nan) for _ in range(4))
    for r in rows:
        b = int(r["b"])
        secs = float(r["secs"] or step)
        total[b] = (r["total"] or 0.0) / secs / scale
        mine[b] = (r["mine"] or 0.0) / secs / scale
        service[b] = r["service_us"] if r["service_us"] is not None else np.nan
        wait[b] = r["wait_us"] if r["wait_us"] is not None else np.nan
    unit = "ops/s" if meta else "MiB/s"
    series = [{"label": f"all clients {unit}", "color": "#555", "values": _clean(total)}]
    if job_id:
        series.append({"label": f"job {job_id} {unit}", "color": "#2ca02c", "values": _clean(mine)})
    if not np.all(np.isnan(service)):
        series.append(
            {
                "label": "service time µs",
                "color": "#d62728",
                "values": _clean(service),
                "scale": "us",
            }
        )
    if not np.all(np.isnan(wait)):
        series.append(
            {"label": "queue wait µs", "color": "#e377c2", "values": _clean(wait), "scale": "us"}
        )
    return {
        "title": f"{component_id}: load and request latency ({step} s bins)",
        "x": [t0 + i * step for i in range(n)],
        "bands": bands or [],
        "yLabel": unit,
        "series": series,
    }


# -- system views (admins) --------------------------------------------------------------------
def latest_sample(store: Store) -> datetime | None:
    return store.query("SELECT max(ts) AS t FROM server_samples").column("t")[0].as_py()


def system_now(store: Store, at: datetime | None = None, minutes: int = 5) -> dict[str, Any]:
    """Every forwarder, OST and MDS: peak one-minute load of the last `minutes`, by level."""
    from iolens.analyze.system import level_of

    t1 = at or latest_sample(store)
    if t1 is None:
        return {"at": None, "kinds": {}, "running": [], "episodes": []}
    t0 = t1 - timedelta(minutes=minutes)
    rows = store.query(
        """
        WITH m AS (
            SELECT kind, component_id, (epoch_us(ts) - 1) // 60000000 AS minute,
                   sum(coalesce(read_bytes, 0) + coalesce(write_bytes, 0)) / sum(interval_s) AS bps,
                   sum(coalesce(md_ops, 0)) / sum(interval_s) AS ops,
                   avg(service_us) AS service_us
            FROM server_samples
            WHERE job_id IS NULL AND kind IN ('forwarder', 'ost', 'mds', 'mdt')
              AND ts > ? AND ts <= ? AND interval_s > 0
            GROUP BY ALL)
        SELECT m.kind, m.component_id, max(bps) AS bps, max(ops) AS ops,
               avg(service_us) AS service_us, any_value(c.peak_bw) AS peak_bw,
               any_value(c.peak_ops) AS peak_ops
        FROM m LEFT JOIN components c USING (component_id)
        GROUP BY ALL ORDER BY m.kind, m.component_id
        """,
        [t0, t1],
    ).to_pylist()
    kinds: dict[str, list[dict[str, Any]]] = {}
    for kind in ("forwarder", "ost", "mds"):
        mine = [r for r in rows if (r["kind"] == "mdt" and kind == "mds") or r["kind"] == kind]
        meta = kind == "mds"
        observed = max((float(r["ops" if meta else "bps"] or 0) for r in mine), default=0.0)
        for r in mine:
            rate = float(r["ops" if meta else "bps"] or 0.0)
            cap = r["peak_ops" if meta else "peak_bw"] or observed or 1.0
            load = rate / cap
            kinds.setdefault(kind, []).append(
                {
                    "component_id": r["component_id"],
                    "rate": rate,
                    "unit": "ops/s" if meta else "B/s",
                    "capacity": cap,
                    "load": load,
                    "level": level_of(load),
                    "service_us": r["service_us"],
                }
            )
    running = store.query(
        'SELECT job_id, "user", app, "start", len(nodes) AS nodes FROM jobs '
        'WHERE "start" <= ? AND ("end" IS NULL OR "end" > ?) ORDER BY "start"',
        [t1, t0],
    ).to_pylist()
    episodes = store.query(
        'SELECT kind, component_id, "start", "end", severity FROM anomalies '
        'WHERE "start" <= ? AND ("end" IS NULL OR "end" >= ?) ORDER BY "start"',
        [t1, t0],
    ).to_pylist()
    for e in episodes:
        e["key"] = episode_key(e["kind"], e["component_id"], e["start"])
    return {"at": t1, "minutes": minutes, "kinds": kinds, "running": running, "episodes": episodes}


def busiest_minute(store: Store) -> datetime | None:
    """The end of the minute the forwarders moved the most bytes: a moment worth a look."""
    rows = store.query(
        "SELECT make_timestamp(((epoch_us(ts) - 1) // 60000000 + 1) * 60000000) AS t "
        "FROM server_samples WHERE job_id IS NULL AND kind = 'forwarder' GROUP BY 1 "
        "ORDER BY sum(coalesce(read_bytes, 0) + coalesce(write_bytes, 0)) DESC LIMIT 1"
    ).to_pylist()
    return rows[0]["t"] if rows else None


def load_page(store: Store, start: datetime | None, end: datetime | None) -> dict[str, Any]:
    """Beacon Figure 5 per kind: peak load level per component and hour, plus the shares."""
    from iolens.analyze.system.summary import load_summary

    summary = load_summary(store, None, start, end)
    figures = {}
    legend = list(svg.LEVEL_COLOURS.items())
    for kind, k in summary["kinds"].items():
        hours = sorted({c["hour"] for c in k["cells"]})
        comps = sorted({c["component_id"] for c in k["cells"]})
        if not hours or not comps:
            continue
        cell = {(c["component_id"], c["hour"]): c for c in k["cells"]}
        fmt = "%m-%d %H:00" if len(hours) > 24 else "%H:00"
        cols = [h.strftime(fmt) for h in hours]

        def colour(i: int, j: int, comps=comps, hours=hours, cell=cell) -> str | None:
            c = cell.get((comps[i], hours[j]))
            return svg.LEVEL_COLOURS[c["level"]] if c else None

        def title(i: int, j: int, comps=comps, hours=hours, cell=cell, cols=cols) -> str:
            c = cell.get((comps[i], hours[j]))
            return f"{comps[i]} {cols[j]}: {c['level']} ({c['load']:.0%} of peak)" if c else ""

        def href(i: int, j: int, comps=comps, hours=hours) -> str:
            t = hours[j]
            return (
                f"/admin/components/{comps[i]}?since={t:%Y-%m-%dT%H:%M:%S}"
                f"&until={t + timedelta(hours=1):%Y-%m-%dT%H:%M:%S}"
            )

        figures[kind] = svg.heatmap(
            comps,
            cols,
            colour,
            title,
            row_href=lambda i, comps=comps: f"/admin/components/{comps[i]}",
            cell_href=href,
            label=f"{kind} load by hour",
            legend=legend,
            cell_w=36.0 if len(hours) <= 24 else None,
        )
    mds = summary.get("mds")
    mds_svg = None
    if mds and mds["bins"]:
        labels = [b["start"].strftime("%H:%M") for b in mds["bins"]]
        mds_svg = svg.bars(
            labels,
            [
                ("jobs", svg.READ, [b["job_ops"] for b in mds["bins"]]),
                ("other clients", svg.OTHER, [b["other_ops"] for b in mds["bins"]]),
            ],
            ylabel="metadata ops per hour",
            label="MDS load split",
        )
    return {"summary": summary, "figures": figures, "mds_svg": mds_svg}


def episode_key(kind: str, component: str, start: datetime) -> str:
    return f"{kind}~{component}~{start:%Y%m%dT%H%M%S}"


def parse_episode_key(key: str) -> tuple[str, str, datetime] | None:
    parts = key.split("~")
    if len(parts) != 3:
        return None
    try:
        return parts[0], parts[1], datetime.strptime(parts[2], "%Y%m%dT%H%M%S")
    except ValueError:
        return None


def episodes(store: Store, kind: str | None = None) -> list[dict[str, Any]]:
    from iolens.present.cli.diagnosis import episode_rows

    rows = episode_rows(store, kind=kind)
    for r in rows:
        r["key"] = episode_key(r["kind"], r["component"], r["start"])
    rows.sort(key=lambda r: r["start"], reverse=True)
    return rows


def episode_detail(store: Store, key: str) -> dict[str, Any] | None:
    parsed = parse_episode_key(key)
    if parsed is None:
        return None
    kind, component, start = parsed
    match = [
        e
        for e in episodes(store, kind)
        if e["component"] == component and e["start"].replace(microsecond=0) == start
    ]
    if not match:
        return None
    e = match[0]
    end = e["end"] or latest_sample(store) or e["start"]
    pad = max(timedelta(minutes=15), (end - e["start"]) / 2)
    chart = component_series(
        store, component, e["start"] - pad, end + pad, bands=[[epoch(e["start"]), epoch(end), True]]
    )
    jobs = store.query(
        """
        SELECT s.job_id, any_value(j."user") AS "user", any_value(j.app) AS app,
               sum(coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0))::DOUBLE AS bytes,
               sum(coalesce(s.md_ops, 0))::DOUBLE AS md_ops
        FROM server_samples s LEFT JOIN jobs j USING (job_id)
        WHERE s.component_id = ? AND s.job_id IS NOT NULL AND s.ts > ? AND s.ts <= ?
        GROUP BY s.job_id ORDER BY bytes DESC, md_ops DESC LIMIT 25
        """,
        [component, e["start"], end],
    ).to_pylist()
    return {"episode": e, "chart": chart, "jobs": jobs}


def interference_page(store: Store) -> dict[str, Any]:
    rows = store.query(
        'SELECT i.victim, i.culprit, i.component_id, i.feature, i."start", i."end", i.delay_s, '
        'i.score, v."user" AS victim_user, c."user" AS culprit_user, v.app AS victim_app, '
        "c.app AS culprit_app FROM interference i LEFT JOIN jobs v ON v.job_id = i.victim "
        "LEFT JOIN jobs c ON c.job_id = i.culprit ORDER BY i.delay_s DESC"
    ).to_pylist()
    ids: dict[str, tuple[str, float]] = {}
    for r in rows:
        for role, jid in (("victim", r["victim"]), ("culprit", r["culprit"])):
            old = ids.get(jid, ("", 0.0))
            ids[jid] = (role if old[0] in ("", role) else "both", old[1] + r["delay_s"])
    colours = {"victim": "#6baed6", "culprit": "#fb6a4a", "both": "#fdae6b"}
    apps = {r["victim"]: r["victim_app"] for r in rows}
    apps |= {r["culprit"]: r["culprit_app"] for r in rows}
    nodes = [
        (jid, f"{jid} {apps.get(jid) or ''}".strip(), f"/jobs/{jid}", colours[role])
        for jid, (role, _) in sorted(ids.items())
    ]
    pair: dict[tuple[str, str], float] = {}
    for r in rows:
        pair[(r["culprit"], r["victim"])] = pair.get((r["culprit"], r["victim"]), 0) + r["delay_s"]
    edges = [(a, b, d, f"{a} slowed {b} by {d:.0f} s") for (a, b), d in pair.items()]
    return {
        "rows": rows,
        "graph_svg": svg.graph(nodes, edges, label="interference graph") if nodes else None,
    }


def mds_page(store: Store, bin_s: int = 300) -> dict[str, Any]:
    from iolens.analyze.system import mds_load, to_plain

    view = to_plain(mds_load(store, bin_s=bin_s))
    chart = None
    if view["bins"]:
        x = [epoch(b["start"]) for b in view["bins"]]
        chart = {
            "title": f"MDS metadata ops/s ({bin_s // 60} min bins): jobs and other clients",
            "x": x,
            "bands": [],
            "yLabel": "ops/s",
            "series": [
                {
                    "label": "jobs ops/s",
                    "color": svg.READ,
                    "values": [b["job_ops"] / bin_s for b in view["bins"]],
                },
                {
                    "label": "other clients ops/s",
                    "color": svg.OTHER,
                    "values": [b["other_ops"] / bin_s for b in view["bins"]],
                },
                {
                    "label": "peak ops/s",
                    "color": "#d62728",
                    "values": [b["peak_rate"] for b in view["bins"]],
                },
            ],
        }
    levels = view.get("load_levels") or {}
    levels_svg = (
        svg.bars(
            list(levels),
            [("share of time", "#9467bd", [100 * v for v in levels.values()])],
            ylabel="% of time at load",
            label="MDS load distribution",
            fmt=lambda v: f"{v:.1f} %",
        )
        if levels
        else None
    )
    return {"view": view, "chart": chart, "levels_svg": levels_svg}


def switches_page(store: Store) -> dict[str, Any]:
    from iolens.analyze.system import switch_traffic, to_plain

    view = to_plain(switch_traffic(store))
    per = (
        svg.bars(
            [s["component_id"] for s in view["switches"]],
            [
                ("read", svg.READ, [s["read_bytes"] / 2**30 for s in view["switches"]]),
                ("write", svg.WRITE, [s["write_bytes"] / 2**30 for s in view["switches"]]),
            ],
            ylabel="GiB through each switch",
            label="switch traffic",
            fmt=lambda v: f"{v:,.1f} GiB",
        )
        if view["switches"]
        else None
    )
    hist = (
        svg.bars(
            [f"{b['low'] / 2**30:,.0f}-{b['high'] / 2**30:,.0f} GiB" for b in view["histogram"]],
            [("switches", "#8c564b", [b["switches"] for b in view["histogram"]])],
            ylabel="switches per volume bracket",
            label="switch volume histogram",
        )
        if view["histogram"]
        else None
    )
    return {"view": view, "per_svg": per, "hist_svg": hist}


def top_page(store: Store, limit: int = 15) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col in ("user", "app"):
        rows = store.query(
            f"""
            SELECT j."{col}" AS name, count(*) AS jobs,
                   sum(coalesce(s.read_bytes, 0))::DOUBLE AS r,
                   sum(coalesce(s.write_bytes, 0))::DOUBLE AS w,
                   sum(coalesce(s.md_ops, 0))::DOUBLE AS md,
                   sum(coalesce(s.io_time_s, 0)) AS io_s, sum(coalesce(s.findings, 0)) AS f
            FROM jobs j LEFT JOIN job_summaries s USING (job_id)
            GROUP BY 1 ORDER BY r + w DESC NULLS LAST LIMIT {int(limit)}
            """
        ).to_pylist()
        out[col] = rows
        out[f"{col}_svg"] = (
            svg.bars(
                [str(r["name"]) for r in rows],
                [
                    ("read", svg.READ, [r["r"] / 2**30 for r in rows]),
                    ("write", svg.WRITE, [r["w"] / 2**30 for r in rows]),
                ],
                ylabel="GiB",
                label=f"top {col}s by I/O",
                fmt=lambda v: f"{v:,.1f} GiB",
            )
            if rows
            else None
        )
    return out


FACTOR_COLUMNS = ("bandwidth", *ZOOMIN_FACTORS)


def factors_page(store: Store, app: str | None = None) -> dict[str, Any]:
    """The platform's factor correlations and one application's parallel coordinates, from
    `job_factors` (Darshan imports): drawn by `iolens.present.plots` (the zoom-in paper's
    Figures 2 and 5), or by the plain SVG here if that package cannot draw them."""
    rows = store.query("SELECT * FROM job_factors ORDER BY job_id").to_pylist()
    if not rows:
        return {"rows": 0, "apps": [], "corr_svg": None, "parallel_svg": None, "app": None}
    apps = sorted({r["app"] for r in rows if r["app"]})
    cols = [c for c in FACTOR_COLUMNS if sum(r[c] is not None for r in rows) >= 2]
    chosen = app if app in apps else (apps[0] if apps else None)
    mine = [r for r in rows if r["app"] == chosen]
    corr_svg = par_svg = None
    try:
        from iolens.analyze.darshan.zoomin.platform import correlation
        from iolens.present.plots import correlation_heatmap, parallel_coordinates

        corr_svg = correlation_heatmap(correlation(rows, cols))
        par_svg = parallel_coordinates(mine, [c for c in cols], color_by="user") if mine else None
    except (ImportError, ValueError, KeyError):  # the plain SVG below still shows the data
        pass
    if corr_svg is None:
        matrix = np.array(
            [[np.nan if r[c] is None else float(r[c]) for c in cols] for r in rows], dtype=float
        )
        corr = _nan_corr(matrix)
        corr_svg = svg.heatmap(
            cols,
            cols,
            lambda i, j: None if math.isnan(corr[i][j]) else svg.diverging(corr[i][j]),
            lambda i, j: (
                f"{cols[i]} ~ {cols[j]}: "
                + ("n/a" if math.isnan(corr[i][j]) else f"{corr[i][j]:+.2f}")
            ),
            label="factor correlation heatmap",
            col_every=1,
            cell_w=34.0,
            legend=[("-1", svg.diverging(-1)), ("0", svg.diverging(0)), ("+1", svg.diverging(1))],
        )
    if par_svg is None and mine:
        palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
        par_svg = svg.parallel(
            cols,
            [(r["job_id"], [r[c] for c in cols], palette[i % 6]) for i, r in enumerate(mine)],
            label=f"parallel coordinates of {chosen}",
        )
    return {
        "rows": len(rows),
        "apps": apps,
        "app": chosen,
        "columns": cols,
        "corr_svg": corr_svg,
        "parallel_svg": par_svg,
    }


def _nan_corr(m: np.ndarray) -> list[list[float]]:
    k = m.shape[1]
    out = [[math.nan] * k for _ in range(k)]
    for i in range(k):
        for j in range(k):
            ok = ~np.isnan(m[:, i]) & ~np.isnan(m[:, j])
            a, b = m[ok, i], m[ok, j]
            if len(a) >= 2 and a.std() > 0 and b.std() > 0:
                out[i][j] = float(np.corrcoef(a, b)[0, 1])
    return out


def admin_component(
    store: Store, component_id: str, since: datetime | None, until: datetime | None
) -> dict[str, Any] | None:
    kinds = store.query(
        "SELECT kind, parent, peak_bw, peak_ops FROM components WHERE component_id = ?",
        [component_id],
    ).to_pylist()
    eps = [e for e in episodes(store) if e["component"] == component_id]
    bands = [[epoch(e["start"]), epoch(e["end"] or e["start"]), True] for e in eps]
    chart = component_series(store, component_id, since, until, bands=bands)
    if chart is None and not kinds:
        return None
    cond, params = "s.component_id = ? AND s.job_id IS NOT NULL", [component_id]
    if since:
        cond += " AND s.ts > ?"
        params.append(since)
    if until:
        cond += " AND s.ts <= ?"
        params.append(until)
    jobs = store.query(
        f"""
        SELECT s.job_id, any_value(j."user") AS "user", any_value(j.app) AS app,
               sum(coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0))::DOUBLE AS bytes,
               sum(coalesce(s.md_ops, 0))::DOUBLE AS md_ops, min(s.ts) AS first, max(s.ts) AS last
        FROM server_samples s LEFT JOIN jobs j USING (job_id) WHERE {cond}
        GROUP BY s.job_id ORDER BY bytes DESC, md_ops DESC LIMIT 25
        """,
        params,
    ).to_pylist()
    return {
        "component": kinds[0] if kinds else {},
        "chart": chart,
        "episodes": eps,
        "jobs": jobs,
    }
