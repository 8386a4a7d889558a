"""The agent's HTTP transport (standard library only) against a stdlib HTTP/1.1 server:
kept-alive connections, chunked answers, idle connections the server closed, refusals."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from iolens.ship.transport import INGEST_PATH, HttpTransport, Rejected, TransportError


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[tuple[str, str | None, bytes, int]]] = []
    mode = "ok"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        port = self.client_address[1]
        Handler.seen.append((self.path, self.headers.get("Authorization"), body, port))
        answer = json.dumps({"key": "k", "rows": {}, "duplicate": False}).encode()
        if Handler.mode == "reject":
            self.send_response(422)
            answer = b"bad batch: unknown table"
        elif Handler.mode == "busy":
            self.send_response(503)
        else:
            self.send_response(200)
        if Handler.mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(answer), 7):
                part = answer[i : i + 7]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(answer)))
        if Handler.mode == "close":
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    Handler.seen, Handler.mode = [], "ok"
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def url(srv: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def test_posts_reuse_one_connection(server):
    t = HttpTransport(url(server), token="s3cret", timeout=5)
    assert t.send(b"one") == {"key": "k", "rows": {}, "duplicate": False}
    assert t.send(b"two")["duplicate"] is False
    paths, auths, bodies, ports = zip(*Handler.seen, strict=True)
    assert set(paths) == {INGEST_PATH} and set(auths) == {"Bearer s3cret"}
    assert bodies == (b"one", b"two") and len(set(ports)) == 1  # kept alive
    t.close()


def test_chunked_answers_and_server_closes(server):
    t = HttpTransport(url(server), timeout=5)
    Handler.mode = "chunked"
    assert t.send(b"x")["key"] == "k"
    Handler.mode = "close"
    assert t.send(b"y")["key"] == "k" and t.sock is None  # the server said close
    Handler.mode = "ok"
    assert t.send(b"z")["key"] == "k"


def test_an_idle_connection_the_server_dropped_is_reopened(server):
    t = HttpTransport(url(server), timeout=5)
    t.send(b"a")
    assert t.sock is not None
    t.sock.shutdown(socket.SHUT_RDWR)  # as if the server timed the idle connection out
    assert t.send(b"b")["key"] == "k"
    assert [s[2] for s in Handler.seen] == [b"a", b"b"]


def test_refusals_and_failures(server):
    t = HttpTransport(url(server), timeout=5)
    Handler.mode = "reject"
    with pytest.raises(Rejected, match="unknown table"):
        t.send(b"x")
    Handler.mode = "busy"
    with pytest.raises(TransportError, match="HTTP 503"):
        t.send(b"x")
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    with pytest.raises(TransportError, match=f"127.0.0.1:{port}"):
        HttpTransport(f"http://127.0.0.1:{port}", timeout=2).send(b"x")


def test_only_http_urls():
    with pytest.raises(Exception, match="http"):
        HttpTransport("ftp://example.org")
