"""The ingest endpoint agents ship to, plus the server's own health and metrics.

Batches arrive in the wire form of `iolens.ship.wire`. A malformed batch is refused with
400 and its reason (and counted); it never affects other batches. A batch whose key was
loaded before is acknowledged as a duplicate without loading it again, which is what makes
the agents' at-least-once delivery exactly-once in the store.

Hostile or broken input costs only itself: a body is counted while it streams in and
refused (413) at the limit, not after; what its parts inflate to is bounded by the wire
decoder (413); a batch the store refuses inside a group commit is retried alone so only it
gets the 400. Only the store itself failing (a full disk, an I/O error) is a 503 for every
batch of the group; the server then reopens the store once it works again, and /healthz
says so meanwhile.
"""

from __future__ import annotations

import asyncio
import queue
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import Future
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)

from iolens.errors import InputError, StoreError
from iolens.ingest.load import load_many
from iolens.model.batch import Batch
from iolens.ship import wire
from iolens.ship.transport import INGEST_PATH
from iolens.store.base import Store
from iolens.store.faults import describe, is_io_failure, is_store_failure

MAX_BATCH_BYTES = 256 * 2**20


class StoreFailing(StoreError):
    """The store itself failed (not the batch): a 503 for every batch of the group."""


class IngestService:
    """Owns the store for writes, with group commit.

    DuckDB allows one writer and a commit costs far more than appending rows, so request
    threads only decode; one writer thread takes every batch waiting (up to
    `GROUP_MAX_BATCHES`), loads them in one transaction, and only then answers each
    request. An acknowledged batch is always committed.
    """

    GROUP_MAX_BATCHES = 256
    GROUP_WAIT_S = 0.005
    #: While the store is failing, how often the writer tries to reopen it.
    RECOVER_EVERY_S = 2.0
    #: Bytes of request bodies held at once (all requests): beyond, 429 until some are done.
    max_inflight_bytes = 2 * MAX_BATCH_BYTES

    def __init__(
        self,
        store: Store,
        tokens: Iterable[str] = (),
        loader: Callable[[Any, list[Batch]], list[dict[str, int]]] = load_many,
    ) -> None:
        self.store = store
        # What loads a group commit: ingest.load_many, or a dataset group's segment writer.
        self.loader = loader
        self.tokens = {t for t in tokens if t}
        self.lock = threading.Lock()
        self.failing: str | None = None  # why the store failed last, until it works again
        self.inflight = 0  # bytes of bodies being received (on the event loop only)
        self.queue: queue.Queue[tuple[Batch, Future[dict[str, int]]]] = queue.Queue()
        self.writer = threading.Thread(target=self._write_loop, name="iolens-writer", daemon=True)
        self.writer.start()
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

    def _write_loop(self) -> None:
        while True:
            try:
                group = [self.queue.get(timeout=self.RECOVER_EVERY_S if self.failing else None)]
            except queue.Empty:  # idle while failing: try to reopen before the next batch
                with self.lock:
                    self._recover()
                continue
            deadline = time.monotonic() + self.GROUP_WAIT_S
            while len(group) < self.GROUP_MAX_BATCHES:
                try:
                    group.append(self.queue.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            self._commit(group)

    def _commit(self, group: list[tuple[Batch, Future[dict[str, int]]]]) -> None:
        try:
            with self.lock:
                if self.failing:
                    self._recover()
                results = self.loader(self.store, [b for b, _ in group])
        except Exception as exc:
            if is_store_failure(exc):  # every waiting request must hear it
                if is_io_failure(exc):  # not a store that refuses by design: /healthz says so
                    self.failing = describe(exc)
                failed = StoreFailing(f"{self.store.location}: {describe(exc)}")
                for _, fut in group:
                    fut.set_exception(failed)
            elif len(group) > 1:  # one bad batch must not sink the others: one by one
                for item in group:
                    self._commit([item])
            else:
                batch, fut = group[0]
                fut.set_exception(
                    exc if isinstance(exc, InputError) else InputError(batch.source, describe(exc))
                )
            return
        self.failing = None
        for (_, fut), counts in zip(group, results, strict=True):
            fut.set_result(counts)

    def _recover(self) -> None:
        """After the store failed (the caller holds the lock): reopen it if DuckDB
        invalidated it. `failing` stays set, with the newest reason, until a batch commits
        again: a store that answers a SELECT may still refuse writes (a full disk)."""
        reopen = getattr(self.store, "reopen_if_invalidated", None)
        try:
            if reopen is not None:
                reopen()
            self.check_store()
        except Exception as exc:
            self.failing = describe(exc)

    def check_store(self) -> None:
        """A cheap query of the store itself, where the store has one (`DuckDBStore.check`;
        a dataset group's segment writer only ingests); raises what the store raises."""
        check = getattr(self.store, "check", None)
        if check is not None:
            check()

    def health(self) -> str | None:
        """None when the store answers a query and took the last batch, else why not
        (a store DuckDB invalidated is reopened first, when it can be)."""
        if self.failing is not None:
            if self.lock.acquire(timeout=5):
                try:
                    self._recover()
                finally:
                    self.lock.release()
            return self.failing
        try:
            self.check_store()
        except Exception as exc:
            return describe(exc)
        return None

    def decode(self, payload: bytes, source: str) -> Batch:
        try:
            return wire.decode(payload, source)
        except InputError:
            self.batches.labels("rejected").inc()
            raise

    def submit(self, batch: Batch) -> Future[dict[str, int]]:
        """Queue a decoded batch for the writer; the future resolves after its commit."""
        fut: Future[dict[str, int]] = Future()
        self.queue.put((batch, fut))
        return fut

    def record(self, batch: Batch, counts: dict[str, int], started: float) -> dict[str, object]:
        """Count the outcome and build the answer for the agent."""
        self.seconds.observe(time.perf_counter() - started)
        if not counts and batch.key is not None:
            self.batches.labels("duplicate").inc()
            return {"key": batch.key, "rows": {}, "duplicate": True}
        self.batches.labels("ok").inc()
        for table, n in counts.items():
            self.rows.labels(table).inc(n)
        return {"key": batch.key, "rows": counts, "duplicate": False}

    def receive(self, payload: bytes, source: str = "request") -> dict[str, object]:
        """Decode and load one payload, blocking until committed; InputError if malformed."""
        started = time.perf_counter()
        batch = self.decode(payload, source)
        try:
            counts = self.submit(batch).result()
        except InputError:
            self.batches.labels("rejected").inc()
            raise
        return self.record(batch, counts, started)

    def check_token(self, authorization: str | None) -> None:
        if not self.tokens:
            return
        given = (authorization or "").removeprefix("Bearer ").strip()
        # tokens are ASCII (compare_digest raises on other str): anything else is unknown
        if not given.isascii() or not any(secrets.compare_digest(given, t) for t in self.tokens):
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
        client = request.client.host if request.client else "unknown"
        started = time.perf_counter()
        async with receiving(request, service) as body:
            try:
                # A few hundred microseconds of Arrow work: cheaper than a thread hop.
                batch = service.decode(body, f"batch from {client}")
            except wire.TooLarge as exc:
                raise HTTPException(413, str(exc)) from None
            except InputError as exc:  # counted by decode()
                raise HTTPException(400, str(exc)) from None
        try:
            counts = await asyncio.wrap_future(service.submit(batch))
        except InputError as exc:  # valid wire form, invalid content (a bad column...)
            service.batches.labels("rejected").inc()
            raise HTTPException(400, str(exc)) from None
        except StoreFailing as exc:
            service.batches.labels("failed").inc()
            raise HTTPException(503, str(exc), headers={"Retry-After": "10"}) from None
        return service.record(batch, counts, started)

    @r.get("/healthz", tags=["server"])
    def healthz() -> Response:
        """200 when the store answers a query; 503 with the reason when it does not."""
        reason = service.health()
        where = service.store.location
        if reason is not None:
            return JSONResponse({"status": "failing", "store": where, "reason": reason}, 503)
        return JSONResponse({"status": "ok", "store": where})

    @r.get("/metrics", tags=["server"])
    def metrics() -> Response:
        return Response(
            generate_latest(service.registry), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    return r


@asynccontextmanager
async def receiving(request: Request, service: IngestService) -> AsyncIterator[bytearray]:
    """The request's body while the block runs. Refused with 413 as soon as it is known to
    pass `MAX_BATCH_BYTES` (from its Content-Length before any of it is read, else while it
    streams in), and with 429 while the bodies being received together would pass
    `service.max_inflight_bytes`: a few large bodies at once cannot take the memory."""
    limit = MAX_BATCH_BYTES
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise HTTPException(400, f"bad Content-Length {declared[:40]!r}")
        if int(declared) > limit:
            raise HTTPException(413, f"batch of {declared} bytes exceeds the limit of {limit}")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            service.inflight += len(chunk)
            if len(body) > limit:
                raise HTTPException(413, f"batch exceeds the limit of {limit} bytes")
            if service.inflight > service.max_inflight_bytes:
                raise HTTPException(
                    429,
                    f"the server is receiving {service.max_inflight_bytes} bytes of batches "
                    "at once; retry later",
                    headers={"Retry-After": "5"},
                )
        yield body
    finally:
        service.inflight -= len(body)


def create_app(
    store: Store,
    tokens: Iterable[str] = (),
    loader: Callable[[Any, list[Batch]], list[dict[str, int]]] = load_many,
) -> FastAPI:
    service = IngestService(store, tokens, loader)
    app = FastAPI(title="iolens", summary="End-to-end HPC I/O monitoring: ingest and query API")
    app.state.ingest = service
    app.include_router(router(service))
    return app
