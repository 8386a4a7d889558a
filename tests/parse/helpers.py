"""Shared by the parser tests: where the shared data lives and how records become JSON."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
#: `../shared/data` next to the repo root (read-only, may be absent on other machines).
SHARED_DATA = (REPO / ".." / "shared" / "data").resolve()
CASES = REPO / "tests" / "cases" / "parse"


def shared(rel: str) -> Path:
    """A file under ../shared/data, or skip the test cleanly when the data is not here."""
    path = SHARED_DATA / rel
    if not path.exists():
        pytest.skip(f"shared data not available: {path}")
    return path


def to_jsonable(obj: Any) -> Any:
    """Records -> plain JSON values (dataclasses as dicts, datetimes as ISO strings)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, datetime):
        return obj.isoformat()
    return obj


def dumps(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), indent=1, sort_keys=False) + "\n"
