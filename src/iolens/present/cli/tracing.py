"""`iolens trace` and `iolens import trace`: per-job I/O insight without changing the code."""

from __future__ import annotations

import getpass
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from iolens.errors import InputError, IolensError
from iolens.present.cli.app import DbOption, JsonOption, err, open_db, out, progress
from iolens.present.cli.render import to_json

import_app = typer.Typer(help="Import data that sites already collect.", no_args_is_help=True)

SCHEDULER_JOB_VARS = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID")


#: Where `iolens trace` keeps traces the store could not take: persistent, per user.
DEFAULT_SPOOL = Path.home() / ".local" / "share" / "iolens" / "traces"


def _load_traces(
    db: Path | None,
    paths: list[Path],
    job_id: str | None,
    state: str | None = None,
    op: str | None = None,
) -> dict[str, int]:
    from iolens.analyze.pipeline import analyze_jobs
    from iolens.ingest.importers import trace
    from iolens.ingest.load import load
    from iolens.store import queries

    files = trace.spool_files(paths)
    totals = {"files": 0, "skipped": 0, "records": 0, "bad": 0}
    jobs: set[str] = set()
    # process (segment) -> whether its final file was seen: interim files are part of it
    final: dict[str, bool] = {}
    with open_db(db, create=True, op=op) as store, progress() as bar:
        task = bar.add_task("importing traces", total=len(files))
        for path, batch in trace.batches(files, job_id):
            bar.advance(task)
            if isinstance(batch, InputError):
                totals["bad"] += 1
                moved = trace.quarantine(path)
                where = f" (moved to {moved.parent})" if moved else ""
                err.print(f"[bold red]error:[/] {batch}{where}", highlight=False, soft_wrap=True)
                continue
            counts = load(store, batch)
            totals["files" if counts else "skipped"] += 1
            process, interim = _process_of(batch.key)
            final[process] = final.get(process, False) or not interim
            totals["records"] += counts.get("client_io", 0)
            jobs.update(trace.job_ids_of(batch))
        queries.refresh_traced_jobs(store, jobs, state)
        if jobs:
            analyze_jobs(store, sorted(jobs))
    totals["jobs"] = len(jobs)
    totals["processes"] = len(final)
    totals["interrupted"] = sum(not f for f in final.values())
    return totals


def _process_of(key: str) -> tuple[str, bool]:
    """A trace batch's process (segment) and whether it is an interim file (`:i<k>`)."""
    head, sep, k = key.rpartition(":i")
    return (head, True) if sep and k.isdigit() else (key, False)


