"""`iolens report`, `iolens explain`, `iolens findings`: findings for people and scripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from iolens.errors import InputError
from iolens.present.cli.app import DbOption, JsonOption, ensure_analyzed, open_db, out
from iolens.present.cli.render import to_json


def report(
    job_id: Annotated[str, typer.Argument(help="Scheduler job id.")],
    html: Annotated[
        Path, typer.Option("--html", help="Write a self-contained HTML report to this file.")
    ],
    db: DbOption = None,
) -> None:
    """Write one job's report as a single HTML file: findings, plots, Darshan modules."""
    from iolens.present.html_report import render

    with open_db(db) as store:
        ensure_analyzed(store)
        page = render(store, job_id)
    try:
        html.write_text(page)
    except OSError as exc:
        raise InputError(str(html), f"cannot write the report ({exc.strerror})") from None
    out.print(f"wrote {html} ({len(page) / 1024:.0f} KiB)")


def explain(
    code: Annotated[str, typer.Argument(help="A finding code, e.g. IOL002, Z02, DP08.")],
    as_json: JsonOption = False,
) -> None:
    """Print what a finding means, why it hurts and what to do about it."""
    from iolens.analyze.catalog import catalog

    docs = catalog()
    doc = docs.get(code.upper())
    if doc is None:
        near = sorted(c for c in docs if c.startswith(code.upper()[:2]))[:8]
        hint = f"; codes like it: {', '.join(near)}" if near else ""
        raise InputError(code, f"unknown finding code{hint} (all: iolens findings --codes)")
    if as_json:
        print(to_json(doc.to_dict()))
        return
    out.print(f"[bold]{doc.code}[/] {doc.name}: {doc.title}")
    out.print(
        f"[dim]{doc.family}; default severity {doc.severity}; for the {doc.target or 'user'}[/]"
    )
    for label, text in (
        ("Symptom", doc.symptom),
        ("Why it hurts", doc.why),
        ("What to do", doc.what),
    ):
        if text:
            out.print(f"\n[bold]{label}:[/] {text}", highlight=False)


def findings(
    db: DbOption = None,
    code: Annotated[list[str] | None, typer.Option(help="Only these codes (repeatable).")] = None,
    severity: Annotated[
        str | None, typer.Option(help="At least this severity: info, warning, critical.")
    ] = None,
    job: Annotated[str | None, typer.Option(help="Only this job.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many findings.")] = 1000,
    codes: Annotated[bool, typer.Option("--codes", help="List every known code instead.")] = False,
    csv: Annotated[
        bool, typer.Option("--drishti-csv", help="Drishti-compatible CSV of flags per job.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Findings across jobs, most severe first."""
    if codes:
        _list_codes(as_json)
        return
    levels = {"info": 0, "warning": 1, "critical": 2}
    if severity is not None and severity not in levels:
        raise typer.BadParameter("use info, warning or critical", param_hint="'--severity'")
    where, params = ["subject_kind = 'job'"], []
    if code:
        where.append("code IN (SELECT unnest(?))")
        params.append([c.upper() for c in code])
    if job:
        where.append("subject_id = ?")
        params.append(job)
    if severity:
        where.append("severity IN (SELECT unnest(?))")
        params.append([s for s, n in levels.items() if n >= levels[severity]])
    with open_db(db) as store:
        ensure_analyzed(store)
        if csv:
            print(_drishti_csv(store, job), end="")
            return
        rows = store.query(
            "SELECT subject_id AS job_id, code, name, severity, target, recommendation, "
            f'evidence, gain, "start", "end" FROM findings WHERE {" AND ".join(where)} '
            "ORDER BY CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, "
            f'"start" DESC NULLS LAST, job_id, code LIMIT {int(limit)}',
            params,
        ).to_pylist()
    for r in rows:
        r["evidence"] = json.loads(r["evidence"]) if r["evidence"] else {}
        r["gain"] = json.loads(r["gain"]) if r["gain"] else None
    if as_json:
        print(to_json(rows))
        return
    t = Table(title=f"{len(rows)} finding(s)")
    for col in ("job", "code", "severity", "for", "recommendation"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r["job_id"], r["code"], r["severity"], r["target"] or "", r["recommendation"])
    out.print(t)


def _list_codes(as_json: bool) -> None:
    from iolens.analyze.catalog import catalog

    docs = [d.to_dict() for d in catalog().values()]
    if as_json:
        print(to_json(docs))
        return
    t = Table(title=f"{len(docs)} finding codes")
    for col in ("code", "name", "severity", "for", "title"):
        t.add_column(col, overflow="fold")
    for d in docs:
        t.add_row(d["code"], d["name"], d["severity"], d["target"] or "", d["title"])
    out.print(t)


def _drishti_csv(store, job: str | None) -> str:
    """Drishti's --csv flags, rebuilt from the stored Darshan logs and findings."""
    from iolens.analyze.darshan.drishti.csv import drishti_csv
    from iolens.store.darshan import load_jobs

    ids = (
        [job]
        if job
        else store.query("SELECT DISTINCT job_id FROM darshan_logs ORDER BY job_id")
        .column("job_id")
        .to_pylist()
    )
    chunks = []
    for jid in ids:
        fs = _findings_of(store, jid)
        for log in load_jobs(store, jid):
            chunks.append(drishti_csv(log, fs))
    if not chunks:
        raise InputError("store", "no Darshan logs (iolens import darshan PATH)")
    header, *_ = chunks[0].splitlines(keepends=True)
    return header + "".join("".join(c.splitlines(keepends=True)[1:]) for c in chunks)


def _findings_of(store, job_id: str) -> list:
    from iolens.model.finding import Finding

    rows = store.query(
        "SELECT code, name, severity, evidence, recommendation, target FROM findings "
        "WHERE subject_kind = 'job' AND subject_id = ?",
        [job_id],
    ).to_pylist()
    return [
        Finding(
            r["code"],
            r["name"],
            r["severity"],
            "job",
            job_id,
            json.loads(r["evidence"] or "{}"),
            r["recommendation"] or "",
            target=r["target"],
        )
        for r in rows
    ]
