"""Ingest: the single path by which observations enter the store."""

from iolens.ingest.batch import Batch, load

__all__ = ["Batch", "load"]
