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
