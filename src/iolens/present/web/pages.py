"""The server-rendered pages: a user's jobs and job pages, the admins' system views.

Each page reads through `scope` (the caller's jobs only; 404 for anyone else's) and the
cached data of `job_views.py`, `system_views.py` and `episode_views.py`; charts arrive as
JSON for uPlot (time series, zoomable: `charts.py`) or as SVG drawn on the server.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from iolens.errors import InputError
from iolens.present.web import charts, episode_views, job_views, scope, stamps, system_views
from iolens.present.web.auth import COOKIE, safe_next, set_session
from iolens.present.web.rest import (
    analyze_pending,
    culprits_for,
    ensure_components,
    me_of,
    parse_time,
    reason_data,
)

PAGE_SIZE = 50


def router(web: Any) -> APIRouter:
    r = APIRouter(tags=["pages"], include_in_schema=False)

    def not_found(request: Request, what: str) -> HTMLResponse:
        return web.page(request, "error.html", status=404, title="Not found", error=what)

    def job_data(store: Any, job_id: str) -> dict[str, Any]:
        return web.cache.get(
            ("job", job_id),
            stamps.job_stamp(store, job_id),
            lambda: job_views.job_page(store, job_id),
        )

    def system(name: str, build: Any, ttl: float = 60.0) -> Any:
        with web.readers.reader() as store:
            return web.cache.get((name,), stamps.store_stamp(store), lambda: build(store), ttl)

    # -- logging in -----------------------------------------------------------------------
    @r.get("/login")
    def login_form(request: Request, next: str | None = None) -> Response:
        if request.state.principal is not None and not request.state.principal.agent:
            return RedirectResponse(safe_next(next), status_code=303)
        return web.page(request, "login.html", title="Log in", next=safe_next(next), error=None)

    @r.post("/login")
    async def login(request: Request) -> Response:
        form = parse_qs((await request.body()).decode(errors="replace"))
        token = (form.get("token") or [""])[0].strip()
        target = safe_next((form.get("next") or ["/"])[0])
        user = web.auth.accounts.verify(token)
        if user is None:
            return web.page(
                request,
                "login.html",
                status=401,
                title="Log in",
                next=target,
                error="That token is not valid.",
            )
        resp = RedirectResponse(target, status_code=303)
        hours = web.auth.config.session_hours
        set_session(
            resp, web.auth.session_cookie(user), int(hours * 3600), web.auth.cookie_secure(request)
        )
        return resp

    @r.post("/logout")
    def logout() -> Response:
        resp = RedirectResponse("/login", status_code=303)
        resp.delete_cookie(COOKIE, path="/")
        return resp

    # -- users ----------------------------------------------------------------------------
    @r.get("/")
    def home() -> Response:
        return RedirectResponse("/jobs", status_code=303)

    @r.get("/jobs")
    def jobs(
        request: Request,
        q: str | None = None,
        user: str | None = None,
        app: str | None = None,
        state: str | None = None,
        since: str | None = None,
        until: str | None = None,
        sort: str = "start",
        order: str = Query("desc", pattern="^(asc|desc)$"),
        page: int = Query(1, ge=1, le=1_000_000),
    ) -> Response:
        who = me_of(request)
        error = None
        try:
            t0, t1 = parse_time(since), parse_time(until)
        except ValueError as exc:
            t0 = t1 = None
            error = str(exc)
        analyze_pending(web)
        with web.readers.reader() as store:
            rows, total = scope.list_jobs(
                store,
                who,
                q=q,
                user=user,
                app=app or None,
                state=state or None,
                since=t0,
                until=t1,
                sort=sort if sort in scope.SORTABLE else "start",
                order=order,
                limit=PAGE_SIZE,
                offset=(page - 1) * PAGE_SIZE,
            )
            facets = web.cache.get(
                ("facets", who.name, who.admin),
                stamps.store_stamp(store),
                lambda: scope.facets(store, who),
            )
        params = {
            k: v
            for k, v in {
                "q": q,
                "user": user,
                "app": app,
                "state": state,
                "since": since,
                "until": until,
            }.items()
            if v
        }

        def sort_link(col: str) -> str:
            flip = "asc" if (sort == col and order == "desc") else "desc"
            return "/jobs?" + urlencode({**params, "sort": col, "order": flip})

        def page_link(n: int) -> str:
            return "/jobs?" + urlencode({**params, "sort": sort, "order": order, "page": n})

        return web.page(
            request,
            "jobs.html",
            title="Jobs" if who.admin else "My jobs",
            rows=rows,
            total=total,
            page=page,
            pages=max(1, -(-total // PAGE_SIZE)),
            facets=facets,
            params=params,
            sort=sort,
            order=order,
            sort_link=sort_link,
            page_link=page_link,
            error=error,
        )

    @r.get("/jobs/{job_id}")
    def job(request: Request, job_id: str) -> Response:
        who = me_of(request)
        analyze_pending(web)
        with web.readers.reader() as store:
            scope.visible_job(store, who, job_id)
            d = job_data(store, job_id)
            history = web.cache.get(
                ("history", job_id, None if who.admin else who.name),
                stamps.job_stamp(store, job_id),
                lambda: job_views.history(store, d["job"], None if who.admin else who.name),
            )
            culprits = culprits_for(store, who, d["culprits"])
            try:
                reasoned = reason_data(web, store, job_id)
            except InputError as exc:  # a bad [reasoner] table: say so, show the rest
                reasoned = {"error": str(exc)}
        from iolens.present.web import svg

        strips = {
            m["metric"]: svg.strip(m["values"], m["value"], fmt=lambda v: f"{v:,.3g}")
            for m in history["metrics"]
        }
        return web.page(
            request,
            "job.html",
            title=f"Job {job_id}",
            d=d,
            job=d["job"],
            live=job_views.is_live(d["job"]),
            history=history,
            strips=strips,
            culprits=culprits,
            reasoned=reasoned,
            ring_shown=job_views.RING_SHOWN,
            slow={e["component_id"]: e for e in d["episodes"]},
        )

    @r.get("/jobs/{job_id}/report")
    def job_report(request: Request, job_id: str) -> Response:
        from iolens.present import html_report

        with web.readers.reader() as store:
            scope.visible_job(store, me_of(request), job_id)
            html = web.cache.get(
                ("report", job_id),
                stamps.job_stamp(store, job_id),
                lambda: html_report.render(store, job_id),
            )
        return HTMLResponse(html)

    @r.get("/jobs/{job_id}/components/{component_id}")
    def job_component(request: Request, job_id: str, component_id: str) -> Response:
        who = me_of(request)
        with web.readers.reader() as store:
            job = scope.visible_job(store, who, job_id)
            d = job_data(store, job_id)
            kind = next((k for k, ids in d["components"].items() if component_id in ids), None)
            if kind is None:
                return not_found(request, f"Job {job_id} did not use {component_id}.")
            t0, t1 = scope.job_window(job)
            bands = [[charts.epoch(job["start"]), charts.epoch(job["end"] or t1), False]]
            chart = web.cache.get(
                ("job-component", job_id, component_id, "page"),
                stamps.job_stamp(store, job_id),
                lambda: charts.component_series(store, component_id, t0, t1, job_id, bands),
            )
        episodes = [e for e in d["episodes"] if e["component_id"] == component_id]
        return web.page(
            request,
            "job_component.html",
            title=f"{component_id} during job {job_id}",
            job=job,
            kind=kind,
            component_id=component_id,
            spec=chart,
            episodes=episodes,
            since=t0,
            until=t1,
        )

    @r.get("/findings/{code}")
    def finding(request: Request, code: str, job: str | None = None) -> Response:
        from iolens.analyze.catalog import catalog

        who = me_of(request)
        doc = catalog().get(code.upper())
        if doc is None:
            return not_found(request, f"No finding code {code}.")
        where, params = ["f.code = ?", "f.subject_kind = 'job'"], [doc.code]
        if not who.admin:
            where.append('j."user" = ?')
            params.append(who.name)
        with web.readers.reader() as store:
            rows = store.query(
                'SELECT f.subject_id AS job_id, j."user", j.app, f.severity, f.recommendation, '
                f'f."start" FROM findings f JOIN jobs j ON j.job_id = f.subject_id '
                f'WHERE {" AND ".join(where)} ORDER BY f."start" DESC NULLS LAST LIMIT 200',
                params,
            ).to_pylist()
        return web.page(
            request, "finding.html", title=f"{doc.code} {doc.name}", doc=doc, rows=rows, back=job
        )

    # -- admins ---------------------------------------------------------------------------
    @r.get("/admin")
    def admin_now(request: Request, at: str | None = None) -> Response:
        try:
            when = parse_time(at)
        except ValueError as exc:
            return web.page(request, "error.html", status=400, title="Bad time", error=str(exc))
        newest = None  # the newest minutes, when they are all idle and `now` is older
        with web.readers.reader() as store:
            stamp = stamps.store_stamp(store)

            def now_at(t: datetime | None) -> dict[str, Any]:
                return web.cache.get(
                    ("now", t), stamp, lambda: system_views.system_now(store, t), 10.0
                )

            now = now_at(when)
            if when is None and now["at"] is not None and system_views.all_idle(now):
                active = web.cache.get(
                    ("active",), stamp, lambda: system_views.latest_activity(store)
                )
                if active is not None and active < now["at"]:
                    newest, now = now["at"], now_at(active)
            busiest = web.cache.get(("busiest",), stamp, lambda: system_views.busiest_minute(store))
        return web.page(
            request,
            "admin_now.html",
            title="System now",
            now=now,
            at=at,
            busiest=busiest,
            newest=newest,
            idle=system_views.all_idle(now),
        )

    @r.get("/admin/load")
    def admin_load(
        request: Request, since: str | None = None, until: str | None = None
    ) -> Response:
        try:
            t0, t1 = parse_time(since), parse_time(until)
        except ValueError as exc:
            return web.page(request, "error.html", status=400, title="Bad window", error=str(exc))
        with web.readers.reader() as store:
            if t0 is None and t1 is None:  # the last day of data, as Beacon's Figure 5
                last = charts.latest_sample(store)
                t0 = last - timedelta(hours=24) if last else None
            d = web.cache.get(
                ("load", t0, t1),
                stamps.store_stamp(store),
                lambda: system_views.load_page(store, t0, t1),
            )
        return web.page(
            request, "admin_load.html", title="Load by hour", d=d, since=since, until=until
        )

    @r.get("/admin/anomalies")
    def admin_anomalies(request: Request, kind: str | None = None) -> Response:
        from iolens.analyze.components import component_gaps

        ensure_components(web)
        with web.readers.reader() as store:
            rows = episode_views.episodes(store, kind or None)
            gaps = component_gaps(store)  # what the detectors could not assess, as the CLI
        return web.page(
            request, "admin_anomalies.html", title="Anomalies", rows=rows, kind=kind, gaps=gaps
        )

    @r.get("/admin/anomalies/{key}")
    def admin_anomaly(request: Request, key: str) -> Response:
        with web.readers.reader() as store:
            d = web.cache.get(
                ("episode", key),
                stamps.store_stamp(store),
                lambda: episode_views.episode_detail(store, key),
            )
        if d is None:
            return not_found(request, f"No anomaly episode {key}.")
        return web.page(request, "admin_anomaly.html", title="Anomaly", d=d, e=d["episode"])

    @r.get("/admin/interference")
    def admin_interference(request: Request) -> Response:
        d = system("interference", system_views.interference_page)
        return web.page(request, "admin_interference.html", title="Interference", d=d)

    @r.get("/admin/mds")
    def admin_mds(request: Request) -> Response:
        d = system("mds", system_views.mds_page)
        return web.page(request, "admin_mds.html", title="Metadata server", d=d, v=d["view"])

    @r.get("/admin/switches")
    def admin_switches(request: Request) -> Response:
        d = system("switches", system_views.switches_page)
        return web.page(request, "admin_switches.html", title="Switches", d=d, v=d["view"])

    @r.get("/admin/top")
    def admin_top(request: Request) -> Response:
        d = system("top", system_views.top_page)
        return web.page(request, "admin_top.html", title="Top users and apps", d=d)

    @r.get("/admin/sysviews")
    def admin_sysviews(request: Request, min_bytes: int = Query(0, ge=0)) -> Response:
        from iolens.present.web import sysview_page

        d = system(
            f"sysviews:{min_bytes}", lambda store: sysview_page.sysview_page(store, min_bytes)
        )
        q = web.query_times.summary()
        return web.page(
            request,
            "admin_sysviews.html",
            title="System views",
            d=d,
            min_bytes=min_bytes,
            q=q,
            q_svg=sysview_page.query_time_svg(q),
        )

    @r.get("/admin/factors")
    def admin_factors(request: Request, app: str | None = None) -> Response:
        with web.readers.reader() as store:
            d = web.cache.get(
                ("factors", app),
                stamps.store_stamp(store),
                lambda: system_views.factors_page(store, app),
            )
        return web.page(request, "admin_factors.html", title="Factors", d=d)

    @r.get("/admin/components/{component_id}")
    def admin_component(
        request: Request, component_id: str, since: str | None = None, until: str | None = None
    ) -> Response:
        try:
            t0, t1 = parse_time(since), parse_time(until)
        except ValueError as exc:
            return web.page(request, "error.html", status=400, title="Bad window", error=str(exc))
        with web.readers.reader() as store:
            d = web.cache.get(
                ("component", component_id, t0, t1),
                stamps.store_stamp(store),
                lambda: system_views.admin_component(store, component_id, t0, t1),
            )
        if d is None:
            return not_found(request, f"No component {component_id}.")
        return web.page(
            request,
            "admin_component.html",
            title=component_id,
            d=d,
            component_id=component_id,
            since=t0,
            until=t1,
        )

    @r.get("/admin/users")
    def admin_users(request: Request) -> Response:
        users = web.auth.accounts.all()
        return web.page(request, "admin_users.html", title="Accounts", users=users)

    return r
