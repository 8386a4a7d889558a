"""The `iolens` command line.

Human output goes to stdout through rich; `--json` prints only JSON on stdout. Progress
bars and errors go to stderr. A user mistake (unknown job, missing database, bad input)
prints one `error:` line and exits with status 2, never a traceback.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from iolens import __version__
from iolens.errors import IolensError
from iolens.present.cli import (
    advise,
    agenting,
    compare,
    darshan_import,
    darshan_log,
    diagnosis,
    expect,
    importing,
    jobdiag,
    network,
    reasoning,
    remote,
    render,
    reporting,
    scaleout,
    scheduler,
    seff,
    serving,
    simulating,
    site,
    subscribing,
    system,
    sysviews,
    tracing,
    users,
    watching,
    zooming,
)
from iolens.present.cli.app import (
    DbOption,
    JsonOption,
    SiteOption,
    app,
    ensure_analyzed,
    err,
    job_steps,
    open_db,
    out,
    progress,
)
from iolens.present.cli.remote import ServerOption, TokenOption

app.command()(simulating.simulate)


# -- queries --------------------------------------------------------------------------------
# Each reads the store (--db) or asks a running `iolens serve` (--server) for the same JSON
# (`iolens.present.views`); the human output is drawn from that JSON either way.


@app.command()
def jobs(
    ctx: typer.Context,
    db: DbOption = None,
    user: Annotated[str | None, typer.Option(help="Only this user's jobs.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many jobs.")] = None,
    server: ServerOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List jobs with their I/O mode and volumes."""
    from iolens.present import views

    server, token = remote.target(ctx, db, server, token)
    if server:
        rows = remote.get(server, token, "/api/v1/jobs", {"user": user, "limit": limit})
    else:
        with open_db(db) as store:
            ensure_analyzed(store)
            rows = views.jobs(store, user=user, limit=limit)
    if as_json:
        print(render.to_json(rows))
    else:
        out.print(render.jobs_table(views.table_rows(rows)))


@app.command()
def job(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="Scheduler job id.")],
    db: DbOption = None,
    layers: Annotated[
        bool,
        typer.Option(
            "--layers", help="Add the job's bytes per 10-s bin at every layer and component."
        ),
    ] = False,
    server: ServerOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Per-job I/O report across compute, forwarding, OST and metadata layers."""
    from urllib.parse import quote

    from iolens.present import views

    server, token = remote.target(ctx, db, server, token)
    if server:
        path = f"/api/v1/jobs/{quote(job_id, safe='')}"
        rep = remote.get(server, token, path, {"layers": "true"} if layers else {})
    else:
        with open_db(db) as store:
            ensure_analyzed(store)
            rep = views.job(store, job_id, layers=layers)
    if as_json:
        print(render.to_json(rep))
    else:
        out.print(render.job_report(rep))
        _expectation(rep.get("expectation"))
        if rep.get("access_pattern_files"):
            total = (rep.get("access_pattern_counts") or {}).get("files")
            out.print(render.access_patterns(rep["access_pattern_files"], total=total))
        if layers:
            out.print(render.layer_series(rep["layer_series"]))


def _expectation(e: dict[str, Any] | None) -> None:
    """The job's place in the IO500 box, under its report."""
    if not e or not e.get("verdict"):
        return
    sc = e.get("scale") or {}
    scale = (
        f", scaled to its {sc['job_nodes']} of IO500's {sc['io500_nodes']:g} nodes"
        if (sc.get("factor") or 1.0) < 1.0
        else ""
    )
    out.print(f"[bold]IO500 box[/] ({e['system']}{scale}): [bold]{e['verdict']}[/]")
    out.print(f"  {e['meaning']}", highlight=False)


