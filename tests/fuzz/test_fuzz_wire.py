"""The wire decoder, fuzzed with damaged real batches (Arrow, light and trace forms) and
frames built around hostile headers and parts. The `@example`s are the crashes it
found in issue 19, kept as regression cases."""

from __future__ import annotations

import zlib

from hypothesis import example, given

from iolens.ship import wire
from tests.fuzz.harness import fuzz, only_input_errors
from tests.fuzz.wire_inputs import BODIES, SEEDS, frame


def test_seeds_decode() -> None:
    assert all(wire.decode(s, "seed") is not None for s in SEEDS)


_SURROGATE = zlib.compress(b'{"columns": {"job_id": ["\\udcff"]}}')


@given(BODIES)
@example(frame(wire.MAGIC_LIGHT, b'{"tables": [["metrics", Infinity]]}', []))  # OverflowError
@example(frame(wire.MAGIC, b"[" * 100_000 + b"]" * 100_000, []))  # RecursionError
@example(frame(wire.MAGIC_LIGHT, b'{"tables": [], "key": "\\udcff"}', []))  # a lone surrogate
@example(  # long run: a lone surrogate in a light column, UnicodeEncodeError from Arrow
    frame(wire.MAGIC_LIGHT, {"tables": [["client_io", len(_SURROGATE)]]}, [_SURROGATE])
)
@example(
    frame(wire.MAGIC, {"tables": [["metrics", 16]]}, [b"\xff\xff\xff\xff\x08\0\0\0" + b"\x01" * 8])
)
@fuzz(400)
def test_decode(body: bytes) -> None:
    only_input_errors(lambda: wire.decode(body, "batch from 127.0.0.1"), "batch from 127.0.0.1")
