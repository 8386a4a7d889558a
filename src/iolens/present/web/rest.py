"""The REST API under /api: what the pages show, as JSON, for the caller's eyes only.

`/api/jobs/{id}` is exactly `iolens job ID --json` (`views.job`); the rest are the data
behind each page. Users get their own jobs, and servers only through them; `/api/admin/...`
is for admins (the gate in `auth.py` refuses others with 403).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse

from iolens.errors import InputError, NotFound
from iolens.present import views
from iolens.present.cli.render import to_json
from iolens.present.web import charts, episode_views, job_views, scope, stamps, system_views
from iolens.present.web.accounts import DEFAULT_TOKEN_DAYS, MAX_TOKEN_DAYS
from iolens.present.web.auth import Principal

JOB_404 = "job {job_id} not found"


def _json(obj: object, status: int = 200) -> Response:
    return Response(to_json(obj), media_type="application/json", status_code=status)


def missing(job_id: str) -> JSONResponse:
    """The one answer for an unknown job and for someone else's."""
    return JSONResponse({"detail": JOB_404.format(job_id=job_id), "job_id": job_id}, 404)


def me_of(request: Request) -> Principal:
    who = request.state.principal
    assert who is not None  # authorize() refused anonymous callers already
    return who


def parse_time(value: str | None) -> datetime | None:
    """ISO time (UTC) or a span back from now (2h); None when empty. ValueError if bad."""
    return views.parse_since(value or None)


