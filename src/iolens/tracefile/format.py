"""Byte layouts of the tracer's output file, mirrored from `tracer/include/iolens_trace.h`.

The C header is the source of truth; these numpy dtypes must match it field for field
(`tests/tracer/test_decoder.py` checks the sizes against the compiled library's output).
Numpy structured dtypes let a whole record block become columns without a Python loop.
"""

from __future__ import annotations

import numpy as np

MAGIC = b"IOLTRACE"
FORMAT_VERSION = 6
#: Versions this decoder reads: 2 added the MPI-IO layer and the HINTS section, 3 the
#: Lustre layouts of FILES entries and two header counters, 4 interim files (F_INTERIM)
#: and the header's `interval`, 5 zstd-compressed sections (SEC_ZSTD) and the HDF5 and
#: PnetCDF layers, 6 five op codes (truncate, fadvise, access, link, readdir), which
#: lengthen the summary's op counters; an older file is a newer one without them.
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)
ENDIAN_MARK = 0x01020304

# Section types.
SEC_RECORDS = 1
SEC_FILES = 2
SEC_SUMMARY = 3
SEC_HEADER = 4
SEC_HINTS = 5
#: Another section, zstd-compressed (version 5): ZSECTION, the frame, zero padding to 8.
SEC_ZSTD = 6
SEC_END = 0x454E44

# Header flags.
F_PARTIAL = 0x1
F_EXEC = 0x2
F_FORKED = 0x4
F_UEXIT = 0x8
F_FILES_CAPPED = 0x10
#: A periodic flush (IOLENS_FLUSH_S), not the process's last file (version 4).
F_INTERIM = 0x20

# Record flags.
R_DIR = 0x1

# FILES entry flags (version 3): a LAYOUT_ENTRY and its OST indices follow the path.
FE_LAYOUT = 0x1

# Layout flags (tracer/src/core/lov.h IOL_LOV_*).
LOV_INCOMPLETE = 0x1  # components not instantiated yet (a PFL file still growing)
LOV_DOM = 0x2  # a component keeps its data on the MDT
LOV_TRUNCATED = 0x4  # more OST indices than the tracer had room for
LOV_RELEASED = 0x8  # HSM-released: no objects
#: LOV magics of the `lustre.lov` xattr: v1, v3 (with a pool name), composite (PFL/FLR).
LOV_MAGIC_V1, LOV_MAGIC_V3, LOV_MAGIC_COMP_V1 = 0x0BD10BD0, 0x0BD30BD0, 0x0BD60BD0

CLOCK_TSC = 0
CLOCK_MONO = 1

FILE_NONE = 0
FILE_OTHER = 1

#: Op codes in C order; the names are iolens.model.schema.OPS.
OP_NAMES = (
    "read", "write", "open", "close", "stat", "unlink", "rename", "mkdir", "rmdir",
    "fsync", "seek", "mmap", "dup", "flush",
    "truncate", "fadvise", "access", "link", "readdir",
)  # fmt: skip
#: Op codes before version 6 (the first 14 of OP_NAMES).
OPS_V5 = 14
LAYER_NAMES = ("posix", "stdio", "mpiio", "hdf5", "pnetcdf")
HIST_BINS = 10
#: Lower edges of Darshan's access-size bins, in bytes.
HIST_EDGES = (0, 100, 1024, 10240, 102400, 1048576, 4194304, 10485760, 104857600, 1073741824)

PREAMBLE = np.dtype([("magic", "S8"), ("version", "<u4"), ("endian", "<u4")])
SECTION = np.dtype([("type", "<u4"), ("aux", "<u4"), ("length", "<u8")])
#: The head of a SEC_ZSTD payload: the inner section's type, the frame's length, and the
#: length the frame must decompress to.
ZSECTION = np.dtype([("type", "<u4"), ("frame_len", "<u4"), ("raw_len", "<u8")])
RECORD = np.dtype(
    [
        ("op", "u1"), ("layer", "u1"), ("flags", "<u2"), ("file", "<u4"),
        ("offset", "<i8"), ("size", "<i8"), ("stride", "<i8"), ("count", "<u8"),
        ("t_start", "<u8"), ("t_end", "<u8"), ("dur", "<u8"),
    ]
)  # fmt: skip
FILE_ENTRY = np.dtype([("index", "<u4"), ("parent", "<u4"), ("path_len", "<u4"), ("flags", "<u4")])
#: A file's Lustre layout (version 3): then `nosts` little-endian u32 OST indices, padded to 8.
LAYOUT_ENTRY = np.dtype(
    [
        ("magic", "<u4"), ("flags", "<u4"), ("stripe_size", "<u8"),
        ("stripe_count", "<u2"), ("components", "<u2"), ("nosts", "<u4"), ("fsname", "S16"),
    ]
)  # fmt: skip
#: One file's MPI-IO hints: then `len` bytes of "key=value\n" lines, zero-padded to 8.
HINTS_ENTRY = np.dtype([("file", "<u4"), ("len", "<u4")])

