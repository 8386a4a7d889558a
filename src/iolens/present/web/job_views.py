"""The data behind a job's page and its REST twin, as JSON-ready dicts (and server-drawn SVG).

Each function reads the store through the analyses that already exist (`views`,
`analyze.jobs`, `analyze.system`, the component detectors' episodes) and shapes the result
for a chart: time series become `{"x": [epoch s], "series": [...]}` for uPlot, categorical
views become SVG (`svg.py`). None of them knows who asks: the routes apply `scope` first
and filter what depends on the caller (other users' jobs) after.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from iolens.errors import IolensError
from iolens.present.web import svg
from iolens.present.web.charts import MiB, downsample, epoch, naive_t
from iolens.present.web.episode_views import episodes_during
from iolens.store.base import Store

LAYER_COLOURS = {"compute": "#2ca02c", "forwarder": "#ff7f0e", "ost": "#1f77b4", "mds": "#9467bd"}


def is_live(job: dict[str, Any]) -> bool:
    return job.get("end") is None or (job.get("state") or "").upper() in ("RUNNING", "PENDING")


def job_page(store: Store, job_id: str) -> dict[str, Any]:
    """Everything the job page shows that does not depend on who asks (cached per job)."""
    from iolens.analyze import report
    from iolens.analyze.catalog import catalog
    from iolens.analyze.jobs.crosslayer import layer_series
    from iolens.analyze.jobs.interference import culprits
    from iolens.present import html_report, views
    from iolens.store.darshan import load_jobs

    try:
        full = report.build(store, job_id, with_series=True)  # the series are for the plots
    except IolensError:
        raise
    except Exception as exc:  # the job's data breaks the report: an error page that says so
        raise views.AnalysisFailed(job_id, f"{type(exc).__name__}: {exc}") from exc
    job = views.job(store, job_id, built=full)  # the object `iolens job ID --json` prints
    bands = [[epoch(p["start"]), epoch(p["end"]), bool(p.get("anomalous"))] for p in job["phases"]]
    timeline = None
    if full.series is not None and len(full.series.read):
        s = full.series
        x, (rd, wr, md) = downsample(s.origin, 1.0, [s.read / MiB, s.write / MiB, s.md])
        timeline = {
            "title": "Client bytes moved per second (1-s bins, I/O phases shaded)",
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
        "ost_map_svg": job_ost_map_svg(store, job_id) if heat else None,
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


def job_ost_map_svg(store: Store, job_id: str) -> str | None:
    """The job's bytes per OST by position (OSS x index), beside its OST x time heatmap."""
    from iolens.analyze.system import to_plain
    from iolens.analyze.system.ost_positions import ost_positions
    from iolens.present.web.sysview_page import ost_map_svg

    return ost_map_svg(to_plain(ost_positions(store, job_id=job_id)))


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
    shade, legend = svg.steps(top / MiB, lambda v: f"{v:,.3g} MiB/s")
    return svg.heatmap(
        h.osts,
        cols,
        lambda i, j: shade(rates[i][j] / MiB) if rates[i][j] > 0 else IDLE,
        lambda i, j: f"{h.osts[i]} {cols[j]}: {rates[i][j] / MiB:,.1f} MiB/s",
        row_href=lambda i: f"/jobs/{job_id}/components/{h.osts[i]}",
        label="bytes per OST over time",
        legend=[("0", IDLE), *legend],
    )


IDLE = "#f5f5f5"  # a heatmap cell with no bytes


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


def reasoning(store: Store, job_id: str) -> dict[str, Any]:
    """SIOX's hierarchical reasoner on the job's traced I/O: the object `iolens reason ID
    --json` prints, with the same `[reasoner]` settings (the site TOML named by
    `IOLENS_SITE_CONFIG`, else the defaults). Empty of anomalies is a verdict too."""
    import os
    from pathlib import Path

    from iolens.analyze.reasoner.config import load
    from iolens.analyze.reasoner.job import reason_job

    site = os.environ.get("IOLENS_SITE_CONFIG")
    return reason_job(store, job_id, load(Path(site) if site else None))


#: forwarded activities the page shows per anomaly (the API has the whole ring)
RING_SHOWN = 5
