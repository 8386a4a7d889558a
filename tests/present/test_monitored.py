"""The monitored state read from a store whose every figure is known (`site_store`)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from iolens.analyze.jobids import save_job_scheme
from iolens.present.monitored import OTHER_JOBS, UNTAGGED, snapshot
from iolens.store import DuckDBStore
from tests.present import site_store
from tests.present.site_store import MIB, T


@pytest.fixture
def store(tmp_path):
    with DuckDBStore(site_store.build(tmp_path / "s.duckdb"), create=False) as s:
        yield s


def test_components_are_their_latest_sample_as_rates(store):
    snap = snapshot(store)
    assert snap.newest == T
    got = {c.component_id: c for c in snap.components}
    # fwd_client rows are per-client shares, not a component; OST1 stopped 10 min ago.
    assert list(got) == ["fwd01", "oss01", "fs-OST0000", "fs-MDT0000"]
    ost = got["fs-OST0000"]
    assert ost.read_bps == pytest.approx(10 * MIB)  # not the earlier 999 MiB round
    assert ost.write_bps == pytest.approx(5 * MIB)
    assert (ost.read_iops, ost.write_iops, ost.md_ops) == (10.0, 5.0, 2.0)
    assert ost.service_s == pytest.approx(1.5e-3)
    assert ost.queue_len is None and ost.peak_bw == 6e8
    oss = got["oss01"]
    assert (oss.wait_s, oss.queue_len, oss.active_threads) == (2.5e-4, 3.5, 12.0)
    assert oss.read_bps is None
    assert got["fs-MDT0000"].md_ops == 50.0 and got["fs-MDT0000"].read_bps is None


def test_a_longer_max_age_keeps_the_silent_ost(store):
    ids = {c.component_id for c in snapshot(store, max_age_s=3600).components}
    assert "fs-OST0001" in ids


def test_jobs_sum_ost_data_and_mdt_metadata_and_untagged_io_is_apart(store):
    snap = snapshot(store)
    jobs = {j.job_id: j for j in snap.jobs}
    a = jobs["101"]
    assert (a.user, a.read_bps, a.write_bps, a.read_iops) == ("alice", 8 * MIB, 0.0, 8.0)
    assert a.md_ops == 15.0  # the MDT's 150 ops in 10 s; OST object ops are not metadata
    assert jobs["102"].user == "bob" and jobs["102"].write_bps == 4 * MIB
    assert jobs[UNTAGGED].md_ops == 30.0 and jobs[UNTAGGED].user == ""
    assert "find" not in jobs and "find.1003" not in jobs
    assert snap.jobs_busy == 5  # 101, 102, 200-202; 300 is listed but idle
    assert "300" not in jobs


def test_top_jobs_bound_the_series_and_the_rest_adds_up(store):
    full = {j.job_id: j for j in snapshot(store).jobs}
    snap = snapshot(store, top_jobs=1)
    ids = [j.job_id for j in snap.jobs]
    # The busiest by bytes (101) and by metadata ops (101 again), then the aggregates.
    assert ids == ["101", OTHER_JOBS, UNTAGGED]
    other = snap.jobs[1]
    rest = [full[k] for k in ("102", "200", "201", "202")]
    assert other.read_bps == pytest.approx(sum(j.read_bps for j in rest))
    assert other.write_bps == pytest.approx(4 * MIB)
    total = sum(j.read_bps + j.write_bps for j in snap.jobs)
    assert total == pytest.approx(sum(j.read_bps + j.write_bps for j in full.values()))


def test_metadata_heavy_jobs_keep_their_row(store):
    # 101 leads both rankings with top 1; with 102 and others the MD ranking still picks 101.
    snap = snapshot(store, top_jobs=2)
    assert [j.job_id for j in snap.jobs][:2] == ["101", "102"]


def test_site_jobid_format_maps_host_suffixed_ids_to_the_job_and_its_owner(store):
    save_job_scheme(store, ["%j.%H"])
    store.execute("UPDATE server_samples SET job_id = job_id || '.c001' WHERE job_id = '102'")
    jobs = {j.job_id: j for j in snapshot(store).jobs}
    assert jobs["102"].user == "bob" and jobs["102"].write_bps == 4 * MIB


def test_anomalies_open_or_recent_only(store):
    snap = snapshot(store)
    got = {(a.kind, a.component_id, a.severity): a.episodes for a in snap.anomalies}
    assert got == {
        ("slow_ost", "fs-OST0000", "critical"): 1,  # open; the one that ended 90 min ago: no
        ("metadata_storm", "fs-MDT0000", "warning"): 1,  # ended 5 min ago
    }
    assert snapshot(store, recent_s=60).anomalies[0].kind == "slow_ost"
    assert len(snapshot(store, recent_s=60).anomalies) == 1


def test_the_hint_skips_history_and_a_wrong_hint_still_answers(store):
    assert snapshot(store, hint=T).components == snapshot(store).components
    late = snapshot(store, hint=T + timedelta(days=3))  # data deleted since: look again
    assert late.newest == T and late.components


def test_an_empty_store_exports_nothing(tmp_path):
    with DuckDBStore(tmp_path / "e.duckdb") as s:
        snap = snapshot(s)
    assert snap.newest is None and snap.components == [] and snap.jobs_busy == 0
    assert [j.job_id for j in snap.jobs] == [OTHER_JOBS, UNTAGGED]


def test_until_gives_the_state_as_it_stood_then(store):
    snap = snapshot(store, until=T - timedelta(seconds=5))
    assert snap.newest == T - timedelta(seconds=5)  # the OSS sample
    ost = next(c for c in snap.components if c.component_id == "fs-OST0000")
    assert ost.read_bps == pytest.approx(99.9 * MIB)  # the earlier round, now the latest
