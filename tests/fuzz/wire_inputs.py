"""Hostile wire-format bodies: damaged real batches and frames built around hostile parts."""

from __future__ import annotations

import json
import struct
import zlib
from datetime import datetime

from hypothesis import strategies as st

from iolens.model.batch import Batch
from iolens.model.rows import Columns
from iolens.model.schema import TABLES
from iolens.ship import wire
from tests.fuzz.mutate import HOSTILE_BYTES
from tests.ship.helpers import samples_batch
from tests.tracer.test_decoder import build

TS = datetime(2026, 3, 1, 12, 0, 0)


def _light() -> bytes:
    rows = [
        {"ts": TS, "interval_s": 10.0, "kind": "ost", "component_id": "fs-OST0000",
         "job_id": None, "metric": "read_bytes", "value": 1.5e9},
    ]  # fmt: skip
    return wire.encode(
        Batch(source="agent:n1", key="fuzz:light", metrics=Columns.from_rows("metrics", rows))
    )


def _trace() -> bytes:
    return wire.encode(
        Batch(source="agent:n1", key="fuzz:trace", trace=("n-1-1-0.iolens", build(version=3)))
    )


SEEDS = [wire.encode(samples_batch(1, rows=5)), _light(), _trace()]

_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=10)
    | st.sampled_from(["\udcff", "2026-01-01", "\u00b2"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def frame(magic: bytes, header: object, parts: list[bytes]) -> bytes:
    head = (
        header if isinstance(header, bytes) else json.dumps(header).encode("utf-8", "surrogatepass")
    )
    return magic + struct.pack("<I", len(head)) + head + b"".join(parts)


@st.composite
def light_frame(draw: st.DrawFn) -> bytes:
    """An IOLB2 frame whose one part holds hostile columns for a real table."""
    table = draw(st.sampled_from(sorted(TABLES)))
    names = TABLES[table].names
    cols = draw(
        st.dictionaries(
            st.sampled_from(names) | st.text(max_size=6),
            st.lists(_JSON_VALUES, max_size=4) | _JSON_VALUES,
            max_size=4,
        )
    )
    payload = draw(
        st.sampled_from(["ok", "not-columns", "deep", "raw"]).map(
            lambda kind: {
                "ok": json.dumps({"columns": cols}),
                "not-columns": json.dumps(cols),
                "deep": '{"columns": ' + _deep(100_000) + "}",
                "raw": "\x00",
            }[kind]
        )
    )
    part = zlib.compress(payload.encode("utf-8", "surrogatepass"))
    size = draw(st.sampled_from([len(part), len(part) + 1, 0, -1, 2**40]))
    header = {"key": draw(_JSON_VALUES), "source": draw(_JSON_VALUES), "tables": [[table, size]]}
    return frame(wire.MAGIC_LIGHT, header, [part])


@st.composite
def hostile_header(draw: st.DrawFn) -> bytes:
    """A frame whose header is hostile JSON (Infinity sizes, deep nesting, wrong shapes)."""
    header = draw(
        st.sampled_from(
            [
                b'{"tables": [["metrics", Infinity]]}',
                b'{"tables": [["metrics", NaN]]}',
                b'{"tables": [["metrics", 1e400]]}',
                b'{"tables": [["metrics"]]}',
                b'{"tables": {"a": 1}}',
                b'{"tables": [["metrics", "12"]], "source": ["x"]}',
                b'["tables"]',
                b'"tables"',
                _deep(100_000).encode(),
                b'{"tables": [], "key": ' + _deep(50_000).encode() + b"}",
            ]
        )
        | _JSON_VALUES.map(lambda v: json.dumps({"tables": v}).encode("utf-8", "surrogatepass"))
    )
    return frame(draw(st.sampled_from([wire.MAGIC, wire.MAGIC_LIGHT])), header, [])


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    raw = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(raw)))
        if draw(st.booleans()):
            junk = draw(st.binary(min_size=1, max_size=8) | st.sampled_from(HOSTILE_BYTES))
            raw[at : at + len(junk)] = junk
        else:
            del raw[at : at + draw(st.integers(1, 32))]
    return bytes(raw)


BODIES = st.one_of(damaged(), light_frame(), hostile_header(), st.binary(max_size=256))