@app.command()
def series(
    ctx: typer.Context,
    db: DbOption = None,
    kind: Annotated[
        str | None, typer.Option(help="Component kind: ost, mdt, oss, forwarder, ib_port, node...")
    ] = None,
    component: Annotated[str | None, typer.Option(help="Component id.")] = None,
    metric: Annotated[str | None, typer.Option(help="Metric name.")] = None,
    since: Annotated[str | None, typer.Option(help="ISO time, or a span like 2h.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many samples.")] = 10_000,
    server: ServerOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stored server-side samples, one value per line."""
    from iolens.present import views

    try:
        views.parse_since(since)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--since'") from None
    server, token = remote.target(ctx, db, server, token)
    if server:
        params = {"kind": kind, "component": component, "metric": metric, "since": since}
        rows = remote.get(server, token, "/api/v1/series", {**params, "limit": limit})
    else:
        with open_db(db) as store:
            rows = views.series(store, kind, component, metric, since, limit)
    if as_json:
        print(render.to_json(rows))
        return
    table = Table(header_style="bold", pad_edge=False)
    for col in ("time", "kind", "component", "metric", "value"):
        table.add_column(col, justify="right" if col == "value" else "left", no_wrap=True)
    for r in rows:
        value = float("nan") if r["value"] is None else r["value"]  # JSON has no NaN
        table.add_row(
            render.human_time(r["time"]), r["kind"], r["component"], r["metric"], f"{value:,.6g}"
        )
    out.print(table)


@app.command()
def analyze(
    job_ids: Annotated[
        list[str] | None, typer.Argument(help="Jobs to analyse [default: all].")
    ] = None,
    db: DbOption = None,
    since: Annotated[
        str | None,
        typer.Option(help="Jobs ended since T, components over [T, now]: ISO time or span (2h)."),
    ] = None,
    dask: Annotated[
        str | None,
        typer.Option(help="Run on this Dask scheduler (tcp://host:8786); --db a dataset."),
    ] = None,
    dask_slurm: Annotated[
        bool, typer.Option(help="Run on Dask workers started as Slurm jobs (dask-jobqueue).")
    ] = False,
    workers: Annotated[int, typer.Option(min=1, help="With --dask-slurm: workers.")] = 4,
    worker_cores: Annotated[int, typer.Option(min=1, help="With --dask-slurm: cores each.")] = 1,
    worker_memory: Annotated[str, typer.Option(help="With --dask-slurm: memory each.")] = "8GiB",
    site_config: SiteOption = None,
    as_json: JsonOption = False,
) -> None:
    """Re-run the analyses: job findings, then the component detectors.

    This is what `iolens serve` does as jobs end and every hour. `--dask`/`--dask-slurm` run them as
    Dask tasks over a dataset's partitions, with the same results."""
    from iolens.analyze import plugins
    from iolens.analyze.components import analyze_components
    from iolens.analyze.pipeline import analyze_jobs
    from iolens.present import views
    from iolens.present.scheduling import analyze_since
    from iolens.store import queries

    if since is not None and job_ids:
        raise typer.BadParameter("give job ids or --since, not both", param_hint="'--since'")
    silenced = plugins.load(site_config).silenced()
    if silenced and (since is not None or dask or dask_slurm):
        raise typer.BadParameter(
            "an [analyze] selection applies to job ids or all jobs, not --since or --dask",
            param_hint="'--site-config'",
        )
    if dask or dask_slurm:
        if since is not None:
            raise typer.BadParameter("not with --dask", param_hint="'--since'")
        slurm = workers if dask_slurm else None
        scaleout.analyze_on_dask(db, job_ids, dask, slurm, worker_cores, worker_memory, as_json)
        return
    try:
        start = views.parse_since(since)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--since'") from None
    episodes: int | None = None
    with open_db(db) as store:
        if start is not None:
            done = analyze_since(store, start)
            found, episodes, analysed = done["findings"], done["anomalies"], len(done["jobs"])
        else:
            ids = job_ids or None
            for j in ids or []:
                queries.job(store, j)  # unknown ids fail early, by name
            with progress() as bar:
                task = bar.add_task("analysing jobs", total=len(ids) if ids else None)
                found = analyze_jobs(store, ids, silenced, on_step=job_steps(bar, task))
            analysed = len(ids) if ids else len(queries.jobs(store))
            if not ids:
                episodes = analyze_components(store)
    counts: dict[str, int] = {}
    for f in found:
        counts[f.code] = counts.get(f.code, 0) + 1
    if as_json:
        print(render.to_json({"jobs": analysed, "findings": counts, "anomalies": episodes}))
    else:
        out.print(
            f"{analysed} job(s), {len(found)} findings: "
            + (", ".join(f"{k} x{v}" for k, v in sorted(counts.items())) or "none")
            + ("" if episodes is None else f"; {episodes} component anomaly episode(s)")
        )


@app.command()
def demo(
    db: Annotated[
        Path | None, typer.Option("--db", help="Where to keep the demo database.")
    ] = None,
    nodes: Annotated[int, typer.Option(min=16)] = 1024,
    hours: Annotated[float, typer.Option(min=0.1)] = 2.0,
    seed: int = 7,
    serve: Annotated[
        bool | None,
        typer.Option(
            "--serve/--no-serve",
            help="Serve the web UI on loopback afterwards [default: at a terminal].",
        ),
    ] = None,
) -> None:
    """Simulate a small cluster, ingest, analyse, and show what iolens finds."""
    from iolens.present.cli.demo import run_demo

    run_demo(db, nodes, hours, seed, out, serve)


@app.command()
def version() -> None:
    """Print the iolens version."""
    out.print(__version__)


app.command(context_settings={"allow_interspersed_args": False})(tracing.trace)
app.add_typer(tracing.import_app, name="import")
tracing.import_app.command("sacct")(scheduler.import_sacct)
app.add_typer(scheduler.hook_app, name="hook")
app.add_typer(site.site_app, name="site")
tracing.import_app.command("lustre")(importing.import_lustre)
tracing.import_app.command("fabric")(importing.import_fabric)
tracing.import_app.command("lmt")(importing.import_lmt)
tracing.import_app.command("darshan")(darshan_import.import_darshan)
app.command()(serving.serve)
app.command()(diagnosis.anomalies)
app.command()(jobdiag.interference)
app.command()(reasoning.reason)
app.command()(seff.seff)
app.command("advise")(advise.advise)
app.command()(agenting.agent)
app.add_typer(agenting.config_app, name="config")
system.register(app)
app.command("network")(network.network)
sysviews.register(app)
subscribing.register(system.alerts_app)
app.command()(watching.watch)
tracing.import_app.command("io500")(expect.import_io500)
app.command()(expect.expect)
app.command()(compare.compare)
app.command()(reporting.report)
app.command()(reporting.explain)
app.command()(reporting.findings)


@app.command(help=darshan_log.SUMMARY)
def darshan(
    paths: Annotated[list[Path], typer.Argument(help=darshan_log.HELP_PATHS)],
    as_json: Annotated[bool, typer.Option("--json", help=darshan_log.HELP_JSON)] = False,
    html: Annotated[Path | None, typer.Option("--html", help=darshan_log.HELP_HTML)] = None,
) -> None:
    # `iolens darshan` itself runs from `entry.py` (argparse, no store); this is the same
    # command for `iolens --help` and for callers of this app
    code = darshan_log.run(paths, as_json, html)
    if code:
        raise typer.Exit(code)


app.command()(scaleout.compact)
app.add_typer(users.user_app, name="user")
app.command()(zooming.zoomin)


def main() -> None:
    from iolens.present.cli import forward

    try:
        try:
            app()
        except forward.Forward as fw:  # a server owns the store: the command runs there
            try:
                sys.exit(forward.run(fw))
            except BrokenPipeError:  # `| head`: stop quietly, as a local run would
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                sys.exit(141)
    except IolensError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