def router(web: Any) -> APIRouter:
    r = APIRouter(prefix="/api", tags=["api"])

    def job_data(store: Any, job_id: str) -> dict[str, Any]:
        return web.cache.get(
            ("job", job_id),
            stamps.job_stamp(store, job_id),
            lambda: job_views.job_page(store, job_id),
        )

    @r.get("/me")
    def me(request: Request) -> dict[str, Any]:
        """Who the API thinks you are."""
        who = me_of(request)
        return {"name": who.name, "admin": who.admin, "via": who.via}

    @r.get("/jobs")
    def jobs(
        request: Request,
        q: str | None = Query(None, description="Substring of job id, app or user"),
        user: str | None = Query(None, description="Admins: one user's jobs"),
        app: str | None = None,
        state: str | None = None,
        since: str | None = Query(None, description="Jobs running at or after (ISO or 2h)"),
        until: str | None = Query(None, description="Jobs started before (ISO or 2h)"),
        sort: str = Query("start", description=f"One of {', '.join(scope.SORTABLE)}"),
        order: str = Query("desc", pattern="^(asc|desc)$"),
        limit: int = Query(1000, ge=1, le=100_000),
        offset: int = Query(0, ge=0, le=1_000_000_000),
    ) -> Response:
        """The caller's visible jobs (admins: all), as `iolens jobs --json` entries."""
        who = me_of(request)
        try:
            t0, t1 = parse_time(since), parse_time(until)
        except ValueError as exc:
            return _json({"detail": str(exc)}, 400)
        analyze_pending(web)
        with web.readers.reader() as store:
            rows, total = scope.list_jobs(
                store,
                who,
                q=q,
                user=user,
                app=app,
                state=state,
                since=t0,
                until=t1,
                sort=sort,
                order=order,
                limit=limit,
                offset=offset,
            )
        resp = _json(rows)
        resp.headers["X-Total-Count"] = str(total)
        return resp

    @r.get("/jobs/{job_id}")
    def job(request: Request, job_id: str, layers: bool = False) -> Response:
        """The per-job report, the same object as `iolens job ID --json`."""
        who = me_of(request)
        analyze_pending(web)
        with web.readers.reader() as store:
            scope.visible_job(store, who, job_id)
            body = web.cache.get(
                ("api-job", job_id, layers),
                stamps.job_stamp(store, job_id),
                lambda: to_json(views.job(store, job_id, layers=layers)),
            )
        return Response(body, media_type="application/json")

    @r.get("/jobs/{job_id}/series")
    def job_series(request: Request, job_id: str) -> Response:
        """The job's time series: client bandwidth per second and every layer per 10 s."""
        with web.readers.reader() as store:
            scope.visible_job(store, me_of(request), job_id)
            d = job_data(store, job_id)
        return _json({"client": d["timeline"], "layers": d["cross"]})

    @r.get("/jobs/{job_id}/findings")
    def job_findings(request: Request, job_id: str) -> Response:
        """The job's findings with recommendations, estimated gains and documentation."""
        with web.readers.reader() as store:
            scope.visible_job(store, me_of(request), job_id)
            d = job_data(store, job_id)
        return _json(d["job"]["findings"])

    @r.get("/jobs/{job_id}/seff")
    def job_seff(
        request: Request,
        job_id: str,
        runs: int = Query(10, ge=1, le=1000),
        fmt: str = Query("json", alias="format", pattern="^(json|line)$"),
    ) -> Response:
        """`iolens seff`: I/O share, core-hours waiting on I/O, the change most likely to
        help and what it would have saved over the owner's recent runs. `format=line`:
        `iolens seff --line` as text/plain (what the Slurm epilog prints), or 204 when the
        job has no I/O and no finding yet (the epilog then prints nothing)."""
        from iolens.analyze.seff import seff
        from iolens.present.api import seff_response

        analyze_pending(web)
        with web.readers.reader() as store:
            scope.visible_job(store, me_of(request), job_id)
            s = seff(store, job_id, runs)
        return seff_response(s, fmt)

    @r.get("/jobs/{job_id}/reason")
    def job_reason(request: Request, job_id: str) -> Response:
        """`iolens reason ID --json`: the hierarchical reasoner's anomalies (process-local,
        node-wide, system-wide), each with the activities that preceded it."""
        with web.readers.reader() as store:
            scope.visible_job(store, me_of(request), job_id)
            try:
                return _json(reason_data(web, store, job_id))
            except InputError as exc:  # the site's [reasoner] table: the server's fault
                return _json({"detail": str(exc), "job_id": job_id}, 500)

    @r.get("/jobs/{job_id}/interference")
    def job_interference(request: Request, job_id: str) -> Response:
        """The jobs that slowed this one (others' jobs anonymised for users)."""
        who = me_of(request)
        with web.readers.reader() as store:
            scope.visible_job(store, who, job_id)
            d = job_data(store, job_id)
            return _json(culprits_for(store, who, d["culprits"]))

    @r.get("/jobs/{job_id}/history")
    def job_history(request: Request, job_id: str) -> Response:
        """This run against earlier runs of the same application (users: their own runs)."""
        who = me_of(request)
        with web.readers.reader() as store:
            scope.visible_job(store, who, job_id)
            d = job_data(store, job_id)
            return _json(job_views.history(store, d["job"], None if who.admin else who.name))

    @r.get("/jobs/{job_id}/components/{component_id}")
    def job_component(request: Request, job_id: str, component_id: str) -> Response:
        """A server the job used, during the job only: load, latency and the job's share."""
        with web.readers.reader() as store:
            job = scope.visible_job(store, me_of(request), job_id)
            if scope.component_in_job(store, job_id, component_id) is None:
                return _json({"detail": f"job {job_id} did not use {component_id}"}, 404)
            t0, t1 = scope.job_window(job)
            chart = web.cache.get(
                ("job-component", job_id, component_id),
                stamps.job_stamp(store, job_id),
                lambda: charts.component_series(store, component_id, t0, t1, job_id),
            )
        return _json({"component": component_id, "since": t0, "until": t1, "series": chart})

    @r.get("/findings")
    def findings(
        request: Request,
        code: str | None = None,
        limit: int = Query(500, ge=1, le=100_000),
    ) -> Response:
        """Findings of the caller's jobs (admins: all), most severe first."""
        who = me_of(request)
        where, params = ["f.subject_kind = 'job'"], []
        if not who.admin:
            where.append('j."user" = ?')
            params.append(who.name)
        if code:
            where.append("f.code = ?")
            params.append(code.upper())
        with web.readers.reader() as store:
            rows = store.query(
                'SELECT f.subject_id AS job_id, j."user", j.app, f.code, f.name, f.severity, '
                'f.recommendation, f.gain, f."start", f."end" FROM findings f '
                f"JOIN jobs j ON j.job_id = f.subject_id WHERE {' AND '.join(where)} "
                "ORDER BY CASE f.severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 "
                f'END, f."start" DESC NULLS LAST, job_id LIMIT {int(limit)}',
                params,
            ).to_pylist()
        return _json(rows)

    @r.get("/findings/codes/{code}")
    def finding_code(code: str) -> Response:
        """What a finding code means: symptom, why it hurts, what to do."""
        from iolens.analyze.catalog import catalog

        doc = catalog().get(code.upper())
        if doc is None:
            return _json({"detail": f"no finding code {code}"}, 404)
        return _json(doc.to_dict())

    # -- admins ---------------------------------------------------------------------------
    @r.get("/admin/now")
    def admin_now() -> Response:
        """Load of every forwarder, OST and MDS over the last minutes, by level."""
        with web.readers.reader() as store:
            return _json(system_views.system_now(store))

    @r.get("/admin/load")
    def admin_load(since: str | None = None, until: str | None = None) -> Response:
        """`iolens load --json`: hourly load levels, forwarder imbalance, MDS split."""
        from iolens.analyze.system.summary import load_summary

        try:
            t0, t1 = parse_time(since), parse_time(until)
        except ValueError as exc:
            return _json({"detail": str(exc)}, 400)
        with web.readers.reader() as store:
            return _json(load_summary(store, None, t0, t1))

    @r.get("/admin/anomalies")
    def admin_anomalies(kind: str | None = None) -> Response:
        """`iolens anomalies --json`, newest first, each with the `key` of its page."""
        ensure_components(web)
        with web.readers.reader() as store:
            return _json(episode_views.episodes(store, kind))

    @r.get("/admin/interference")
    def admin_interference() -> Response:
        """Every stored culprit -> victim pair, largest delay first."""
        with web.readers.reader() as store:
            return _json(system_views.interference_page(store)["rows"])

    @r.get("/admin/mds")
    def admin_mds(bin_s: int = Query(300, ge=10, le=7 * 86400)) -> Response:
        """MDS load per bin, split into jobs and other clients."""
        with web.readers.reader() as store:
            return _json(system_views.mds_page(store, bin_s)["view"])

    @r.get("/admin/switches")
    def admin_switches() -> Response:
        """Switch traffic and how uneven it is."""
        with web.readers.reader() as store:
            return _json(system_views.switches_page(store)["view"])

    @r.get("/admin/routers")
    def admin_routers() -> Response:
        """LNet router traffic per router and minute, and how uneven it is."""
        from iolens.analyze.system import router_traffic, to_plain

        with web.readers.reader() as store:
            return _json(to_plain(router_traffic(store)))

    @r.get("/admin/top")
    def admin_top(limit: int = Query(15, ge=1, le=1000)) -> Response:
        """Top users and applications by bytes moved."""
        with web.readers.reader() as store:
            d = system_views.top_page(store, limit)
        return _json({"users": d["user"], "apps": d["app"]})

    @r.get("/admin/sysview/query-times")
    def admin_query_times() -> Response:
        """This server's query times, from the plot cache and computed (Beacon Fig. 13)."""
        return _json(web.query_times.summary())

    @r.get("/admin/sysview/{name}")
    def admin_sysview(
        name: str,
        since: str | None = None,
        until: str | None = None,
        job: str | None = None,
        min_bytes: int = Query(0, ge=0, description="corehours, modes: leave out smaller jobs"),
    ) -> Response:
        """`iolens sysview NAME --json`: durations, corehours, modes, mds-clients, osts."""
        from iolens.present.web.sysview_page import VIEWS, view_data

        if name not in VIEWS:
            return _json({"detail": f"no system view {name!r}; one of {', '.join(VIEWS)}"}, 404)
        try:
            t0, t1 = parse_time(since), parse_time(until)
        except ValueError as exc:
            return _json({"detail": str(exc)}, 400)
        with web.readers.reader() as store:
            d = web.cache.get(
                ("sysview", name, t0, t1, job, min_bytes),
                stamps.store_stamp(store),
                lambda: view_data(store, name, t0, t1, job, min_bytes),
                60.0,
            )
        return _json(d)

    @r.get("/admin/components/{component_id}/series")
    def admin_component(
        component_id: str, since: str | None = None, until: str | None = None
    ) -> Response:
        """Any component's load and request latency over a window."""
        try:
            t0, t1 = parse_time(since), parse_time(until)
        except ValueError as exc:
            return _json({"detail": str(exc)}, 400)
        with web.readers.reader() as store:
            chart = charts.component_series(store, component_id, t0, t1)
        if chart is None:
            return _json({"detail": f"no samples of {component_id}"}, 404)
        return _json(chart)

    @r.get("/admin/users")
    def admin_users() -> Response:
        """The built-in accounts (never their tokens)."""
        return _json([u.to_dict() for u in web.auth.accounts.all()])

    @r.post("/admin/users/{name}")
    def admin_add_user(
        name: str,
        admin: bool = False,
        replace: bool = False,
        days: int = Query(DEFAULT_TOKEN_DAYS, ge=1, le=MAX_TOKEN_DAYS),
    ) -> Response:
        """Create an account (or re-key it with `replace`); answers its new token, once.
        The token works `days` days."""
        try:
            token = web.auth.accounts.add(name, admin, replace, days)
        except InputError as exc:
            return _json({"detail": str(exc)}, 409 if "exists" in str(exc) else 400)
        return _json({"name": name, "admin": admin, "token": token, "days": days}, 201)

    @r.post("/admin/users/{name}/revoke")
    def admin_revoke_user(name: str) -> Response:
        """End an account's token and every session it opened (`iolens user revoke`)."""
        try:
            user = web.auth.accounts.revoke(name)
        except NotFound as exc:
            return _json({"detail": str(exc)}, 404)
        return _json(user.to_dict())

    @r.delete("/admin/users/{name}")
    def admin_remove_user(name: str) -> Response:
        """Remove an account: its token and sessions stop working at once."""
        try:
            web.auth.accounts.remove(name)
        except NotFound as exc:
            return _json({"detail": str(exc)}, 404)
        return _json({"name": name, "removed": True})

    return r


