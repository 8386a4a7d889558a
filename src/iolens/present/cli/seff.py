"""`iolens seff JOBID`: how much of a job was I/O, and the one change that would help."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.table import Table

from iolens.present.cli import remote, render
from iolens.present.cli.app import DbOption, JsonOption, ensure_analyzed, open_db, out
from iolens.present.cli.remote import ServerOption, TokenOption


def seff(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="Scheduler job id.")],
    runs: Annotated[
        int, typer.Option(min=1, max=1000, help="Your last runs of the app to sum savings over.")
    ] = 10,
    one_line: Annotated[
        bool, typer.Option("--line", help="One line (for a Slurm epilog or a script).")
    ] = False,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """I/O efficiency of a job: its I/O share, the core-hours it spent waiting on I/O,
    the change most likely to help and what it would have saved over your last runs."""
    from iolens.analyze.seff import line
    from iolens.analyze.seff import seff as figures

    server, token = remote.target(ctx, db, server, token)
    if server:
        s = remote.get(server, token, f"/api/v1/jobs/{quote(job_id, safe='')}/seff", {"runs": runs})
    else:
        with open_db(db) as store:
            ensure_analyzed(store)
            s = figures(store, job_id, runs)
    if as_json:
        print(render.to_json(s))
    elif one_line:
        print(line(s))
    else:
        out.print(_table(s))


def _table(s: dict[str, Any]) -> Table:
    t = Table(title=f"I/O efficiency of job {s['job_id']}", show_header=False, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    share = f" ({s['io_share']:.1%} of the run)" if s["io_share"] is not None else ""
    runtime = f"{s['runtime_s']:,.0f} s" if s["runtime_s"] else "unknown (still running?)"
    t.add_row("User / app", f"{s['user']} / {s['app'] or '-'}")
    t.add_row("Run time", f"{runtime} on {s['cores']} cores")
    t.add_row("I/O time", f"{s['io_time_s']:,.0f} s{share} (the slowest rank)")
    t.add_row("Waiting on I/O", f"{s['io_core_hours']:,.2f} core-hours")
    rb, wb = (render.human_bytes(s[k]) for k in ("read_bytes", "write_bytes"))
    t.add_row("Data", f"read {rb}, wrote {wb}")
    top = s["top"]
    if not top:
        t.add_row("Best change", f"none expected to help ({s['findings']} finding(s))")
        return t
    lo, hi = top["range_s"] or [top["seconds"]] * 2
    t.add_row("Best change", f"{top['code']} {top['title']}: {top['recommendation']}")
    t.add_row("Would save", f"~{top['seconds']:,.0f} s ({lo:,.0f}-{hi:,.0f} s), "
              f"{top['core_hours']:,.2f} core-hours")  # fmt: skip
    t.add_row("Model", top["model"] or "-")
    h = s["history"]
    if h:
        clo, chi = h["core_hours_range"]
        t.add_row(
            "Over your last runs",
            f"{h['core_hours']:,.2f} core-hours ({clo:,.2f}-{chi:,.2f}) on "
            f"{h['runs_with_finding']} of your last {h['runs']} runs of {s['app'] or 'this app'}",
        )
    return t
