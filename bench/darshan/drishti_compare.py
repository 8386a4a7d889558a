"""Drishti 0.8 vs. iolens's Drishti rules on the same Darshan logs: the table in
docs/accuracy.md ("Darshan diagnosis vs Drishti (issue 6)").

    .venv/bin/python bench/darshan/drishti_compare.py            # every test log
    .venv/bin/python bench/darshan/drishti_compare.py LOG...     # these logs

Drishti runs as users run it: the `drishti` command from PyPI, one subprocess per log,
with `--csv` (its flags export). When the command crashes before writing its CSV, Drishti
runs again in-process in a subprocess that catches the exception and reads the insights
it had raised (`csv_report`), so its verdict on the log is still known. Differences are
explained by the documented Drishti defects of tests/analyze/darshan/test_drishti_compare.py.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.common import table  # noqa: E402

from iolens.analyze.darshan.drishti import diagnose  # noqa: E402
from iolens.analyze.darshan.drishti.csv import drishti_codes  # noqa: E402
from iolens.ingest.darshan_reader import read_log  # noqa: E402
from iolens.model.darshan import DarshanJob  # noqa: E402
from iolens.model.finding import Finding  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
#: the logs of issue 6: the shared real logs, the generated ones, the darshan package's
LOG_DIRS = (SHARED / "darshan-logs", SHARED / "darshan-logs-generated")
#: PyDarshan's DataFrame path (which Drishti uses) needs ~9 s and 1.25 GiB for this one
SKIP = ("micro-dxt-2M.darshan",)

#: runs Drishti's handler in-process and reports the insights raised before any crash
_RECOVER = r"""
import json, sys
log, out, dest = sys.argv[1:4]
sys.argv = ["drishti", "--csv", "--code", "--export_dir", out, log]
from drishti.includes import config
from drishti.handlers.handle_darshan import handler
error = None
try:
    handler()
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
with open(dest, "w") as f:
    json.dump({"codes": list(config.csv_report), "error": error}, f)
