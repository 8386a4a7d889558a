"""What an Arrow IPC stream will take once read, known before reading it.

With buffer compression, each buffer of a record batch starts with the length it inflates
to, and Arrow allocates that length before it decompresses: a few kilobytes of zstd can
claim gigabytes. `declared_sizes` walks the stream's messages (their Flatbuffers metadata
read by hand: pyarrow does not expose a message's buffer layout) and adds those lengths up,
so the caller can refuse a stream before Arrow takes the memory.
"""

from __future__ import annotations

import struct

_CONTINUATION = 0xFFFFFFFF
_DICTIONARY_BATCH, _RECORD_BATCH = 2, 3


class _Table:
    """One Flatbuffers table inside `buf` at `pos`: its fields by index."""

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf, self.pos = buf, pos
        self.vtable = pos - _unpack("<i", buf, pos)
        self.vsize = _unpack("<H", buf, self.vtable)

    def _field(self, index: int) -> int | None:
        at = 4 + 2 * index
        if at + 2 > self.vsize:
            return None
        off = _unpack("<H", self.buf, self.vtable + at)
        return self.pos + off if off else None

    def scalar(self, index: int, fmt: str, default: int = 0) -> int:
        at = self._field(index)
        return default if at is None else _unpack(fmt, self.buf, at)

    def table(self, index: int) -> _Table | None:
        at = self._field(index)
        return None if at is None else _Table(self.buf, at + _unpack("<I", self.buf, at))

    def structs(self, index: int, size: int) -> list[int]:
        """Positions of the structs of a vector field."""
        at = self._field(index)
        if at is None:
            return []
        vec = at + _unpack("<I", self.buf, at)
        count = _unpack("<I", self.buf, vec)
        if vec + 4 + count * size > len(self.buf):
            raise ValueError("Arrow message metadata: vector past its end")
        return [vec + 4 + i * size for i in range(count)]


def _unpack(fmt: str, buf: bytes, pos: int) -> int:
    if pos < 0 or pos + struct.calcsize(fmt) > len(buf):
        raise ValueError("Arrow message metadata: offset out of bounds")
    return int(struct.unpack_from(fmt, buf, pos)[0])


def declared_sizes(stream: bytes) -> int:
    """Bytes the record and dictionary batches of `stream` will take once read: the
    inflated lengths their compressed buffers declare, or the buffers' own lengths.
    ValueError when the framing or metadata is malformed."""
    total, pos = 0, 0
    while pos + 4 <= len(stream):
        size = _unpack("<I", stream, pos)
        pos += 4
        if size == _CONTINUATION:
            size = _unpack("<I", stream, pos)
            pos += 4
        if size == 0:  # end of stream
            break
        meta = stream[pos : pos + size]
        if len(meta) != size:
            raise ValueError("Arrow stream truncated in a message's metadata")
        pos += size
        message = _Table(meta, _unpack("<I", meta, 0))
        body_length = message.scalar(3, "<q")
        body = stream[pos : pos + body_length]
        if body_length < 0 or len(body) != body_length:
            raise ValueError("Arrow stream truncated in a message's body")
        pos += body_length
        kind = message.scalar(1, "<B")
        header = message.table(2)
        if header is None or kind not in (_DICTIONARY_BATCH, _RECORD_BATCH):
            continue
        batch = header.table(1) if kind == _DICTIONARY_BATCH else header
        if batch is not None:
            total += _batch_size(batch, body)
    return total


def _batch_size(batch: _Table, body: bytes) -> int:
    compressed = batch.table(3) is not None
    total = 0
    for at in batch.structs(2, 16):  # Buffer {offset: long, length: long}
        offset, length = struct.unpack_from("<qq", batch.buf, at)
        if offset < 0 or length < 0 or offset + length > len(body):
            raise ValueError("Arrow buffer outside its message's body")
        if compressed and length >= 8:
            inflated = struct.unpack_from("<q", body, offset)[0]
            total += length - 8 if inflated == -1 else max(inflated, 0)
        else:
            total += length
    return total
