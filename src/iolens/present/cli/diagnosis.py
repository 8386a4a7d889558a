"""`iolens anomalies`: the component anomaly episodes the detectors stored (Beacon Table 2).

The detectors (`iolens.analyze.components`, described in docs/diagnosis.md) run on
`iolens analyze`, hourly inside `iolens serve`, and here when the store has samples they
have not examined yet, so the listing is never stale.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from iolens.present.cli import render
from iolens.present.cli.app import DbOption, JsonOption, err, open_db, out, progress
from iolens.store.base import Store


def ensure_components_analyzed(store: Store) -> None:
    """Run the detectors over samples newer than their last run (all data the first time)."""
    from iolens.analyze.components import analyze_components, analyzed_until

    done = analyzed_until(store)
    newest = store.query("SELECT max(ts) AS t FROM server_samples").column("t")[0].as_py()
    if newest is None or (done is not None and done is not False and done >= newest):
        return
    if done is False and store.query("SELECT count(*) AS n FROM anomalies").column("n")[0].as_py():
        return  # no record of runs in this backend: trust what is stored
    with progress() as bar:
        bar.add_task("analysing components", total=None)
        # From an hour before the last run, so an episode open then is re-examined whole.
        since = done - timedelta(hours=1) if isinstance(done, datetime) else None
        analyze_components(store, since)


def episode_rows(
    store: Store,
    kind: str | None = None,
    component: str | None = None,
    since: datetime | None = None,
) -> list[dict[str, Any]]:
    """Stored episodes as JSON-ready dicts, oldest first; `since` keeps those not ended by then."""
    sql = (
        'SELECT kind, component_kind, component_id, "start", "end", severity, evidence, '
        "detector, created FROM anomalies WHERE true"
    )
    params: list[Any] = []
    if kind:
        sql += " AND kind = ?"
        params.append(kind)
    if component:
        sql += " AND component_id = ?"
        params.append(component)
    if since:
        sql += ' AND ("end" IS NULL OR "end" >= ?)'
        params.append(since)
    rows = store.query(sql + ' ORDER BY "start", kind, component_id', params).to_pylist()
    out_rows = []
    for r in rows:
        try:
            evidence = json.loads(r["evidence"]) if r["evidence"] else {}
        except ValueError:
            evidence = {"raw": r["evidence"]}
        out_rows.append(
            {
                "kind": r["kind"],
                "component": r["component_id"],
                "component_kind": r["component_kind"],
                "start": r["start"],
                "end": r["end"],
                "ongoing": r["end"] is None,
                "duration_s": (r["end"] - r["start"]).total_seconds() if r["end"] else None,
                "severity": r["severity"],
                "evidence": evidence,
                "detector": r["detector"],
                "created": r["created"],
            }
        )
    return out_rows


def anomalies(
    db: DbOption = None,
    kind: Annotated[
        str | None,
        typer.Option(
            help="Only this kind: slow_ost, slow_forwarder, metadata_storm, cache_thrashing, "
            "low_bandwidth, n1_interference..."
        ),
    ] = None,
    component: Annotated[str | None, typer.Option(help="Only this component id.")] = None,
    since: Annotated[
        str | None, typer.Option(help="Episodes not ended before T: ISO time or a span (2h).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Component anomaly episodes: slow OSTs and forwarders, metadata storms, cache thrashing."""
    from iolens.present import views

    try:
        t_since = views.parse_since(since)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--since'") from None
    from iolens.analyze.components import component_gaps

    with open_db(db) as store:
        ensure_components_analyzed(store)
        rows = episode_rows(store, kind, component, t_since)
        gaps = component_gaps(store)
    if as_json:
        print(render.to_json({"episodes": rows, "not_assessed": gaps}))
        return
    if not rows:
        err.print("no anomaly episodes" + (" matching the filters" if kind or component else ""))
    else:
        _episodes_table(rows)
    print_gaps(gaps)


def print_gaps(gaps: list[dict[str, Any]]) -> None:
    """What the detectors could not assess: a blind spot is said, never left silent."""
    if not gaps:
        return
    err.print(Text("Not assessed (the data a real collector would need are missing):", "bold"))
    for g in gaps:
        ids = g.get("components") or []
        what = ", ".join(ids[:4]) + (f" and {len(ids) - 4} more" if len(ids) > 4 else "")
        err.print(
            f"  {g['detector']}: {what or g['component_kind']}: {g['missing']}. {g['remedy']}"
        )


def _episodes_table(rows: list[dict[str, Any]]) -> None:
    # Wide terminals get the one-line summary as a column; narrow ones a numbered list below.
    wide = out.width >= 110
    table = Table(header_style="bold", pad_edge=False, title="Component anomalies")
    cols = ["#", "start", "duration", "kind", "component", "severity"] + (["what"] if wide else [])
    for col in cols:
        table.add_column(col, no_wrap=col != "what", justify="right" if col == "#" else "left")
    notes = []
    for i, r in enumerate(rows, 1):
        sev, summary = r["severity"], str(r["evidence"].get("summary", ""))
        cells = [
            str(i),
            render.human_time(r["start"])[:16],
            "ongoing" if r["end"] is None else _duration(r["duration_s"]),
            r["kind"],
            r["component"],
            Text(sev, style=render.SEVERITY_STYLE.get(sev, "")),
        ]
        table.add_row(*cells, *([Text(summary)] if wide else []))
        notes.append(Text(f"{i:>3}. {summary}"))
    out.print(table)
    if not wide:
        for note in notes:
            out.print(note)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes / 60:.1f} h"
