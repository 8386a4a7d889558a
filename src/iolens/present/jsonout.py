"""JSON for `--json`: datetimes as ISO 8601 UTC, numpy scalars as numbers, NaN as null.

Kept apart from the rich rendering (`cli/render.py`) so a command that prints only JSON
does not import rich.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any


def to_json(obj: Any) -> str:
    def default(o: Any) -> Any:
        if isinstance(o, datetime):
            return o.isoformat() + ("Z" if o.tzinfo is None else "")
        if hasattr(o, "item"):  # numpy scalars
            return o.item()
        raise TypeError(f"not JSON serialisable: {type(o).__name__}")

    def clean(o: Any) -> Any:
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, list):
            return [clean(v) for v in o]
        return o

    return json.dumps(clean(obj), default=default, indent=2)
