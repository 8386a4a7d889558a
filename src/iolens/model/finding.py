"""A finding: what every rule family emits, and its row in the `findings` table.

The job rules (`analyze/findings/`), the Darshan rules (`analyze/darshan/`) and the
importers that store their results all speak this one record, so it lives with the other
shared shapes rather than beside any one family's base class.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from iolens.model.schema import FINDINGS


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
    #: causal chain: codes of the findings this one explains (its consequences) ...
    explains: list[str] | None = None
    #: ... and of those that explain it (its causes); the evidence repeats both, so they
    #: survive the store, which keeps evidence but no column for them
    explained_by: list[str] | None = None


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
