"""`iolens reason`: a job's anomalies by the hierarchical reasoner (process, node,
system), each with the activities that preceded it."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from iolens.present.cli import render
from iolens.present.cli.app import DbOption, JsonOption, SiteOption, open_db, out

#: forwarded activities shown per anomaly without --json (JSON has them all)
SHOWN = 5


def reason(
    job_id: Annotated[str, typer.Argument(help="The job's scheduler job id.")],
    site_config: SiteOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Anomalies of a job's traced I/O, judged process-local, node-wide or system-wide."""
    from iolens.analyze.reasoner.config import load
    from iolens.analyze.reasoner.job import reason_job
    from iolens.store import queries

    cfg = load(site_config)
    with open_db(db) as store:
        queries.job(store, job_id)  # an unknown job is a one-line error
        result = reason_job(store, job_id, cfg)
    if as_json:
        print(render.to_json(result))
        return
    if not result["activities"]:
        out.print(f"Job {job_id} has no traced I/O to reason over.")
        return
    anoms = result["anomalies"]
    if not anoms:
        out.print(
            f"No anomaly in job {job_id}'s {result['activities']:,} traced activities "
            f"({result['processes']} processes on {result['nodes']} nodes).",
            style="green",
        )
        return
    table = Table(title=f"Anomalies of job {job_id}", header_style="bold", pad_edge=False)
    for col in ("verdict", "where", "when (UTC)", "what", "calls", "slowdown"):
        table.add_column(col, no_wrap=col != "what")
    for a in anoms:
        table.add_row(
            a["verdict"],
            a["where"],
            f"{render.human_time(a['start'])} +{(a['end'] - a['start']).total_seconds():.2f}s",
            _what(a),
            f"{a['calls']:,}",
            f"{a['slowdown']:.0f}x" if a["slowdown"] else "-",
        )
    out.print(table)
    for i, a in enumerate(anoms, 1):
        fw = a["forwarded"][-SHOWN:]
        head = f"{i}. {a['verdict']} at {a['where']}"
        out.print(f"\n[bold]{head}[/]: the last {len(fw)} activities before it")
        for f in fw:
            us = f["dur_ns"] / 1e3 / max(f["count"], 1)
            out.print(
                f"  {render.human_time(f['t_start'])} {f['node']} pid {f['pid']} {f['op']} "
                f"{f['count']}x{f['size']} B {f['path'] or ''} ({us:,.0f} us/call)"
            )
        for s in a["servers"]:
            out.print(f"  server anomaly at the time: {s['kind']} on {s['component_id']}")


def _what(a: dict[str, Any]) -> str:
    return ", ".join(
        f"{w['op']} {w['size_class']} ({w['detector']})".replace(" - (", " (") for w in a["what"]
    )
