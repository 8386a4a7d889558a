"""Data model shared by every layer: Arrow schemas, ids and small typed objects."""

from iolens.model.ids import file_id
from iolens.model.schema import SCHEMA_VERSION, TABLES

__all__ = ["SCHEMA_VERSION", "TABLES", "file_id"]
