"""The ingest endpoint agents ship to, plus the server's own health and metrics.

Batches arrive in the wire form of `iolens.ship.wire`. A malformed batch is refused with
400 and its reason (and counted); it never affects other batches. A batch whose key was
loaded before is acknowledged as a duplicate without loading it again, which is what makes
the agents' at-least-once delivery exactly-once in the store.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterable

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Request, Response
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from starlette.concurrency import run_in_threadpool

from iolens.errors import InputError
from iolens.ingest.load import load
from iolens.ship import wire
from iolens.ship.transport import INGEST_PATH
from iolens.store.base import Store

MAX_BATCH_BYTES = 256 * 2**20


class IngestService:
    """Owns the store for writes: DuckDB allows one writer, so loads are serialised."""

    def __init__(self, store: Store, tokens: Iterable[str] = ()) -> None:
        self.store = store
        self.tokens = {t for t in tokens if t}
        self.lock = threading.Lock()
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self.batches = Counter(
            "iolens_ingest_batches",
            "Batches received, by result",
            ["result"],
            registry=self.registry,
        )
        self.rows = Counter(
            "iolens_ingest_rows", "Rows appended, by table", ["table"], registry=self.registry
        )
        self.seconds = Histogram(
            "iolens_ingest_seconds", "Time to decode and load a batch", registry=self.registry
        )

    def receive(self, payload: bytes, source: str = "request") -> dict[str, object]:
        """Decode and load one payload; InputError when it is malformed."""
        started = time.perf_counter()
        try:
            batch = wire.decode(payload, source)
            with self.lock:
                counts = load(self.store, batch)
        except InputError:
            self.batches.labels("rejected").inc()
            raise
        self.seconds.observe(time.perf_counter() - started)
        if not counts and batch.key is not None:
            self.batches.labels("duplicate").inc()
            return {"key": batch.key, "rows": {}, "duplicate": True}
        self.batches.labels("ok").inc()
        for table, n in counts.items():
            self.rows.labels(table).inc(n)
        return {"key": batch.key, "rows": counts, "duplicate": False}

    def check_token(self, authorization: str | None) -> None:
        if not self.tokens:
            return
        given = (authorization or "").removeprefix("Bearer ").strip()
        if not any(secrets.compare_digest(given, t) for t in self.tokens):
            raise HTTPException(
                401, "missing or unknown agent token", headers={"WWW-Authenticate": "Bearer"}
            )


def router(service: IngestService) -> APIRouter:
    r = APIRouter()

    def agent(authorization: str | None = Header(default=None)) -> None:
        service.check_token(authorization)

    @r.post(INGEST_PATH, dependencies=[Depends(agent)], tags=["ingest"])
    async def ingest_batch(request: Request) -> dict[str, object]:
        """Load one batch shipped by an agent (body: iolens wire format)."""
        body = await request.body()
        if len(body) > MAX_BATCH_BYTES:
            raise HTTPException(413, f"batch of {len(body)} bytes exceeds {MAX_BATCH_BYTES}")
        client = request.client.host if request.client else "unknown"
        try:
            return await run_in_threadpool(service.receive, body, f"batch from {client}")
        except InputError as exc:
            raise HTTPException(400, str(exc)) from None

    @r.get("/healthz", tags=["server"])
    def healthz() -> dict[str, str]:
        return {"status": "ok", "store": service.store.location}

    @r.get("/metrics", tags=["server"])
    def metrics() -> Response:
        return Response(
            generate_latest(service.registry), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    return r


def create_app(store: Store, tokens: Iterable[str] = ()) -> FastAPI:
    service = IngestService(store, tokens)
    app = FastAPI(title="iolens", summary="End-to-end HPC I/O monitoring: ingest and query API")
    app.state.ingest = service
    app.include_router(router(service))
    return app
