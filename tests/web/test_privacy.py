"""Privacy and the authorisation layer, in-process: every route is gated, users see only
their own jobs, and someone else's job looks exactly like one that does not exist."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from iolens.present.web.app import create_app, route_table
from iolens.present.web.auth import COOKIE, PUBLIC_PATHS, WebConfig, authorize
from iolens.store import DuckDBStore

AGENT = "agent-t0k"


@pytest.fixture(scope="module")
def served(web_db, tmp_path_factory):
    path = web_db.copy(tmp_path_factory.mktemp("privacy") / "p.duckdb")
    store = DuckDBStore(path)
    app = create_app(store, [AGENT])
    with TestClient(app) as client:
        yield app, client
    store.close()


def _fill(path: str, web_db) -> str:
    """A route template with real values, so a 401 is the gate and not a 404."""
    values = {
        "job_id": web_db.job,
        "component_id": web_db.slow_ost,
        "path": "iolens.css",
        "code": web_db.finding,
        "key": web_db.episode_key,
        "name": "nobody",
    }
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: values[m.group(1)], path)


def test_every_route_runs_the_gate(served):
    app, _ = served
    table = route_table(app)
    assert len(table) > 40
    for r in table:
        assert r.api, f"{r.path} is not an API route: the gate cannot be attached to it"
        assert authorize in r.dependencies, f"{r.path} skips authorize()"


def test_unauthenticated_requests_get_401_everywhere_but_login_health_static(served, web_db):
    app, client = served
    client.cookies.clear()
    public = {"/login", "/healthz", "/metrics", "/static/{path:path}"}
    assert public == set(PUBLIC_PATHS)
    checked = 0
    browser = {"Origin": "http://testserver"}  # as a browser on the server's own pages
    for r in route_table(app):
        for method in r.methods - {"HEAD"}:
            res = client.request(
                method, _fill(r.path, web_db), headers=browser, follow_redirects=False
            )
            checked += 1
            if r.path in public:
                # /login answers the form (GET) or refuses the empty token (POST): never data
                assert res.status_code in (200, 401), (method, r.path, res.status_code)
                continue
            assert res.status_code == 401, (method, r.path, res.status_code)
            if r.path.startswith("/api") or r.path in ("/openapi.json", "/metrics/site"):
                assert res.headers["www-authenticate"] == "Bearer"
                assert "job_id" not in res.text
            else:  # pages answer the login form, with the 401
                assert 'action="/login"' in res.text
    assert checked > 40
    # the same with a wrong bearer token and a forged cookie
    wrong = {"Authorization": "Bearer iol_00000000_xxxxxxxxxxxxxxxxxxxxxxxx"}
    for path in ("/jobs", f"/jobs/{web_db.job}", "/api/jobs", "/admin", "/docs"):
        assert client.get(path, headers=wrong).status_code == 401
        client.cookies.set(COOKIE, f"v1.cm9vdA.00000000.9999999999.{'0' * 64}")
        assert client.get(path).status_code == 401
        client.cookies.clear()


def test_user_sees_only_own_jobs(served, web_db):
    _, client = served
    me = web_db.auth(web_db.user)
    rows = client.get("/api/jobs", headers=me).json()
    assert {r["user"] for r in rows} == {web_db.user}
    assert sorted(r["job_id"] for r in rows) == web_db.a_jobs
    # asking for someone else's jobs does not widen the view
    rows = client.get("/api/jobs", params={"user": web_db.other}, headers=me).json()
    assert {r["user"] for r in rows} <= {web_db.user}
    rows = client.get("/api/v1/jobs", params={"user": web_db.other}, headers=me).json()
    assert rows == []
    assert {r["user"] for r in client.get("/api/v1/jobs", headers=me).json()} == {web_db.user}
    page = client.get("/jobs", headers=me).text
    assert all(j not in page for j in web_db.b_jobs if j not in web_db.a_jobs)


def test_other_users_objects_are_404_like_unknown_ids(served, web_db):
    _, client = served
    me = web_db.auth(web_db.user)
    theirs = web_db.b_jobs[0]
    unknown = "999999"
    for job_id in (theirs, unknown):
        for path in (
            f"/jobs/{job_id}",
            f"/jobs/{job_id}/report",
            f"/jobs/{job_id}/components/{web_db.slow_ost}",
        ):
            assert client.get(path, headers=me).status_code == 404, path
        for path in (
            f"/api/jobs/{job_id}",
            f"/api/jobs/{job_id}/series",
            f"/api/jobs/{job_id}/findings",
            f"/api/jobs/{job_id}/interference",
            f"/api/jobs/{job_id}/history",
            f"/api/jobs/{job_id}/components/{web_db.slow_ost}",
        ):
            res = client.get(path, headers=me)
            assert res.status_code == 404, path
            assert res.json() == {"detail": f"job {job_id} not found", "job_id": job_id}
    # the --server API: the same words for both
    a = client.get(f"/api/v1/jobs/{theirs}", headers=me)
    b = client.get(f"/api/v1/jobs/{unknown}", headers=me)
    assert a.status_code == b.status_code == 404
    assert a.json()["detail"].replace(theirs, "X") == b.json()["detail"].replace(unknown, "X")
    # ... and its live view (the job page's poll, `iolens watch`)
    a = client.get(f"/api/v1/jobs/{theirs}/live", headers=me)
    b = client.get(f"/api/v1/jobs/{unknown}/live", headers=me)
    assert a.status_code == b.status_code == 404
    assert a.json()["detail"].replace(theirs, "X") == b.json()["detail"].replace(unknown, "X")
    assert client.get(f"/api/v1/jobs/{web_db.job}/live", headers=me).status_code == 200
    # guessing: every id around A's own gives 404 unless it is A's
    base = int(web_db.job)
    for n in range(base - 15, base + 15):
        code = client.get(f"/api/jobs/{n}", headers=me).status_code
        assert code == (200 if str(n) in web_db.a_jobs else 404), n
    # findings, too, are only A's
    rows = client.get("/api/findings", headers=me).json()
    assert rows and {r["user"] for r in rows} == {web_db.user}


def test_servers_only_through_own_jobs_and_runs(served, web_db):
    _, client = served
    me = web_db.auth(web_db.user)
    ok = client.get(f"/api/jobs/{web_db.job}/components/{web_db.slow_ost}", headers=me).json()
    job = client.get(f"/api/jobs/{web_db.job}", headers=me).json()
    assert ok["series"]["x"]
    assert ok["series"]["x"][0] >= _epoch(job["start"]) - 61
    assert ok["series"]["x"][-1] <= _epoch(job["end"]) + 61
    unused = "sw001"  # a switch: never on a job's I/O path
    assert client.get(f"/jobs/{web_db.job}/components/{unused}", headers=me).status_code == 404
    assert client.get(f"/api/jobs/{web_db.job}/components/{unused}", headers=me).status_code == 404
    for path in ("/api/v1/series", "/admin", "/admin/load", f"/admin/components/{web_db.slow_ost}",
                 "/api/admin/now", "/api/admin/anomalies", "/api/admin/users"):  # fmt: skip
        assert client.get(path, headers=me).status_code == 403, path


def test_culprits_of_other_users_are_anonymous(served, web_db):
    _, client = served
    admin, me = web_db.auth("root"), web_db.auth(web_db.user)
    for job_id in web_db.a_jobs:
        everyone = client.get(f"/api/jobs/{job_id}/interference", headers=admin).json()
        mine = client.get(f"/api/jobs/{job_id}/interference", headers=me).json()
        assert len(everyone) == len(mine)
        for full, seen in zip(everyone, mine, strict=True):
            if full["user"] != web_db.user:
                assert seen["job_id"] is None and seen["user"] is None
            else:
                assert seen["job_id"] == full["job_id"]


def test_admin_sees_everything(served, web_db):
    _, client = served
    admin = web_db.auth("root")
    rows = client.get("/api/jobs", headers=admin).json()
    assert {web_db.user, web_db.other} <= {r["user"] for r in rows}
    for job_id in (web_db.a_jobs[0], web_db.b_jobs[0]):
        assert client.get(f"/api/jobs/{job_id}", headers=admin).status_code == 200
        assert client.get(f"/jobs/{job_id}", headers=admin).status_code == 200
    assert client.get("/api/admin/anomalies", headers=admin).json()


def test_api_job_is_iolens_job_json(served, web_db):
    from iolens.present import views
    from iolens.present.cli.render import to_json

    _, client = served
    res = client.get(f"/api/jobs/{web_db.job}", headers=web_db.auth(web_db.user))
    with DuckDBStore(web_db.path, read_only=True) as store:
        assert res.text == to_json(views.job(store, web_db.job))


def test_token_link_sets_a_session_and_drops_the_token(served, web_db):
    _, client = served
    client.cookies.clear()
    token = web_db.tokens[web_db.user]
    res = client.get(f"/jobs/{web_db.job}?token={token}&x=1", follow_redirects=False)
    assert res.status_code == 303 and res.headers["location"] == f"/jobs/{web_db.job}?x=1"
    cookie = res.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie.replace("Lax", "lax")
    assert res.headers["cache-control"] == "no-store"
    assert token not in cookie
    assert client.get(f"/jobs/{web_db.job}").status_code == 200  # the cookie works
    assert client.get("/api/me").json()["via"] == "session"
    # tampering with the cookie logs out
    value = client.cookies[COOKIE]
    client.cookies.set(COOKIE, value[:-1] + ("0" if value[-1] != "0" else "1"))
    assert client.get(f"/jobs/{web_db.job}").status_code == 401
    client.cookies.clear()
    # a bad token in the link is a 401, not a redirect
    assert client.get("/jobs?token=iol_12345678_nope-nope-nope-nope-nope").status_code == 401
    # the login form does the same as the link
    own = {"Origin": "http://testserver"}  # what a browser sends with the form
    res = client.post(
        "/login",
        data={"token": token, "next": "//evil.example/x"},
        headers=own,
        follow_redirects=False,
    )
    assert res.status_code == 303 and res.headers["location"] == "/"
    assert client.post("/logout", headers=own, follow_redirects=False).status_code == 303
    client.cookies.clear()


def test_agent_tokens_ship_and_answer_server_but_see_no_pages(served, web_db):
    _, client = served
    agent = {"Authorization": f"Bearer {AGENT}"}
    assert client.get("/api/v1/jobs", headers=agent).status_code == 200
    assert client.get("/api/v1/series", params={"limit": 1}, headers=agent).status_code == 200
    for path in ("/jobs", "/api/jobs", "/admin"):
        assert client.get(path, headers=agent).status_code == 403
    # a user token cannot ship data
    res = client.post("/api/v1/batches", content=b"x", headers=web_db.auth("root"))
    assert res.status_code == 401


def test_removed_user_is_locked_out_at_once(served, web_db):
    _, client = served
    admin = web_db.auth("root")
    res = client.post("/api/admin/users/zoe", headers=admin)
    assert res.status_code == 201
    token = res.json()["token"]
    zoe = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/jobs", headers=zoe).json() == []  # no jobs: sees nothing
    client.get(f"/jobs?token={token}")  # and a session
    assert client.get("/jobs").status_code == 200
    assert client.delete("/api/admin/users/zoe", headers=admin).status_code == 200
    assert client.get("/api/jobs", headers=zoe).status_code == 401
    assert client.get("/jobs").status_code == 401
    client.cookies.clear()
    assert "zoe" not in {u["name"] for u in client.get("/api/admin/users", headers=admin).json()}


def test_trusted_header_only_when_configured_and_from_the_proxy(web_db, tmp_path):
    path = web_db.copy(tmp_path / "h.duckdb")
    store = DuckDBStore(path)
    try:
        header = {"X-Remote-User": web_db.user}
        with TestClient(create_app(store, [AGENT])) as c:  # not configured: ignored
            assert c.get("/api/jobs", headers=header).status_code == 401
        with pytest.raises(ValueError, match="testclient"):
            WebConfig(trust_header="X-Remote-User", trusted_proxies=["testclient"])
        cfg = WebConfig(trust_header="X-Remote-User", trusted_proxies=["10.9.8.7"])
        with TestClient(create_app(store, [AGENT], cfg), client=("127.0.0.1", 5000)) as c:
            assert c.get("/api/jobs", headers=header).status_code == 401  # not the proxy
        cfg = WebConfig(trust_header="X-Remote-User", trusted_proxies=["0.0.0.0/0", "::/0"])
        app = create_app(store, [AGENT], cfg)
        with TestClient(app, client=("127.0.0.1", 5000)) as c:
            rows = c.get("/api/jobs", headers=header).json()
            assert {r["user"] for r in rows} == {web_db.user}
            assert c.get("/admin", headers=header).status_code == 403
            assert c.get("/admin", headers={"X-Remote-User": "root"}).status_code == 200
            assert c.get("/api/jobs", headers={"X-Remote-User": "bad name"}).status_code == 401
    finally:
        store.close()


def test_tokens_are_stored_hashed(web_db):
    with DuckDBStore(web_db.path, read_only=True) as store:
        rows = store.query("SELECT name, token_hash FROM users").to_pylist()
    assert rows
    for r in rows:
        assert r["token_hash"].startswith("scrypt$")
        assert web_db.tokens[r["name"]] not in r["token_hash"]
    raw = web_db.path.read_bytes()
    assert all(t.encode() not in raw for t in web_db.tokens.values())


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