#: struct iol_summary after its `ops` counters (their number changed in version 6).
_SUMMARY_REST = [
        ("bytes_read", "<u8"), ("bytes_written", "<u8"),
        ("max_byte_read", "<i8"), ("max_byte_written", "<i8"),
        ("seq_reads", "<u8"), ("seq_writes", "<u8"),
        ("consec_reads", "<u8"), ("consec_writes", "<u8"),
        ("hist_read", "<u8", (HIST_BINS,)), ("hist_write", "<u8", (HIST_BINS,)),
        ("t_first", "<u8"), ("t_last", "<u8"),
        ("time_read", "<u8"), ("time_write", "<u8"), ("time_meta", "<u8"),
        ("last_end_read", "<i8"), ("last_end_write", "<i8"),
]  # fmt: skip


def _summary(nops: int) -> np.dtype:
    """struct iol_summary with `nops` op counters."""
    return np.dtype([("file", "<u4"), ("layer", "<u4"), ("ops", "<u8", (nops,)), *_SUMMARY_REST])


SUMMARY = _summary(len(OP_NAMES))
#: The summary of versions 1-5: 14 op counters.
SUMMARY_V5 = _summary(OPS_V5)
HEADER = np.dtype(
    [
        ("flags", "<u4"), ("clock", "<u4"), ("pid", "<i4"), ("ppid", "<i4"),
        ("rank", "<i4"), ("uid", "<u4"),
        ("start_wall_ns", "<u8"), ("end_wall_ns", "<u8"),
        ("base_ticks", "<u8"), ("base_wall_ns", "<u8"), ("ns_per_tick", "<f8"),
        ("calls", "<u8"), ("records", "<u8"), ("dropped_records", "<u8"),
        ("dropped_calls", "<u8"),
        ("files", "<u4"), ("dropped_files", "<u4"), ("spool_errors", "<u4"),
        ("segment", "<u4"), ("budget_mb", "<u4"),
        ("len_job_id", "<u2"), ("len_host", "<u2"), ("len_exe", "<u2"), ("len_user", "<u2"),
        ("pad", "<u2", (2,)), ("missed_calls", "<u8"),
    ]
)  # fmt: skip
#: Version 3 appends two layout counters to the header.
HEADER_V3 = np.dtype([*HEADER.descr, ("layouts", "<u4"), ("layouts_lost", "<u4")])
#: Version 4 appends the interval: k for interim file k, in the final file the number of
#: interim files before it.
HEADER_V4 = np.dtype([*HEADER_V3.descr, ("interval", "<u4"), ("pad2", "<u4")])

assert PREAMBLE.itemsize == 16
assert SECTION.itemsize == 16
assert ZSECTION.itemsize == 16
assert RECORD.itemsize == 64
assert FILE_ENTRY.itemsize == 16
assert HINTS_ENTRY.itemsize == 8
assert SUMMARY.itemsize == 440
assert SUMMARY_V5.itemsize == 400
assert HEADER.itemsize == 136
assert HEADER_V3.itemsize == 144
assert HEADER_V4.itemsize == 152
assert LAYOUT_ENTRY.itemsize == 40


def header_dtype(version: int) -> np.dtype:
    """The header struct of a file of format `version`."""
    if version >= 4:
        return HEADER_V4
    return HEADER_V3 if version >= 3 else HEADER


def summary_dtype(version: int) -> np.dtype:
    """The summary struct of a file of format `version`."""
    return SUMMARY if version >= 6 else SUMMARY_V5


def op_count(version: int) -> int:
    """How many op codes a file of format `version` may use."""
    return len(OP_NAMES) if version >= 6 else OPS_V5
