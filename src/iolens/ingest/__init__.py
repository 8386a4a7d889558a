"""Ingest: the single path by which observations enter the store."""

from iolens.ingest.load import load
from iolens.model.batch import Batch

__all__ = ["Batch", "load"]
