"""`iolens simulate`, and the run behind it and the demo: simulate a cluster, load it
through the normal ingest path, analyse it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from iolens.present.cli import render
from iolens.present.cli.app import DbOption, JsonOption, job_steps, open_db, out, progress


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
        batches = sim.batch_count()
        bar.update(task, total=batches, completed=0, description="ingesting")
        sim.load(store, on_batch=lambda _name: bar.advance(task, 1))
        bar.update(task, completed=batches)
        job_ids = [r.spec.job_id for r in sim.result.jobs]
        task2 = bar.add_task("analysing jobs", total=len(job_ids))
        analyze_jobs(store, job_ids, on_step=job_steps(bar, task2))
    return store, sim.truth


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
