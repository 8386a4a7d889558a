"""The ingest endpoint, fuzzed through FastAPI's TestClient over a real DuckDB store: every
hostile body gets 200, 400 or 413 (never a 500), and a good batch still lands after them.
The `@example`s are the 500s it found in issue 19."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import example, given

from iolens.ingest.http import create_app
from iolens.ship import wire
from iolens.ship.transport import INGEST_PATH
from iolens.store import DuckDBStore
from tests.fuzz.harness import fuzz
from tests.fuzz.wire_inputs import BODIES, frame
from tests.ship.helpers import samples_batch

AUTH = {"Authorization": "Bearer fuzz-token"}
_CLIENT: list[TestClient] = []


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    store = DuckDBStore(Path(tmp_path_factory.mktemp("ingest")) / "s.duckdb")
    app = create_app(store, tokens=["fuzz-token"])
    with TestClient(app, raise_server_exceptions=False) as c:
        _CLIENT.append(c)
        yield c
    _CLIENT.clear()
    store.close()


@given(BODIES)
@example(frame(wire.MAGIC_LIGHT, b'{"tables": [["metrics", Infinity]]}', []))
@example(frame(wire.MAGIC, b"[" * 100_000 + b"]" * 100_000, []))
@example(
    frame(wire.MAGIC, {"tables": [["metrics", 16]]}, [b"\xff\xff\xff\xff\x08\0\0\0" + b"\x01" * 8])
)
@fuzz(200)
def test_hostile_bodies(client: TestClient, body: bytes) -> None:
    r = client.post(INGEST_PATH, content=body, headers=AUTH)
    assert r.status_code in (200, 400, 413), (r.status_code, r.text[:300])
    if r.status_code == 400:
        assert r.json()["detail"], "a refusal says why"


def test_good_batches_still_land(client: TestClient) -> None:
    """After (or without) the hostile bodies, the server takes batches as before."""
    r = client.post(
        INGEST_PATH, content=wire.encode(samples_batch(7, key="fuzz:after")), headers=AUTH
    )
    assert r.status_code == 200 and r.json()["rows"] == {"server_samples": 50}
    assert client.get("/healthz").status_code == 200
