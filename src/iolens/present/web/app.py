"""The whole server `iolens serve` runs: ingest, the `--server` query API, the REST API, the
web pages, their static assets and the API docs, every route behind `auth.authorize`."""

from __future__ import annotations

import contextlib
import getpass
import mimetypes
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.exceptions import HTTPException as StarletteHTTPException

from iolens.errors import StoreError
from iolens.ingest.http import IngestService
from iolens.ingest.http import router as ingest_router
from iolens.present import api, views
from iolens.present.web import pages, rest, run, scope, site_metrics, subscription_routes
from iolens.present.web.accounts import Accounts
from iolens.present.web.auth import (
    Authenticator,
    AuthError,
    LoginRedirect,
    Principal,
    WebConfig,
    authorize,
    load_token_file,
    set_session,
)
from iolens.present.web.browser_policy import security_headers
from iolens.present.web.cache import PlotCache
from iolens.present.web.query_times import QueryTimes, TimingMiddleware
from iolens.present.web.session_secret import forget_legacy, session_secret
from iolens.store.base import Store

STATIC = Path(str(resources.files("iolens.present.web") / "static"))


@dataclass
class Web:
    """What the routes share: the ingest service (writer), readers, cache, templates, auth."""

    service: IngestService
    readers: api.Readers
    cache: PlotCache
    env: Environment
    auth: Authenticator
    checked_stamp: Any = None  # the store's stamp when pending analyses were last looked for
    query_times: QueryTimes = field(default_factory=QueryTimes)  # Beacon Fig. 13

    def page(self, request: Request, template: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        me: Principal | None = getattr(request.state, "principal", None)
        html = self.env.get_template(template).render(me=me, path=request.url.path, **ctx)
        return HTMLResponse(html, status_code=status)


def environment() -> Environment:
    from iolens.present.html_report import human_bytes, snippets
    from iolens.present.web import filters

    env = Environment(
        loader=PackageLoader("iolens.present.web", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "default": str}
    env.filters["bytes"] = human_bytes
    env.filters["rate"] = lambda v: human_bytes(v) + "/s" if v else "-"
    env.filters["snippets"] = snippets
    env.filters.update(filters.FILTERS)
    return env


#: Address prefixes of programs (REST, ingest, query API, scrapers, assets): their errors
#: stay JSON; everything else is a page a person opened.
MACHINE_PREFIXES = ("/api/", "/metrics", "/healthz", "/openapi.json", "/static/")


def machine_path(path: str) -> bool:
    return path.startswith(MACHINE_PREFIXES)


def static_router() -> APIRouter:
    r = APIRouter(tags=["web"])

    @r.get("/static/{path:path}", include_in_schema=False)
    def static(path: str) -> Response:
        """The vendored chart library, the stylesheet and the page script (public)."""
        if "\0" in path:  # the OS refuses NUL in a path (ValueError): no such file
            return JSONResponse({"detail": "not found"}, status_code=404)
        target = (STATIC / path).resolve()
        if not target.is_file() or not target.is_relative_to(STATIC.resolve()):
            return JSONResponse({"detail": "not found"}, status_code=404)
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return Response(
            target.read_bytes(),
            media_type=kind,
            headers={"Cache-Control": "public, max-age=3600"},
        )

    return r


def docs_router(app: FastAPI, web: Web) -> APIRouter:
    r = APIRouter(tags=["web"])

    @r.get("/openapi.json", include_in_schema=False)
    def openapi() -> JSONResponse:
        """The OpenAPI description of every endpoint."""
        return JSONResponse(app.openapi())

    @r.get("/docs", include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        """The API reference, drawn from the OpenAPI description (no CDN)."""
        spec = app.openapi()
        ops = []
        for path, methods in sorted(spec.get("paths", {}).items()):
            for method, op in methods.items():
                params = [
                    {
                        "name": p["name"],
                        "in": p["in"],
                        "required": p.get("required", False),
                        "type": p.get("schema", {}).get("type", ""),
                    }
                    for p in op.get("parameters", [])
                ]
                ops.append(
                    {
                        "method": method.upper(),
                        "path": path,
                        "summary": op.get("summary", ""),
                        "description": op.get("description", ""),
                        "tags": op.get("tags", []),
                        "params": params,
                    }
                )
        return web.page(request, "api_docs.html", ops=ops, title="REST API")

    return r


@dataclass(frozen=True)
class RouteInfo:
    path: str
    methods: frozenset[str]
    dependencies: tuple[Any, ...]  # the callables, outermost first; None: not an API route
    api: bool


def route_table(app: FastAPI) -> list[RouteInfo]:
    """Every route of the app with the dependencies it runs, included routers flattened
    (FastAPI before 0.120 flattens them itself; later versions keep them nested)."""
    out: list[RouteInfo] = []

    def walk(routes: Iterable[Any], prefix: str, deps: tuple[Any, ...]) -> None:
        for r in routes:
            if isinstance(r, APIRoute):
                mine = tuple(d.dependency for d in r.dependencies)
                out.append(RouteInfo(prefix + r.path, frozenset(r.methods), deps + mine, True))
            elif hasattr(r, "original_router") and hasattr(r, "include_context"):
                ctx = r.include_context
                mine = tuple(d.dependency for d in ctx.dependencies)
                walk(r.original_router.routes, prefix + ctx.prefix, deps + mine)
            else:
                methods = frozenset(getattr(r, "methods", None) or {"GET"})
                out.append(RouteInfo(prefix + getattr(r, "path", "?"), methods, (), False))

    walk(app.routes, "", ())
    return out


def _preload(env: Environment) -> None:
    """Import the job pages' analyses, set up matplotlib's fonts and compile the templates
    (~1 s), so the first visitor does not pay for them; a failure shows on its page."""
    try:
        from iolens.analyze import catalog, report  # noqa: F401
        from iolens.present import html_report, plots

        plots.bandwidth_timeline(0.0, np.zeros(2), np.ones(2))
        html_report._env().get_template("report.html")
        for name in ("job.html", "jobs.html", "job_component.html"):
            env.get_template(name)
    except Exception:
        return


def create_app(
    store: Store,
    tokens: Iterable[str] = (),
    config: WebConfig | None = None,
    owner_token: str | None = None,
) -> FastAPI:
    """The server on one store; `tokens` are the agent tokens, `config` the `[web]` table,
    `owner_token` the token of the account running the server (an admin)."""
    service = IngestService(store, tokens)
    app = FastAPI(
        title="iolens",
        summary="End-to-end HPC I/O monitoring: ingest, query API, REST API and web UI",
        description=(
            "Every endpoint but /healthz, /metrics, /login and /static needs a caller: "
            "`Authorization: Bearer TOKEN` (an `iolens user add` token, or an agent token for "
            "ingest and /api/v1) or the session cookie of the web UI. Users see their own "
            "jobs only; /api/admin needs an admin; /metrics/site an admin or a metrics "
            "token (docs/monitoring.md)."
        ),
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.ingest = service
    readers = api.Readers(service)
    secret = session_secret(store)  # outside the store: a copy of it forges nothing
    with service.lock, contextlib.suppress(StoreError):  # a read-only store keeps its own
        forget_legacy(store)
    accounts = Accounts(store, service.lock, readers.reader)
    config = config or WebConfig()
    scrapers = load_token_file(config.metrics.token_file)
    auth = Authenticator(
        accounts, secret, set(service.tokens), config, scrapers, owner_token=owner_token
    )
    with contextlib.suppress(KeyError, OSError):  # no name for this uid: keep "owner"
        auth.owner_name = getpass.getuser()  # the account the owner token stands for
    app.state.auth = auth
    web = Web(service, readers, PlotCache(), environment(), auth)
    app.state.web = web
    threading.Thread(target=_preload, args=(web.env,), name="iolens-preload", daemon=True).start()

    gate = [Depends(authorize)]
    app.include_router(ingest_router(service), dependencies=gate)
    app.include_router(api.router(service, readers), dependencies=gate)
    app.include_router(site_metrics.router(readers, config.metrics), dependencies=gate)
    app.include_router(run.router(service, accounts), dependencies=gate)
    app.include_router(rest.router(web), dependencies=gate)
    app.include_router(subscription_routes.router(web), dependencies=gate)
    app.include_router(pages.router(web), dependencies=gate)
    app.include_router(docs_router(app, web), dependencies=gate)
    app.include_router(static_router(), dependencies=gate)

    app.add_middleware(TimingMiddleware, times=web.query_times)
    headers = security_headers()

    @app.middleware("http")
    async def server_timing(request: Request, call_next: Any) -> Response:
        """`Server-Timing: app;dur=MS` on every answer (what the page benchmark reads), and
        the browser's security headers (`browser_policy`)."""
        t0 = time.perf_counter()
        resp: Response = await call_next(request)
        resp.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - t0) * 1000:.1f}"
        resp.headers.update(headers)
        return resp

    # The promise of auth.py, kept mechanically: a route without the gate is a bug.
    ungated = [r.path for r in route_table(app) if authorize not in r.dependencies]
    if ungated:
        raise RuntimeError(f"routes without iolens.present.web.auth.authorize: {ungated}")

    @app.exception_handler(AuthError)
    async def auth_error(request: Request, exc: AuthError) -> Response:
        if exc.page:
            template = "login.html" if exc.status_code == 401 else "error.html"
            resp = web.page(
                request,
                template,
                status=exc.status_code,
                error=exc.detail,
                next=request.url.path,
                title="Log in" if exc.status_code == 401 else "Not allowed",
            )
        else:
            resp = JSONResponse({"detail": exc.detail}, status_code=exc.status_code)
        for k, v in (exc.headers or {}).items():
            resp.headers[k] = v
        return resp

    @app.exception_handler(StarletteHTTPException)
    async def no_such_page(request: Request, exc: StarletteHTTPException) -> Response:
        """An unknown address is a page for a browser, and stays JSON for programs."""
        if exc.status_code != 404 or machine_path(request.url.path):
            return await http_exception_handler(request, exc)
        return web.page(
            request,
            "error.html",
            status=404,
            title="Not found",
            error=f"There is no page at {request.url.path}.",
        )

    @app.exception_handler(scope.JobHidden)
    async def job_hidden(request: Request, exc: scope.JobHidden) -> Response:
        if request.url.path.startswith("/api/"):
            return rest.missing(exc.job_id)
        return web.page(
            request,
            "error.html",
            status=404,
            title="Not found",
            error=f"No job {exc.job_id} among the jobs you can see.",
        )

    @app.exception_handler(views.AnalysisFailed)
    async def analysis_failed(request: Request, exc: views.AnalysisFailed) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"detail": str(exc), "job_id": exc.job_id}, status_code=500)
        return web.page(request, "error.html", status=500, title="Analysis failed", error=str(exc))

    @app.exception_handler(LoginRedirect)
    async def token_login(request: Request, exc: LoginRedirect) -> Response:
        resp = RedirectResponse(exc.location, status_code=303)
        resp.headers["Cache-Control"] = "no-store"  # the URL with the token is not kept
        set_session(resp, exc.cookie, exc.max_age, auth.cookie_secure(request))
        return resp

    return app
