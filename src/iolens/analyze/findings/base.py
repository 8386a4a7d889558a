"""The findings contract: one rule per file, each with a stable code.

A rule looks at a `JobReport` and returns a `Finding` or None. Its class docstring has three
parts (Symptom / Why it hurts / What to do) that the docs and the UI show; evidence is
data (numbers a person can check), not prose. Sites silence codes in their config.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

import pyarrow as pa

from iolens.analyze.report import JobReport
from iolens.model.schema import FINDINGS

GiB = 2**30


@dataclass
class Finding:
    code: str
    name: str
    severity: str  # info | warning | critical
    subject_kind: str
    subject_id: str
    evidence: dict[str, Any]
    recommendation: str
    start: datetime | None = None
    end: datetime | None = None
    created: datetime = field(default_factory=lambda: datetime.now(UTC).replace(tzinfo=None))
    #: who should act on it: "user" (run settings), "developer" (code), "admin" (system)
    target: str | None = None
    #: estimated gain, e.g. {"metric": "bandwidth", "factor": 4.0, "basis": "..."}
    gain: dict[str, Any] | None = None


class JobRule:
    """Base of the per-job rules; subclasses set the class attributes and `check`."""

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[str] = "warning"
    target: ClassVar[str] = "user"  # who acts on it: user | developer | admin

    def check(self, report: JobReport) -> Finding | None:
        raise NotImplementedError

    def finding(
        self,
        report: JobReport,
        evidence: dict[str, Any],
        recommendation: str,
        severity: str | None = None,
    ) -> Finding:
        return Finding(
            self.code,
            self.name,
            severity or self.severity,
            "job",
            report.job_id,
            evidence,
            recommendation,
            report.start,
            report.end,
            target=self.target,
        )


def findings_table(findings: list[Finding]) -> pa.Table:
    rows = [
        {
            "subject_kind": f.subject_kind,
            "subject_id": f.subject_id,
            "code": f.code,
            "name": f.name,
            "severity": f.severity,
            "start": f.start,
            "end": f.end,
            "evidence": json.dumps(f.evidence, sort_keys=True),
            "recommendation": f.recommendation,
            "created": f.created,
            "target": f.target,
            "gain": None if f.gain is None else json.dumps(f.gain, sort_keys=True),
        }
        for f in findings
    ]
    return pa.Table.from_pylist(rows, schema=FINDINGS)
