"""The query API: what `iolens jobs`, `job` and `series` show, over HTTP.

`iolens serve` owns the store (DuckDB admits one writing process), so while it runs the
CLI asks it (`--server`). Each endpoint answers exactly the JSON the matching `--json`
command prints: both call `iolens.present.views` and serialise with `render.to_json`.

Reads run on their own DuckDB cursor (a second connection of the server's process), so
they never wait for a group commit and see only committed batches. Analysing jobs that
have no summary yet writes, so it takes the ingest writer's lock like a batch does.

Auth: `iolens.present.web.auth.authorize`, the gate of every route of the server. Agent
tokens read everything (as before); a user's token (`iolens user add`) reads only that
user's jobs: `/jobs` lists them whatever `user=` says, another user's job is the same 404 as
an unknown one, and `/series` (every component's samples) is for admins.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from iolens.errors import NotFound
from iolens.ingest.http import IngestService
from iolens.present import views
from iolens.present.cli.render import to_json
from iolens.store import DuckDBStore, queries
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
        self._generation = 0
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
            if self._generation != store.generation:  # the store was reopened
                with self.service.lock:
                    self._root = store.con.cursor()
                    self._generation = store.generation
            con = self._root.cursor()
        try:
            yield _CursorStore(store, con)
        finally:
            con.close()

    def analyze_pending(self) -> None:
        """What `ensure_analyzed` does for the CLI, under the writer's discipline."""
        with self.reader() as store:
            if not queries.unanalyzed_jobs(store):
                return
        from iolens.analyze.pipeline import analyze_jobs

        with self.service.lock:
            todo = queries.unanalyzed_jobs(self.service.store)
            if todo:
                analyze_jobs(self.service.store, todo)


def _json(obj: object) -> Response:
    return Response(to_json(obj), media_type="application/json")


def _caller(request: Request) -> tuple[str | None, bool]:
    """(user name, admin) of the caller `authorize` resolved; agents are admins."""
    who = getattr(request.state, "principal", None)
    return (who.name, bool(who.admin)) if who is not None else (None, True)


def seff_response(s: dict[str, Any], fmt: str) -> Response:
    """The seff figures as JSON, or `format=line`: the one line as text/plain, 204 when the
    job has no I/O and no finding yet (the Slurm epilog then prints nothing)."""
    from iolens.analyze.seff import line

    if fmt == "json":
        return _json(s)
    if not s["io_time_s"] and not s["findings"]:
        return Response(status_code=204)
    return Response(line(s) + "\n", media_type="text/plain")


def router(service: IngestService, readers: Readers | None = None) -> APIRouter:
    readers = readers or Readers(service)

    def reader_token(request: Request, authorization: str | None = Header(default=None)) -> None:
        if getattr(request.state, "principal", None) is None:  # not behind the web gate
            service.check_token(authorization)

    r = APIRouter(prefix=API_PREFIX, dependencies=[Depends(reader_token)], tags=["query"])

    @r.get("/jobs")
    def list_jobs(
        request: Request,
        user: str | None = None,
        limit: int | None = Query(default=None, ge=1, le=10_000_000),
    ) -> Response:
        """Jobs in start order (`iolens jobs --json`); new jobs are analysed first."""
        name, admin = _caller(request)
        readers.analyze_pending()
        with readers.reader() as store:
            if not admin and user not in (None, name):
                return _json([])
            return _json(views.jobs(store, user=user if admin else name, limit=limit))

    @r.get("/jobs/{job_id}")
    def get_job(request: Request, job_id: str, layers: bool = False) -> Response:
        """The per-job report (`iolens job ID --json`); 404 for an unknown job."""
        name, admin = _caller(request)
        readers.analyze_pending()
        with readers.reader() as store:
            try:
                if not admin:
                    from iolens.present.web.auth import Principal
                    from iolens.present.web.scope import visible_job

                    visible_job(store, Principal(name or "", False, "token"), job_id)
                return _json(views.job(store, job_id, layers=layers))
            except NotFound as exc:
                return JSONResponse({"detail": str(exc), "job_id": job_id}, status_code=404)
            except views.AnalysisFailed as exc:  # the server's failure, with its reason
                return JSONResponse({"detail": str(exc), "job_id": job_id}, status_code=500)

    @r.get("/jobs/{job_id}/seff")
    def get_job_seff(
        request: Request,
        job_id: str,
        runs: int = Query(10, ge=1, le=1000),
        fmt: str = Query("json", alias="format", pattern="^(json|line)$"),
    ) -> Response:
        """`iolens seff ID --json` (`format=line`: `--line` as text, the Slurm epilog's)."""
        from iolens.analyze.seff import seff

        name, admin = _caller(request)
        readers.analyze_pending()
        with readers.reader() as store:
            try:
                if not admin:
                    from iolens.present.web.auth import Principal
                    from iolens.present.web.scope import visible_job

                    visible_job(store, Principal(name or "", False, "token"), job_id)
                return seff_response(seff(store, job_id, runs), fmt)
            except NotFound as exc:
                return JSONResponse({"detail": str(exc), "job_id": job_id}, status_code=404)

    @r.get("/jobs/{job_id}/live")
    def get_job_live(request: Request, job_id: str) -> Response:
        """The job right now (`iolens watch --json`): state, totals so far, current phase
        and bandwidth against earlier runs, findings. Read-only: never takes the writer's
        lock, so a page polling it costs ingest nothing."""
        from iolens.present import live

        name, admin = _caller(request)
        with readers.reader() as store:
            try:
                if not admin:
                    from iolens.present.web.auth import Principal
                    from iolens.present.web.scope import visible_job

                    visible_job(store, Principal(name or "", False, "token"), job_id)
                return _json(live.snapshot(store, job_id))
            except NotFound as exc:
                return JSONResponse({"detail": str(exc), "job_id": job_id}, status_code=404)

    @r.get("/series")
    def get_series(
        request: Request,
        kind: str | None = None,
        component: str | None = None,
        metric: str | None = None,
        since: str | None = None,
        limit: int = Query(default=10_000, ge=1, le=10_000_000),
    ) -> Response:
        """Server-side samples, one value per entry (`iolens series --json`); admins only."""
        if not _caller(request)[1]:
            return JSONResponse(
                {"detail": "every component's samples are for admins; see /api/jobs/ID/..."},
                status_code=403,
            )
        try:
            views.parse_since(since)
        except ValueError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=400)
        with readers.reader() as store:
            return _json(views.series(store, kind, component, metric, since, limit))

    return r
