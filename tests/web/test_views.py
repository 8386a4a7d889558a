"""The admins' and users' views on what real collectors give (issue 17): charts binned no
finer than the agents sample, a job's share of a forwarder from the daemon's per-client
counters, metadata load from the MDTs, and pages that say what they cannot show (a
forwarder without per-client counters, components without a benchmarked peak, switches,
detectors without the data they need) instead of drawing nothing or zeros."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from iolens.present.web import system_views
from iolens.present.web.app import create_app
from iolens.present.web.charts import component_series
from iolens.store import DuckDBStore


@pytest.fixture(scope="module")
def store(web_db) -> Iterator[DuckDBStore]:
    with DuckDBStore(web_db.path, create=False) as s:
        yield s


def _client_bytes(store: DuckDBStore) -> dict[str, float]:
    """Each job's bytes as its own processes recorded them (the tracer's records)."""
    rows = store.query(
        "SELECT job_id, sum(size * count)::DOUBLE AS b FROM client_io "
        "WHERE op IN ('read', 'write') GROUP BY job_id"
    ).to_pylist()
    return {r["job_id"]: r["b"] for r in rows}


def test_charts_are_binned_no_finer_than_the_samples(store, web_db):
    job = store.query('SELECT "start", "end" FROM jobs WHERE job_id = ?', [web_db.job]).to_pylist()
    every = store.query(
        "SELECT median(interval_s) AS s FROM server_samples WHERE component_id = ? "
        "AND job_id IS NULL",
        [web_db.slow_ost],
    ).to_pylist()[0]["s"]
    spec = component_series(store, web_db.slow_ost, job[0]["start"], job[0]["end"])
    x = np.array(spec["x"])
    assert every >= 10 and np.all(np.diff(x) >= every)  # the agent's round, not 1 s
    total = np.array([np.nan if v is None else v for v in spec["series"][0]["values"]])
    # every bin holds a sample (a round an agent lost may leave one empty): lines, not dots
    assert np.mean(~np.isnan(total)) >= 0.9


def test_a_jobs_share_of_a_forwarder_is_its_nodes_traffic(store):
    """The daemon counts per client node; a node's requests go to the job running on it.
    Checked against the jobs' own records: a job whose nodes all sit behind one forwarder
    moved exactly its bytes there."""
    mine = _client_bytes(store)
    behind = {
        r["job_id"]: r["fwds"]
        for r in store.query(
            "SELECT j.job_id, list(DISTINCT f.forwarder) AS fwds FROM "
            "(SELECT job_id, unnest(nodes) AS node FROM jobs) j "
            "JOIN forwarding f ON f.compute_node = j.node GROUP BY j.job_id"
        ).to_pylist()
    }
    checked = 0
    for fwd in ("fwd001", "fwd002"):
        d = system_views.admin_component(store, fwd, None, None)
        assert d["jobs_note"] is None and d["jobs"]
        for row in d["jobs"]:
            assert row["label"] is None and row["user"]  # scheduler jobs, with their owner
            if behind[row["job_id"]] == [fwd]:
                assert row["bytes"] == pytest.approx(mine[row["job_id"]], rel=0.01)
                checked += 1
    assert checked >= 20
    # on the job's page of that forwarder, the job's share never exceeds the total
    job = next(j for j, fwds in behind.items() if fwds == ["fwd001"] and mine.get(j))
    t = store.query('SELECT "start", "end" FROM jobs WHERE job_id = ?', [job]).to_pylist()[0]
    spec = component_series(store, "fwd001", t["start"], t["end"], job)
    assert spec["note"] is None
    total, share = (
        np.array([np.nan if v is None else v for v in s["values"]]) for s in spec["series"][:2]
    )
    assert spec["series"][1]["label"].startswith(f"job {job}")
    seen = ~np.isnan(total)
    assert np.nansum(share) > 0 and np.all(share[seen] <= total[seen] + 1e-6)


def test_a_forwarder_episode_lists_the_jobs_behind_it(store):
    """An N-1 episode at a forwarder names its culprit; the episode page's jobs (from the
    per-client counters) include it."""
    from iolens.present.web import episode_views

    n1 = [e for e in episode_views.episodes(store, "n1_interference") if e["evidence"]]
    assert n1
    for e in n1:
        d = episode_views.episode_detail(store, e["key"])
        assert d["jobs_note"] is None
        assert str(e["evidence"]["culprit"]) in [j["job_id"] for j in d["jobs"]]


def test_processes_outside_jobs_are_named_not_linked(store):
    """job_stats ids like `find.1003` are processes (Lustre's %e.%u), not jobs."""
    d = system_views.admin_component(store, "lustre-MDT0000", None, None)
    processes = [r for r in d["jobs"] if r["label"]]
    known = set(store.query("SELECT job_id FROM jobs").column("job_id").to_pylist())
    assert processes and all(r["job_id"] not in known for r in processes)
    assert all("uid" in r["label"] for r in processes)
    assert all(r["job_id"] in known for r in d["jobs"] if not r["label"])


def test_system_now_shows_the_mdts_metadata_load(store):
    at = system_views.busiest_minute(store)
    now = system_views.system_now(store, at)
    mdts = store.query("SELECT component_id FROM components WHERE kind = 'mdt'").column(0)
    # the MDS host's rows are its request queue, not metadata load: no tile of 0 ops/s
    assert {c["component_id"] for c in now["kinds"]["mds"]} == set(mdts.to_pylist())
    assert now["no_peak"] == {}  # the simulated site's topology gives every peak


# -- what a site without some data sees -----------------------------------------------------


def _copy(web_db, tmp: Path, name: str) -> Path:
    return web_db.copy(tmp / f"{name}.duckdb")


@pytest.fixture(scope="module")
def router_site(web_db, tmp_path_factory):
    """The same cluster with LNet routers as forwarders: bytes, messages and a queue, no
    per-client counters and no latency (what `lnet_router` reads), analysed again; and no
    benchmarked peaks for the OSTs (no site topology for them)."""
    from iolens.analyze.components import analyze_components

    path = _copy(web_db, tmp_path_factory.mktemp("router"), "router")
    with DuckDBStore(path, create=False) as s:
        s.execute("DELETE FROM server_samples WHERE kind = 'fwd_client'")
        s.execute("DELETE FROM metrics WHERE kind IN ('fwd_client', 'forwarder')")
        s.execute(
            "UPDATE server_samples SET service_us = NULL, wait_us = NULL, "
            "active_threads = NULL WHERE kind = 'forwarder'"
        )
        s.execute("UPDATE components SET peak_bw = NULL WHERE kind = 'ost'")
        analyze_components(s)
    store = DuckDBStore(path, create=False)
    with TestClient(create_app(store, [])) as client:
        yield store, client
    store.close()


def test_without_per_client_counters_the_forwarder_pages_say_so(router_site, web_db):
    store, client = router_site
    t = store.query('SELECT "start", "end" FROM jobs WHERE job_id = ?', [web_db.job]).to_pylist()
    fwd = store.query(
        "SELECT forwarder FROM forwarding WHERE compute_node = "
        "(SELECT nodes[1] FROM jobs WHERE job_id = ?)",
        [web_db.job],
    ).to_pylist()[0]["forwarder"]
    spec = component_series(store, fwd, t[0]["start"], t[0]["end"], web_db.job)
    assert "exports no per-client counters" in spec["note"]
    assert [s["label"] for s in spec["series"]] == ["all clients MiB/s"]  # no made-up share
    admin = web_db.auth("root")
    page = client.get(f"/jobs/{web_db.job}/components/{fwd}", headers=admin).text
    assert "Not known:" in page and "per-client counters" in page
    page = client.get(f"/admin/components/{fwd}", headers=admin).text
    assert "which jobs it served is not known" in page


def test_pages_say_what_they_cannot_show(router_site, web_db):
    store, client = router_site
    admin = web_db.auth("root")
    # levels without a benchmarked peak are relative, and the page says so
    osts = store.query("SELECT component_id FROM components WHERE kind = 'ost'").column(0)
    now = system_views.system_now(store, system_views.busiest_minute(store))
    assert set(now["no_peak"]["ost"]) == set(osts.to_pylist())
    assert "No benchmarked peak" in client.get("/admin", headers=admin).text
    # the detectors' blind spots, as `iolens anomalies` prints them
    page = client.get("/admin/anomalies", headers=admin).text
    assert 'id="not-assessed"' in page and "slow_forwarder" in page
    assert "docs/forwarder-format.md" in page
    # no host behind the switches reports port counters: the page and its REST twin say why
    page = client.get("/admin/switches", headers=admin).text
    assert "No switch traffic" in page and "InfiniBand port counters" in page
    assert "<svg" not in page
    view = client.get("/api/admin/switches", headers=admin).json()
    assert view["switches"] == [] and "switch" in view["missing"]


def test_factors_page_with_one_darshan_job(tmp_path):
    """Issue 19: `/admin/factors` with exactly one job's factors was a 500 (an empty
    correlation matrix reached the plot); it now says there is nothing to correlate yet."""
    import pyarrow as pa

    from iolens.model.schema import JOB_FACTORS
    from iolens.present.web.system_views import factors_page
    from iolens.store import DuckDBStore

    row = {f.name: (1.0 if pa.types.is_floating(f.type) else None) for f in JOB_FACTORS}
    row.update(job_id="1", app="ior")
    with DuckDBStore(tmp_path / "f.duckdb") as store:
        store.append("job_factors", pa.Table.from_pylist([row], schema=JOB_FACTORS))
        out = factors_page(store, None)
    assert out["rows"] == 1 and out["app"] == "ior"
    assert out["corr_svg"] is None and out["parallel_svg"] is None


def test_job_page_episodes_never_name_another_users_job(tmp_path):
    """Issue 19: a user's own job page showed an anomaly summary naming another user's job;
    the owner's own ids stay, others' read "another user's job"."""
    from datetime import datetime

    import pyarrow as pa

    from iolens.model.schema import ANOMALIES, JOBS
    from iolens.present.web.episode_views import episodes_during
    from iolens.store import DuckDBStore

    t0, t1 = datetime(2025, 3, 3, 8), datetime(2025, 3, 3, 9)

    def job(job_id: str, user: str) -> dict:
        row = {f.name: None for f in JOBS}
        row.update(job_id=job_id, user=user, start=t0, end=t1)
        return row

    ep = {f.name: None for f in ANOMALIES}
    summary = "N-1 job 100009 slowed 2 job(s): 100010, 1000090"
    ep.update(
        kind="n1_interference",
        component_kind="forwarder",
        component_id="fwd1",
        start=t0,
        end=t1,
        severity="warning",
        evidence=f'{{"summary": "{summary}"}}',
    )
    with DuckDBStore(tmp_path / "p.duckdb") as store:
        store.append(
            "jobs",
            pa.Table.from_pylist([job("100009", "bob"), job("100010", "ann")], schema=JOBS),
        )
        store.append("anomalies", pa.Table.from_pylist([ep], schema=ANOMALIES))
        seen = episodes_during(store, ["fwd1"], {"start": t0, "end": t1, "user": "ann"})
    text = seen[0]["summary"]
    assert "100009" not in text.replace("1000090", "")
    assert "another user's job" in text and "100010" in text and "1000090" in text
