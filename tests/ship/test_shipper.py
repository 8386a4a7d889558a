"""At-least-once delivery + server de-duplication = every sample stored exactly once."""

from __future__ import annotations

import random

from iolens.ingest.http import IngestService
from iolens.ship.shipper import Backoff, Shipper
from iolens.ship.spool import MemorySpool
from iolens.ship.transport import InMemoryTransport
from iolens.store import DuckDBStore
from tests.ship.helpers import samples_batch, totals


def stored(store):
    row = store.query("SELECT count(*) AS n, sum(read_bytes) AS r FROM server_samples").to_pylist()
    return row[0]["n"], int(row[0]["r"] or 0)


def test_outage_delays_but_loses_and_duplicates_nothing(tmp_path):
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        service = IngestService(store)
        transport = InMemoryTransport(service.receive)
        shipper = Shipper(MemorySpool(), transport, Backoff(base=0.0, cap=0.0))
        sent = []
        for i in range(30):
            if i == 10:
                transport.down = True
            if i == 20:
                transport.down = False
            b = samples_batch(i)
            sent.append(b)
            shipper.submit(b)
            shipper.deliver(now=float(i))
        shipper.deliver(now=1e9)
        assert shipper.spool.pending() == []
        assert shipper.stats.failures >= 10
        assert stored(store) == totals(sent)


def test_redelivery_after_a_lost_ack_is_loaded_once(tmp_path):
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        service = IngestService(store)
        batch = samples_batch(1)
        from iolens.ship import wire

        payload = wire.encode(batch)
        first = service.receive(payload)
        second = service.receive(payload)  # the agent never saw the first answer
        assert first["duplicate"] is False and second["duplicate"] is True
        assert stored(store) == totals([batch])


def test_backoff_grows_with_full_jitter_and_resets():
    b = Backoff(base=1.0, cap=8.0, rng=random.Random(1))
    delays = [b.next_delay() for _ in range(6)]
    assert all(0 <= d <= min(8.0, 2**i) for i, d in enumerate(delays))
    b.reset()
    assert b.next_delay() <= 1.0
