"""Decoder for the LD_PRELOAD tracer's per-process output files (tracer/ in the repo).

    decode(path) -> TraceFile      header fields + FILES, CLIENT_IO and SUMMARIES tables
    decode_dir(spool_dir)          every traced process under a directory (its complete
                                   *.iolens files: interim ones merged, merge(files))
    library_path()                 the libiolens.so to put in LD_PRELOAD
    batch_of(trace)                one process's trace as an idempotent store batch
    Layout                         a file's Lustre layout, as the tracer read it
    writer.write(trace, spool)     a TraceFile written as the tracer writes it (writer.py:
                                   encode, process_trace for one process's client records)

Modules: format (byte layouts mirrored from tracer/include/iolens_trace.h), reader
(validation, raw sections), tables (Arrow conversion), trace (TraceFile), layout
(Lustre layouts and OST names), writer (the format, from Python), library.
"""

from __future__ import annotations

from iolens.tracefile.batch import batch_of
from iolens.tracefile.layout import Layout
from iolens.tracefile.library import library_path
from iolens.tracefile.tables import SUMMARIES
from iolens.tracefile.trace import SUFFIX, TraceFile, decode, decode_dir, merge

__all__ = [
    "SUFFIX",
    "SUMMARIES",
    "Layout",
    "TraceFile",
    "batch_of",
    "decode",
    "decode_dir",
    "library_path",
    "merge",
]
