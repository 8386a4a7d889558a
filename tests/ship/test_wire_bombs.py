"""Decompression bombs (issue 19): small payloads that inflate past the limits are refused
before the memory is taken, in every part of both wire forms."""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import pyarrow as pa
import pytest

from iolens.errors import InputError
from iolens.ship import wire
from iolens.ship.arrow_sizes import declared_sizes


def _frame(magic: bytes, parts: list[tuple[str, bytes]]) -> bytes:
    header = json.dumps({"key": "bomb", "tables": [[n, len(d)] for n, d in parts]}).encode()
    return magic + struct.pack("<I", len(header)) + header + b"".join(d for _, d in parts)


def _zlib_of(prefix: bytes, zeros: int, suffix: bytes = b"") -> bytes:
    """zlib of prefix + `zeros` ASCII zeros-with-commas + suffix, built in 1 MiB steps."""
    z = zlib.compressobj(9)
    out = [z.compress(prefix)]
    step = b"0," * 2**19
    for _ in range(zeros // len(step)):
        out.append(z.compress(step))
    out.append(z.compress(b"0" + suffix))
    out.append(z.flush())
    return b"".join(out)


def arrow_bomb(rows: int) -> bytes:
    """An IOLB1 batch whose one int64 column of zeros inflates to 8 * rows bytes."""
    table = pa.table({"file_id": np.zeros(rows, np.int64), "path": pa.nulls(rows, pa.string())})
    sink = pa.BufferOutputStream()
    opts = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, table.schema, options=opts) as writer:
        writer.write_table(table)
    return _frame(wire.MAGIC, [("files", sink.getvalue().to_pybytes())])


def light_bomb(json_bytes: int) -> bytes:
    part = _zlib_of(b'{"columns": {"value": [', json_bytes, b"]}}")
    return _frame(wire.MAGIC_LIGHT, [("metrics", part)])


def trace_bomb(size: int) -> bytes:
    z = zlib.compressobj(9)
    part = z.compress(b'"bomb.iolens"\n') + z.compress(bytes(size)) + z.flush()
    return _frame(wire.MAGIC_LIGHT, [("trace", part)])


def test_an_arrow_bomb_is_refused_from_its_declared_sizes():
    rows = (wire.MAX_INFLATED_BYTES // 8) + 1_000_000  # a little past the limit
    data = arrow_bomb(rows)
    assert len(data) < wire.MAX_INFLATED_BYTES / 1000  # a bomb: > 1000x
    before = pa.default_memory_pool().bytes_allocated()
    limit = wire.MAX_INFLATED_BYTES
    with pytest.raises(wire.TooLarge, match=rf"table files inflates past .*{limit}"):
        wire.decode(data, source="agent-7")
    assert pa.default_memory_pool().bytes_allocated() - before < 2**20


def _stream(data: bytes) -> bytes:
    return data[10 + struct.unpack_from("<I", data, 6)[0] :]


def test_an_arrow_stream_up_to_the_limit_still_decodes():
    data = arrow_bomb(1000)
    need = declared_sizes(_stream(data))
    assert need >= 8 * 1000  # the int64 column, at least
    assert wire.decode(data, max_inflated=need).files.num_rows == 1000
    with pytest.raises(wire.TooLarge, match=str(need - 1)):
        wire.decode(data, max_inflated=need - 1)


def test_a_light_json_bomb_is_refused_while_inflating():
    data = light_bomb(wire.MAX_LIGHT_JSON_BYTES + 2**20)
    assert len(data) < 2**20
    with pytest.raises(wire.TooLarge, match=rf"table metrics .*{wire.MAX_LIGHT_JSON_BYTES}"):
        wire.decode(data, source="agent-7")


def test_a_trace_bomb_is_refused_while_inflating():
    data = trace_bomb(wire.MAX_INFLATED_BYTES + 2**20)
    assert len(data) < 2**20
    with pytest.raises(wire.TooLarge, match=rf"trace inflates past .*{wire.MAX_INFLATED_BYTES}"):
        wire.decode(data, source="agent-7")


def test_the_limit_is_for_the_whole_batch_not_each_part():
    one = light_bomb(2**20)
    part = _stream(one)
    two = _frame(wire.MAGIC_LIGHT, [("metrics", part), ("metrics", part)])
    assert wire.decode(one, max_json=2**20 + 100).metrics.num_rows > 0
    with pytest.raises(wire.TooLarge):
        wire.decode(two, max_json=2**20 + 100)


def test_a_lying_arrow_stream_is_an_input_error():
    data = arrow_bomb(1000)
    stream = _stream(data)
    with pytest.raises(ValueError, match="truncated"):
        declared_sizes(stream[:-100])
    mangled = stream[:-40] + b"\xff" * 32 + stream[-8:]  # the last buffer's bytes
    with pytest.raises(InputError, match="table files"):
        wire.decode(data[: -len(stream)] + mangled)
