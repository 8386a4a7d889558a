"""`iolens darshan LOG...`: Darshan logs diagnosed in the terminal, as JSON, or as HTML.

The store-free counterpart of `drishti LOG`: the logs are read, diagnosed by the rules
`iolens import darshan` runs, and shown; nothing is kept. Several logs of one job (one per
executable the job ran) are diagnosed as one job; logs of several jobs give one
diagnosis each. `entry.py` runs this command from an app of its own, so a fresh process
imports what reading and diagnosing a log needs (numpy, pandas, PyDarshan's binding, the
rules), not DuckDB, the web stack or the other commands; with `--json`, not rich either.

Exit status: 0 when every log was diagnosed; 2 when a log could not be read (missing,
empty, truncated, crashing libdarshan-util), each named in one `error:` line on stderr,
after the others are shown.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

SUMMARY = "Diagnose Darshan logs without a store, like `drishti LOG` (one job per diagnosis)."
HELP_PATHS = "Darshan logs of one job (or directories of logs)."
HELP_JSON = "Print JSON only."
HELP_HTML = "Also write a self-contained HTML report to this file."


def main(argv: Sequence[str]) -> int:
    """`iolens darshan ...` from `entry.py`, parsed with argparse: typer builds a pydantic
    adapter per parameter on every run (pydantic alone takes as long to import as the rest
    of the command), and `main.py` registers the same command for `iolens --help`."""
    parser = argparse.ArgumentParser(prog="iolens darshan", description=SUMMARY)
    parser.add_argument("paths", nargs="+", type=Path, metavar="LOG", help=HELP_PATHS)
    parser.add_argument("--json", dest="as_json", action="store_true", help=HELP_JSON)
    parser.add_argument("--html", type=Path, metavar="FILE", help=HELP_HTML)
    args = parser.parse_args(argv)
    # the imports (numpy, pandas, the rules) make some 116,000 objects that live as long as
    # the process; the cycle collector ran 175 times over them (0.05 s of a 0.7 s run).
    # Off until they are done: `diagnose_logs` freezes them and turns it back on.
    gc.disable()
    return run(args.paths, args.as_json, args.html)


def run(paths: Sequence[Path], as_json: bool = False, html: Path | None = None) -> int:
    """Diagnose, show, write the HTML; the exit status (2 when a log could not be read).
    An `InputError` that stops everything (no log found, HTML not writable) is raised."""
    from iolens.errors import InputError
    from iolens.ingest.darshan_input import log_files
    from iolens.present.darshan_logs import diagnose_logs

    files = log_files(paths)
    if not files:
        raise InputError(", ".join(map(str, paths)), "no *.darshan files found")
    jobs, failed = diagnose_logs(files)
    if html is not None and len(jobs) > 1:
        ids = ", ".join(j.job_id for j in jobs)
        raise InputError(str(html), f"one job per HTML report; these logs are of jobs {ids}")
    titles = _titles()
    if as_json:
        from iolens.present.jsonout import to_json

        print(
            to_json(
                {
                    "jobs": [j.to_dict(titles) for j in jobs],
                    "failed": [{"path": e.source, "error": e.message} for e in failed],
                }
            )
        )
    else:
        from iolens.present.cli.render import stdout_console

        console = stdout_console()
        for j in jobs:
            _show(console, j.to_dict(titles))
    if html is not None and jobs:
        from iolens.present.html_report import render_darshan

        page = render_darshan(jobs[0], titles)
        try:
            html.write_text(page)
        except OSError as exc:
            raise InputError(str(html), f"cannot write the report ({exc.strerror})") from None
        print(f"wrote {html} ({len(page) / 1024:.0f} KiB)", file=sys.stderr)
    for e in failed:
        print(f"error: {e}", file=sys.stderr)
    return 2 if failed else 0


def _titles() -> dict[str, str]:
    """Each Darshan finding code's one-line summary, from the rules' documentation (not
    the job rules': their modules are not imported)."""
    from iolens.analyze.catalog import titles

    return titles(("zoomin", "drishti", "expert"))


def _show(console: Console, job: dict[str, Any]) -> None:
    """One job's diagnosis for a person: what ran, what it moved, what to change."""
    from rich.console import Group
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table

    from iolens.present.cli.render import SEVERITY_STYLE, human_bytes, human_rate

    logs = job["logs"]
    exe = ", ".join(e.split()[0].rsplit("/", 1)[-1] for e in job["exe"] if e.strip()) or "?"
    head = (
        f"[bold]job {escape(job['job_id'])}[/] · {escape(exe)} · uid {job['uid']} · "
        f"{job['nprocs']} process(es) · {job['run_time_s']:.1f} s · {len(logs)} log(s)"
    )
    lines = [head]
    for log in logs:
        mods = ", ".join(
            f"{m} {v['records']}" if v["records"] is not None else m
            for m, v in log["modules"].items()
        )
        part = f" · [red]partial: {', '.join(log['partial'])}[/]" if log["partial"] else ""
        lines.append(
            f"[dim]{escape(log['path'])}[/]: Darshan {log['darshan'] or '?'} · {escape(mods)}{part}"
        )
        lines.append(
            f"  read {human_bytes(log['bytes_read'])} · written "
            f"{human_bytes(log['bytes_written'])} · I/O time {log['io_time_s']:.3g} s · "
            f"{human_rate(log['bandwidth'])} (bytes / slowest rank's I/O time)"
        )
    if len(logs) > 1:
        lines.append(
            f"job: read {human_bytes(job['bytes_read'])} · written "
            f"{human_bytes(job['bytes_written'])} · I/O time {job['io_time_s']:.3g} s · "
            f"{human_rate(job['bandwidth']['bytes_per_s'])} (logs that ran together count "
            "their slowest process; logs that ran in turn add up)"
        )
    found = job["findings"]
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column()
    for f in found:
        style = SEVERITY_STYLE.get(f["severity"], "")
        more = f" [dim](in {f['logs']} of {len(logs)} logs)[/]" if len(logs) > 1 else ""
        g = f.get("gain") or {}
        save = ""
        if g.get("seconds") is not None:
            lo, hi = g["range_s"]
            save = (
                f"\n[dim]would save ~{g['seconds']:,.3g} s ({lo:,.3g}-{hi:,.3g} s), "
                f"{g['core_hours']:,.3g} core-hours: {escape(g['model'])}[/]"
            )
        table.add_row(
            f"[{style}]{f['severity'].upper()}[/]",
            f"[bold]{f['code']}[/]",
            f"[bold]{escape(f['title'])}[/]{more}\n{escape(f['recommendation'])}{save}",
        )
    counts = {s: sum(f["severity"] == s for f in found) for s in ("critical", "warning", "info")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "none"
    body = table if found else "[green]No findings: nothing in these logs needs attention.[/]"
    console.print(
        Panel(
            Group(*lines, "", body),
            title="iolens darshan",
            title_align="left",
            subtitle=f"{len(found)} finding(s): {summary} · `iolens explain CODE` says more",
            subtitle_align="left",
        )
    )
