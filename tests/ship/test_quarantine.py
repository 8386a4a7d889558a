"""A batch the server keeps refusing is set aside; the rest still go (issue 19)."""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from iolens.ship import wire
from iolens.ship.shipper import Backoff, Shipper
from iolens.ship.spool import DiskSpool
from iolens.ship.transport import HttpTransport
from iolens.store import DuckDBStore
from tests.loopback import TOKEN, free_port, start_server, stop
from tests.ship.helpers import null_kind_batch, samples_batch


def _refusals(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "refused batch" in r.getMessage()]


def test_a_batch_the_real_server_refuses_is_set_aside_and_the_rest_delivered(tmp_path, caplog):
    db, port = tmp_path / "s.duckdb", free_port()
    server = start_server(db, port, tmp_path / "server.log")
    transport = HttpTransport(f"http://127.0.0.1:{port}", token=TOKEN, timeout=10)
    spool = DiskSpool(tmp_path / "spool" / "outbox", rejected=tmp_path / "spool" / "rejected")
    shipper = Shipper(spool, transport, Backoff(base=0.0, cap=0.0))
    caplog.set_level(logging.ERROR, "iolens.ship.shipper")
    try:
        for i in range(22):
            shipper.submit(null_kind_batch(i) if i == 0 else samples_batch(i))  # the bad one first
        shipper.deliver(now=0.0)
        shipper.deliver(now=1.0)
    finally:
        stop(server)
        transport.close()
    assert spool.pending() == [] and shipper.stats.sent == 21 and shipper.stats.rejected == 1
    (aside,) = (tmp_path / "spool" / "rejected").glob("*.iolb")
    reason = aside.with_suffix(".reason").read_text()
    assert "HTTP 400" in reason and "table server_samples, column kind" in reason
    assert wire.decode(aside.read_bytes()).key == "agent-1:0"  # kept as it was sent
    (logged,) = _refusals(caplog)
    assert "column kind" in logged and str(aside) in logged
    with DuckDBStore(db, create=False) as store:
        n = store.query("SELECT count(*) AS n FROM server_samples").to_pylist()[0]["n"]
    assert n == 21 * 50


class FlakyForOne(BaseHTTPRequestHandler):
    """Answers 500 for the one payload it was told to hate, 200 for any other."""

    protocol_version = "HTTP/1.1"
    hated: ClassVar[bytes] = b""
    accepted: ClassVar[list[bytes]] = []
    down = False

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if body == FlakyForOne.hated or FlakyForOne.down:
            self.send_response(500)
            answer = b"Internal Server Error"
        else:
            FlakyForOne.accepted.append(body)
            self.send_response(200)
            answer = b'{"duplicate": false}'
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky() -> Iterator[str]:
    FlakyForOne.accepted, FlakyForOne.down, FlakyForOne.hated = [], False, b""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FlakyForOne)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_a_batch_that_keeps_getting_500_while_others_get_in_is_set_aside(tmp_path, flaky, caplog):
    spool = DiskSpool(tmp_path / "outbox")
    transport = HttpTransport(flaky, timeout=10)
    shipper = Shipper(spool, transport, Backoff(base=0.0, cap=0.0))
    caplog.set_level(logging.ERROR, "iolens.ship.shipper")
    batches = [samples_batch(i) for i in range(5)]
    FlakyForOne.hated = wire.encode(batches[0])
    rounds = 0
    for b in batches:
        shipper.submit(b)
        shipper.deliver(now=float(rounds))
        rounds += 1
    while spool.pending() and rounds < 20:
        shipper.deliver(now=float(rounds))
        rounds += 1
    assert spool.pending() == []
    assert len(FlakyForOne.accepted) == 4  # the others went, behind the bad one
    assert shipper.stats.rejected == 1 and rounds <= Shipper.MAX_SERVER_ERRORS + 5
    assert len(_refusals(caplog)) == 1
    (aside,) = (tmp_path / "outbox" / "rejected").glob("*.iolb")
    assert "HTTP 500" in aside.with_suffix(".reason").read_text()
    transport.close()


def test_a_server_failing_for_everyone_sets_nothing_aside(tmp_path, flaky):
    spool = DiskSpool(tmp_path / "outbox")
    transport = HttpTransport(flaky, timeout=10)
    shipper = Shipper(spool, transport, Backoff(base=0.0, cap=0.0))
    FlakyForOne.down = True
    for i in range(5):
        shipper.submit(samples_batch(i))
    for r in range(3 * Shipper.MAX_SERVER_ERRORS):
        shipper.deliver(now=float(r))
    assert len(spool.pending()) == 5 and shipper.stats.rejected == 0
    FlakyForOne.down = False
    shipper.deliver(now=1e9)
    assert spool.pending() == [] and len(FlakyForOne.accepted) == 5
    transport.close()


def test_spool_and_rejected_are_private(tmp_path):
    old = os.umask(0o022)
    try:
        spool = DiskSpool(tmp_path / "a" / "outbox")
        spool.put("k1", b"payload")
        spool.quarantine("k1", "refused")
    finally:
        os.umask(old)

    def mode(p) -> int:
        return stat.S_IMODE(os.stat(p).st_mode)

    assert mode(tmp_path / "a" / "outbox") == 0o700
    (aside,) = (tmp_path / "a" / "outbox" / "rejected").glob("*.iolb")
    assert mode(aside.parent) == 0o700 and mode(aside) == 0o600
    assert mode(aside.with_suffix(".reason")) == 0o600
    spool.put("k2", b"payload")
    (waiting,) = (tmp_path / "a" / "outbox").glob("*.iolb")
    assert mode(waiting) == 0o600


def test_the_5xx_count_survives_agent_runs_from_cron(tmp_path, flaky):
    batches = [samples_batch(i) for i in range(3)]
    FlakyForOne.hated = wire.encode(batches[0])
    for run in range(Shipper.MAX_SERVER_ERRORS + 1):  # one process per run, as `--once`
        transport = HttpTransport(flaky, timeout=10)
        shipper = Shipper(DiskSpool(tmp_path / "outbox"), transport, Backoff(0.0, 0.0))
        if run == 0:
            for b in batches:
                shipper.submit(b)
        shipper.deliver(now=0.0)
        transport.close()
        if not shipper.spool.pending():
            break
    assert run == Shipper.MAX_SERVER_ERRORS - 1 and shipper.stats.rejected == 1
    assert len(FlakyForOne.accepted) == 2
    assert list((tmp_path / "outbox" / "rejected").glob("*.iolb"))
    saved = tmp_path / "outbox" / "server-errors.json"
    assert saved.exists() and stat.S_IMODE(saved.stat().st_mode) == 0o600
