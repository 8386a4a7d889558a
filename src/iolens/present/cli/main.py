"""The `iolens` command line.

Human output goes to stdout through rich; `--json` prints only JSON on stdout. Progress
bars and errors go to stderr. A user mistake (unknown job, missing database, bad input)
prints one `error:` line and exits with status 2, never a traceback.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from iolens import __version__
from iolens.errors import IolensError
from iolens.present.cli import agenting, render, serving, tracing
from iolens.present.cli.app import (
    DbOption,
    JsonOption,
    app,
    ensure_analyzed,
    err,
    open_db,
    out,
    progress,
)


def run_simulation(
    db: Path | None,
    nodes: int,
    hours: float,
    seed: int,
    fresh: bool = False,
    show_progress: bool = True,
) -> tuple[Any, dict[str, Any]]:
    """Simulate, ingest through the normal path, analyse; returns (store, truth)."""
    from iolens.analyze.pipeline import analyze_jobs
    from iolens.ingest import load
    from iolens.simulate import SimConfig, simulate
    from iolens.store import default_db_path

    path = Path(db) if db else default_db_path()
    if fresh and path.exists():
        path.unlink()
        Path(f"{path}.wal").unlink(missing_ok=True)
    store = open_db(path, create=True)
    with progress(show_progress) as bar:
        task = bar.add_task(f"simulating {nodes} nodes x {hours:g} h", total=None)
        sim = simulate(SimConfig(nodes=nodes, hours=hours, seed=seed))
        batches = len(sim.result.jobs) + 3
        bar.update(task, total=batches, completed=0, description="ingesting")
        for _name, batch in sim.batches():
            load(store, batch)
            bar.advance(task, 1)
        bar.update(task, completed=batches)
        job_ids = [r.spec.job_id for r in sim.result.jobs]
        task2 = bar.add_task("analysing jobs", total=len(job_ids))
        analyze_jobs(store, job_ids, on_job=lambda _j: bar.advance(task2))
    return store, sim.truth


@app.command()
def simulate(
    db: DbOption = None,
    nodes: Annotated[int, typer.Option(min=16, help="Compute nodes (512 per forwarder).")] = 1024,
    hours: Annotated[
        float, typer.Option(min=0.1, max=240, help="Hours of jobs to generate.")
    ] = 2.0,
    seed: Annotated[int, typer.Option(help="Random seed: same seed, same cluster.")] = 0,
    truth: Annotated[Path | None, typer.Option(help="Write the ground truth JSON here.")] = None,
    fresh: Annotated[bool, typer.Option(help="Delete the database first.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Simulate a cluster's jobs, I/O and servers, and load it like real collectors would."""
    store, gt = run_simulation(db, nodes, hours, seed, fresh=fresh)
    if truth:
        truth.write_text(json.dumps(gt, indent=1, default=float))
    summary = {
        "db": store.location,
        "jobs": len(gt["jobs"]),
        "faults": len(gt["faults"]),
        "interference_pairs": len(gt["interference"]),
    }
    store.close()
    if as_json:
        print(render.to_json(summary))
    else:
        out.print(
            f"Simulated {summary['jobs']} jobs on {nodes} nodes into {summary['db']}"
            + (f"; ground truth in {truth}" if truth else "")
        )


# -- queries --------------------------------------------------------------------------------
def _job_json(row: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "job_id",
        "user",
        "app",
        "start",
        "end",
        "state",
        "io_mode",
        "nprocs",
        "read_bytes",
        "write_bytes",
        "read_bw_avg",
        "write_bw_avg",
        "md_ops",
        "findings",
    )
    return {"nodes": len(row.get("nodes") or []), **{k: row.get(k) for k in keys}}


@app.command()
def jobs(
    db: DbOption = None,
    user: Annotated[str | None, typer.Option(help="Only this user's jobs.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many jobs.")] = None,
    as_json: JsonOption = False,
) -> None:
    """List jobs with their I/O mode and volumes."""
    from iolens.store import queries

    with open_db(db) as store:
        ensure_analyzed(store)
        rows = queries.jobs(store, user=user, limit=limit)
    if as_json:
        print(render.to_json([_job_json(r) for r in rows]))
    else:
        out.print(render.jobs_table(rows))


