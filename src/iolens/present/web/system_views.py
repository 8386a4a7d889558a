"""The data behind the admins' system views and their REST twins: the system now, load by
hour, interference, the MDS, switches, top users and applications, the zoom-in factors,
and one component over a period (JSON-ready dicts and server-drawn SVG)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from iolens.model.schema import ZOOMIN_FACTORS
from iolens.present.web import svg
from iolens.present.web.charts import component_series, epoch, latest_sample
from iolens.present.web.episode_views import episode_key, episodes, jobs_on
from iolens.store.base import Store

#: Tile groups of the system-now page and the sample kinds behind them. The metadata load
#: is the MDT's (md_stats, kind `mdt`); kind `mds` is the MDS host's request queue.
NOW_KINDS = {"forwarder": "forwarder", "ost": "ost", "mds": "mdt"}


def system_now(store: Store, at: datetime | None = None, minutes: int = 5) -> dict[str, Any]:
    """Every forwarder, OST and MDT: peak one-minute load of the last `minutes`, by level.

    A level is against the component's benchmarked peak (`components.peak_bw`/`peak_ops`,
    from the site topology); without one, against the busiest of its kind in the window,
    and `no_peak` lists those components so the page can say so.
    """
    from iolens.analyze.system import level_of

    t1 = at or latest_sample(store)
    if t1 is None:
        return {"at": None, "kinds": {}, "no_peak": {}, "running": [], "episodes": []}
    t0 = t1 - timedelta(minutes=minutes)
    rows = store.query(
        """
        WITH m AS (
            SELECT kind, component_id, (epoch_us(ts) - 1) // 60000000 AS minute,
                   sum(coalesce(read_bytes, 0) + coalesce(write_bytes, 0)) / sum(interval_s) AS bps,
                   sum(coalesce(md_ops, 0)) / sum(interval_s) AS ops,
                   avg(service_us) AS service_us
            FROM server_samples
            WHERE job_id IS NULL AND kind IN ('forwarder', 'ost', 'mdt')
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
    no_peak: dict[str, list[str]] = {}
    for kind, sampled in NOW_KINDS.items():
        mine = [r for r in rows if r["kind"] == sampled]
        meta = kind == "mds"
        observed = max((float(r["ops" if meta else "bps"] or 0) for r in mine), default=0.0)
        for r in mine:
            rate = float(r["ops" if meta else "bps"] or 0.0)
            peak = r["peak_ops" if meta else "peak_bw"]
            if not peak:
                no_peak.setdefault(kind, []).append(r["component_id"])
            cap = peak or observed or 1.0
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
    return {
        "at": t1,
        "minutes": minutes,
        "kinds": kinds,
        "no_peak": no_peak,
        "running": running,
        "episodes": episodes,
    }


def all_idle(now: dict[str, Any]) -> bool:
    """Every tile of a `system_now` is idle (or there are none)."""
    return all(c["level"] == "idle" for comps in now["kinds"].values() for c in comps)


def latest_activity(store: Store) -> datetime | None:
    """The end of the newest minute in which some forwarder, OST or MDT was above idle:
    the admins' landing page when the newest minutes are all idle (a drained machine, a
    replay that ended). Above idle is `level_of`'s line against the benchmarked peak; a
    component without one is above idle whenever it moved anything, as `system_now` then
    measures it against the busiest of its kind."""
    from iolens.analyze.system.load import LEVELS

    idle_below = dict(LEVELS)["low"]
    rows = store.query(
        """
        WITH m AS (
            SELECT kind, component_id, (epoch_us(ts) - 1) // 60000000 AS minute,
                   sum(coalesce(read_bytes, 0) + coalesce(write_bytes, 0)) / sum(interval_s) AS bps,
                   sum(coalesce(md_ops, 0)) / sum(interval_s) AS ops
            FROM server_samples
            WHERE job_id IS NULL AND kind IN ('forwarder', 'ost', 'mdt') AND interval_s > 0
            GROUP BY ALL)
        SELECT make_timestamp((max(minute) + 1) * 60000000) AS t
        FROM m LEFT JOIN components c USING (component_id)
        WHERE CASE WHEN m.kind = 'mdt'
                   THEN (CASE WHEN c.peak_ops > 0 THEN ops / c.peak_ops >= ? ELSE ops > 0 END)
                   ELSE (CASE WHEN c.peak_bw > 0 THEN bps / c.peak_bw >= ? ELSE bps > 0 END)
              END
        """,
        [idle_below, idle_below],
    ).to_pylist()
    return rows[0]["t"] if rows else None


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
        "graph_svg": (
            svg.graph(
                nodes,
                edges,
                label="interference graph",
                legend=[
                    (role, c)
                    for role, c in colours.items()
                    if any(r == role for r, _ in ids.values())
                ],
            )
            if nodes
            else None
        ),
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
    """Beacon 4.4's switch traffic, or, without it, why not (the view's `missing`)."""
    from iolens.analyze.system import switch_traffic, to_plain

    view = to_plain(switch_traffic(store))
    per = (
        svg.bars(
            [s["component_id"] for s in view["switches"]],
            [
                ("from hosts", svg.WRITE, [s["tx_bytes"] / 2**30 for s in view["switches"]]),
                ("to hosts", svg.READ, [s["rx_bytes"] / 2**30 for s in view["switches"]]),
            ],
            ylabel="GiB between each switch and its hosts",
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
    return {"view": view, "per_svg": per, "hist_svg": hist, **routers_part(store)}


#: Router load levels drawn (fraction of the busiest router-minute): the legend lists each.
ROUTER_LEVELS = (0.25, 0.5, 0.75, 1.0)


def routers_part(store: Store) -> dict[str, Any]:
    """LNet routers beside the switches: bytes each routed and its load per minute, cells
    coloured at the level (`ROUTER_LEVELS`) their rate reaches so the legend names every
    colour drawn."""
    from iolens.analyze.system import router_traffic, to_plain

    view = to_plain(router_traffic(store))
    if not view["routers"]:
        return {"routers": view, "routers_svg": None, "routers_time_svg": None}
    names = [r["component_id"] for r in view["routers"]]
    per = svg.bars(
        names,
        [("routed", svg.WRITE, [r["bytes"] / 2**30 for r in view["routers"]])],
        ylabel="GiB routed",
        label="LNet router traffic",
        fmt=lambda v: f"{v:,.1f} GiB",
    )
    top = max((v for n in names for v in view["rates"][n] if v is not None), default=0.0) or 1.0
    mins = [m.strftime("%m-%d %H:%M") for m in view["minutes"]]

    def level(i: int, j: int) -> float | None:
        v = view["rates"][names[i]][j]
        return None if v is None else next(x for x in ROUTER_LEVELS if v / top <= x + 1e-12)

    def colour(i: int, j: int) -> str | None:
        x = level(i, j)
        return None if x is None else svg.ramp(x)

    def title(i: int, j: int) -> str:
        v = view["rates"][names[i]][j]
        return f"{names[i]} {mins[j]}: " + ("no sample" if v is None else f"{v / 2**20:,.1f} MiB/s")

    legend = [(f"<= {x * top / 2**20:,.0f} MiB/s", svg.ramp(x)) for x in ROUTER_LEVELS]
    over_time = svg.heatmap(
        names, mins, colour, title, label="LNet router load per minute", legend=legend
    )
    return {"routers": view, "routers_svg": per, "routers_time_svg": over_time}


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
    if len(rows) < 2 or not cols:  # one job correlates with nothing: nothing to draw yet
        return {"rows": len(rows), "apps": apps, "app": chosen, "columns": cols,
                "corr_svg": None, "parallel_svg": None}  # fmt: skip
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
        users = sorted({str(r["user"]) for r in mine})  # coloured by user, as plots' version
        hue = {u: palette[i % len(palette)] for i, u in enumerate(users)}
        par_svg = svg.parallel(
            cols,
            [(r["job_id"], [r[c] for c in cols], hue[str(r["user"])]) for r in mine],
            label=f"parallel coordinates of {chosen}",
            legend=[(u, hue[u]) for u in users],
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
    kind = kinds[0]["kind"] if kinds else None
    jobs, jobs_note = jobs_on(store, component_id, kind, since, until)
    return {
        "component": kinds[0] if kinds else {},
        "chart": chart,
        "episodes": eps,
        "jobs": jobs,
        "jobs_note": jobs_note,
    }
