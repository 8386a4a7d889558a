"""Scale-out commands: `iolens compact`, and what `serve` and `analyze` do with a dataset.

A dataset (`docs/scale-out.md`) is a directory of partitioned Parquet segments that many
ingest servers (`iolens serve --dataset DIR --group G`) write and one query/analysis
server reads. Every query command takes the dataset directory as `--db`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from iolens.present.cli import render
from iolens.present.cli.app import JsonOption, SiteOption, err, job_steps, out, progress

if TYPE_CHECKING:
    from iolens.store.site_config import SiteConfig

DatasetOption = Annotated[
    Path | None,
    typer.Option(
        "--dataset",
        envvar="IOLENS_DATASET",
        show_envvar=True,
        help="Parquet dataset directory shared by the ingest servers (scale-out store).",
    ),
]


def site_config(site: Path | None) -> SiteConfig:
    from iolens.store.site_config import SiteConfig, load_site

    return load_site(site) if site else SiteConfig()


def dataset_path(dataset: Path | None, site: SiteConfig) -> Path:
    path = dataset or site.dataset.path
    if path is None:
        raise typer.BadParameter("give --dataset DIR (or a --site-config file with [dataset] path)")
    return path


# -- serve ---------------------------------------------------------------------------------


def serve_dataset(
    dataset: Path | None,
    site_file: Path | None,
    group: str | None,
    flush_every: float | None,
    tokens: list[str],
    make_app: Callable[[Any], Any],
    schedule: Callable[[Any], Any],
    run: Callable[[Any], None],
) -> None:
    """`iolens serve --dataset`: with --group, an ingest server writing that group's
    segments; without, the query/analysis server over the whole dataset."""
    from iolens.errors import StoreError
    from iolens.ingest.http import create_app as create_ingest_app
    from iolens.ingest.load import load_segments
    from iolens.store.dataset import DatasetStore
    from iolens.store.segments import MAX_BATCHES, SegmentWriter

    site = site_config(site_file)
    root = dataset_path(dataset, site)
    if group is not None:
        writer = SegmentWriter(root, group, key_hours=24.0 * site.dataset.key_days)
        if writer.recovered:
            err.print(f"recovered {writer.recovered} segment(s) of an interrupted commit")
        app = create_ingest_app(writer, tokens, loader=load_segments)
        service = app.state.ingest
        # Commits gather everything that arrived in `flush_s`: a few large segments rather
        # than one per batch (each request waits for its commit, as before).
        service.GROUP_WAIT_S = flush_every or site.dataset.flush_s
        service.GROUP_MAX_BATCHES = MAX_BATCHES
        try:
            run(app)
        finally:
            writer.close()
        return
    store = DatasetStore(root, create=True)
    if not store.publishing:
        err.print(f"warning: another process writes the analysis results of {root}")
    app = make_app(store)

    def refuse(_store: Any, _batches: list[Any]) -> list[dict[str, int]]:
        raise StoreError(f"this server only queries {root}; ship to a group's server (--group)")

    app.state.ingest.loader = refuse
    scheduler = schedule(app.state.ingest)
    try:
        run(app)
    finally:
        scheduler.stop()
        store.close()


# -- analyze -------------------------------------------------------------------------------


def analyze_on_dask(
    db: Path | None,
    job_ids: list[str] | None,
    address: str | None,
    slurm_workers: int | None,
    worker_cores: int,
    worker_memory: str,
    as_json: bool,
) -> None:
    """`iolens analyze --dask ADDRESS | --dask-slurm --workers N` on a dataset."""
    from iolens.analyze.distributed import analyze_distributed, connect
    from iolens.store import open_store
    from iolens.store.dataset import DatasetStore

    store = open_store(str(db) if db else None, create=False)
    if not isinstance(store, DatasetStore):
        store.close()
        raise typer.BadParameter(
            "--dask needs a dataset: pass its directory as --db", param_hint="'--db'"
        )
    try:
        try:
            client, cluster = connect(
                address,
                slurm_workers=slurm_workers,
                cores=worker_cores,
                memory=worker_memory,
            )
        except ImportError:
            raise typer.BadParameter(
                "Dask is not installed: pip install 'iolens[scale]'", param_hint="'--dask'"
            ) from None
        try:
            ids = job_ids or None
            with progress() as bar:
                task = bar.add_task("analysing jobs on Dask", total=None)
                run = analyze_distributed(
                    store,
                    client,
                    ids,
                    components=ids is None,
                    on_step=job_steps(bar, task, "analysing jobs on Dask"),
                )
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    finally:
        store.close()
    counts: dict[str, int] = {}
    for f in run.findings:
        counts[f.code] = counts.get(f.code, 0) + 1
    if as_json:
        print(
            render.to_json(
                {
                    "jobs": run.jobs,
                    "findings": counts,
                    "anomalies": run.episodes,
                    "tasks": run.tasks,
                    "windows": run.windows,
                    "seconds": {k: round(v, 3) for k, v in run.seconds.items()},
                }
            )
        )
    else:
        out.print(
            f"{run.jobs} job(s), {len(run.findings)} findings: "
            + (", ".join(f"{k} x{v}" for k, v in sorted(counts.items())) or "none")
            + ("" if run.episodes is None else f"; {run.episodes} component anomaly episode(s)")
            + f" ({sum(run.tasks.values())} Dask tasks, {run.seconds['total']:.1f} s)"
        )


# -- compact -------------------------------------------------------------------------------


def compact(
    dataset: DatasetOption = None,
    site: SiteOption = None,
    full_days: Annotated[
        int | None, typer.Option(min=0, help="Days server samples keep their own interval.")
    ] = None,
    downsample: Annotated[
        int | None, typer.Option(min=1, help="Interval of older server samples, seconds.")
    ] = None,
    keep_days: Annotated[
        int | None, typer.Option(min=0, help="Drop timed data older than this (0: never).")
    ] = None,
    settle: Annotated[
        float | None,
        typer.Option(min=0, help="Seconds after an hour ends before its partition is rewritten."),
    ] = None,
    grace: Annotated[
        float | None,
        typer.Option(min=0, help="Seconds before replaced segments are deleted."),
    ] = None,
    second_pass: Annotated[
        bool,
        typer.Option(help="Merge client records across nodes (else only sort and merge files)."),
    ] = True,
    ratios: Annotated[
        str | None,
        typer.Option(help="Also report second-pass compression per 'app' or 'io_mode' (slower)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Compact a dataset: merge segments, second-pass compression, retention.

    Merges small segments, compresses client records a second time (across the nodes of
    each job, losslessly) and applies retention: downsamples old server samples, drops
    expired data."""
    from iolens.store.compaction import compact as run_compaction
    from iolens.store.compaction import dataset_bytes, second_pass_ratios

    cfg = site_config(site)
    root = dataset_path(dataset, cfg)
    if ratios not in (None, "app", "io_mode"):
        raise typer.BadParameter("'app' or 'io_mode'", param_hint="'--ratios'")
    ret = cfg.retention.model_copy()
    for key, value in (
        ("full_days", full_days),
        ("downsample_s", downsample),
        ("keep_days", keep_days),
        ("settle_s", settle),
        ("grace_s", grace),
    ):
        if value is not None:
            setattr(ret, key, value)
    report = run_compaction(root, ret, second_pass=second_pass)
    summary = report.summary()
    summary["bytes"] = dataset_bytes(root)
    if ratios:
        summary["second_pass"] = second_pass_ratios(root, by=ratios)
    if as_json:
        print(render.to_json(summary))
        return
    rows = summary["tables"]
    if not rows:
        out.print(f"nothing to compact in {root} ({report.deleted} replaced file(s) deleted)")
    for key, r in rows.items():
        out.print(
            f"{key}: {r['partitions']} partition(s), {r['files_in']} file(s), "
            f"{r['rows_in']:,} -> {r['rows_out']:,} rows, "
            f"{render.human_bytes(r['bytes_in'])} -> {render.human_bytes(r['bytes_out'])}"
        )
    for r in summary.get("second_pass", []):
        out.print(
            f"second pass {ratios} {r[ratios]}: {r['records']:,} records -> "
            f"{r['merged_rows']:,} rows ({r['row_ratio']}x), bytes {r['byte_ratio']}x"
        )
