"""Drishti's `--csv` export, from iolens findings.

Drishti 0.8 (`export_csv` in `drishti/includes/module.py`) writes one header row and one
value row: `JOB`, then one column per insight code in a fixed order, `True` when the
insight fired (whatever its level) and `False` otherwise; codes outside that list (the
DXT Explorer ones, D01/D02) are appended as extra columns when they fire. Python's csv
writer ends lines with CRLF; so does this.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from iolens.analyze.darshan.drishti import DRISHTI_CODES
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding

#: Drishti 0.8's column order
COLUMNS = (
    "S01",
    *(f"P{i:02d}" for i in range(1, 20)),
    "P21",
    "P22",
    *(f"M{i:02d}" for i in range(1, 11)),
)


def drishti_codes(findings: Iterable[Finding]) -> list[str]:
    """The Drishti codes of the findings that map to one, in finding order, once each."""
    out: list[str] = []
    for f in findings:
        code = DRISHTI_CODES.get(f.code)
        if code and code not in out:
            out.append(code)
    return out


def drishti_csv(job: DarshanJob, findings: Iterable[Finding]) -> str:
    """The CSV Drishti would write for this job, from iolens's findings on it."""
    fired = drishti_codes(findings)
    header = ["JOB", *COLUMNS, *(c for c in fired if c not in COLUMNS)]
    row = [job.job_id, *(str(c in fired) for c in header[1:])]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerow(row)
    return buf.getvalue()