def culprits_for(store: Any, who: Principal, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Culprits as the caller may see them: another user's job is "another user's job"."""
    owner = scope.owners(store, [r["job_id"] for r in rows])
    out = []
    for r in rows:
        mine = who.admin or owner.get(r["job_id"]) == who.name
        out.append(
            {
                **r,
                "job_id": r["job_id"] if mine else None,
                "user": owner.get(r["job_id"]) if mine else None,
                "visible": mine,
                "evidence": r["evidence"],
            }
        )
    return out


def reason_data(web: Any, store: Any, job_id: str) -> dict[str, Any]:
    """The reasoner's verdict on a job, cached until the job changes (API and page)."""
    return web.cache.get(
        ("reason", job_id),
        stamps.job_stamp(store, job_id),
        lambda: job_views.reasoning(store, job_id),
    )


def ensure_components(web: Any) -> None:
    """Run the component detectors over samples they have not seen, as the CLI does."""
    from iolens.analyze.components import analyzed_until

    with web.readers.reader() as store:
        done = analyzed_until(store)
        newest = store.query("SELECT max(ts) AS t FROM server_samples").column("t")[0].as_py()
    if newest is None or (done not in (None, False) and done >= newest):
        return
    from iolens.present.cli.diagnosis import ensure_components_analyzed

    with web.service.lock:
        ensure_components_analyzed(web.service.store)


def analyze_pending(web: Any) -> None:
    """Analyse jobs without a summary first (as the CLI does), but look for them only when
    the store changed since the last look: on 100 k jobs the look itself costs ~50 ms."""
    with web.readers.reader() as store:
        stamp = stamps.store_stamp(store)
    if getattr(web, "checked_stamp", None) == stamp:
        return
    web.readers.analyze_pending()
    web.checked_stamp = stamp
