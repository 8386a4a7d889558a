"""The ingest endpoint in-process, then a real server over loopback killed mid-stream."""

from __future__ import annotations

import os
import signal

import pytest
from fastapi.testclient import TestClient

from iolens.ingest.http import create_app
from iolens.ship import wire
from iolens.ship.shipper import Backoff, Shipper
from iolens.ship.spool import DiskSpool
from iolens.ship.transport import INGEST_PATH, HttpTransport
from iolens.store import DuckDBStore
from tests.loopback import free_port, start_server
from tests.ship.helpers import samples_batch, totals


@pytest.fixture
def client(tmp_path):
    store = DuckDBStore(tmp_path / "s.duckdb")
    with TestClient(create_app(store, tokens=["s3cret"])) as c:
        yield c, store
    store.close()


AUTH = {"Authorization": "Bearer s3cret"}


def test_token_is_required(client):
    c, _ = client
    body = wire.encode(samples_batch(1))
    assert c.post(INGEST_PATH, content=body).status_code == 401
    assert (
        c.post(INGEST_PATH, content=body, headers={"Authorization": "Bearer no"}).status_code == 401
    )
    assert c.post(INGEST_PATH, content=body, headers=AUTH).status_code == 200


def test_bad_batch_is_refused_with_a_reason_and_good_ones_still_land(client):
    c, _store = client
    bad = c.post(INGEST_PATH, content=b"IOLB1\nnonsense", headers=AUTH)
    assert bad.status_code == 400 and "batch" in bad.json()["detail"]
    good = c.post(INGEST_PATH, content=wire.encode(samples_batch(2)), headers=AUTH)
    assert good.status_code == 200 and good.json()["rows"] == {"server_samples": 50}
    metrics = c.get("/metrics").text
    assert 'iolens_ingest_batches_total{result="rejected"} 1.0' in metrics
    assert 'iolens_ingest_batches_total{result="ok"} 1.0' in metrics
    assert 'iolens_ingest_rows_total{table="server_samples"} 50.0' in metrics
    assert c.get("/healthz").json()["status"] == "ok"


def test_server_killed_mid_stream_loses_and_duplicates_nothing(tmp_path):
    db, port = tmp_path / "s.duckdb", free_port()
    server = start_server(db, port, tmp_path / "server.log")
    transport = HttpTransport(f"http://127.0.0.1:{port}", token="t0k", timeout=5)
    shipper = Shipper(DiskSpool(tmp_path / "spool"), transport, Backoff(base=0.0, cap=0.0))
    sent = []
    try:
        for i in range(40):
            if i == 15:  # the server dies without warning
                os.kill(server.pid, signal.SIGKILL)
                server.wait()
            if i == 30:
                server = start_server(db, port, tmp_path / "server.log")
            b = samples_batch(i)
            sent.append(b)
            shipper.submit(b)
            shipper.deliver(now=float(i))
        for _ in range(3):
            shipper.deliver(now=1e9)
        assert shipper.spool.pending() == []
        assert shipper.stats.failures > 0
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        transport.close()
    with DuckDBStore(db, create=False) as store:
        row = store.query(
            "SELECT count(*) n, sum(read_bytes) r, count(DISTINCT ts) t FROM server_samples"
        ).to_pylist()[0]
    rows, read = totals(sent)
    assert (row["n"], int(row["r"])) == (rows, read)
    assert row["t"] == rows  # no sample twice
