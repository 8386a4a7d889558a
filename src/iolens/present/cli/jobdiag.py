"""`iolens interference`: the jobs that slowed one job's I/O, and through what."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer
from rich.table import Table

from iolens.present.cli import render
from iolens.present.cli.app import DbOption, JsonOption, ensure_analyzed, err, open_db, out


def _span(row: dict[str, str | None]) -> str:
    """Length of a culprit's window, as 5m12s."""
    if not row["start"] or not row["end"]:
        return "-"
    secs = int(
        (
            datetime.fromisoformat(row["end"][:-1]) - datetime.fromisoformat(row["start"][:-1])
        ).total_seconds()
    )
    return f"{secs // 60}m{secs % 60:02d}s" if secs >= 60 else f"{secs}s"


def interference(
    job_id: Annotated[str, typer.Argument(help="The victim's scheduler job id.")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Culprit jobs that slowed a job's I/O on shared forwarders, OSTs or the MDS."""
    from iolens.analyze.jobs.interference import culprits, interference_gaps
    from iolens.store import queries

    with open_db(db) as store:
        queries.job(store, job_id)  # an unknown job is a one-line error
        ensure_analyzed(store)
        rows = culprits(store, job_id)
        gaps = interference_gaps(store)
    if as_json:
        print(render.to_json({"culprits": rows, "not_assessed": gaps}))
        return
    for g in gaps:
        err.print(f"Not assessed: {g['missing']}. {g['remedy']}")
    if not rows:
        out.print(f"No job slowed job {job_id}'s I/O enough to name it.", style="green")
        return
    table = Table(title=f"Jobs that slowed job {job_id}", header_style="bold", pad_edge=False)
    for col, justify in (
        ("culprit", "right"),
        ("component", "left"),
        ("feature", "left"),
        ("delay", "right"),
        ("of I/O", "right"),
        ("window (UTC)", "left"),
    ):
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for r in rows:
        table.add_row(
            r["job_id"],
            r["component"],
            r["feature"],
            f"{r['delay_s']:,.0f} s",
            f"{r['score']:.0%}" if r["score"] is not None else "-",
            f"{render.human_time(r['start'])} +{_span(r)}",
        )
    out.print(table)
