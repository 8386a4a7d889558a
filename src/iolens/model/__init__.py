"""Data model shared by every layer: Arrow schemas, ids and small typed objects.

`SCHEMA_VERSION` and `TABLES` load the Arrow schemas on first use (PEP 562), so the light
agent can import `iolens.model.batch` and `iolens.model.rows` without pyarrow.
"""

from __future__ import annotations

from typing import Any

from iolens.model.ids import file_id

__all__ = ["SCHEMA_VERSION", "TABLES", "file_id"]


def __getattr__(name: str) -> Any:
    if name in ("SCHEMA_VERSION", "TABLES"):
        from iolens.model import schema

        return getattr(schema, name)
    raise AttributeError(f"module 'iolens.model' has no attribute {name!r}")
