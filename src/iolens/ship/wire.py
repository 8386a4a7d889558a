"""The on-the-wire form of a Batch: a small JSON header and one Arrow IPC stream per table.

    b"IOLB1\\n" | u32 header length | header JSON | IPC stream 1 | IPC stream 2 | ...

The header names the tables and their byte lengths, the batch's idempotency key and its
source. IPC streams use Arrow's built-in zstd buffer compression, so no extra codec is
needed and the server decodes straight into Arrow.
"""

from __future__ import annotations

import json
import struct

import pyarrow as pa

from iolens.errors import InputError
from iolens.model.batch import Batch
from iolens.model.schema import TABLES

MAGIC = b"IOLB1\n"
_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


def encode(batch: Batch) -> bytes:
    parts: list[bytes] = []
    names: list[list[object]] = []
    for name, table in batch.tables().items():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema, options=_OPTIONS) as writer:
            writer.write_table(table)
        data = sink.getvalue().to_pybytes()
        parts.append(data)
        names.append([name, len(data)])
    header = json.dumps(
        {
            "key": batch.key,
            "source": batch.source,
            "keep_known_jobs": batch.keep_known_jobs,
            "tables": names,
        }
    ).encode()
    return MAGIC + struct.pack("<I", len(header)) + header + b"".join(parts)


def decode(data: bytes, source: str = "request") -> Batch:
    """Bytes -> Batch, or an InputError saying what is wrong with them."""
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4:
        raise InputError(source, "not an iolens batch (bad magic)")
    (hlen,) = struct.unpack_from("<I", data, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(data[start : start + hlen])
        tables = [(str(n), int(size)) for n, size in header["tables"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(source, f"bad batch header: {exc}") from None
    batch = Batch(
        source=str(header.get("source") or source),
        key=header.get("key"),
        keep_known_jobs=bool(header.get("keep_known_jobs")),
    )
    offset = start + hlen
    for name, size in tables:
        if name not in TABLES:
            raise InputError(source, f"unknown table {name!r}")
        chunk = data[offset : offset + size]
        if len(chunk) != size:
            raise InputError(source, f"table {name} is truncated ({len(chunk)} of {size} bytes)")
        try:
            setattr(batch, name, pa.ipc.open_stream(chunk).read_all())
        except pa.ArrowInvalid as exc:
            raise InputError(source, f"table {name}: {exc}") from None
        offset += size
    if offset != len(data):
        raise InputError(source, f"{len(data) - offset} unexpected bytes after the last table")
    return batch
