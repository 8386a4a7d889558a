"""Print and record how many inputs the fuzz targets ran (see harness.py for profiles)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.fuzz import harness


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not harness.COUNTS:
        return
    total = sum(harness.COUNTS.values())
    tr = terminalreporter
    tr.section(f"fuzz inputs (profile {harness.PROFILE}, scale {harness.SCALE})")
    for name, n in sorted(harness.COUNTS.items()):
        tr.write_line(f"{n:>12,}  {name}")
    tr.write_line(f"{total:>12,}  total over {len(harness.COUNTS)} targets")
    out = Path(
        os.environ.get("IOLENS_FUZZ_REPORT", tr.config.rootpath / ".hypothesis" / "fuzz.json")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "profile": harness.PROFILE,
                "scale": harness.SCALE,
                "total": total,
                "targets": dict(sorted(harness.COUNTS.items())),
            },
            indent=1,
        )
        + "\n"
    )
    tr.write_line(f"written to {out}")
