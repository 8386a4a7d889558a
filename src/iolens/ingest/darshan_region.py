"""A region of a Darshan log decompressed as a stream, and DXT segments read from it.

libdarshan-util returns a DXT record whole (millions of segments at once); reading the
region here instead hands them out in windows of `MERGE_WINDOW`, so memory stays bounded.
"""

from __future__ import annotations

import bz2
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from iolens.errors import InputError
from iolens.ingest.darshan_records import MERGE_WINDOW, SEGMENT

#: Compressed bytes read from the file per step while streaming a region.
_READ_STEP = 1 << 20


class Region:
    """One log region decompressed as a stream (a chain of zlib / bzip2 streams, as
    libdarshan-util writes one per rank or per buffer flush)."""

    def __init__(self, path: Path, off: int, length: int, comp: int, source: str, what: str):
        self.f = path.open("rb")
        self.f.seek(off)
        self.left = length
        self.comp = comp
        self.source, self.what = source, what
        self.d: Any = self._decompressor()
        self.buf = bytearray()
        self.pending = b""  # compressed input not consumed yet

    def _decompressor(self) -> Any:
        if self.comp == 0:
            return zlib.decompressobj()
        if self.comp == 1:
            return bz2.BZ2Decompressor()
        return None

    def _more(self, want: int) -> bool:
        """Decompress until `want` bytes are buffered; False at the end of the region."""
        while len(self.buf) < want:
            d = self.d
            if d is not None and d.eof:  # one stream ended: the next starts in what it left
                # (unused_data holds all of it; zlib's unconsumed_tail may repeat part of it)
                self.d, self.pending = self._decompressor(), d.unused_data
                continue
            if d is not None and self.comp == 1 and not d.needs_input:
                self.buf += self._inflate(b"")  # bzip2 still holds output for its input
                continue
            if not self.pending:
                if self.left <= 0:
                    return False
                self.pending = self.f.read(min(_READ_STEP, self.left))
                if not self.pending:
                    raise InputError(self.source, f"truncated Darshan log ({self.what} region)")
                self.left -= len(self.pending)
            if d is None:
                self.buf += self.pending
                self.pending = b""
                continue
            data, self.pending = self.pending, b""
            self.buf += self._inflate(data)
            if self.comp == 0 and not d.eof:
                self.pending = d.unconsumed_tail  # input left when the output limit hit
        return True

    def _inflate(self, data: bytes) -> bytes:
        try:
            return bytes(self.d.decompress(data, _READ_STEP))
        except (zlib.error, OSError, EOFError, ValueError) as exc:
            raise InputError(
                self.source, f"corrupt Darshan log: {self.what} region ({exc})"
            ) from None

    def read(self, n: int, allow_end: bool = False) -> bytes | None:
        if not self._more(n):
            if allow_end and len(self.buf) < n:
                self.buf.clear()
                self.f.close()
                return None
            raise InputError(self.source, f"corrupt Darshan log: {self.what} region ends early")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


def dxt_segments(
    stream: Region, dtype: np.dtype, writes: int, reads: int, no_offsets: bool
) -> Iterator[tuple[str, Iterator[np.ndarray]]]:
    """One DXT record's segments from `stream`: ("write", windows), then ("read", windows)."""
    for op, n in (("write", writes), ("read", reads)):
        windows = _windows(stream, dtype, n, no_offsets)
        yield op, windows
        for _ in windows:  # the caller may stop early: the stream must move on
            pass


def _windows(stream: Region, dtype: np.dtype, n: int, no_offsets: bool) -> Iterator[np.ndarray]:
    while n > 0:
        k = min(n, MERGE_WINDOW)
        raw = stream.read(k * dtype.itemsize)
        assert raw is not None
        segs = np.frombuffer(raw, dtype).astype(SEGMENT)
        if no_offsets:
            segs["offset"] = -1
        yield segs
        n -= k