"""


def package_logs() -> list[Path]:
    import darshan

    return sorted(Path(darshan.__file__).parent.joinpath("examples").rglob("*.darshan"))


def all_logs() -> list[Path]:
    logs = [p for d in LOG_DIRS if d.is_dir() for p in sorted(d.rglob("*.darshan"))]
    return [p for p in logs + package_logs() if p.name not in SKIP]


def drishti_command() -> str | None:
    """The `drishti` entry point of this environment, or None when not installed."""
    here = Path(sys.executable).parent / "drishti"
    return str(here) if here.exists() else shutil.which("drishti")


@dataclass
class DrishtiRun:
    """What Drishti reported on one log."""

    codes: list[str]  # in report order, repeats kept (Drishti 0.8 lists P10 twice)
    error: str | None = None  # the CLI's crash; codes are then those raised before it
    csv: str | None = None  # the CSV the CLI wrote
    seconds: float = 0.0

    @property
    def flags(self) -> set[str]:
        return set(self.codes)


def run_drishti(log: Path, workdir: Path) -> DrishtiRun:
    """`drishti --csv --code LOG`; on a crash, the insights it raised before crashing."""
    cmd = drishti_command()
    if cmd is None:
        raise RuntimeError("drishti is not installed (pip install drishti-io==0.8)")
    out = Path(tempfile.mkdtemp(dir=workdir))
    env = {**os.environ, "COLUMNS": "200"}
    t0 = time.perf_counter()
    res = subprocess.run(
        [cmd, "--csv", "--code", "--export_dir", str(out), str(log)],
        capture_output=True,
        text=True,
        env=env,
        cwd=out,
        timeout=600,
    )
    seconds = time.perf_counter() - t0
    written = out / (log.name.removesuffix(".darshan") + ".csv")
    if res.returncode == 0 and written.exists():
        text = written.read_bytes().decode()  # as written: CRLF line ends
        head, row = list(csv.reader(text.splitlines()))[:2]
        flags = [k for k, v in zip(head[1:], row[1:], strict=True) if v == "True"]
        # the console lists each insight as "[CODE] ..." (the CSV cannot show repeats)
        shown = re.findall(r"\[([SPMD]\d\d)\]", res.stdout)
        codes = shown if set(shown) == set(flags) else flags
        return DrishtiRun(codes, None, text, seconds)
    dest = out / "recovered.json"
    subprocess.run(
        [sys.executable, "-c", _RECOVER, str(log), str(out), str(dest)],
        capture_output=True,
        text=True,
        cwd=out,
        timeout=600,
    )
    got = json.loads(dest.read_text()) if dest.exists() else {"codes": [], "error": None}
    error = got["error"] or (res.stderr.strip().splitlines() or ["no CSV written"])[-1]
    return DrishtiRun(got["codes"], error, None, seconds)


def run_iolens(log: Path) -> tuple[DarshanJob, list[Finding], float]:
    t0 = time.perf_counter()
    job = read_log(log)
    findings = diagnose(job)
    return job, findings, time.perf_counter() - t0


@dataclass
class Row:
    log: Path
    drishti: DrishtiRun
    iolens: list[str]
    notes: list[str] = field(default_factory=list)


#: why iolens reports what Drishti 0.8 does not, by Drishti code
IOLENS_ONLY = {
    "P09": "per-file redundancy (bytes beyond the file's extent)",
    "P10": "per-file redundancy (bytes beyond the file's extent)",
    "D01": "from counters (Drishti shows it only from DXT Explorer's --json)",
    "D02": "from counters (Drishti shows it only from DXT Explorer's --json)",
}


def compare(log: Path, workdir: Path, defects: dict[str, Any] | None = None) -> Row:
    """Both tools on one log, with a note per difference (`defects`: the KNOWN_DEFECTS of
    the comparison test, which explain Drishti-only insights)."""
    run = run_drishti(log, workdir)
    job, findings, _ = run_iolens(log)
    mine = drishti_codes(findings)
    row = Row(log, run, mine)
    if run.error:
        row.notes.append(f"Drishti crashed ({run.error}); its insights up to the crash")
    repeats = sorted({c for c in run.codes if run.codes.count(c) > 1})
    if repeats:
        row.notes.append(f"Drishti lists {', '.join(repeats)} twice")
    for code in sorted(run.flags - set(mine)):
        d = (defects or {}).get(code)
        why = d.short if d is not None and d.applies(job) else "NOT EXPLAINED"
        row.notes.append(f"{code} Drishti only: {why}")
    for code in sorted(set(mine) - run.flags):
        row.notes.append(f"{code} iolens only: {IOLENS_ONLY.get(code, 'iolens finds it')}")
    return row


def markdown(rows: list[Row]) -> str:
    body = [
        [
            f"`{r.log.name}`",
            " ".join(sorted(r.drishti.flags)) or "-",
            " ".join(sorted(r.iolens)) or "-",
            "; ".join(r.notes),
        ]
        for r in rows
    ]
    codes = sorted({c for r in rows for c in r.drishti.flags | set(r.iolens)})
    summary = []
    for c in codes:
        d = sum(c in r.drishti.flags for r in rows)
        i = sum(c in r.iolens for r in rows)
        both = sum(c in r.drishti.flags and c in r.iolens for r in rows)
        summary.append([c, str(d), str(i), str(both), str(d - both), str(i - both)])
    crashed = sum(r.drishti.error is not None for r in rows)
    out = [
        f"{len(rows)} logs; Drishti 0.8 crashed on {crashed} of them.",
        "",
        table(["code", "Drishti", "iolens", "both", "Drishti only", "iolens only"], summary),
        "",
        table(["log", "Drishti", "iolens", "note"], body),
    ]
    return "\n".join(out)


def known_defects() -> dict[str, Any]:
    from tests.analyze.darshan.test_drishti_compare import KNOWN_DEFECTS

    return dict(KNOWN_DEFECTS)


def main(argv: list[str]) -> int:
    logs = [Path(a) for a in argv] or all_logs()
    defects = known_defects()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [compare(log, Path(tmp), defects) for log in logs]
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
