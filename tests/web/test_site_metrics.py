"""Who may read `/metrics/site` (site-wide state is operator data), in-process."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from iolens.errors import InputError
from iolens.present.metrics import MetricsConfig
from iolens.present.web.accounts import add_user
from iolens.present.web.app import create_app
from iolens.present.web.auth import WebConfig
from iolens.store import DuckDBStore
from tests.present import site_store

AGENT = "agent-t0k"
SCRAPER = "prom-0123456789abcdef"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    d = tmp_path_factory.mktemp("site-metrics")
    store = DuckDBStore(site_store.build(d / "s.duckdb"), create=False)
    tokens = {"alice": add_user(store, "alice"), "root": add_user(store, "root", admin=True)}
    (d / "metrics.token").write_text(f"# Prometheus' scrape token\n{SCRAPER}\n")
    config = WebConfig(metrics=MetricsConfig(token_file=d / "metrics.token"))
    app = create_app(store, [AGENT], config)
    with TestClient(app) as client:
        yield client, tokens
    store.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_admins_and_the_metrics_token_read_site_metrics(served):
    client, tokens = served
    for token in (tokens["root"], SCRAPER):
        res = client.get("/metrics/site", headers=bearer(token))
        assert res.status_code == 200
        assert res.headers["content-type"].startswith("text/plain; version=0.0.4")
        assert 'iolens_component_read_bytes_per_second{component="fs-OST0000",kind="ost"}' in (
            res.text
        )
        assert 'iolens_job_read_bytes_per_second{job_id="101",user="alice"}' in res.text


def test_everyone_else_is_refused(served):
    client, tokens = served
    client.cookies.clear()
    res = client.get("/metrics/site")
    assert res.status_code == 401 and res.headers["www-authenticate"] == "Bearer"
    assert "iolens_" not in res.text
    for token in (tokens["alice"], AGENT, "wrong"):
        res = client.get("/metrics/site", headers=bearer(token))
        assert res.status_code in (401, 403) and "iolens_" not in res.text, token
    assert client.get("/metrics/site", headers=bearer(AGENT)).status_code == 403
    assert client.get("/metrics/site", headers=bearer(tokens["alice"])).status_code == 403


def test_the_metrics_token_reads_nothing_else(served):
    client, _ = served
    for path in ("/api/v1/jobs", "/api/jobs", "/api/jobs/101", "/jobs", "/admin", "/docs"):
        assert client.get(path, headers=bearer(SCRAPER)).status_code == 403, path
    res = client.post("/api/v1/batches", content=b"x", headers=bearer(SCRAPER))
    assert res.status_code == 401  # ingest wants an agent token


def test_public_metrics_keep_the_servers_counters_and_no_site_data(served):
    client, _ = served
    client.cookies.clear()
    res = client.get("/metrics")
    assert res.status_code == 200 and "iolens_ingest_batches" in res.text
    assert "iolens_component_" not in res.text and "iolens_job_" not in res.text


def test_a_missing_or_empty_token_file_stops_start_up(tmp_path):
    empty = tmp_path / "empty.token"
    empty.write_text("# nothing yet\n")
    for path in (tmp_path / "missing.token", empty):
        config = WebConfig(metrics=MetricsConfig(token_file=path))
        with DuckDBStore(tmp_path / "x.duckdb") as store, pytest.raises(InputError):
            create_app(store, [], config)
