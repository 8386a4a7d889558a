"""Ship: get batches from a node to the ingest server without losing or duplicating any.

wire.py (batch <-> bytes), spool.py (disk and memory spools), transport.py (HTTP and
in-memory), shipper.py (spool first, then deliver oldest-first with back-off).
"""
