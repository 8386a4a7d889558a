"""Hostile batches against the ingest endpoint (issue 19): bombs, oversized bodies, a bad
batch inside a group commit, and a store that fails under the server."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from concurrent.futures import Future

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from iolens.errors import InputError, StoreError
from iolens.ingest.http import MAX_BATCH_BYTES, IngestService, StoreFailing, create_app
from iolens.ingest.load import load_many
from iolens.model.batch import Batch
from iolens.ship import wire
from iolens.ship.transport import INGEST_PATH
from iolens.store import DuckDBStore
from tests.loopback import TOKEN, free_port, start_server, stop
from tests.ship.helpers import null_kind_batch, samples_batch
from tests.ship.test_wire_bombs import arrow_bomb, light_bomb

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def client(tmp_path):
    store = DuckDBStore(tmp_path / "s.duckdb")
    with TestClient(create_app(store, tokens=[TOKEN])) as c:
        yield c, store
    store.close()


def test_bombs_get_413_naming_the_limit_and_cost_only_themselves(client):
    c, store = client
    bomb_body = arrow_bomb(wire.MAX_INFLATED_BYTES // 8 + 10**6)
    bomb = c.post(INGEST_PATH, content=bomb_body, headers=AUTH)
    assert bomb.status_code == 413
    assert str(wire.MAX_INFLATED_BYTES) in bomb.json()["detail"]
    json_bomb = c.post(INGEST_PATH, content=light_bomb(wire.MAX_LIGHT_JSON_BYTES + 1), headers=AUTH)
    assert json_bomb.status_code == 413 and "table metrics" in json_bomb.json()["detail"]
    good = c.post(INGEST_PATH, content=wire.encode(samples_batch(1)), headers=AUTH)
    assert good.status_code == 200
    assert store.query("SELECT count(*) AS n FROM server_samples").to_pylist() == [{"n": 50}]


def test_a_null_in_a_not_null_column_fails_only_its_batch_in_a_group_commit(tmp_path):
    groups: list[int] = []

    def loader(store, batches):
        groups.append(len(batches))
        return load_many(store, batches)

    store = DuckDBStore(tmp_path / "s.duckdb")
    service = IngestService(store, loader=loader)
    items: list[tuple[Batch, Future[dict[str, int]]]] = [
        (null_kind_batch(i) if i == 137 else samples_batch(i), Future()) for i in range(200)
    ]
    with service.lock:  # the writer waits: all 200 are queued for one group
        for item in items:
            service.queue.put(item)
        time.sleep(0.1)
    for i, (_, fut) in enumerate(items):
        if i == 137:
            with pytest.raises(InputError, match="table server_samples, column kind: 50 NULL"):
                fut.result(timeout=60)
        else:
            assert fut.result(timeout=60) == {"server_samples": 50}
    assert groups[0] == 200  # it was one group commit, then one by one
    n = store.query("SELECT count(*) AS n FROM server_samples").to_pylist()[0]["n"]
    assert n == 199 * 50
    store.close()


def test_the_store_failing_is_a_503_for_the_whole_group(tmp_path):
    store = DuckDBStore(tmp_path / "s.duckdb")

    def loader(store, batches):
        raise OSError(28, "No space left on device")

    service = IngestService(store, loader=loader)
    futs = [service.submit(samples_batch(i)) for i in range(5)]
    for fut in futs:
        with pytest.raises(StoreFailing, match="No space left"):
            fut.result(timeout=10)
    store.close()


def test_healthz_queries_the_store(client):
    c, store = client
    assert c.get("/healthz").status_code == 200
    store.con.close()  # the store cannot answer any more (and cannot be reopened: not fatal)
    res = c.get("/healthz")
    assert res.status_code == 503
    assert res.json()["status"] == "failing" and "closed" in res.json()["reason"]


def _rss_peak(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _post_raw(port: int, headers: list[str], chunks: int, chunk: bytes) -> bytes:
    """Send a POST whose body is `chunks` chunks (chunked encoding when no Content-Length),
    stopping as soon as the server answers; the server's answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        head = [f"POST {INGEST_PATH} HTTP/1.1", f"Host: 127.0.0.1:{port}", *headers, "", ""]
        s.sendall("\r\n".join(head).encode())
        chunked = not any(h.lower().startswith("content-length") for h in headers)
        for _ in range(chunks):
            if select.select([s], [], [], 0)[0]:
                break  # the server answered before the end of the body
            try:
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            except OSError:
                break
        answer = b""
        s.settimeout(30)
        while b"\r\n\r\n" not in answer:
            data = s.recv(65536)
            if not data:
                break
            answer += data
        return answer