def trace(
    command: Annotated[list[str], typer.Argument(help="The program and its arguments.")],
    db: DbOption = None,
    job_id: Annotated[
        str | None, typer.Option(help="Job id [default: the scheduler's, else a new local id].")
    ] = None,
    spool: Annotated[
        Path | None,
        typer.Option(
            envvar="IOLENS_TRACE_SPOOL",
            show_envvar=True,
            help="Where traces wait when the store cannot take them "
            "[default: ~/.local/share/iolens/traces].",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run COMMAND under the LD_PRELOAD tracer, then load its I/O into the store as a job.

    Use `--` before the command when it has options: iolens trace -- ./app -n 4.
    The exit status is the command's own (128+N when signal N killed it), whatever goes
    wrong in iolens (that is a warning on stderr). A trace the store cannot take now
    (locked, server down, disk full) stays in the spool, for the agent or `iolens import
    trace`; stderr says where, and which processes' traces were lost (full disk, killed)."""
    from iolens.tracefile import library_path

    lib = library_path()
    if job_id is None:
        job_id = next((os.environ[v] for v in SCHEDULER_JOB_VARS if os.environ.get(v)), None)
    if job_id is None:
        job_id = f"local-{socket.gethostname()}-{int(time.time())}-{os.getpid()}"
    spool_dir = spool or DEFAULT_SPOOL
    # A private folder per run: the files of this run, not the spool's other waiting ones.
    run_dir = spool_dir / f".run-{socket.gethostname()}-{os.getpid()}-{time.time_ns()}"
    try:
        spool_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        run_dir.mkdir(mode=0o700)
    except OSError as exc:
        raise IolensError(f"cannot write traces to {spool_dir}: {exc.strerror or exc}") from None
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(x for x in (str(lib), env.get("LD_PRELOAD", "")) if x)
    env["IOLENS_SPOOL"] = str(run_dir)
    env["IOLENS_JOB_ID"] = job_id
    try:
        rc = exit_status(subprocess.call(command, env=env))
    except (FileNotFoundError, PermissionError) as exc:
        run_dir.rmdir()
        why, rc = (
            ("command not found", 127)
            if isinstance(exc, FileNotFoundError)
            else (
                "permission denied",
                126,
            )
        )
        err.print(f"[bold red]error:[/] cannot run {command[0]!r}: {why}", highlight=False)
        sys.exit(rc)
    try:  # whatever happens in iolens now, the exit status is the program's
        _after_run(db, run_dir, spool_dir, job_id, rc, as_json, command[0])
    except BaseException as exc:  # a job must never be marked FAILED by iolens
        if isinstance(exc, KeyboardInterrupt):
            rc = rc or 130
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        err.print(
            f"iolens: warning: the trace was not handled ({reason}); files of this run, if "
            f"any, are in {run_dir}",
            highlight=False,
            soft_wrap=True,
        )
    sys.exit(rc)


def _after_run(
    db: Path | None,
    run_dir: Path,
    spool_dir: Path,
    job_id: str,
    rc: int,
    as_json: bool,
    program: str = "",
) -> None:
    """Load the run's traces (or keep them in the spool), and say what was lost."""
    warnings = _unfinished(run_dir)
    running = any(run_dir.glob(f"*{SUFFIX_PARTIAL}"))
    state = "COMPLETED" if rc == 0 else "FAILED"
    kept: Path | None = None
    try:
        totals = _store_traces(db, run_dir, job_id, state)
    except Exception as exc:  # locked, server down, disk full: the trace must survive
        kept = _keep(run_dir, spool_dir)
        totals = {"files": 0, "skipped": 0, "records": 0, "jobs": 0, "bad": 0, "processes": 0}
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        err.print(
            f"iolens: the store cannot take the trace now ({reason}); it is kept in "
            f"{kept}: `iolens import trace {kept}` loads it later (an agent whose "
            "trace_spool is that folder ships it)",
            highlight=False,
            soft_wrap=True,
        )
    else:
        if totals.get("interrupted"):
            warnings.append(
                f"{totals['interrupted']} process(es) killed before its final flush (SIGKILL, "
                "out of memory): their trace is partial, up to their last interim file"
            )
        if totals.get("bad"):
            bad = _keep(run_dir / "bad", spool_dir / "bad")
            warnings.append(f"{totals['bad']} trace file(s) did not decode: kept in {bad}")
        if running:
            warnings.append(
                f"a process of the run still runs: its trace will be written to {run_dir} "
                f"(`iolens import trace {run_dir}` loads it then)"
            )
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    if kept is None and not totals.get("processes", totals["files"]) and not running:
        warnings.append(_untraced(program))
    summary = {
        "job_id": job_id,
        "exit_code": rc,
        "user": getpass.getuser(),
        **totals,
        "stored": kept is None,
        "spool": str(kept) if kept else None,
        "lost": warnings,
    }
    if as_json:
        print(to_json(summary))
    elif kept is None and not totals.get("processes", totals["files"]):
        err.print(f"iolens: traced no process of {program or 'the command'}", highlight=False)
    elif kept is None:
        err.print(
            f"iolens: traced {totals.get('processes', totals['files'])} process(es), "
            f"{totals['records']:,} records "
            f"as job {job_id}; see `iolens job {job_id}`"
        )
    for w in warnings:
        err.print(f"iolens: warning: {w}", highlight=False, soft_wrap=True)


SUFFIX_PARTIAL = ".iolens.partial"


def _untraced(program: str) -> str:
    """Why no process left a trace: the executable's own reason when it has one."""
    from iolens.tracefile.preloadable import executable, untraceable

    path = executable(program) if program else None
    why = untraceable(path) if path else None
    return (
        why
        or "no process of the command loaded the tracer (a static or Go program, "
        "raw syscalls, or a launcher that clears LD_PRELOAD)"
    ) + "; nothing was stored"


def _unfinished(run_dir: Path) -> list[str]:
    """Traces the run lost, said and cleaned: the tracer's `.lost` marks (it could not
    write: full disk, unwritable spool) and the `.partial` files of processes that are gone
    (killed, e.g. SIGKILL: their trace ends before its header, so nothing is salvageable).
    A `.partial` file of a process still running is left to it."""
    from iolens.collect.sources.tracer_spool import pid_alive

    lost, killed = [], []
    for path in sorted(run_dir.iterdir()):
        name = path.name
        if name.endswith(".iolens.lost"):
            lost.append(name.split("-")[-3])
            path.unlink(missing_ok=True)
        elif name.endswith(SUFFIX_PARTIAL):
            parts = name[: -len(SUFFIX_PARTIAL)].rsplit("-", 3)
            pid, start = (int(parts[1]), int(parts[2])) if len(parts) == 4 else (0, 0)
            if not pid or not pid_alive(pid, start):
                # with interim files its trace is partial, said when they load; else lost
                stem = name[: -len(SUFFIX_PARTIAL)]
                if not any(run_dir.glob(f"{glob.escape(stem)}.*.iolens")):
                    killed.append(str(pid))
                path.unlink(missing_ok=True)
    out = []
    if lost:
        out.append(
            f"the trace of {len(lost)} process(es) (pid {', '.join(lost)}) was lost: the "
            "tracer could not write it (see its message above: full disk, unwritable spool)"
        )
    if killed:
        out.append(
            f"the trace of {len(killed)} process(es) (pid {', '.join(killed)}) was lost: "
            "killed before it could finish its trace (SIGKILL, out of memory)"
        )
    return out


def exit_status(returncode: int) -> int:
    """A shell's view of a child's end: its status, or 128+N when signal N killed it."""
    return 128 - returncode if returncode < 0 else returncode


def _store_traces(db: Path | None, run_dir: Path, job_id: str, state: str) -> dict[str, int]:
    """Into the store, or through the server that owns it (as `iolens import trace`)."""
    from iolens.present.cli import forward

    try:
        return _load_traces(db, [run_dir], job_id, state, op="import trace")
    except forward.Forward as fw:
        printed: list[str] = []
        token = os.environ.get("IOLENS_TOKEN") or fw.server.token
        params = {"paths": [str(run_dir)], "job_id": job_id, "state": state, "as_json": True}
        status = forward.call(fw.server.url, "import trace", params, token, printed.append)
        if status != 0:
            raise IolensError(f"iolens server at {fw.server.url} exited {status}") from None
        return json.loads("".join(printed))


def _keep(run_dir: Path, spool_dir: Path) -> Path:
    """Move the run's files into the spool itself, where agents and imports look."""
    spool_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for path in run_dir.iterdir():
        if path.is_file() and not path.is_symlink():
            path.replace(spool_dir / path.name)
    shutil.rmtree(run_dir, ignore_errors=True)
    return spool_dir


@import_app.command("trace")
def import_trace(
    paths: Annotated[list[Path], typer.Argument(help="Spool files or directories.")],
    db: DbOption = None,
    job_id: Annotated[str | None, typer.Option(help="Assign every trace to this job.")] = None,
    state: Annotated[
        str | None, typer.Option(hidden=True, help="The job's end state (`iolens trace`).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Load tracer spool files collected elsewhere (files already loaded are skipped).

    A file that does not decode costs only itself: one `error:` line naming it, it is moved
    to `bad/` beside it, the others are imported, and the exit status is 2."""
    from iolens.ingest.importers.trace import SPOOL_SUFFIX, spool_files

    if not spool_files(paths):  # a wrong directory, not an empty import
        raise InputError(", ".join(map(str, paths)), f"no *{SPOOL_SUFFIX} trace files found")
    totals = _load_traces(db, paths, job_id, state)
    if as_json:
        print(to_json(totals))
    else:
        bad = f"; {totals['bad']} bad (see above)" if totals["bad"] else ""
        out.print(
            f"Imported {totals['files']} trace file(s) ({totals['records']:,} records, "
            f"{totals['jobs']} job(s)); {totals['skipped']} already loaded{bad}."
        )
    if totals["bad"]:
        sys.exit(2)
