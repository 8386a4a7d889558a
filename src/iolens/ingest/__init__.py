"""Ingest: the single path by which observations enter the store (`ingest.load.load`).

Nothing is imported here: the store-free `iolens darshan` reads logs through
`iolens.ingest.darshan_*` and must not pay for the loader's imports.
"""