def test_an_oversized_streamed_body_is_refused_at_the_limit(tmp_path):
    port = free_port()
    server = start_server(tmp_path / "s.duckdb", port, tmp_path / "server.log")
    try:
        peak = _rss_peak(server.pid)
        auth = [f"Authorization: Bearer {TOKEN}"]
        declared = _post_raw(port, [*auth, f"Content-Length: {600 * 2**20}"], 0, b"")
        assert declared.startswith(b"HTTP/1.1 413"), declared[:200]
        assert _rss_peak(server.pid) - peak < 50 * 2**20
        chunk = b"x" * 2**20
        body = 600 * 2**20
        streamed = _post_raw(port, [*auth, "Transfer-Encoding: chunked"], body // len(chunk), chunk)
        assert streamed.startswith(b"HTTP/1.1 413"), streamed[:200]
        grew = _rss_peak(server.pid) - peak
        assert grew < MAX_BATCH_BYTES + 100 * 2**20 < body  # read up to the limit, no further
        # and the server still takes batches
        import httpx

        ok = httpx.post(
            f"http://127.0.0.1:{port}{INGEST_PATH}",
            content=wire.encode(samples_batch(1)),
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )
        assert ok.status_code == 200
    finally:
        stop(server)


def _random_batch(i: int, rows: int = 5000) -> Batch:
    """Server samples that do not compress: the disk fills in a few dozen batches."""
    import numpy as np

    rng = np.random.default_rng(i)
    batch = samples_batch(i, rows=rows)
    t = batch.server_samples
    for c in ("interval_s", "wait_us", "service_us", "queue_len", "active_threads"):
        t = t.set_column(t.schema.get_field_index(c), c, pa.array(rng.random(rows)))
    for c in ("read_bytes", "write_bytes", "read_ops", "write_ops", "md_ops"):
        t = t.set_column(t.schema.get_field_index(c), c, pa.array(rng.integers(0, 2**62, rows)))
    batch.server_samples = t
    return batch


@pytest.fixture
def small_disk(tmp_path):
    """A 24 MiB tmpfs (root only): a disk that fills, and `grow()` gives space back."""
    from tests.tmpfs import resize, small_tmpfs

    with small_tmpfs(tmp_path / "disk", "24m") as disk:
        yield disk, lambda: resize(disk, "512m")


def test_the_server_recovers_once_the_full_disk_has_space_again(tmp_path, small_disk):
    import httpx

    disk, grow = small_disk
    db, port = disk / "s.duckdb", free_port()
    server = start_server(db, port, tmp_path / "server.log")
    url = f"http://127.0.0.1:{port}"
    batches = [_random_batch(i) for i in range(80)]
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=60) as http:
            answers = []
            for b in batches:
                answers.append(http.post(INGEST_PATH, content=wire.encode(b)).status_code)
                if answers[-1] != 200:
                    break
            assert answers[-1] == 503, answers  # the disk is full: the store failed
            health = http.get("/healthz")
            assert health.status_code == 503, health.text
            assert health.json()["status"] == "failing"
            assert "space" in health.json()["reason"] or "invalidated" in health.json()["reason"]
            assert http.post(INGEST_PATH, content=wire.encode(batches[-1])).status_code == 503
            assert http.get("/healthz").status_code == 503  # still full: still failing

            grow()
            deadline = time.monotonic() + 30
            refused = answers.index(503)
            while http.post(INGEST_PATH, content=wire.encode(batches[refused])).status_code != 200:
                assert time.monotonic() < deadline, "the store did not take batches again"
                time.sleep(0.5)
            assert http.get("/healthz").status_code == 200
            for b in batches:  # the agents send again what was refused, and the rest
                assert http.post(INGEST_PATH, content=wire.encode(b)).status_code == 200
    finally:
        stop(server)
    with DuckDBStore(db, create=False) as store:
        rows = store.query("SELECT count(*) AS n FROM server_samples").to_pylist()[0]["n"]
        keys = store.query("SELECT count(DISTINCT key) AS n FROM ingested").to_pylist()[0]["n"]
    assert rows == 80 * 5000 and keys == 80  # nothing lost, nothing twice


