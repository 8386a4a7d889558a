"""The admins' system-views page (`/admin/sysviews`): Beacon's Tables 2-4, Figures 9,
10(b) and 13, and the K computer's positional OST map, as JSON-ready dicts and SVG.

The numbers come from `iolens.analyze.system` (the same functions `iolens sysview` and
`/api/admin/sysview/<name>` serve); this module only draws them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from iolens.present.web import svg
from iolens.store.base import Store

GIB = 2**30
#: The views by name: REST path segment -> builder of the plain JSON.
VIEWS = ("durations", "corehours", "modes", "mds-clients", "osts")


def view_data(
    store: Store,
    name: str,
    start: datetime | None = None,
    end: datetime | None = None,
    job_id: str | None = None,
    min_bytes: int = 0,
) -> dict[str, Any]:
    """One view's plain JSON (KeyError for an unknown name); `min_bytes` leaves jobs moving
    fewer bytes out of corehours and modes (Beacon's 200 MB "non-trivial I/O")."""
    from iolens.analyze.system import to_plain
    from iolens.analyze.system.anomaly_durations import anomaly_durations
    from iolens.analyze.system.io_mode_mix import io_mode_mix
    from iolens.analyze.system.mds_clients import mds_clients
    from iolens.analyze.system.ost_positions import ost_positions
    from iolens.analyze.system.volume_by_corehours import volume_by_corehours

    build: dict[str, Callable[[], Any]] = {
        "durations": lambda: anomaly_durations(store, start, end),
        "corehours": lambda: volume_by_corehours(store, min_bytes),
        "modes": lambda: io_mode_mix(store, min_bytes),
        "mds-clients": lambda: mds_clients(store, start, end),
        "osts": lambda: ost_positions(store, start, end, job_id),
    }
    return to_plain(build[name]())


def sysview_page(store: Store, min_bytes: int = 0) -> dict[str, Any]:
    """Every view's data and figure, for the page."""
    d = {name: view_data(store, name, min_bytes=min_bytes) for name in VIEWS}
    modes = d["modes"]["modes"]
    ch = d["corehours"]["classes"]
    roles = d["mds-clients"]["roles"]
    return {
        **{k.replace("-", "_"): v for k, v in d.items()},
        "corehours_svg": svg.bars(
            [c["label"] for c in ch],
            [
                ("avg read", svg.READ, [(c["avg_read"] or 0) / GIB for c in ch]),
                ("avg write", svg.WRITE, [(c["avg_write"] or 0) / GIB for c in ch]),
            ],
            ylabel="GiB per job",
            label="average I/O volume by core-hours",
            fmt=lambda v: f"{v:,.1f}",
        ),
        "modes_svg": svg.bars(
            [m["mode"] for m in modes],
            [
                ("read volume", svg.READ, [100 * (m["read_share"] or 0) for m in modes]),
                ("write volume", svg.WRITE, [100 * (m["write_share"] or 0) for m in modes]),
                ("jobs", svg.META, [100 * (m["job_share"] or 0) for m in modes]),
            ],
            ylabel="% of all",
            label="I/O-mode mix by volume and job count",
            fmt=lambda v: f"{v:.1f} %",
        ),
        "mds_clients_svg": (
            svg.bars(
                list(roles),
                [("metadata ops", svg.OTHER, [v / 1e6 for v in roles.values()])],
                ylabel="metadata ops, millions",
                label="MDS load by client system",
                fmt=lambda v: f"{v:,.2f} M",
            )
            if d["mds-clients"]["total_ops"]
            else None
        ),
        "osts_svg": ost_map_svg(d["osts"]),
    }


def ost_map_svg(v: dict[str, Any]) -> str | None:
    """The OSS x index grid, each cell shaded by its bytes against the busiest OST."""
    if not v["servers"]:
        return None
    width = max(len(r) for r in v["grid"])
    top = v["max_bytes"] or 1
    grid = v["grid"]

    def cell(i: int, j: int) -> dict[str, Any] | None:
        return grid[i][j] if j < len(grid[i]) else None

    def colour(i: int, j: int) -> str | None:
        c = cell(i, j)
        return None if c is None else svg.ramp((c["read_bytes"] + c["write_bytes"]) / top)

    def title(i: int, j: int) -> str:
        c = cell(i, j)
        if c is None:
            return ""
        gib = (c["read_bytes"] + c["write_bytes"]) / GIB
        return f"{c['ost']} on {v['servers'][i]}: {gib:,.1f} GiB"

    def href(i: int, j: int) -> str | None:
        c = cell(i, j)
        return None if c is None else f"/admin/components/{c['ost']}"

    return svg.heatmap(
        v["servers"],
        [str(j) for j in range(width)],
        colour,
        title,
        cell_href=href,
        label="OSTs by position",
        col_every=1,
        cell_w=40.0,
        legend=[
            ("0", svg.ramp(0)),
            ("half", svg.ramp(0.5)),
            (f"{top / GIB:,.1f} GiB", svg.ramp(1)),
        ],
    )


def query_time_svg(summary: dict[str, Any]) -> str | None:
    """Beacon Figure 13: the CDF of the server's own query times, cached and computed."""
    series = [
        (f"from cache ({summary['cached']['n']})", svg.READ, summary["cached"]["seconds"]),
        (f"computed ({summary['computed']['n']})", svg.WRITE, summary["computed"]["seconds"]),
    ]
    if not summary["queries"]:
        return None
    return svg.cdf(series, xlabel="query time, seconds", label="query time CDF")
