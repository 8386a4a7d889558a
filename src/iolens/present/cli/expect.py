"""`iolens import io500` and `iolens expect`: IO500 runs, the box of user expectation, runs
where 'hard' beat 'easy', and where a job falls in the box."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from iolens.present.cli.app import DbOption, JsonOption, err, open_db, out
from iolens.present.cli.render import to_json


def import_io500(
    paths: Annotated[
        list[Path],
        typer.Argument(help="IO500 result directories, or folders holding any number of them."),
    ],
    db: DbOption = None,
    system: Annotated[
        str | None,
        typer.Option(
            help="The system the runs were made on [default: the folder holding results/, "
            "else the result directory's name]."
        ),
    ] = None,
    tz: Annotated[
        str,
        typer.Option(help="Time zone of the times in the result files (IANA name, UTC, local)."),
    ] = "UTC",
    as_json: JsonOption = False,
) -> None:
    """Load IO500 result directories, current and 2018-era formats.

    Reads result_summary.txt, result.txt, config.ini and the IOR and mdtest outputs (the
    2018 io500.sh format too). Re-importing a run replaces it."""
    from iolens.ingest.importers import io500
    from iolens.ingest.importers.sacct import timezone

    zone = timezone(tz)
    result = io500.read_paths(paths, system, zone)
    if result.runs:
        with open_db(db, create=True) as store:
            counts = io500.load_runs(store, result.runs)
    else:
        counts = {"io500_runs": 0, "io500_phases": 0}
    summary = {
        "runs": [
            {
                "run_id": r.run_id,
                "system": r.system,
                "api": r.api,
                "format": r.format,
                "version": r.version,
                "timestamp": r.timestamp,
                "score": r.score,
                "phases": len(r.phases),
                "path": r.path,
            }
            for r in result.runs
        ],
        "phases": counts["io500_phases"],
        "errors": [{"path": e.source, "error": e.message} for e in result.errors],
    }
    if as_json:
        print(to_json(summary))
    else:
        for r in result.runs:
            out.print(
                f"{r.system} / {r.api}: run {r.run_id} ({r.format} {r.version or ''}".rstrip()
                + f", {len(r.phases)} phases, score {r.score if r.score is not None else '-'})"
            )
        out.print(f"Imported {len(result.runs)} IO500 run(s) ({counts['io500_phases']} phases).")
    for e in result.errors:
        err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
    if result.errors:
        sys.exit(2 if not result.runs else 1)


def _num(x: float | None) -> str:
    from iolens.analyze.expect.box import number

    return "-" if x is None else number(x)


def _print(data: dict[str, Any]) -> None:
    units = data["units"]
    bw_u, md_u = units["bandwidth"], units["metadata"]
    for g in data["boxes"]:
        runs = Table(
            title=f"{g['system']} / {g['api'] or '-'}: IO500 runs ({bw_u}, {md_u})",
            header_style="bold",
            pad_edge=False,
        )
        runs.add_column("run", no_wrap=True)
        runs.add_column("date", no_wrap=True)
        runs.add_column("nodes", justify="right")
        for col in ("easy BW", "hard BW", "easy MD", "hard MD"):
            runs.add_column(col, justify="right")
        runs.add_column("flag")
        for r in data["runs"]:
            if (r["system"], r["api"]) != (g["system"], g["api"]):
                continue
            v = r["views"]["aggregate"]
            flag = "hard>easy" if r["anomalous"] else ("invalid" if r["valid"] is False else "")
            runs.add_row(
                r["run_id"],
                str(r["timestamp"] or "-")[:10],
                str(r["nodes"] or "-"),
                _num(v["easy_bw"]),
                _num(v["hard_bw"]),
                _num(v["easy_md"]),
                _num(v["hard_md"]),
                f"[red]{flag}[/]" if r["anomalous"] else flag,
            )
        out.print(runs)
        box = Table(
            title=f"{g['system']} / {g['api'] or '-'}: box of expectation",
            header_style="bold",
            pad_edge=False,
        )
        for col in ("view", f"bandwidth {bw_u} worst..best", f"metadata {md_u} worst..best"):
            box.add_column(col)
        for view in ("aggregate", "write", "read"):
            b = g[view]
            box.add_row(
                view,
                "-" if b is None else f"{_num(b['bw_lo'])} .. {_num(b['bw_hi'])}",
                "-" if b is None else f"{_num(b['md_lo'])} .. {_num(b['md_hi'])}",
            )
        out.print(box)
        n = len(g["runs"])
        note = f"{n} run(s) in the box"
        if g["excluded"]:
            note += f"; left out as anomalous: {', '.join(g['excluded'])}"
        if g["from_anomalous"]:
            note += "; only anomalous runs: the box is built from them"
        note += (
            f"; stable after {g['stable_after']} runs"
            if g["stable_after"]
            else "; not stable yet (run IO500 more times: the paper needed about 20)"
        )
        out.print(note, highlight=False)
    for a in data["anomalous_runs"]:
        out.print(f"[bold red]anomalous[/] {a['system']} run {a['run_id']}: {a['reason']}")
    job = data.get("job")
    if job:
        out.print(
            f"\n[bold]Job {job['job_id']}[/] against {job['system']}"
            + (f" ({job['api']})" if job["api"] else "")
            + f": [bold]{job['verdict'] or 'no verdict'}[/]"
        )
        sc = job.get("scale") or {}
        if sc.get("io500_nodes"):
            out.print(
                f"  box scaled to the job's {sc['job_nodes']} of IO500's "
                f"{sc['io500_nodes']:g} client nodes (x{sc['factor']:.3g})",
                highlight=False,
            )
        for a in job["axes"]:
            out.print(
                f"  {a['axis']}: {_num(a['value'])} {a['unit']} "
                f"(worst {_num(a['worst'])}, best {_num(a['best'])}; {a['position']})"
            )
        pm = job.get("paper_md_rate")
        if pm:
            out.print(
                f"  metadata by the paper's formula: {_num(pm['value'])} {pm['unit']} "
                f"({pm['ops']:,} ops / {pm['meta_time_s']:.3g} s of metadata time; "
                f"{pm['position'] or '-'})",
                highlight=False,
            )
        out.print(f"  {job['meaning']}")


def expect(
    db: DbOption = None,
    system: Annotated[str | None, typer.Option(help="Only this system's runs.")] = None,
    api: Annotated[
        str | None, typer.Option(help="Only runs with this IOR API (POSIX, MPIIO, DFS...).")
    ] = None,
    job: Annotated[
        str | None,
        typer.Option(
            "--job", help="Place this job in the box: below worst case, within, near best."
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="Draw the boxes, runs (and the job) to this .svg, .png or .pdf file."),
    ] = None,
    include_anomalous: Annotated[
        bool,
        typer.Option(
            "--include-anomalous", help="Let runs where 'hard' beat 'easy' widen the box."
        ),
    ] = False,
    tolerance: Annotated[
        float,
        typer.Option(
            min=0.0, help="Flag hard > easy only beyond this fraction (0.05 = 5 %) of easy."
        ),
    ] = 0.0,
    as_json: JsonOption = False,
) -> None:
    """The IO500 bounding box of what users can expect, per system and API.

    Also its stability, the runs where 'hard' beat 'easy' (probable system faults), phase
    tails, and a job's place."""
    from iolens.analyze.expect import expectations
    from iolens.analyze.expect.plot import plot as draw

    with open_db(db) as store:
        data = expectations(
            store,
            system=system,
            api=api,
            include_anomalous=include_anomalous,
            tolerance=tolerance,
            job_id=job,
        )
    if plot is not None:
        data["plot"] = str(draw(data, plot))
    if as_json:
        print(to_json(data))
        return
    if not data["runs"]:
        out.print("No IO500 runs in the store: load some with `iolens import io500 DIR`.")
        return
    _print(data)
    if plot is not None:
        out.print(f"Plot written to {data['plot']}")
