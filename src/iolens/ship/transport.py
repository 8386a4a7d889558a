"""Transports: how a payload reaches the ingest server. One method, two implementations.

The HTTP transport runs in the node agent and the Slurm hook, whose install
(`iolens[agent]`) and resident memory stay small, so it is the standard library's, not
httpx (importing httpx alone costs ~20 MiB resident: it pulls in rich and pygments for its
command line). Plain `http://` is HTTP/1.1 on one kept-alive socket, written here in a few
lines because `http.client` imports `ssl` and `email` (~8 MiB resident) even for plain
HTTP; `https://` goes through `http.client`, imported only then.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any, BinaryIO, Protocol
from urllib.parse import urlsplit

from iolens.errors import IolensError

INGEST_PATH = "/api/v1/batches"


class TransportError(IolensError):
    """The payload was not delivered; it stays in the spool and is retried."""


class Rejected(IolensError):
    """The server refused the payload for good (malformed): retrying cannot help."""


class ServerError(TransportError):
    """The server answered, with a 5xx: its failure, or this payload's (`Shipper` tells
    them apart by whether other payloads get through)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


#: 4xx answers that are not the payload's fault: a token to fix, a server to wait for.
RETRY_4XX = frozenset({401, 403, 408, 429})


class Transport(Protocol):
    def send(self, payload: bytes) -> dict[str, object]:
        """Deliver one encoded batch; the server's answer on success."""
        ...


#: A kept-alive connection the server closed while idle: sent again on a new one.
_STALE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError, EOFError)


class HttpTransport:
    def __init__(self, server: str, token: str | None = None, timeout: float = 30.0) -> None:
        self.base_url = server.rstrip("/")
        url = urlsplit(self.base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise IolensError(f"server must be an http(s):// URL, not {server!r}")
        self.https = url.scheme == "https"
        self.host = url.hostname
        self.port = url.port or (443 if self.https else 80)
        self.path = url.path + INGEST_PATH
        self.timeout = timeout
        self.headers = {"Content-Type": "application/x-iolens-batch"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.sock: socket.socket | None = None
        self.rfile: BinaryIO | None = None
        self.conn: Any = None  # http.client.HTTPSConnection, for https only

    def send(self, payload: bytes) -> dict[str, object]:
        post = self._post_https if self.https else self._post_plain
        try:
            try:
                status, body = post(payload)
            except _STALE:
                self.close()
                status, body = post(payload)
        except (OSError, ValueError, EOFError) as exc:
            self.close()
            raise TransportError(f"{self.base_url}: {exc or type(exc).__name__}") from None
        except Exception as exc:  # http.client.HTTPException (https)
            self.close()
            raise TransportError(f"{self.base_url}: {type(exc).__name__}: {exc}") from None
        text = body.decode("utf-8", "replace")
        if 400 <= status < 500 and status not in RETRY_4XX:
            raise Rejected(f"server rejected the batch: HTTP {status} {text[:300]}")
        if status >= 500:
            raise ServerError(status, f"{self.base_url}: HTTP {status} {text[:200]}")
        if status != 200:
            raise TransportError(f"{self.base_url}: HTTP {status} {text[:200]}")
        try:
            return dict(json.loads(body))
        except (ValueError, TypeError) as exc:
            raise TransportError(f"{self.base_url}: not a JSON answer: {exc}") from None

    def _post_https(self, payload: bytes) -> tuple[int, bytes]:
        import http.client

        if self.conn is None:
            self.conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout)
        try:
            self.conn.request("POST", self.path, body=payload, headers=self.headers)
            res = self.conn.getresponse()
        except http.client.RemoteDisconnected as exc:
            raise ConnectionResetError(str(exc)) from None
        except http.client.HTTPException as exc:
            raise ValueError(f"{type(exc).__name__}: {exc}") from None
        return res.status, res.read()

    def _post_plain(self, payload: bytes) -> tuple[int, bytes]:
        if self.sock is None:
            self.sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            self.rfile = self.sock.makefile("rb")
        assert self.rfile is not None
        lines = [f"POST {self.path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        lines += [f"Content-Length: {len(payload)}", "", ""]
        self.sock.sendall("\r\n".join(lines).encode("latin-1") + payload)
        status_line = self.rfile.readline(65_537)
        if not status_line:
            raise EOFError("the server closed the connection")
        version, status, *_ = status_line.split(None, 2)
        headers = {}
        while (line := self.rfile.readline(65_537)) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = self._chunked()
        elif "content-length" in headers:
            size = int(headers["content-length"])
            body = self.rfile.read(size)
            if len(body) != size:
                raise EOFError("the answer is truncated")
        else:
            body = self.rfile.read()
            headers["connection"] = "close"
        if headers.get("connection", "").lower() == "close" or version == b"HTTP/1.0":
            self.close()
        return int(status), body

    def _chunked(self) -> bytes:
        assert self.rfile is not None
        parts = []
        while size := int(self.rfile.readline(65_537).split(b";")[0], 16):
            parts.append(self.rfile.read(size))
            self.rfile.readline(65_537)
        while self.rfile.readline(65_537) not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return b"".join(parts)

    def close(self) -> None:
        for closable in (self.rfile, self.sock, self.conn):
            if closable is not None:
                closable.close()
        self.sock = self.rfile = self.conn = None


class InMemoryTransport:
    """Hands payloads to a function (the ingest handler) in the same process."""

    def __init__(self, receive: Callable[[bytes], dict[str, object]]) -> None:
        self.receive = receive
        self.down = False  # tests flip this to simulate an outage

    def send(self, payload: bytes) -> dict[str, object]:
        if self.down:
            raise TransportError("in-memory server is down")
        return self.receive(payload)
