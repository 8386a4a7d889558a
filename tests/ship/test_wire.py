from __future__ import annotations

import pytest

from iolens.errors import InputError
from iolens.ship import wire
from tests.ship.helpers import samples_batch


def test_roundtrip_keeps_tables_and_key():
    batch = samples_batch(3)
    batch.keep_known_jobs = True
    back = wire.decode(wire.encode(batch))
    assert back.key == batch.key and back.source == batch.source and back.keep_known_jobs
    assert back.server_samples.equals(batch.server_samples)
    assert back.client_io is None


def test_payload_is_compressed():
    batch = samples_batch(1, rows=20_000)
    assert len(wire.encode(batch)) < batch.server_samples.nbytes / 3


@pytest.mark.parametrize(
    "mangle,message",
    [
        (lambda b: b"GET / HTTP/1.1\r\n", "bad magic"),
        (lambda b: b[:-10], "truncated"),
        (lambda b: b + b"xx", "unexpected bytes"),
        (lambda b: b[:6] + b"\xff\xff\x00\x00" + b[10:], "bad batch header"),
    ],
)
def test_corrupt_payloads_are_named(mangle, message):
    data = mangle(wire.encode(samples_batch(1)))
    with pytest.raises(InputError, match=message):
        wire.decode(data, source="agent-7")
