"""Transports: how a payload reaches the ingest server. One method, two implementations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import httpx

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
        headers = {"Content-Type": "application/x-iolens-batch"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.client = httpx.Client(base_url=server.rstrip("/"), headers=headers, timeout=timeout)

    def send(self, payload: bytes) -> dict[str, object]:
        try:
            res = self.client.post(INGEST_PATH, content=payload)
        except httpx.HTTPError as exc:
            raise TransportError(f"{self.client.base_url}: {exc}") from None
        if res.status_code in (400, 413, 422):
            raise Rejected(f"server rejected the batch: {res.text[:300]}")
        if res.status_code != 200:
            raise TransportError(f"{self.client.base_url}: HTTP {res.status_code} {res.text[:200]}")
        return dict(res.json())

    def close(self) -> None:
        self.client.close()


class InMemoryTransport:
    """Hands payloads to a function (the ingest handler) in the same process."""

    def __init__(self, receive: Callable[[bytes], dict[str, object]]) -> None:
        self.receive = receive
        self.down = False  # tests flip this to simulate an outage

    def send(self, payload: bytes) -> dict[str, object]:
        if self.down:
            raise TransportError("in-memory server is down")
        return self.receive(payload)
