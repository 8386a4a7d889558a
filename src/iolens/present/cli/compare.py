"""`iolens compare`: rank runs of one application over server-side metrics (K computer 6.6)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from iolens.present.cli import render
from iolens.present.cli.app import DbOption, JsonOption, open_db, out


def _fmt(value: float | None, unit: str | None) -> str:
    if value is None:
        return "-"
    if unit == "bytes/s":
        return render.human_rate(value)
    if unit == "ratio":
        return f"{100 * value:.1f}%"
    return f"{value:,.4g}"


def _rank(r: float | None) -> str:
    if r is None:
        return ""
    return f" ({r:g})"


def _print(data: dict[str, Any]) -> None:
    metrics = data["metrics"]
    table = Table(
        title="Runs ranked over server-side metrics (rank 1 = best; score = mean rank, lower "
        "is better)",
        header_style="bold",
        pad_edge=False,
    )
    table.add_column("#", justify="right")
    table.add_column("job")
    table.add_column("app")
    table.add_column("procs", justify="right")
    for m in metrics:
        arrow = "↓" if m["better"] == "lower" else "↑"
        table.add_column(f"{m['name']} {arrow}", justify="right")
    table.add_column("score", justify="right")
    for r in data["runs"]:
        table.add_row(
            str(r["position"]),
            r["job_id"],
            str(r["app"] or "-"),
            str(r["nprocs"] or "-"),
            *[
                _fmt(r["metrics"][m["name"]], m["unit"]) + _rank(r["ranks"].get(m["name"]))
                for m in metrics
            ],
            f"{r['score']:.2f}",
        )
    out.print(table)
    for m in metrics:
        src = f"from {m['source']}" if m["source"] else "no data"
        line = f"  {m['name']}: {m['label']} ({m['paper']}), {m['better']} is better, {src}"
        if m["skipped"]:
            line += f" — not ranked: {m['skipped']}"
        out.print(line, highlight=False)
    for w in data["warnings"]:
        out.print(f"[yellow]warning:[/] {w}")
    out.print(f"Best: job {data['best']}; worst: job {data['worst']}.")


def compare(
    job_ids: Annotated[
        list[str] | None, typer.Argument(help="Jobs to compare (runs of one application).")
    ] = None,
    db: DbOption = None,
    tag: Annotated[
        str | None,
        typer.Option(help="Also compare every job of this application (scheduler job name)."),
    ] = None,
    tick_ns: Annotated[
        float | None,
        typer.Option(help="Length of an InfiniBand port_xmit_wait tick, to report waits in s."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Rank runs of one application with different settings by server-side metrics.

    Ranked over the servers' and links' view of them (OSS queue depth, wait, active
    threads; link utilisation and wait; mean OST bandwidth), each in its right direction,
    and by mean rank (K computer Tables 6.1/6.2)."""
    from iolens.analyze.compare import compare as rank_runs
    from iolens.analyze.compare import jobs_with_tag

    ids = list(job_ids or [])
    with open_db(db) as store:
        if tag is not None:
            tagged = jobs_with_tag(store, tag)
            if not tagged:
                raise typer.BadParameter(f"no jobs of application {tag!r}", param_hint="'--tag'")
            ids += tagged
        if len(dict.fromkeys(ids)) < 2:
            raise typer.BadParameter("give at least two job ids, or a --tag with two or more jobs")
        data = rank_runs(store, ids, tick_ns)
    if as_json:
        print(render.to_json(data))
    else:
        _print(data)
