"""`iolens network`: the interconnect's balance, the admin page `/admin/switches` in a
terminal: traffic per switch (Beacon 4.4) and per LNet router."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from iolens.present.cli import render
from iolens.present.cli.app import DbOption, JsonOption, open_db, out
from iolens.present.cli.system import time_bound


def network(
    db: DbOption = None,
    since: Annotated[str | None, typer.Option(help="ISO time (UTC) or a span like 24h.")] = None,
    until: Annotated[str | None, typer.Option(help="ISO time (UTC) or a span back.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Traffic per switch and per LNet router, and how evenly each set carries it.

    A switch is counted at its own ports (the agent's fabric source) or else at its hosts'
    InfiniBand ports; a router by the bytes LNet routed through it."""
    from iolens.analyze.system import router_traffic, switch_traffic, to_plain

    start, end = time_bound(since, "since"), time_bound(until, "until")
    with open_db(db) as store:
        result = {
            "switches": to_plain(switch_traffic(store, start, end)),
            "routers": to_plain(router_traffic(store, start, end)),
        }
    if as_json:
        print(render.to_json(result))
        return
    _print(result)


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _print(result: dict[str, Any]) -> None:
    sw = result["switches"]
    if sw["missing"]:
        out.print(f"[bold]Switches[/]: no traffic: {sw['missing']}.")
    else:
        t = Table(title="Switches (busiest first)")
        for c in ("switch", "from hosts", "to hosts", "hosts", "peak", "uplinks", "counted at"):
            t.add_column(c, justify="left" if c in ("switch", "counted at") else "right")
        for s in sw["switches"]:
            up = s["uplink_bytes"]
            t.add_row(
                s["component_id"],
                render.human_bytes(s["tx_bytes"]),
                render.human_bytes(s["rx_bytes"]),
                f"{s['hosts_reporting']} of {s['hosts']}",
                render.human_rate(s["peak_rate"]),
                "-" if up is None else render.human_bytes(up),
                "switch ports" if s["basis"] == "switch" else "host ports",
            )
        out.print(t)
        out.print(f"busiest / mean {_ratio(sw['max_over_mean'])}, CV {_ratio(sw['cv'])}")
        if sw["unmonitored"]:
            out.print("not monitored: " + ", ".join(sw["unmonitored"]))
    rt = result["routers"]
    if rt["missing"]:
        out.print(f"[bold]LNet routers[/]: {rt['missing']}.")
        return
    t = Table(title="LNet routers (busiest first)")
    for c in ("router", "routed", "messages", "dropped", "peak minute", "mean"):
        t.add_column(c, justify="left" if c == "router" else "right")
    for r in rt["routers"]:
        t.add_row(
            r["component_id"],
            render.human_bytes(r["bytes"]),
            f"{r['msgs']:,}",
            render.human_bytes(r["drop_bytes"]),
            render.human_rate(r["peak_rate"]),
            render.human_rate(r["mean_rate"]),
        )
    out.print(t)
    out.print(f"busiest / mean {_ratio(rt['max_over_mean'])}, CV {_ratio(rt['cv'])}")
    for note in rt["notes"]:
        out.print(note)