def test_a_store_duckdb_invalidated_on_the_full_disk_is_reopened(small_disk):
    from iolens.present.web.app import create_app as create_server_app

    disk, grow = small_disk
    store = DuckDBStore(disk / "s.duckdb")
    with TestClient(create_server_app(store, tokens=[TOKEN])) as c:  # with the query API
        assert c.get("/api/v1/jobs", headers=AUTH).status_code == 200
        sent = []
        for i in range(80):  # fill the disk
            res = c.post(INGEST_PATH, content=wire.encode(_random_batch(i)), headers=AUTH)
            if res.status_code != 200:
                break
            sent.append(i)
        assert res.status_code == 503
        with contextlib.suppress(StoreError):  # DuckDB checkpoints by itself at 16 MB of WAL
            store.execute("CHECKPOINT")  # which, on the full disk, invalidates the database
        health = c.get("/healthz")
        assert health.status_code == 503 and "FATAL" in health.json()["reason"]
        res = c.post(INGEST_PATH, content=wire.encode(_random_batch(i)), headers=AUTH)
        assert res.status_code == 503  # still full
        assert c.get("/healthz").status_code == 503

        grow()
        again = c.post(INGEST_PATH, content=wire.encode(_random_batch(i)), headers=AUTH)
        assert again.status_code == 200 and again.json()["duplicate"] is False
        assert c.get("/healthz").json()["status"] == "ok"
        assert store.generation >= 1  # the store was closed and opened again
        n = store.query("SELECT count(*) AS n FROM server_samples").to_pylist()[0]["n"]
        assert n == (len(sent) + 1) * 5000  # every acknowledged batch survived the reopen
        assert c.get("/api/v1/jobs", headers=AUTH).status_code == 200  # reads, reopened too
    store.close()


def test_bodies_received_at_once_are_bounded_together(tmp_path):
    import httpx
    import uvicorn

    store = DuckDBStore(tmp_path / "s.duckdb")
    app = create_app(store, tokens=[TOKEN])
    app.state.ingest.max_inflight_bytes = 2 * 2**20
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        # one client is slowly sending 1.5 MiB (and stops half-way)...
        slow = socket.create_connection(("127.0.0.1", port), timeout=30)
        head = [f"POST {INGEST_PATH} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
        head += [f"Authorization: Bearer {TOKEN}", "Transfer-Encoding: chunked", "", ""]
        slow.sendall("\r\n".join(head).encode())
        part = b"x" * (3 * 2**19)
        slow.sendall(b"%x\r\n%s\r\n" % (len(part), part))
        time.sleep(0.5)
        # ...so another's 1 MiB would pass the 2 MiB held at once: 429, retry later
        chunk = b"y" * 2**20
        streamed = [f"Authorization: Bearer {TOKEN}", "Transfer-Encoding: chunked"]
        busy = _post_raw(port, streamed, 2, chunk)
        assert busy.startswith(b"HTTP/1.1 429"), busy[:200]
        slow.close()  # the slow client gives up: its bytes are released
        time.sleep(0.5)
        assert app.state.ingest.inflight == 0
        ok = httpx.post(
            f"http://127.0.0.1:{port}{INGEST_PATH}",
            content=wire.encode(samples_batch(1)),
            headers=AUTH,
            timeout=30,
        )
        assert ok.status_code == 200
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        store.close()
