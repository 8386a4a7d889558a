"""`iolens zoomin`: the zoom-in analysis across Darshan jobs (`iolens.present.zoomin`).

Over logs given on the command line (read now; with `--db`, with the store's weather and
scheduler data) or over a store's imported jobs (no logs given). Exit status 2 when a
log could not be read, each named in one `error:` line, after the others are shown.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from iolens.present.cli.app import DbOption, JsonOption, open_db, out
from iolens.present.cli.render import human_bytes, human_rate, to_json


def zoomin(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Darshan logs or directories [default: the store's jobs]."),
    ] = None,
    db: DbOption = None,
    job: Annotated[
        list[str] | None, typer.Option("--job", help="Only these stored jobs (repeatable).")
    ] = None,
    app: Annotated[str | None, typer.Option(help="Only this application (executable).")] = None,
    as_json: JsonOption = False,
) -> None:
    """The zoom-in paper's factors per job, their correlation with bandwidth (platform
    view) and the jobs of each application (application view)."""
    from iolens.errors import InputError
    from iolens.ingest.darshan_input import log_files
    from iolens.present.zoomin import rows_from_logs, rows_from_store, view

    failed: list[InputError] = []
    if paths:
        if job:
            raise typer.BadParameter("give logs or --job, not both", param_hint="'--job'")
        files = log_files(paths)
        if not files:
            raise InputError(", ".join(map(str, paths)), "no *.darshan files found")
        if db is None:
            rows, failed = rows_from_logs(files)
        else:
            with open_db(db) as store:
                rows, failed = rows_from_logs(files, store)
    else:
        with open_db(db) as store:
            rows = rows_from_store(store, job)
    result = view(rows, app)
    if as_json:
        print(to_json({**result, "failed": [{"path": e.source, "error": e.message}
                                            for e in failed]}))  # fmt: skip
    else:
        _show(result)
    for e in failed:
        print(f"error: {e}", file=sys.stderr)
    if failed:
        raise typer.Exit(2)


def _num(v: Any, fmt: str = "{:.3g}") -> str:
    return "-" if v is None else fmt.format(v)


def _show(result: dict[str, Any]) -> None:
    rows = result["jobs"]
    if not rows:
        out.print("No Darshan jobs to analyse.")
        return
    t = Table(title="Zoom-in factors (Table I) per job", header_style="bold", pad_edge=False)
    cols = ("job", "app", "user", "bandwidth", "data", "procs", "meta %", "small %", "seq %",
            "max rank", "max OST", "OSS CPU %", "MDS CPU %", "OST MB", "causes")  # fmt: skip
    for c in cols:
        t.add_column(c, justify="left" if c in ("job", "app", "user", "causes") else "right")
    for r in rows:
        t.add_row(
            r["job_id"],
            r.get("app") or "-",
            r.get("user") or "-",
            human_rate(r.get("bandwidth")),
            human_bytes(r.get("datasize")),
            _num(r.get("nprocs"), "{:.0f}"),
            _num(r.get("mtime_pct"), "{:.1f}"),
            _num(r.get("small_pct"), "{:.1f}"),
            _num(r.get("seq_pct"), "{:.1f}"),
            _num(r.get("max_rank_io"), "{:.2f}"),
            _num(r.get("max_ost_io"), "{:.2f}"),
            _num(r.get("oss_cpu_pct"), "{:.1f}"),
            _num(r.get("mds_cpu_pct"), "{:.1f}"),
            _num(r.get("ost_io_mb"), "{:.1f}"),
            " ".join(r.get("causes") or []) or "-",
        )
    out.print(t)
    c = Table(title="Platform view: correlation with bandwidth", header_style="bold")
    c.add_column("factor")
    c.add_column("Pearson r", justify="right")
    c.add_column("jobs", justify="right")
    for f in result["bandwidth_correlation"]:
        c.add_row(f["factor"], _num(f["r"], "{:+.2f}"), str(f["jobs"]))
    out.print(c)
    a = Table(title="Application view", header_style="bold")
    for col in ("app", "user", "jobs", "bandwidth classes"):
        a.add_column(col, justify="right" if col == "jobs" else "left")
    for g in result["applications"]:
        classes = ", ".join(f"{k}: {v}" for k, v in g["classes"].items()) or "-"
        a.add_row(g["app"] or "-", g["user"] or "-", str(g["jobs"]), classes)
    out.print(a)
