"""`iolens demo`: the whole path on a simulated cluster in about a minute."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.rule import Rule
from rich.table import Table

from iolens.present.cli import render

DEMO_DB = Path.home() / ".local" / "share" / "iolens" / "demo.duckdb"


def command() -> str:
    """How to type `iolens` here: the bare name when the shell finds this very executable on
    PATH, else its path (the README's set-up leaves it in .venv/bin, off PATH)."""
    exe = Path(sys.argv[0])
    found = shutil.which("iolens")
    if exe.name != "iolens" or (found and Path(found).resolve() == exe.resolve()):
        return "iolens"
    if exe.is_absolute() and not exe.is_relative_to(Path.cwd()):
        return str(exe)
    return os.path.relpath(exe)


def pick_interesting(rows: list[dict[str, Any]], findings: list[dict[str, Any]]) -> str | None:
    """The job whose diagnosis is most instructive: the worst finding, then the most bytes."""
    rank = {"critical": 0, "warning": 1, "info": 2}
    if findings:
        best = min(findings, key=lambda f: (rank.get(f["severity"], 3), f["code"], f["subject_id"]))
        return str(best["subject_id"])
    if rows:
        return max(rows, key=lambda r: (r["read_bytes"] or 0) + (r["write_bytes"] or 0))["job_id"]
    return None


def run_demo(
    db: Path | None,
    nodes: int,
    hours: float,
    seed: int,
    out: Console,
    serve: bool | None = None,
) -> None:
    from iolens.analyze import report
    from iolens.present.cli.simulating import run_simulation
    from iolens.store import queries

    path = db or DEMO_DB
    out.print(Rule(f"iolens demo: {nodes} compute nodes, {hours:g} h of jobs (seed {seed})"))
    t0 = time.perf_counter()
    store, truth = run_simulation(path, nodes, hours, seed, fresh=True)
    elapsed = time.perf_counter() - t0
    counts = store.query(
        "SELECT (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM client_io) AS recs, "
        "(SELECT count(*) FROM server_samples) AS samples, "
        "(SELECT count(*) FROM components WHERE kind = 'forwarder') AS fwd, "
        "(SELECT count(*) FROM components WHERE kind = 'ost') AS ost"
    ).to_pylist()[0]
    out.print(
        f"Simulated, ingested and analysed in {elapsed:.1f} s: {counts['jobs']} jobs, "
        f"{counts['recs']:,} compressed client records, {counts['samples']:,} server samples "
        f"({counts['fwd']} forwarders, {counts['ost']} OSTs, 1 MDS)."
    )

    rows = queries.jobs(store)
    out.print(render.jobs_table(rows[:15], title=f"Jobs (first 15 of {len(rows)})"))

    top = sorted(rows, key=lambda r: -((r["read_bytes"] or 0) + (r["write_bytes"] or 0)))[:5]
    out.print(render.jobs_table(top, title="Top I/O jobs"))

    findings = store.query(
        "SELECT code, name, severity, subject_id FROM findings ORDER BY code, subject_id"
    ).to_pylist()
    by_code = Table(title="Findings by rule", header_style="bold")
    for col in ("code", "rule", "severity", "jobs", "examples"):
        by_code.add_column(col)
    grouped: dict[str, list[dict[str, Any]]] = {}
    for f in findings:
        grouped.setdefault(f["code"], []).append(f)
    for code, fs in grouped.items():
        by_code.add_row(
            code,
            fs[0]["name"],
            fs[0]["severity"],
            str(len(fs)),
            ", ".join(f["subject_id"] for f in fs[:4]),
        )
    out.print(by_code)

    from iolens.analyze.components import analyze_components
    from iolens.present.cli.diagnosis import episode_rows
    from iolens.simulate.score import score_episodes

    analyze_components(store)
    episodes = episode_rows(store)
    table = Table(title="Component anomalies (iolens anomalies)", header_style="bold")
    for col in ("start", "kind", "component", "severity", "what"):
        table.add_column(col)
    for e in episodes:
        table.add_row(
            render.human_time(e["start"])[:16],
            e["kind"],
            e["component"],
            e["severity"],
            str(e["evidence"].get("summary", "")),
        )
    out.print(table)

    # Honest check against what only the simulator knows.
    scores = score_episodes(truth["faults"], store.query("SELECT * FROM anomalies").to_pylist())
    found = sum(s.found for s in scores.values())
    total = sum(s.found + s.missed for s in scores.values())
    false = sum(s.false_pos for s in scores.values())
    mode_ok = sum(1 for r in rows if r["io_mode"] == truth["jobs"][r["job_id"]]["io_mode"])
    bytes_ok = sum(
        1
        for r in rows
        if r["read_bytes"] == truth["jobs"][r["job_id"]]["read_bytes"]
        and r["write_bytes"] == truth["jobs"][r["job_id"]]["write_bytes"]
    )
    out.print(
        f"Ground truth: I/O mode right for {mode_ok}/{len(rows)} jobs, byte counts exact "
        f"for {bytes_ok}/{len(rows)}; injected faults: "
        + ", ".join(sorted({f["kind"] for f in truth["faults"]}))
        + f"; found {found}/{total} on the right component and time, {false} false alarms."
    )

    job_id = pick_interesting(rows, findings)
    if job_id:
        out.print(Rule(f"Per-job report of job {job_id}"))
        out.print(render.job_report(report.build(store, job_id).to_dict()))
    web = demo_accounts(store, job_id, rows)
    store.close()
    out.print(Rule())
    out.print(
        f"The database is {path}. Try:\n"
        f"  {command()} jobs --db {path} --user carol\n"
        f"  {command()} job {job_id} --db {path} --json"
    )
    show_web(path, web, job_id, out, serve)


def demo_accounts(store: Any, job_id: str | None, rows: list[dict[str, Any]]) -> dict[str, str]:
    """A web UI account for the owner of the job shown, and an admin: name -> token."""
    from iolens.present.web.accounts import add_user

    owner = next((r["user"] for r in rows if r["job_id"] == job_id), None)
    accounts = {"admin": add_user(store, "admin", admin=True, replace=True)}
    if owner:
        accounts[owner] = add_user(store, owner, replace=True)
    return accounts


def show_web(
    path: Path, accounts: dict[str, str], job_id: str | None, out: Console, serve: bool | None
) -> None:
    """Print clickable links into the web UI; serve it on loopback when asked (by default
    when a person is at the terminal), until Ctrl-C."""
    import socket

    port = 8470
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:  # taken: any free port
            with socket.socket() as t:
                t.bind(("127.0.0.1", 0))
                port = t.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    user = next((n for n in accounts if n != "admin"), None)
    out.print(Rule("Web UI"))
    if user and job_id:
        link = f"{base}/jobs/{job_id}?token={accounts[user]}"
        out.print(f"  job {job_id} as its owner {user}: {link}", soft_wrap=True, highlight=False)
    link = f"{base}/admin?token={accounts['admin']}"
    out.print(f"  system views as admin: {link}", soft_wrap=True, highlight=False)
    if serve is None:
        serve = sys.stdin.isatty() and sys.stdout.isatty()
    if not serve:
        out.print(
            f"Start the server for these links with: {command()} serve --db {path} --port {port}",
            soft_wrap=True,
        )
        return
    import uvicorn

    from iolens.present.web.app import create_app
    from iolens.store import DuckDBStore

    out.print(f"Serving the web UI on {base} (loopback only); Ctrl-C stops it.")
    store = DuckDBStore(path)
    try:
        uvicorn.run(create_app(store), host="127.0.0.1", port=port, log_level="warning")
    finally:
        store.close()
