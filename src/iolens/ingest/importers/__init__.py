"""Importers: turn what sites already have (tracer spools, Darshan logs, sacct output...)
into `Batch`es, one format per module."""
