"""The on-the-wire form of a Batch, in two versions the server both reads.

    magic | u32 header length | header JSON | part 1 | part 2 | ...

The header names the parts and their byte lengths, the batch's idempotency key and its
source.

- `IOLB1` (Arrow): each part is an Arrow IPC stream with Arrow's zstd buffer compression.
  Written when a batch holds Arrow tables (importers, the simulator, full installs).
- `IOLB2` (light): each part is zlib-compressed JSON, `{"columns": {name: [values]}}`,
  timestamps as integer microseconds since the epoch (UTC); or a part named `trace`, one
  tracer file as written (zlib-compressed), which the server decodes. Written for batches
  of `Columns` (the node agent and the Slurm hook), using only the standard library:
  pyarrow alone is over 100 MB installed, more than a node agent may take.

The server decodes both into Arrow tables with the model schema: a column the schema does
not have, or a value of the wrong type, is an InputError naming the table and column, and
`load()` then checks the tables as it checks every batch. Measured on an agent's batch
(docs/performance.md): the light payload is the same order of size as Arrow's.

A payload is hostile until decoded: what its parts inflate to is bounded (`TooLarge`, a
limit per batch) before the memory is taken, from the sizes Arrow's buffers declare and by
inflating zlib parts incrementally, so a few kilobytes cannot claim gigabytes.
"""

from __future__ import annotations

import json
import struct
import zlib
from datetime import datetime
from typing import Any

from iolens.errors import InputError
from iolens.model.batch import TABLE_FIELDS, Batch
from iolens.model.rows import Columns

MAGIC = b"IOLB1\n"
MAGIC_LIGHT = b"IOLB2\n"
_EPOCH = datetime(1970, 1, 1)
_US = 1_000_000
#: What the parts of one batch may inflate to: Arrow buffers and tracer files together,
#: and, separately, the JSON of light tables (whose Python objects take ~10x their text).
MAX_INFLATED_BYTES = 512 * 2**20
MAX_LIGHT_JSON_BYTES = 64 * 2**20


class TooLarge(InputError):
    """A part inflates past a limit: refused before the memory is taken (HTTP 413)."""


def encode(batch: Batch) -> bytes:
    """Arrow (IOLB1) if any table is Arrow, else the light form (IOLB2)."""
    parts = batch.parts()
    if batch.trace is None and any(not isinstance(t, Columns) for t in parts.values()):
        return _encode_arrow(batch)
    return _encode_light(batch, parts)


def _frame(magic: bytes, batch: Batch, parts: list[tuple[str, bytes]]) -> bytes:
    header = json.dumps(
        {
            "key": batch.key,
            "source": batch.source,
            "keep_known_jobs": batch.keep_known_jobs,
            "tables": [[name, len(data)] for name, data in parts],
        }
    ).encode()
    return magic + struct.pack("<I", len(header)) + header + b"".join(d for _, d in parts)


def _encode_arrow(batch: Batch) -> bytes:
    import pyarrow as pa

    options = pa.ipc.IpcWriteOptions(compression="zstd")
    parts: list[tuple[str, bytes]] = []
    for name, table in batch.tables().items():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
            writer.write_table(table)
        parts.append((name, sink.getvalue().to_pybytes()))
    return _frame(MAGIC, batch, parts)


def _json_value(value: object) -> object:
    if isinstance(value, datetime):  # naive UTC, as the model's timestamp[us]
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * _US + delta.microseconds
    raise TypeError(f"not JSON: {type(value).__name__}")


def _encode_light(batch: Batch, tables: dict[str, Any]) -> bytes:
    parts: list[tuple[str, bytes]] = []
    for name, cols in tables.items():
        body = json.dumps({"columns": cols.columns}, default=_json_value, separators=(",", ":"))
        parts.append((name, zlib.compress(body.encode(), 6)))
    if batch.trace is not None:
        name, data = batch.trace
        owner = batch.extra.get("trace_owner")  # the file's owner, as the agent saw it
        layouts = batch.extra.get("layouts")  # MooseFS chunkservers of its files
        head: object = name
        if owner or layouts:
            head = {"name": name, "owner": owner} | ({"layouts": layouts} if layouts else {})
        parts.append(("trace", zlib.compress(json.dumps(head).encode() + b"\n" + data, 6)))
    return _frame(MAGIC_LIGHT, batch, parts)


