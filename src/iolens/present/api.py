"""The query API: what `iolens jobs`, `job` and `series` show, over HTTP.

`iolens serve` owns the store (DuckDB admits one writing process), so while it runs the
CLI asks it (`--server`). Each endpoint answers exactly the JSON the matching `--json`
command prints: both call `iolens.present.views` and serialise with `render.to_json`.

Reads run on their own DuckDB cursor (a second connection of the server's process), so
they never wait for a group commit and see only committed batches. Analysing jobs that
have no summary yet writes, so it takes the ingest writer's lock like a batch does.

Auth: a bearer token from the agent token list. Per-user read tokens come with the web UI.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Response
from fastapi.responses import JSONResponse

from iolens.errors import NotFound
from iolens.ingest.http import IngestService
from iolens.ingest.http import create_app as create_ingest_app
from iolens.present import views
from iolens.present.cli.render import to_json
from iolens.store import DuckDBStore
from iolens.store.base import Store

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

API_PREFIX = "/api/v1"


class _CursorStore(DuckDBStore):
    """The server's store seen through another connection of the same DuckDB instance."""

    def __init__(self, parent: DuckDBStore, con: DuckDBPyConnection) -> None:
        # Deliberately no super().__init__(): the parent opened and migrated the file.
        self.path = parent.path
        self.location = parent.location
        self.con = con


class Readers:
    """Hands out read-only views of the service's store and keeps job summaries current."""

    def __init__(self, service: IngestService) -> None:
        self.service = service
        self._lock = threading.Lock()
        self._root: DuckDBPyConnection | None = None
        if isinstance(service.store, DuckDBStore):
            with service.lock:  # the writer thread must not use the connection meanwhile
                self._root = service.store.con.cursor()

    @contextmanager
    def reader(self) -> Iterator[Store]:
        store = self.service.store
        if self._root is None or not isinstance(store, DuckDBStore):
            with self.service.lock:  # a backend without cursors: share the writer's connection
                yield store
            return
        with self._lock:
            con = self._root.cursor()
        try:
            yield _CursorStore(store, con)
        finally:
            con.close()

    def analyze_pending(self) -> None:
        """What `ensure_analyzed` does for the CLI, under the writer's discipline."""
        from iolens.analyze.pipeline import analyze_jobs, unanalyzed_jobs

        with self.reader() as store:
            if not views.pending_analysis(store):
                return
        with self.service.lock:
            todo = unanalyzed_jobs(self.service.store)
            if todo:
                analyze_jobs(self.service.store, todo)


def _json(obj: object) -> Response:
    return Response(to_json(obj), media_type="application/json")


def router(service: IngestService) -> APIRouter:
    readers = Readers(service)

    def reader_token(authorization: str | None = Header(default=None)) -> None:
        service.check_token(authorization)

    r = APIRouter(prefix=API_PREFIX, dependencies=[Depends(reader_token)], tags=["query"])

    @r.get("/jobs")
    def list_jobs(
        user: str | None = None, limit: int | None = Query(default=None, ge=1)
    ) -> Response:
        """Jobs in start order (`iolens jobs --json`); new jobs are analysed first."""
        readers.analyze_pending()
        with readers.reader() as store:
            return _json(views.jobs(store, user=user, limit=limit))

    @r.get("/jobs/{job_id}")
    def get_job(job_id: str, layers: bool = False) -> Response:
        """The per-job report (`iolens job ID --json`); 404 for an unknown job."""
        readers.analyze_pending()
        with readers.reader() as store:
            try:
                return _json(views.job(store, job_id, layers=layers))
            except NotFound as exc:
                return JSONResponse({"detail": str(exc), "job_id": job_id}, status_code=404)

    @r.get("/series")
    def get_series(
        kind: str | None = None,
        component: str | None = None,
        metric: str | None = None,
        since: str | None = None,
        limit: int = Query(default=10_000, ge=1),
    ) -> Response:
        """Server-side samples, one value per entry (`iolens series --json`)."""
        try:
            views.parse_since(since)
        except ValueError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=400)
        with readers.reader() as store:
            return _json(views.series(store, kind, component, metric, since, limit))

    return r


def create_app(store: Store, tokens: Iterable[str] = ()) -> FastAPI:
    """What `iolens serve` runs: the ingest endpoint plus the query API on one store."""
    app = create_ingest_app(store, list(tokens))
    app.include_router(router(app.state.ingest))
    return app
