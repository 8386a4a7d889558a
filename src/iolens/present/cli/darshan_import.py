"""`iolens import darshan`: the Darshan logs a site already keeps, imported and diagnosed.

Each log is imported on its own (a broken one is listed and the rest go on) and diagnosed
right after it is stored, when the Darshan rules are installed. Exit status: 0 when at
least one log was imported or had been before, 2 when every log failed (or none was
found), as for any input error.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from iolens.errors import InputError
from iolens.present.cli.app import DbOption, JsonOption, err, open_db, out, progress
from iolens.present.cli.render import to_json

if TYPE_CHECKING:
    import pyarrow as pa

    from iolens.ingest.importers.darshan import Analyzer
    from iolens.ingest.importers.darshan_context import ImportResult
    from iolens.model.darshan import DarshanJob
    from iolens.store.base import Store


def import_darshan(
    paths: Annotated[
        list[Path], typer.Argument(help="Darshan logs, or directories searched for *.darshan.")
    ],
    db: DbOption = None,
    no_dxt: Annotated[
        bool,
        typer.Option(
            "--no-dxt",
            help="Skip DXT traces: faster; client records then come from the counters.",
        ),
    ] = False,
    uid_map: Annotated[
        Path | None,
        typer.Option(
            "--uid-map",
            help="TOML [uids] table naming the account of each uid in the logs (docs/deploy.md);"
            " without it a job is owned by uid:N and only admins see it. Also re-owns the "
            "jobs of logs loaded before.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Import Darshan logs: jobs, files, counters, DXT and findings (re-imports are skipped)."""
    from iolens.ingest.uid_map import load_uid_map

    owners = load_uid_map(uid_map) if uid_map is not None else None
    _start_decoder()
    from iolens.ingest.darshan_input import log_files
    from iolens.ingest.importers.darshan import import_logs, summarize

    files = log_files(paths)
    if not files:
        raise InputError(", ".join(map(str, paths)), "no *.darshan files found")
    t0 = time.perf_counter()
    live = err.is_terminal
    with open_db(db, create=True) as store, progress() as bar:
        task = bar.add_task("importing Darshan logs", total=len(files))

        def done(res: ImportResult) -> None:
            bar.advance(task)
            if res.error and live:  # as they happen; listed at the end otherwise
                bar.console.print(f"[red]failed[/] {res.error}", highlight=False)

        results = import_logs(
            store,
            files,
            dxt=not no_dxt,
            analyze=_diagnoser(store),
            on_log=done,
            owners=owners,
        )
        merged = _merge_repeated(store, results)
    seconds = time.perf_counter() - t0
    summary = summarize(results)
    summary["seconds"] = round(seconds, 3)
    summary["findings"] -= merged
    summary["findings_merged"] = merged
    summary["logs_per_s"] = round(len(results) / seconds, 2) if seconds > 0 else None
    if as_json:
        print(to_json(summary))
    else:
        _print(summary, listed=live)
    if summary["failed"] == summary["logs"]:
        raise typer.Exit(2)


def _start_decoder() -> None:
    """Start the process the Darshan decoding workers fork from now, so its imports (numpy,
    pandas: about a second) run while this process loads its own and opens the
    store (`iolens.ingest.darshan_decode`; the module list is its `PRELOAD`)."""
    import multiprocessing
    from multiprocessing import forkserver

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["iolens.ingest.darshan_decode"])
    forkserver.ensure_running()


def _print(s: dict[str, Any], listed: bool) -> None:
    findings = f", {s['findings']:,} finding(s)" if s["findings"] else ""
    out.print(
        f"Imported {s['imported']} of {s['logs']} Darshan log(s) ({s['jobs']} job(s), "
        f"{s['records']:,} records, {s['client_io']:,} client I/O rows{findings}); "
        f"{s['skipped']} already loaded, {s['failed']} failed. "
        f"{s['seconds']:.1f} s, {s['logs_per_s'] or 0:.1f} logs/s.",
        highlight=False,
        soft_wrap=True,
    )
    for p in s["partial"]:
        out.print(
            f"partial data (Darshan hit its limits): {p['path']}: {', '.join(p['modules'])}",
            highlight=False,
            soft_wrap=True,
        )
    for n in s["notes"]:
        out.print(f"note: {n['path']}: {n['note']}", highlight=False, soft_wrap=True)
    if s["failures"] and not listed:
        err.print(f"{len(s['failures'])} log(s) failed:", highlight=False)
        for f in s["failures"]:
            err.print(f"  {f['error']}", highlight=False, soft_wrap=True)


def _merge_repeated(store: Store, results: list[ImportResult]) -> int:
    """A job of several logs in the batch keeps one finding per code (with the count)."""
    from iolens.analyze.darshan import merge_stored

    per_job: dict[str, int] = {}
    for r in results:
        if r.status == "imported" and r.job_id and r.findings:
            per_job[r.job_id] = per_job.get(r.job_id, 0) + 1
    return merge_stored(store, sorted(j for j, n in per_job.items() if n > 1))


def _diagnoser(store: Store) -> Analyzer:
    """Findings of each log, and its zoom-in factors row kept in job_factors.

    A job with several logs (one per executable run) keeps the factors of its last log.
    """
    from iolens.analyze.darshan import CODES, analyze_log, site_context
    from iolens.analyze.darshan.zoomin import factors_table
    from iolens.model.finding import findings_table

    site = site_context(store)

    def run(job: DarshanJob) -> tuple[Collection[str], pa.Table]:
        found, factors = analyze_log(store, job, site)
        store.execute("DELETE FROM job_factors WHERE job_id = ?", [job.job_id])
        store.append("job_factors", factors_table([factors]))
        return CODES | {f.code for f in found}, findings_table(found)

    return run
