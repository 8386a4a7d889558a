"""The wire decoder, fuzzed with damaged real batches (Arrow, light and trace forms) and
frames built around hostile headers and parts. `ship/wire.py` is being hardened in
parallel (decompression bounds, issue 19): what still crashes is xfail until merged."""

from __future__ import annotations

import pytest
from hypothesis import example, given

from iolens.ship import wire
from tests.fuzz.harness import fuzz, only_input_errors
from tests.fuzz.wire_inputs import BODIES, SEEDS, frame

XFAIL = pytest.mark.xfail(
    strict=False,
    reason="ship/wire.py is hardened by the ingest engineer of issue 19; re-run after merging",
)


def test_seeds_decode() -> None:
    assert all(wire.decode(s, "seed") is not None for s in SEEDS)


@XFAIL
@given(BODIES)
@example(frame(wire.MAGIC_LIGHT, b'{"tables": [["metrics", Infinity]]}', []))  # OverflowError
@example(frame(wire.MAGIC, b"[" * 100_000 + b"]" * 100_000, []))  # RecursionError
@example(
    frame(wire.MAGIC, {"tables": [["metrics", 16]]}, [b"\xff\xff\xff\xff\x08\0\0\0" + b"\x01" * 8])
)
@fuzz(400)
def test_decode(body: bytes) -> None:
    only_input_errors(lambda: wire.decode(body, "batch from 127.0.0.1"), "batch from 127.0.0.1")
