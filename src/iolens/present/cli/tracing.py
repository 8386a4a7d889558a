"""`iolens trace` and `iolens import trace`: per-job I/O insight without changing the code."""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from iolens.errors import InputError, IolensError
from iolens.present.cli.app import DbOption, JsonOption, err, open_db, out, progress
from iolens.present.cli.render import to_json

import_app = typer.Typer(help="Import data that sites already collect.", no_args_is_help=True)

SCHEDULER_JOB_VARS = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID")


def _load_traces(
    db: Path | None, paths: list[Path], job_id: str | None, state: str | None = None
) -> dict[str, int]:
    from iolens.analyze.pipeline import analyze_jobs
    from iolens.ingest import load
    from iolens.ingest.importers import trace

    files = trace.spool_files(paths)
    totals = {"files": 0, "skipped": 0, "records": 0}
    jobs: set[str] = set()
    with open_db(db, create=True) as store, progress() as bar:
        task = bar.add_task("importing traces", total=len(files))
        for _path, batch in trace.batches(files, job_id):
            counts = load(store, batch)
            totals["files" if counts else "skipped"] += 1
            totals["records"] += counts.get("client_io", 0)
            jobs.update(trace.job_ids_of(batch))
            bar.advance(task)
        trace.refresh_traced_jobs(store, jobs, state)
        if jobs:
            analyze_jobs(store, sorted(jobs))
    totals["jobs"] = len(jobs)
    return totals


def trace(
    command: Annotated[list[str], typer.Argument(help="The program and its arguments.")],
    db: DbOption = None,
    job_id: Annotated[
        str | None, typer.Option(help="Job id [default: the scheduler's, else a new local id].")
    ] = None,
    spool: Annotated[
        Path | None, typer.Option(help="Where the tracer writes [default: a temporary directory].")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run COMMAND under the LD_PRELOAD tracer, then load its I/O into the store as a job.

    Use `--` before the command when it has options: iolens trace -- ./app -n 4.
    The exit status is the command's own.
    """
    from iolens.tracefile import library_path

    lib = library_path()
    if job_id is None:
        job_id = next((os.environ[v] for v in SCHEDULER_JOB_VARS if os.environ.get(v)), None)
    if job_id is None:
        job_id = f"local-{socket.gethostname()}-{int(time.time())}-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="iolens-trace-") as tmp:
        spool_dir = spool or Path(tmp)
        spool_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["LD_PRELOAD"] = " ".join(x for x in (str(lib), env.get("LD_PRELOAD", "")) if x)
        env["IOLENS_SPOOL"] = str(spool_dir)
        env["IOLENS_JOB_ID"] = job_id
        try:
            rc = subprocess.call(command, env=env)
        except FileNotFoundError:
            raise IolensError(f"cannot run {command[0]!r}: command not found") from None
        except PermissionError:
            raise IolensError(f"cannot run {command[0]!r}: permission denied") from None
        mine = [p for p in spool_dir.glob("*.iolens")]
        totals = _load_traces(db, mine, job_id, state="COMPLETED" if rc == 0 else "FAILED")
    summary = {"job_id": job_id, "exit_code": rc, "user": getpass.getuser(), **totals}
    if as_json:
        print(to_json(summary))
    else:
        err.print(
            f"iolens: traced {totals['files']} process(es), {totals['records']:,} records "
            f"as job {job_id}; see `iolens job {job_id}`"
        )
    sys.exit(rc)


@import_app.command("trace")
def import_trace(
    paths: Annotated[list[Path], typer.Argument(help="Spool files or directories.")],
    db: DbOption = None,
    job_id: Annotated[str | None, typer.Option(help="Assign every trace to this job.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Load tracer spool files collected elsewhere (files already loaded are skipped)."""
    from iolens.ingest.importers.trace import SPOOL_SUFFIX, spool_files

    if not spool_files(paths):  # a wrong directory, not an empty import
        raise InputError(", ".join(map(str, paths)), f"no *{SPOOL_SUFFIX} trace files found")
    totals = _load_traces(db, paths, job_id)
    if as_json:
        print(to_json(totals))
    else:
        out.print(
            f"Imported {totals['files']} trace file(s) ({totals['records']:,} records, "
            f"{totals['jobs']} job(s)); {totals['skipped']} already loaded."
        )
