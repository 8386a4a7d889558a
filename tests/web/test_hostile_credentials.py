"""Credentials that are not ASCII (issue 19): a forged token or cookie is no caller (401),
never a 500 from `compare_digest`, on the web routes and on ingest."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from iolens.present.web.app import create_app
from iolens.present.web.auth import COOKIE
from iolens.store import DuckDBStore

AGENT = "agent-t0k"


@pytest.fixture(scope="module")
def client(web_db, tmp_path_factory):
    path = web_db.copy(tmp_path_factory.mktemp("hostile-cred") / "h.duckdb")
    store = DuckDBStore(path)
    with TestClient(create_app(store, [AGENT])) as c:
        yield c
    store.close()


@pytest.mark.parametrize("token", ["t\u00f6ken", "\u00e9" * 40, "agent-t0k\u00a0"])
@pytest.mark.parametrize("route", ["/api/v1/jobs", "/jobs", "/admin", "/metrics/site"])
def test_non_ascii_bearer_is_401(client, token, route):
    res = client.get(route, headers={"Authorization": b"Bearer " + token.encode("latin-1")})
    assert res.status_code == 401, (route, res.status_code, res.text[:200])


def test_non_ascii_bearer_on_ingest_is_401(client):
    res = client.post(
        "/api/v1/batches",
        content=b"x",
        headers={"Authorization": "Bearer t\u00f6ken".encode("latin-1")},
    )
    assert res.status_code == 401


def test_non_ascii_session_cookie_is_no_session(client):
    client.cookies.clear()
    cookie = f"{COOKIE}=v1.\u00e9.k.9999999999.\u00e9\u00e9".encode("latin-1")
    res = client.get("/api/v1/jobs", headers={"Cookie": cookie})
    assert res.status_code == 401


BIG = "99999999999999999999999"


@pytest.mark.parametrize(
    "url",
    [
        f"/api/jobs?limit={BIG}",
        f"/api/jobs?offset={BIG}",
        "/api/jobs?offset=-1",
        "/api/findings?limit=-5",
        f"/api/findings?limit={BIG}",
        f"/jobs?page={BIG}",
        f"/api/admin/mds?bin_s={BIG}",
        f"/api/v1/jobs?limit={BIG}",
        f"/api/v1/series?limit={BIG}",
    ],
)
def test_out_of_range_integers_are_422_not_500(client, web_db, url):
    """Issue 19: query integers beyond what a store can take were a 500."""
    res = client.get(url, headers=web_db.auth("root"))
    assert res.status_code == 422, (url, res.status_code, res.text[:200])


def test_nul_in_a_static_path_is_404(client):
    assert client.get("/static/iolens.css%00.js").status_code == 404
