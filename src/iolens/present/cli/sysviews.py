"""`iolens sysview ...`: Beacon's and the K computer's system tables for administrators.

Each subcommand prints one view of `iolens.analyze.system` (the same JSON the REST API
serves under `/api/admin/sysview/<name>` and the admin page `/admin/sysviews` draws).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from iolens.present.cli import render
from iolens.present.cli.app import DbOption, JsonOption, open_db, out
from iolens.present.cli.system import time_bound

if TYPE_CHECKING:
    from iolens.store.base import Store

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


def _view(db: Path | None, build: Callable[[Store], Any], as_json: bool) -> dict[str, Any] | None:
    """Build the view on the store; print its JSON and return None, or return the plain
    dict to draw (every subcommand's one shape)."""
    from iolens.analyze.system import to_plain

    with open_db(db) as store:
        plain = to_plain(build(store))
    if as_json:
        print(render.to_json(plain))
        return None
    return plain


def _table(
    title: str, columns: Sequence[str], rows: Iterable[Sequence[str]], left: Sequence[str] = ()
) -> None:
    """Print a table: the first column and those in `left` left-aligned, numbers right."""
    t = Table(title=title, header_style="bold")
    for i, col in enumerate(columns):
        t.add_column(col, justify="left" if i == 0 or col in left else "right")
    for row in rows:
        t.add_row(*row)
    out.print(t)


@sysview_app.command("durations")
def durations(
    db: DbOption = None, since: SinceOption = None, until: UntilOption = None,
    as_json: JsonOption = False,
) -> None:  # fmt: skip
    """Anomaly episodes by duration class (hours) and layer (Beacon Table 2)."""
    from iolens.analyze.system.anomaly_durations import anomaly_durations

    t0, t1 = time_bound(since, "since"), time_bound(until, "until")
    d = _view(db, lambda store: anomaly_durations(store, t0, t1), as_json)
    if d is None:
        return
    if not d["total"]:
        out.print("No anomaly episodes stored (run `iolens analyze`).")
        return
    layers = d["layers"]
    rows = [[c, *(str(d["counts"][c][lay]) for lay in layers)] for c in d["classes"]]
    rows.append(["ongoing", *(str(d["ongoing"][lay]) for lay in layers)])
    _table("Anomaly episodes by duration (hours) and layer", ["duration", *layers], rows)


@sysview_app.command("corehours")
def corehours(
    db: DbOption = None, min_bytes: MinBytesOption = 0, as_json: JsonOption = False
) -> None:
    """Average I/O volume per job by core-hour class (Beacon Table 3)."""
    from iolens.analyze.system.volume_by_corehours import volume_by_corehours

    d = _view(db, lambda store: volume_by_corehours(store, min_bytes), as_json)
    if d is None:
        return
    _table(
        "Average I/O volume per job by core-hours",
        ("core-hours", "jobs", "avg read", "avg write"),
        (
            (c["label"], str(c["jobs"]), render.human_bytes(c["avg_read"]),
             render.human_bytes(c["avg_write"]))
            for c in d["classes"]
        ),
    )  # fmt: skip
    out.print("core-hours = processes x run time; unknown: no process count or no end yet")


@sysview_app.command("modes")
def modes(db: DbOption = None, min_bytes: MinBytesOption = 0, as_json: JsonOption = False) -> None:
    """I/O-mode mix (N-N, N-1, N-M, 1-1) by volume and by job count (Beacon Table 4, Fig. 9)."""
    from iolens.analyze.system.io_mode_mix import io_mode_mix

    d = _view(db, lambda store: io_mode_mix(store, min_bytes), as_json)
    if d is None:
        return
    _table(
        "I/O modes by volume and job count",
        ("mode", "jobs", "jobs %", "read %", "write %", "avg read", "avg write"),
        (
            (m["mode"], str(m["jobs"]), _pct(m["job_share"]), _pct(m["read_share"]),
             _pct(m["write_share"]), render.human_bytes(m["avg_read"]),
             render.human_bytes(m["avg_write"]))
            for m in d["modes"]
        ),
    )  # fmt: skip


@sysview_app.command("mds-clients")
def mds_clients(
    db: DbOption = None, since: SinceOption = None, until: UntilOption = None,
    top: Annotated[int, typer.Option(min=1, help="Busiest clients to list per role.")] = 5,
    as_json: JsonOption = False,
) -> None:  # fmt: skip
    """MDS load split by client system: compute/forwarders, login, other (Beacon Fig. 10(b))."""
    from iolens.analyze.system.mds_clients import mds_clients as view

    t0, t1 = time_bound(since, "since"), time_bound(until, "until")
    d = _view(db, lambda store: view(store, t0, t1, top), as_json)
    if d is None:
        return
    if not d["total_ops"]:
        out.print("No per-client MDT counters (mdt_client) in this window.")
        return
    _table(
        "Metadata operations by client system",
        ("role", "ops", "share", "busiest clients"),
        (
            (role, f"{ops:,}", _pct(d["shares"][role]),
             ", ".join(c["host"] or c["nid"] for c in d["top"][role]))
            for role, ops in d["roles"].items()
        ),
        left=("busiest clients",),
    )  # fmt: skip
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
    d = _view(db, lambda store: ost_positions(store, t0, t1, job), as_json)
    if d is None:
        return
    if not d["servers"]:
        out.print("No OSTs known (no topology and no OST samples).")
        return
    width = max(len(r) for r in d["grid"])
    rows = []
    for oss, row in zip(d["servers"], d["grid"], strict=True):
        cells = [f"{c['ost']}: {render.human_bytes(c['read_bytes'] + c['write_bytes'])}"
                 for c in row]  # fmt: skip
        rows.append([oss, *cells, *([""] * (width - len(cells)))])
    _table(
        "Bytes per OST by position (read + write)",
        ["OSS", *(f"slot {i}" for i in range(width))],
        rows,
    )


def register(app: typer.Typer) -> None:
    """Add `iolens sysview` to the command line."""
    app.add_typer(sysview_app, name="sysview")
