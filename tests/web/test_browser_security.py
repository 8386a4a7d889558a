"""The web UI against another page in the same browser (issue 19): a page on another port
of the same host created an admin account and logged the victim in as someone else (CSRF),
and no answer carried CSP or frame headers. In-process, then over real HTTP."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from iolens.present.web.accounts import add_user
from iolens.present.web.app import create_app
from iolens.present.web.auth import COOKIE, WebConfig
from iolens.store import DuckDBStore

OWN = "http://testserver"
FOREIGN = "http://testserver:9999"  # the attack: another port of the same host


@pytest.fixture
def client(tmp_path: Path):
    store = DuckDBStore(tmp_path / "s.duckdb")
    users = {"alice": add_user(store, "alice"), "root": add_user(store, "root", admin=True)}
    with TestClient(create_app(store, [])) as c:
        c.users = users  # type: ignore[attr-defined]
        yield c
    store.close()


def _as_admin(c: TestClient) -> None:
    """The victim: an admin logged in through the UI (a session cookie)."""
    c.cookies.clear()
    assert c.get(f"/jobs?token={c.users['root']}", follow_redirects=False).status_code == 303
    assert COOKIE in c.cookies


def _users(c: TestClient) -> set[str]:
    auth = {"Authorization": f"Bearer {c.users['root']}"}
    return {u["name"] for u in c.get("/api/admin/users", headers=auth).json()}


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": FOREIGN},
        {"Origin": "null"},  # a sandboxed frame, or a page with Referrer-Policy: no-referrer
        {"Origin": "https://testserver"},  # same host, other scheme
        {"Referer": f"{FOREIGN}/evil.html"},  # an old browser without Origin
        {},  # neither: a browser request carrying the cookie is refused too
    ],
)
def test_a_foreign_page_cannot_create_an_account_with_the_admins_cookie(client, headers):
    _as_admin(client)
    res = client.post("/api/admin/users/mallory?admin=true", headers=headers)
    assert res.status_code == 403, res.text
    assert "refused" in res.json()["detail"]
    assert client.delete("/api/admin/users/alice", headers=headers).status_code == 403
    assert client.post("/logout", headers=headers, follow_redirects=False).status_code == 403
    assert _users(client) == {"alice", "root"}


def test_the_servers_own_pages_still_change_things(client):
    _as_admin(client)
    res = client.post("/api/admin/users/mallory", headers={"Origin": OWN})
    assert res.status_code == 201
    res = client.post("/api/admin/users/eve", headers={"Referer": f"{OWN}/admin/users"})
    assert res.status_code == 201
    assert _users(client) == {"alice", "eve", "mallory", "root"}
    res = client.post("/logout", headers={"Origin": OWN}, follow_redirects=False)
    assert res.status_code == 303


def test_behind_a_proxy_that_rewrites_host_its_forwarded_host_counts(tmp_path):
    """Only from a trusted proxy (loopback by default): elsewhere the header is ignored."""
    store = DuckDBStore(tmp_path / "s.duckdb")
    token = add_user(store, "alice")
    proxied = {"Host": "127.0.0.1:8470", "X-Forwarded-Host": "hpc.example.org"}
    proxied["X-Forwarded-Proto"] = "https"
    form = {"token": token}
    try:
        app = create_app(store, [])
        with TestClient(app, client=("127.0.0.1", 5000)) as c:
            own = {**proxied, "Origin": "https://hpc.example.org"}
            res = c.post("/login", data=form, headers=own, follow_redirects=False)
            assert res.status_code == 303
            evil = {**proxied, "Origin": "https://evil.example.org"}
            res = c.post("/login", data=form, headers=evil, follow_redirects=False)
            assert res.status_code == 403
        with TestClient(app, client=("10.1.2.3", 5000)) as c:  # not the proxy
            own = {**proxied, "Origin": "https://hpc.example.org"}
            res = c.post("/login", data=form, headers=own, follow_redirects=False)
            assert res.status_code == 403
    finally:
        store.close()


def test_login_csrf_from_a_foreign_page_is_refused(client):
    """The attacker's page logs the victim into the attacker's account: refused, no cookie."""
    client.cookies.clear()
    form = {"token": client.users["alice"], "next": "/jobs"}
    for headers in ({"Origin": FOREIGN}, {"Origin": "null"}, {}):
        res = client.post("/login", data=form, headers=headers, follow_redirects=False)
        assert res.status_code == 403, (headers, res.status_code)
        assert "set-cookie" not in res.headers and COOKIE not in client.cookies
        assert "refused" in res.text
    res = client.post("/login", data=form, headers={"Origin": OWN}, follow_redirects=False)
    assert res.status_code == 303 and COOKIE in client.cookies


def test_bearer_requests_and_credential_less_scripts_are_not_origin_checked(client):
    """Agents and scripts send a bearer token, which a browser cannot add cross-origin."""
    root = {"Authorization": f"Bearer {client.users['root']}", "Origin": FOREIGN}
    assert client.post("/api/admin/users/zed", headers=root).status_code == 201
    client.cookies.clear()
    # ingest of a server without agent tokens: anyone, as before; a bad body is its own 400
    res = client.post("/api/v1/batches", content=b"not a batch")
    assert res.status_code == 400, res.text


def test_the_cookie_is_httponly_lax_and_secure_over_https(tmp_path):
    store = DuckDBStore(tmp_path / "s.duckdb")
    token = add_user(store, "alice")
    try:
        with TestClient(create_app(store, []), base_url="https://testserver") as c:
            res = c.get(f"/jobs?token={token}", follow_redirects=False)
            cookie = res.headers["set-cookie"]
            assert "HttpOnly" in cookie and "samesite=lax" in cookie.lower()
            assert "Secure" in cookie
            res = c.post("/login", data={"token": token}, headers={"Origin": "https://testserver"})
            assert res.history and "Secure" in res.history[0].headers["set-cookie"]
        with TestClient(create_app(store, [], WebConfig(secure_cookie=True))) as c:
            cookie = c.get(f"/jobs?token={token}", follow_redirects=False).headers["set-cookie"]
            assert "Secure" in cookie  # behind a TLS proxy
        with TestClient(create_app(store, [])) as c:
            cookie = c.get(f"/jobs?token={token}", follow_redirects=False).headers["set-cookie"]
            assert "Secure" not in cookie  # plain http on loopback: it must still work
    finally:
        store.close()


def test_token_links_are_exchanged_on_every_page_route(client):
    """`?token=` on any page: 303 to the same URL without it; the API ignores it."""
    token = client.users["root"]
    for path, kept in [
        ("/jobs", ""),
        ("/jobs", "?user=alice&page=2"),
        ("/admin", ""),
        ("/admin/users", ""),
        ("/docs", ""),
        ("/login", "?next=%2Fadmin"),
    ]:
        client.cookies.clear()
        sep = "&" if kept else "?"
        res = client.get(f"{path}{kept}{sep}token={token}", follow_redirects=False)
        assert res.status_code == 303, path
        assert res.headers["location"] == f"{path}{kept}", path
        assert token not in res.headers["location"] and COOKIE in client.cookies
        assert res.headers["cache-control"] == "no-store"
    client.cookies.clear()
    assert client.get(f"/api/jobs?token={token}").status_code == 401  # bearer only


HEADERS = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


def _check_headers(res: httpx.Response) -> None:
    for k, v in HEADERS.items():
        assert res.headers.get(k) == v, (res.url, k, res.headers.get(k))
    csp = res.headers["content-security-policy"]
    rules = dict(r.strip().split(" ", 1) for r in csp.split(";"))
    assert rules["default-src"] == "'self'" and rules["script-src"] == "'self'"
    assert rules["frame-ancestors"] == "'none'" and rules["object-src"] == "'none'"
    assert "unsafe-inline" not in rules["script-src"] + rules["style-src-elem"]


def test_every_answer_carries_the_security_headers(client):
    root = {"Authorization": f"Bearer {client.users['root']}"}
    client.cookies.clear()
    for path, headers, status in [
        ("/login", {}, 200),
        ("/jobs", {}, 401),
        ("/jobs", root, 200),
        ("/admin/users", root, 200),
        ("/api/jobs", root, 200),
        ("/api/jobs", {}, 401),
        ("/jobs/nope", root, 404),
        ("/static/iolens.css", {}, 200),
        ("/static/nope", {}, 404),
        ("/healthz", {}, 200),
        (f"/jobs?token={client.users['alice']}", {}, 303),
    ]:
        res = client.get(path, headers=headers, follow_redirects=False)
        assert res.status_code == status, (path, res.status_code)
        _check_headers(res)
    _as_admin(client)
    _check_headers(client.post("/api/admin/users/x", headers={"Origin": FOREIGN}))


def test_over_http_a_foreign_port_cannot_create_an_account(server, web_db):
    """The issue's attack against a real `iolens serve`: the admin's browser, driven by a
    page on another port of the same host, posts with the admin's session cookie."""
    port = int(server.rsplit(":", 1)[1])
    with httpx.Client(base_url=server, timeout=120) as c:
        assert c.get("/admin", params={"token": web_db.tokens["root"]}).status_code == 303
        assert COOKIE in c.cookies
        foreign = {"Origin": f"http://127.0.0.1:{port + 1}"}
        res = c.post("/api/admin/users/csrf-victim", params={"admin": "true"}, headers=foreign)
        assert res.status_code == 403
        _check_headers(res)
        names = {u["name"] for u in c.get("/api/admin/users").json()}
        assert "csrf-victim" not in names
        res = c.post("/login", data={"token": web_db.tokens[web_db.user]}, headers=foreign)
        assert res.status_code == 403 and "set-cookie" not in res.headers
        _check_headers(c.get("/jobs"))