def decode(
    data: bytes,
    source: str = "request",
    max_inflated: int = MAX_INFLATED_BYTES,
    max_json: int = MAX_LIGHT_JSON_BYTES,
) -> Batch:
    """Bytes (either version) -> Batch of Arrow tables, or an InputError saying what is
    wrong with them (`TooLarge` when the parts would inflate past the limits)."""
    if data.startswith(MAGIC):
        light = False
    elif data.startswith(MAGIC_LIGHT):
        light = True
    else:
        raise InputError(source, "not an iolens batch (bad magic)")
    if len(data) < len(MAGIC) + 4:
        raise InputError(source, "not an iolens batch (bad magic)")
    (hlen,) = struct.unpack_from("<I", data, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(data[start : start + hlen])
        tables = [(str(n), int(size)) for n, size in header["tables"]]
        if not isinstance(header.get("key"), str | None):
            raise TypeError("key is not a string")
        # JSON's \udcXX escapes give lone surrogates, which no store or Arrow string takes
        json.dumps(header, ensure_ascii=False).encode()
    # OverflowError: int(Infinity); RecursionError: JSON nested past Python's stack
    except (
        ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError,
        UnicodeError,
    ) as exc:  # fmt: skip
        raise InputError(source, f"bad batch header: {type(exc).__name__}: {exc}") from None
    batch = Batch(
        source=str(header.get("source") or source),
        key=header.get("key"),
        keep_known_jobs=bool(header.get("keep_known_jobs")),
    )
    offset = start + hlen
    budget = _Budget(source, max_inflated, max_json)
    for name, size in tables:
        if name not in TABLE_FIELDS and not (light and name == "trace"):
            raise InputError(source, f"unknown table {name!r}")
        chunk = data[offset : offset + size]
        if len(chunk) != size:
            raise InputError(source, f"table {name} is truncated ({len(chunk)} of {size} bytes)")
        if name == "trace":
            batch = _trace_batch(chunk, source, budget)
        elif light:
            setattr(batch, name, _light_table(name, chunk, source, budget))
        else:
            setattr(batch, name, _arrow_table(name, chunk, source, budget))
        offset += size
    if offset != len(data):
        raise InputError(source, f"{len(data) - offset} unexpected bytes after the last table")
    return batch


class _Budget:
    """What the parts of one batch may still inflate to."""

    def __init__(self, source: str, max_inflated: int, max_json: int) -> None:
        self.source = source
        self.left = {"inflated": max_inflated, "json": max_json}
        self.limit = dict(self.left)

    def take(self, kind: str, what: str, size: int) -> None:
        if size > self.left[kind]:
            raise TooLarge(
                self.source,
                f"{what} inflates past the limit of {self.limit[kind]} bytes per batch "
                f"({'JSON of light tables' if kind == 'json' else 'decompressed data'})",
            )
        self.left[kind] -= size

    def inflate(self, kind: str, what: str, chunk: bytes) -> bytes:
        """zlib-inflate `chunk`, never past what is left (one byte more tells it would)."""
        z = zlib.decompressobj()
        out = z.decompress(chunk, self.left[kind] + 1)
        if z.unconsumed_tail or len(out) > self.left[kind]:
            self.take(kind, what, self.left[kind] + 1)
        if not z.eof:
            raise zlib.error("incomplete or truncated stream")
        self.take(kind, what, len(out))
        return out


def _arrow_table(name: str, chunk: bytes, source: str, budget: _Budget) -> Any:
    import pyarrow as pa

    from iolens.ship.arrow_sizes import declared_sizes

    try:
        budget.take("inflated", f"table {name}", declared_sizes(chunk))
        table = pa.ipc.open_stream(chunk).read_all()
        table.validate(full=True)  # offsets and lengths inside their buffers
        return table
    except (pa.ArrowException, ValueError, OSError) as exc:  # OSError: Arrow's IOError
        raise InputError(source, f"table {name}: {exc}") from None


def _light_table(name: str, chunk: bytes, source: str, budget: _Budget) -> Any:
    """One IOLB2 part -> an Arrow table with the model's types for the columns it has."""
    import pyarrow as pa

    from iolens.model.schema import TABLES

    try:
        columns = json.loads(budget.inflate("json", f"table {name}", chunk))["columns"]
        if not isinstance(columns, dict):
            raise TypeError("columns is not an object")
    except (ValueError, KeyError, TypeError, RecursionError, zlib.error) as exc:
        raise InputError(source, f"table {name}: not compressed JSON columns: {exc}") from None
    schema = TABLES[name]
    arrays, fields = [], []
    for col, values in columns.items():
        if col not in schema.names:
            raise InputError(source, f"table {name}: unknown column {col!r}")
        f = schema.field(col)
        try:
            arrays.append(pa.array(values, type=f.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, UnicodeError) as exc:
            raise InputError(source, f"table {name}, column {col}: {exc}") from None
        fields.append(pa.field(col, f.type))
    if len({len(a) for a in arrays}) > 1:
        raise InputError(source, f"table {name}: columns of different lengths")
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _trace_batch(chunk: bytes, source: str, budget: _Budget) -> Batch:
    """A tracer file shipped as written -> the batch `iolens import trace` would make of it
    (same key, so the two paths load it once)."""
    from iolens.tracefile import batch_of
    from iolens.tracefile.trace import decode_bytes

    try:
        name_line, data = budget.inflate("inflated", "trace", chunk).split(b"\n", 1)
        head = json.loads(name_line)
        # a name (older agents), or {"name", "owner": {"uid", "user"}} from the agent's lstat
        name = str(head["name"] if isinstance(head, dict) else head)
        owner = head.get("owner") if isinstance(head, dict) else None
        owner = (int(owner["uid"]), str(owner["user"])) if owner else None
        if owner:
            owner[1].encode()  # a lone surrogate is no user name
        layouts = _layouts(head.get("layouts") if isinstance(head, dict) else None)
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError, zlib.error) as exc:
        raise InputError(source, f"trace: not a compressed tracer file: {exc}") from None
    return batch_of(decode_bytes(data, name), owner=owner, layouts=layouts)


def _layouts(raw: object) -> dict[str, list[str]] | None:
    """The agent's `path -> [chunkserver]` map, checked: strings only (else ValueError)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(c, str) for c in v)
        for k, v in raw.items()
    ):
        raise ValueError("layouts: expected an object of path -> list of chunkserver names")
    for k, v in raw.items():
        (k + "".join(v)).encode()  # a lone surrogate is no path
    return raw
