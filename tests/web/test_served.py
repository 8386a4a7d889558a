"""Privacy over real HTTP: a real `iolens serve` on loopback, asked with httpx."""

from __future__ import annotations

import httpx

from tests.loopback import TOKEN


def test_unauthenticated_is_401_and_public_routes_answer(server, web_db):
    with httpx.Client(base_url=server, timeout=60) as c:
        assert c.get("/healthz").status_code == 200
        assert c.get("/metrics").status_code == 200
        assert c.get("/login").status_code == 200
        assert c.get("/static/vendor/uplot/uPlot.iife.min.js").status_code == 200
        assert c.get("/static/../accounts.py").status_code in (404, 400)
        for path in ("/", "/jobs", f"/jobs/{web_db.job}", "/api/jobs", f"/api/jobs/{web_db.job}",
                     "/admin", "/admin/load", "/api/admin/now", "/docs", "/openapi.json",
                     "/api/v1/jobs"):  # fmt: skip
            res = c.get(path)
            assert res.status_code == 401, path


def test_user_a_cannot_reach_user_b_jobs(server, web_db):
    me = web_db.auth(web_db.user)
    with httpx.Client(base_url=server, timeout=120, headers=me) as c:
        assert c.get(f"/api/jobs/{web_db.job}").status_code == 200
        for job_id in [*web_db.b_jobs[:3], "1", "100000", f"{web_db.job}0", "../etc"]:
            assert c.get(f"/api/jobs/{job_id}").status_code == 404, job_id
            assert c.get(f"/jobs/{job_id}").status_code == 404, job_id
        rows = c.get("/api/jobs").json()
        assert rows and {r["user"] for r in rows} == {web_db.user}


def test_token_link_logs_in_over_http(server, web_db):
    token = web_db.tokens[web_db.user]
    with httpx.Client(base_url=server, timeout=120, follow_redirects=True) as c:
        res = c.get(f"/jobs/{web_db.job}", params={"token": token})
        assert res.status_code == 200 and res.url.path == f"/jobs/{web_db.job}"
        assert "token" not in str(res.url)
        assert f"Job {web_db.job}" in res.text
        assert c.get(f"/jobs/{web_db.b_jobs[0]}").status_code == 404


def test_agent_token_still_serves_the_cli(server):
    with httpx.Client(base_url=server, timeout=120) as c:
        res = c.get(
            "/api/v1/jobs", params={"limit": 2}, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert res.status_code == 200 and len(res.json()) == 2
