"""`iolens watch JOBID`: follow a job in the terminal until it ends.

The same snapshot the live job page polls (`iolens.present.live`): from the server that
owns the store (`--server`, or the one announced beside it), else from the store itself,
opened afresh for each refresh so that it is never held between them (ingest may need it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from iolens.errors import IolensError
from iolens.present.cli import remote, render
from iolens.present.cli.app import DbOption, open_db, out
from iolens.present.cli.remote import ServerOption, TokenOption


def _fetcher(
    ctx: typer.Context, job_id: str, db: Path | None, server: str | None, token: str | None
) -> Callable[[], dict[str, Any]]:
    from urllib.parse import quote

    server, token = remote.target(ctx, db, server, token)
    if server:
        path = f"/api/v1/jobs/{quote(job_id, safe='')}/live"
        return lambda: remote.get(server, token, path)

    def local() -> dict[str, Any]:
        from iolens.present import live

        with open_db(db) as store:
            snap = live.snapshot(store, job_id)
        return json.loads(render.to_json(snap))  # the server's JSON, exactly

    return local


def view(s: dict[str, Any]) -> Group:
    """The snapshot as a small table and its findings."""
    bw = s.get("bandwidth") or {}
    phase = s.get("phase")
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    state = s.get("state") or "-"
    t.add_row("job", f"{s['job_id']} ({s.get('app') or '-'}, {s.get('user')})")
    t.add_row("state", state + (" (figures provisional)" if s.get("provisional") else ""))
    t.add_row("elapsed", render.human_seconds(s.get("elapsed_s")))
    t.add_row("read", render.human_bytes(s.get("read_bytes")))
    t.add_row("written", render.human_bytes(s.get("write_bytes")))
    current = render.human_rate(bw.get("current_bw"))
    if bw.get("baseline_bw"):
        current += f" vs {render.human_rate(bw['baseline_bw'])} ({bw.get('baseline')})"
    t.add_row("bandwidth", current)
    if phase:
        t.add_row(
            "phase",
            f"#{phase['phase']}: {render.human_seconds(phase.get('duration_s'))}, "
            f"{render.human_rate(phase.get('bw'))}",
        )
    parts: list[Any] = [t]
    if s.get("slower"):
        slow = 1 / bw["ratio"] if bw.get("ratio") else None
        parts.append(
            Text(f"slower than {bw.get('baseline')}: {slow:.1f}x", style="bold yellow")
            if slow
            else Text("slower than before", style="bold yellow")
        )
    for f in s.get("findings") or []:
        tag = " (provisional)" if f.get("live") else ""
        parts.append(Text(f"{f['severity']}: {f['code']} {f['name']}{tag}"))
    return Group(*parts)


def watch(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="Scheduler job id.")],
    db: DbOption = None,
    every: Annotated[float, typer.Option(min=1, help="Seconds between refreshes.")] = 5.0,
    once: Annotated[bool, typer.Option("--once", help="One snapshot, then exit.")] = False,
    server: ServerOption = None,
    token: TokenOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON line per refresh.")
    ] = False,
) -> None:
    """Follow a job: state, elapsed, bytes so far, current bandwidth and phase, findings,
    refreshed until the job ends."""
    fetch = _fetcher(ctx, job_id, db, server, token)
    snap = fetch()  # an unknown job fails here, before any live display
    if as_json or once:
        while True:
            if as_json:
                print(json.dumps(snap, separators=(",", ":")), flush=True)
            else:
                out.print(view(snap))
            if once or not snap.get("running"):
                return
            time.sleep(every)
            snap = fetch()
    from rich.live import Live

    with Live(view(snap), console=out, refresh_per_second=4) as live:
        while snap.get("running"):
            time.sleep(every)
            try:
                snap = fetch()
            except IolensError as exc:  # a server restarting: say so, keep watching
                live.update(Group(view(snap), Text(f"(update failed: {exc})", style="dim")))
                continue
            live.update(view(snap))