@app.command()
def job(
    job_id: Annotated[str, typer.Argument(help="Scheduler job id.")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Per-job I/O report across compute, forwarding, OST and metadata layers."""
    from iolens.analyze import report

    with open_db(db) as store:
        ensure_analyzed(store)
        rep = report.build(store, job_id).to_dict()
    if as_json:
        print(render.to_json(rep))
    else:
        out.print(render.job_report(rep))


def _since(value: str | None) -> datetime | None:
    """ISO time (UTC) or a span back from the newest sample: 30s, 15m, 2h, 7d."""
    if value is None:
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if value[-1:] in units and value[:-1].replace(".", "", 1).isdigit():
        return datetime.now(UTC).replace(tzinfo=None) - timedelta(
            seconds=float(value[:-1]) * units[value[-1]]
        )
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(f"{value!r} is neither an ISO time nor a span like 2h") from None
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


@app.command()
def series(
    db: DbOption = None,
    kind: Annotated[
        str | None, typer.Option(help="Component kind: ost, mdt, oss, forwarder, ib_port, node...")
    ] = None,
    component: Annotated[str | None, typer.Option(help="Component id.")] = None,
    metric: Annotated[str | None, typer.Option(help="Metric name.")] = None,
    since: Annotated[str | None, typer.Option(help="ISO time, or a span like 2h.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many samples.")] = 10_000,
    as_json: JsonOption = False,
) -> None:
    """Stored server-side samples, one value per line."""
    from iolens.store import queries

    with open_db(db) as store:
        rows = queries.series(store, kind, component, metric, _since(since), limit)
    if as_json:
        print(render.to_json(rows))
        return
    table = Table(header_style="bold", pad_edge=False)
    for col in ("time", "kind", "component", "metric", "value"):
        table.add_column(col, justify="right" if col == "value" else "left", no_wrap=True)
    for r in rows:
        table.add_row(
            render.human_time(r["time"]),
            r["kind"],
            r["component"],
            r["metric"],
            f"{r['value']:,.6g}",
        )
    out.print(table)


@app.command()
def analyze(
    job_ids: Annotated[
        list[str] | None, typer.Argument(help="Jobs to analyse [default: all].")
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Re-run the analyses and findings rules."""
    from iolens.analyze.pipeline import analyze_jobs
    from iolens.store import queries

    with open_db(db) as store:
        ids = job_ids or None
        for j in ids or []:
            queries.job(store, j)  # unknown ids fail early, by name
        with progress() as bar:
            task = bar.add_task("analysing jobs", total=len(ids) if ids else None)
            found = analyze_jobs(store, ids, on_job=lambda _j: bar.advance(task))
    counts: dict[str, int] = {}
    for f in found:
        counts[f.code] = counts.get(f.code, 0) + 1
    if as_json:
        print(render.to_json({"findings": counts}))
    else:
        out.print(
            f"{len(found)} findings: "
            + (", ".join(f"{k} x{v}" for k, v in sorted(counts.items())) or "none")
        )


@app.command()
def demo(
    db: Annotated[
        Path | None, typer.Option("--db", help="Where to keep the demo database.")
    ] = None,
    nodes: Annotated[int, typer.Option(min=16)] = 1024,
    hours: Annotated[float, typer.Option(min=0.1)] = 2.0,
    seed: int = 7,
) -> None:
    """Simulate a small cluster, ingest, analyse, and show what iolens finds."""
    from iolens.present.cli.demo import run_demo

    run_demo(db, nodes, hours, seed, out)


@app.command()
def version() -> None:
    """Print the iolens version."""
    out.print(__version__)


app.command(context_settings={"allow_interspersed_args": False})(tracing.trace)
app.add_typer(tracing.import_app, name="import")
app.command()(serving.serve)
app.command()(agenting.agent)
app.add_typer(agenting.config_app, name="config")


def main() -> None:
    try:
        app()
    except IolensError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
