"""Transports: how a payload reaches the ingest server. One method, two implementations.

The HTTP transport uses the standard library's `http.client` (one kept-alive connection),
not httpx: it runs in the node agent and the Slurm hook, whose install (`iolens[agent]`)
stays small, and importing httpx alone costs ~20 MiB resident (it pulls in rich and
pygments for its command line).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from typing import Protocol
from urllib.parse import urlsplit

from iolens.errors import IolensError

INGEST_PATH = "/api/v1/batches"


class TransportError(IolensError):
    """The payload was not delivered; it stays in the spool and is retried."""


class Rejected(IolensError):
    """The server refused the payload for good (malformed): retrying cannot help."""


class Transport(Protocol):
    def send(self, payload: bytes) -> dict[str, object]:
        """Deliver one encoded batch; the server's answer on success."""
        ...


class HttpTransport:
    def __init__(self, server: str, token: str | None = None, timeout: float = 30.0) -> None:
        self.base_url = server.rstrip("/")
        url = urlsplit(self.base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise IolensError(f"server must be an http(s):// URL, not {server!r}")
        self.scheme, self.host, self.port = url.scheme, url.hostname, url.port
        self.path = url.path + INGEST_PATH
        self.timeout = timeout
        self.headers = {"Content-Type": "application/x-iolens-batch"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self.conn is None:
            cls = (
                http.client.HTTPSConnection
                if self.scheme == "https"
                else http.client.HTTPConnection
            )
            self.conn = cls(self.host, self.port, timeout=self.timeout)
        return self.conn

    def _post(self, payload: bytes) -> tuple[int, bytes]:
        conn = self._connection()
        try:
            conn.request("POST", self.path, body=payload, headers=self.headers)
            res = conn.getresponse()
            return res.status, res.read()
        except (OSError, http.client.HTTPException):
            self.close()  # a fresh connection next time
            raise

    def send(self, payload: bytes) -> dict[str, object]:
        try:
            try:
                status, body = self._post(payload)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                status, body = self._post(payload)  # the server closed an idle connection
        except (OSError, http.client.HTTPException) as exc:
            raise TransportError(f"{self.base_url}: {exc or type(exc).__name__}") from None
        text = body.decode("utf-8", "replace")
        if status in (400, 413, 422):
            raise Rejected(f"server rejected the batch: {text[:300]}")
        if status != 200:
            raise TransportError(f"{self.base_url}: HTTP {status} {text[:200]}")
        try:
            return dict(json.loads(body))
        except (ValueError, TypeError) as exc:
            raise TransportError(f"{self.base_url}: not a JSON answer: {exc}") from None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class InMemoryTransport:
    """Hands payloads to a function (the ingest handler) in the same process."""

    def __init__(self, receive: Callable[[bytes], dict[str, object]]) -> None:
        self.receive = receive
        self.down = False  # tests flip this to simulate an outage

    def send(self, payload: bytes) -> dict[str, object]:
        if self.down:
            raise TransportError("in-memory server is down")
        return self.receive(payload)
