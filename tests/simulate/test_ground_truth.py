"""The per-job report against what only the simulator knows."""

from __future__ import annotations

import pytest

from iolens.analyze import report
from iolens.store import queries


@pytest.fixture(scope="module")
def reports(sim_db):
    with sim_db.store() as store:
        return {j: report.build(store, j) for j in sim_db.truth["jobs"]}


def test_simulation_is_big_enough(sim_db):
    assert sim_db.truth["config"]["nodes"] >= 1024 and sim_db.truth["config"]["hours"] >= 2
    assert len(sim_db.truth["jobs"]) >= 50
    modes = {j["io_mode"] for j in sim_db.truth["jobs"].values()}
    assert modes == {"N-N", "N-1", "N-M", "1-1"}


def test_io_mode_of_every_job_matches_truth(sim_db, reports):
    wrong = {
        j: (r.io_mode, sim_db.truth["jobs"][j]["io_mode"])
        for j, r in reports.items()
        if r.io_mode != sim_db.truth["jobs"][j]["io_mode"]
    }
    assert wrong == {}


def test_bytes_of_every_job_match_truth_exactly(sim_db, reports):
    for job_id, r in reports.items():
        t = sim_db.truth["jobs"][job_id]
        assert (r.read_bytes, r.write_bytes) == (t["read_bytes"], t["write_bytes"]), job_id


def test_every_job_is_listed_with_its_user(sim_db):
    with sim_db.store() as store:
        rows = {r["job_id"]: r for r in queries.jobs(store)}
    assert set(rows) == set(sim_db.truth["jobs"])
    assert all(rows[j]["user"] == t["user"] for j, t in sim_db.truth["jobs"].items())


def _thrashed_jobs(truth):
    return {f["job_id"] for f in truth["faults"] if f["kind"] == "cache_thrashing"}


def test_bytes_seen_by_each_layer(sim_db, reports):
    """The tracer has every byte; the OSTs' job_stats, as the agent rates them, never more
    (except the thrashed reads) and most of it. An agent cannot rate a job_stats entry the
    first time it sees it (it has no earlier reading), so the I/O a job did on an OST
    before the agent's first look at its entry is missing from the per-job rows; short
    phases lose the most (`docs/simulator.md`, Emission)."""
    thrashed = _thrashed_jobs(sim_db.truth)
    seen = total = 0
    for job_id, r in reports.items():
        compute, ost, mdt = r.layers["compute"], r.layers.get("ost"), r.layers.get("mdt")
        t = sim_db.truth["jobs"][job_id]
        assert (compute["read_bytes"], compute["write_bytes"]) == (
            t["read_bytes"],
            t["write_bytes"],
        )
        if ost is not None:
            assert ost["write_bytes"] <= compute["write_bytes"], job_id  # writes never amplify
            if job_id not in thrashed:
                assert ost["read_bytes"] <= compute["read_bytes"], job_id
            seen += ost["write_bytes"]
        if mdt is not None:
            assert mdt["md_ops"] <= compute["md_ops"], job_id
        total += compute["write_bytes"]
    assert seen >= 0.6 * total


def test_thrashing_amplifies_backend_reads(sim_db, reports):
    thrashed = _thrashed_jobs(sim_db.truth)
    assert thrashed, "the 1,024-node simulation plants an N-N read that thrashes"
    for job_id in thrashed:
        r = reports[job_id]
        assert r.layers["ost"]["read_bytes"] > 1.5 * r.layers["compute"]["read_bytes"]
        codes = {f["code"] for f in r.findings}
        assert "IOL003" in codes


def test_component_totals_cover_the_job_shares(sim_db):
    """Per OST and sample, the total (obdfilter `stats`) is what the job_stats entries
    (Slurm jobs and the login node's untagged processes) add up to: an entry born since
    the last round is rated from zero, so no first interval is lost."""
    with sim_db.store() as store:
        rows = store.query("""
            SELECT t.component_id, t.ts, t.read_bytes + t.write_bytes AS total,
                   sum(j.read_bytes + j.write_bytes) AS jobs
            FROM server_samples t JOIN server_samples j USING (kind, component_id, ts)
            WHERE t.kind = 'ost' AND t.job_id IS NULL AND j.job_id IS NOT NULL
            GROUP BY ALL""").to_pylist()
    assert len(rows) > 500
    assert all(r["total"] == r["jobs"] for r in rows)


def test_faults_and_interference_are_in_the_truth(sim_db):
    kinds = {f["kind"] for f in sim_db.truth["faults"]}
    assert kinds == {
        "slow_ost",
        "slow_forwarder",
        "cache_thrashing",
        "metadata_storm",
        "n1_interference",
    }
    pairs = {(i["victim"], i["culprit"]) for i in sim_db.truth["interference"]}
    for n1 in (f for f in sim_db.truth["faults"] if f["kind"] == "n1_interference"):
        # Beacon's criterion, on the simulator's own losses: an N-1 job over 32 nodes behind
        # the forwarder, and victims behind it that truly lost enough to it
        assert n1["victims"] and all((v, n1["culprit"]) in pairs for v in n1["victims"])
        assert n1["culprit_nodes"] > 32
        assert sim_db.truth["jobs"][n1["culprit"]]["io_mode"] == "N-1"
        assert (
            n1["magnitude"] == n1["culprit_nodes"] <= sim_db.truth["jobs"][n1["culprit"]]["nnodes"]
        )
    # Each fault's size, as a detector would be judged by it.
    by_kind = {f["kind"]: f for f in sim_db.truth["faults"]}
    assert by_kind["slow_ost"]["magnitude"] == 10.0  # the defaults: 10x slower
    assert by_kind["slow_forwarder"]["magnitude"] == 4.0
    assert by_kind["metadata_storm"]["magnitude"] == 60_000.0  # ops/s offered


def test_report_fields_are_consistent(reports):
    for r in reports.values():
        assert r.io_procs <= (r.nprocs or r.io_procs)
        assert r.io_nodes <= r.nodes
        assert r.read_bw_avg >= 0 and r.write_bw_avg >= 0
        assert r.io_time_s <= (r.runtime_s or r.io_time_s)  # the slowest rank's, in the run
        assert r.forwarders and all(f.startswith("fwd") for f in r.forwarders)
        if r.read_bytes + r.write_bytes:
            assert r.osts


def test_planted_n1_culprit_is_diagnosed(sim_db, reports):
    n1 = next(f for f in sim_db.truth["faults"] if f["kind"] == "n1_interference")
    codes = {f["code"] for f in reports[n1["culprit"]].findings}
    assert "IOL001" in codes
