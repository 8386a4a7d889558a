"""Golden files: compare with the checked-in expectation, or (re)write it on request.

`IOLENS_UPDATE_GOLDEN=1` rewrites every golden; a missing one is written and the test
fails, so a new golden is always looked at before it counts.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def check_golden(
    expected: Path, got: Any, dumps: Callable[[Any], str] = lambda v: json.dumps(v, indent=1)
) -> None:
    if os.environ.get("IOLENS_UPDATE_GOLDEN") == "1" or not expected.exists():
        expected.write_text(dumps(got).rstrip("\n") + "\n")
        if os.environ.get("IOLENS_UPDATE_GOLDEN") != "1":
            pytest.fail(f"{expected} was missing and has been written; check it and re-run")
        return
    assert got == json.loads(expected.read_text())


def reading_rows(readings: list[Any]) -> list[dict[str, Any]]:
    """Agent `Reading`s as golden rows: what the source read, without how the agent rates
    it (`sparse`, `fresh`) and without the fields a source leaves unset (`window`,
    `parent`), so goldens written before those fields existed still compare."""
    rows = []
    for r in readings:
        row = dataclasses.asdict(r)
        for k in ("sparse", "fresh"):
            row.pop(k)
        for k in ("window", "parent"):
            if row[k] is None:
                row.pop(k)
            elif k == "window":
                row[k] = list(row[k])
        rows.append(row)
    return rows
