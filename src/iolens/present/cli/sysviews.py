"""`iolens sysview ...`: Beacon's and the K computer's system tables for administrators.

Each subcommand prints one view of `iolens.analyze.system` (the same JSON the REST API
serves under `/api/admin/sysview/<name>` and the admin page `/admin/sysviews` draws).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from iolens.present.cli import render
from iolens.present.cli.app import DbOption, JsonOption, open_db, out
from iolens.present.cli.system import time_bound

sysview_app = typer.Typer(
    help="System views for administrators: anomaly durations, volume by core-hours, "
    "I/O-mode mix, MDS load by client system, OSTs by position.",
    no_args_is_help=True,
)

SinceOption = Annotated[str | None, typer.Option(help="ISO time (UTC) or a span like 24h.")]
UntilOption = Annotated[str | None, typer.Option(help="ISO time (UTC) or a span back.")]
MinBytesOption = Annotated[
    int,
    typer.Option(
        "--min-bytes", min=0, help="Leave out jobs moving fewer bytes (Beacon: 200000000)."
    ),
]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _emit(view: Any, as_json: bool) -> dict[str, Any] | None:
    """Print the JSON and return None, or return the plain dict to draw."""
    from iolens.analyze.system import to_plain

    plain = to_plain(view)
    if as_json:
        print(render.to_json(plain))
        return None
    return plain


@sysview_app.command("durations")
def durations(
    db: DbOption = None, since: SinceOption = None, until: UntilOption = None,
    as_json: JsonOption = False,
) -> None:  # fmt: skip
    """Anomaly episodes by duration class (hours) and layer (Beacon Table 2)."""
    from iolens.analyze.system.anomaly_durations import anomaly_durations

    t0, t1 = time_bound(since, "since"), time_bound(until, "until")
    with open_db(db) as store:
        d = _emit(anomaly_durations(store, t0, t1), as_json)
    if d is None:
        return
    if not d["total"]:
        out.print("No anomaly episodes stored (run `iolens analyze`).")
        return
    t = Table(title="Anomaly episodes by duration (hours) and layer", header_style="bold")
    t.add_column("duration")
    for layer in d["layers"]:
        t.add_column(layer, justify="right")
    for c in d["classes"]:
        t.add_row(c, *(str(d["counts"][c][lay]) for lay in d["layers"]))
    t.add_row("ongoing", *(str(d["ongoing"][lay]) for lay in d["layers"]))
    out.print(t)


@sysview_app.command("corehours")
def corehours(
    db: DbOption = None, min_bytes: MinBytesOption = 0, as_json: JsonOption = False
) -> None:
    """Average I/O volume per job by core-hour class (Beacon Table 3)."""
    from iolens.analyze.system.volume_by_corehours import volume_by_corehours

    with open_db(db) as store:
        d = _emit(volume_by_corehours(store, min_bytes), as_json)
    if d is None:
        return
    t = Table(title="Average I/O volume per job by core-hours", header_style="bold")
    for col in ("core-hours", "jobs", "avg read", "avg write"):
        t.add_column(col, justify="left" if col == "core-hours" else "right")
    for c in d["classes"]:
        t.add_row(
            c["label"],
            str(c["jobs"]),
            render.human_bytes(c["avg_read"]),
            render.human_bytes(c["avg_write"]),
        )
    out.print(t)
    out.print("core-hours = processes x run time; unknown: no process count or no end yet")


@sysview_app.command("modes")
def modes(db: DbOption = None, min_bytes: MinBytesOption = 0, as_json: JsonOption = False) -> None:
    """I/O-mode mix (N-N, N-1, N-M, 1-1) by volume and by job count (Beacon Table 4, Fig. 9)."""
    from iolens.analyze.system.io_mode_mix import io_mode_mix

    with open_db(db) as store:
        d = _emit(io_mode_mix(store, min_bytes), as_json)
    if d is None:
        return
    t = Table(title="I/O modes by volume and job count", header_style="bold")
    cols = ("mode", "jobs", "jobs %", "read %", "write %", "avg read", "avg write")
    for col in cols:
        t.add_column(col, justify="left" if col == "mode" else "right")
    for m in d["modes"]:
        t.add_row(
            m["mode"],
            str(m["jobs"]),
            _pct(m["job_share"]),
            _pct(m["read_share"]),
            _pct(m["write_share"]),
            render.human_bytes(m["avg_read"]),
            render.human_bytes(m["avg_write"]),
        )
    out.print(t)


@sysview_app.command("mds-clients")
def mds_clients(
    db: DbOption = None, since: SinceOption = None, until: UntilOption = None,
    top: Annotated[int, typer.Option(min=1, help="Busiest clients to list per role.")] = 5,
    as_json: JsonOption = False,
) -> None:  # fmt: skip
    """MDS load split by client system: compute/forwarders, login, other (Beacon Fig. 10(b))."""
    from iolens.analyze.system.mds_clients import mds_clients as view

    t0, t1 = time_bound(since, "since"), time_bound(until, "until")
    with open_db(db) as store:
        d = _emit(view(store, t0, t1, top), as_json)
    if d is None:
        return
    if not d["total_ops"]:
        out.print("No per-client MDT counters (mdt_client) in this window.")
        return
    t = Table(title="Metadata operations by client system", header_style="bold")
    for col in ("role", "ops", "share", "busiest clients"):
        t.add_column(col, justify="right" if col in ("ops", "share") else "left")
    for role, ops in d["roles"].items():
        busiest = ", ".join(c["host"] or c["nid"] for c in d["top"][role])
        t.add_row(role, f"{ops:,}", _pct(d["shares"][role]), busiest)
    out.print(t)
    out.print(d["rule"] + ".", highlight=False)


@sysview_app.command("osts")
def osts(
    db: DbOption = None, since: SinceOption = None, until: UntilOption = None,
    job: Annotated[str | None, typer.Option(help="Only this job's bytes (its jobstats).")] = None,
    as_json: JsonOption = False,
) -> None:  # fmt: skip
    """Bytes per OST laid out by OSS and OST index (the K computer's positional maps)."""
    from iolens.analyze.system.ost_positions import ost_positions

    t0, t1 = time_bound(since, "since"), time_bound(until, "until")
    with open_db(db) as store:
        d = _emit(ost_positions(store, t0, t1, job), as_json)
    if d is None:
        return
    if not d["servers"]:
        out.print("No OSTs known (no topology and no OST samples).")
        return
    t = Table(title="Bytes per OST by position (read + write)", header_style="bold")
    t.add_column("OSS")
    width = max(len(r) for r in d["grid"])
    for i in range(width):
        t.add_column(f"slot {i}", justify="right")
    for oss, row in zip(d["servers"], d["grid"], strict=True):
        cells = [f"{c['ost']}: {render.human_bytes(c['read_bytes'] + c['write_bytes'])}"
                 for c in row]  # fmt: skip
        t.add_row(oss, *cells, *([""] * (width - len(cells))))
    out.print(t)


def register(app: typer.Typer) -> None:
    """Add `iolens sysview` to the command line."""
    app.add_typer(sysview_app, name="sysview")
