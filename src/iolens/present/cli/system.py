"""`iolens load` (how busy forwarders, OSTs and the MDS are) and `iolens alerts check`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from iolens.present.cli import render
from iolens.present.cli.app import DbOption, JsonOption, open_db, out

LOAD_KINDS = ("forwarder", "ost", "mds")
LEVELS = ("high", "mid", "low", "idle")

alerts_app = typer.Typer(
    help="Mail and webhook alerts: admins' on lasting component anomalies, owners' on "
    "their jobs' findings.",
    no_args_is_help=True,
)


def time_bound(value: str | None, name: str) -> Any:
    """A `--since`/`--until` value as a time; a bad one is a usage error naming it."""
    from iolens.present import views

    try:
        return views.parse_since(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"'--{name}'") from None


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _rate(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return render.human_rate(value) if unit == "bytes/s" else f"{value:,.0f} ops/s"


def load(
    db: DbOption = None,
    kind: Annotated[
        str | None, typer.Option(help="Only this kind: forwarder, ost or mds (default: all three).")
    ] = None,
    since: Annotated[str | None, typer.Option(help="ISO time (UTC) or a span like 24h.")] = None,
    until: Annotated[str | None, typer.Option(help="ISO time (UTC) or a span back.")] = None,
    top: Annotated[int, typer.Option(min=1, help="Most loaded components to list.")] = 5,
    as_json: JsonOption = False,
) -> None:
    """Per-hour peak load of forwarders, OSTs and the MDS (Beacon's load levels).

    Also forwarder imbalance, and the MDS load split into jobs and other clients."""
    from iolens.analyze.system.summary import load_summary

    if kind is not None and kind not in LOAD_KINDS:
        raise typer.BadParameter(
            f"{kind!r} is not one of {', '.join(LOAD_KINDS)}", param_hint="'--kind'"
        )
    start, end = time_bound(since, "since"), time_bound(until, "until")
    with open_db(db) as store:
        summary = load_summary(store, [kind] if kind else None, start, end)
    if as_json:
        print(render.to_json(summary))
        return
    _print_load(summary, top)


def _print_load(summary: dict[str, Any], top: int) -> None:
    kinds = summary["kinds"]
    if not any(k["cells"] for k in kinds.values()):
        out.print("No load samples in this window.")
        _print_missing(kinds)
        return
    shares = Table(
        title="Peak load by hour: share of component-hours per level",
        header_style="bold",
        pad_edge=False,
    )
    for col in ("kind", "components", "hours", *LEVELS):
        shares.add_column(col, justify="left" if col == "kind" else "right")
    for name, k in kinds.items():
        shares.add_row(
            name,
            str(len(k["components"])),
            str(len(k["hours"])),
            *(_pct(k["shares"][lv]) if k["cells"] else "-" for lv in LEVELS),
        )
    out.print(shares)
    out.print("high > 90 %, mid 50-90 %, low 10-50 %, idle < 10 % of the component's peak")
    _print_missing(kinds)
    for name, k in kinds.items():
        if not k["components"]:
            continue
        t = Table(title=f"Most loaded: {name}", header_style="bold", pad_edge=False)
        for col in ("component", "peak", "capacity", "load", "peak hour", *LEVELS):
            t.add_column(col, justify="left" if col in ("component", "peak hour") else "right")
        for c in k["components"][:top]:
            cap = _rate(c["capacity"], k["unit"]) + (
                " (seen)" if c["capacity_source"] == "observed" else ""
            )
            routed = " (routed)" if c["basis"] == "route_bytes" else ""
            t.add_row(
                c["component_id"],
                _rate(c["peak"], k["unit"]) + routed,
                cap,
                _pct(c["peak_load"]),
                render.human_time(c["peak_hour"]),
                *(str(c["hours"][lv]) for lv in LEVELS),
            )
        out.print(t)
    imb = summary.get("forwarder_imbalance")
    if imb and imb["hours"]:
        out.print(
            f"Forwarder imbalance: a saturated forwarder next to an idle one in "
            f"{imb['idle_next_to_saturated']} of {imb['hours']} hours; "
            f"mean spread between busiest and idlest {_pct(imb['mean_spread'])} of peak."
        )
        rows = [h for h in imb["by_hour"] if h["high"] and h["idle"]]
        if rows:
            t = Table(header_style="bold", pad_edge=False)
            for col in ("hour", "saturated", "idle"):
                t.add_column(col)
            for h in rows[:top]:
                t.add_row(render.human_time(h["hour"]), ", ".join(h["high"]), ", ".join(h["idle"]))
            out.print(t)
    mds = summary.get("mds")
    if mds and mds["total_ops"]:
        out.print(
            f"MDS: {mds['total_ops']:,} metadata ops; jobs {_pct(mds['job_share'])}, "
            f"other clients (login nodes, untagged) {_pct(mds['other_share'])}: processes "
            f"outside any job {_pct(mds['untagged_share'])}, no jobstats entry "
            f"{_pct(mds['unattributed_ops'] / mds['total_ops'])}; "
            f"above 75 % of peak {_pct(mds['time_above_75'])} of the time."
        )
        procs = [_untagged(p) for p in mds["top_untagged"][:3]]
        clients = [f"{c['host'] or c['nid']} {_pct(c['share'])}" for c in mds["top_clients"][:3]]
        if procs:
            out.print("Top untagged processes: " + ", ".join(procs) + ".")
        if clients:
            out.print("Top clients (MDT exports): " + ", ".join(clients) + ".")
        t = Table(title="MDS load by hour", header_style="bold", pad_edge=False)
        for col in ("hour", "ops", "jobs", "other", "other %", "peak load"):
            t.add_column(col, justify="left" if col == "hour" else "right")
        for b in mds["bins"]:
            t.add_row(
                render.human_time(b["start"]),
                f"{b['total_ops']:,}",
                f"{b['job_ops']:,}",
                f"{b['other_ops']:,}",
                _pct(b["other_share"]),
                _pct(b["peak_load"]) + (f" {b['level']}" if b.get("level") else ""),
            )
        out.print(t)


def _print_missing(kinds: dict[str, Any]) -> None:
    """Why a kind has no cells: the files its rate comes from were not collected."""
    for name, k in kinds.items():
        if k.get("missing"):
            out.print(f"{name}: {k['missing']}.", highlight=False)


def _untagged(p: dict[str, Any]) -> str:
    """`find (uid 1003, carol) 94%`: an untagged process of the MDS split."""
    name = p["process"] or p["job_id"]
    if p["uid"] is not None:
        name += f" (uid {p['uid']}" + (f", {p['user']})" if p["user"] else ")")
    return f"{name} {_pct(p['share'])}"


@alerts_app.command("check")
def alerts_check(
    config: Annotated[
        Path, typer.Option("--config", help="TOML file with the alerts table (docs/cli.md).")
    ],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send the alerts that are due, once per episode and channel (for cron).

    Exits 1 when
    a send failed; it is retried on the next check."""
    from iolens.present.alerts import check_alerts, load_alerts_config

    cfg = load_alerts_config(config)
    with open_db(db) as store:
        result = check_alerts(store, cfg)
    if as_json:
        print(render.to_json(result.to_dict()))
    else:
        out.print(
            f"{result.due} episode(s) due; {result.sent} alert(s) sent, {result.failed} failed."
        )
        for a in result.attempts:
            mark = "sent" if a.ok else "FAILED"
            out.print(f"  {mark} {a.channel} {a.episode}: {a.detail}", highlight=False)
    if result.failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `iolens load` and `iolens alerts` to the command line."""
    app.command("load")(load)
    app.add_typer(alerts_app, name="alerts")
