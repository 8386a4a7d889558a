"""`iolens load` on the seeded simulation, and `iolens analyze --since`."""

from __future__ import annotations

import json
import shutil
from datetime import datetime

import pytest

from iolens.analyze.components import DETECTORS
from iolens.analyze.jobs.interference import DETECTOR as INTERFERENCE
from iolens.store import DuckDBStore
from tests.conftest import run_cli


def test_load_json_has_every_kind_and_adds_up(sim_db):
    res = run_cli("load", "--db", str(sim_db.path), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert set(doc["kinds"]) == {"forwarder", "ost", "mds"}
    for kind in doc["kinds"].values():
        assert sum(kind["shares"].values()) == pytest.approx(1.0)
        assert sum(kind["counts"].values()) == len(kind["cells"])
    fwd = doc["forwarder_imbalance"]
    assert fwd["hours"] == len(doc["kinds"]["forwarder"]["hours"])
    mds = doc["mds"]
    assert mds["job_ops"] + mds["other_ops"] == mds["total_ops"] > 0
    assert max(b["other_share"] or 0 for b in mds["bins"]) > 0.9  # the login-node storm


def test_load_one_kind_and_a_window(sim_db):
    first = json.loads(run_cli("load", "--db", str(sim_db.path), "--json").stdout)
    hour = first["kinds"]["ost"]["hours"][0]
    res = run_cli(
        "load", "--db", str(sim_db.path), "--kind", "ost", "--since", hour,
        "--until", hour.replace(":00:00Z", ":59:59Z"), "--json",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert list(doc["kinds"]) == ["ost"] and "mds" not in doc
    assert "forwarder_imbalance" not in doc
    assert doc["kinds"]["ost"]["hours"] == [hour]


def test_load_human_output(sim_db):
    res = run_cli("load", "--db", str(sim_db.path))
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    for part in ("Peak load by hour", "Most loaded: forwarder", "Forwarder imbalance", "MDS:"):
        assert part in text, part
    assert "other clients" in text and "MDS load by hour" in text


def test_load_bad_options_are_one_line_errors(sim_db, tmp_path):
    res = run_cli("load", "--db", str(sim_db.path), "--kind", "switch")
    assert res.returncode == 2 and "switch" in res.stderr
    res = run_cli("load", "--db", str(sim_db.path), "--since", "yesterday")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    res = run_cli("load", "--db", str(tmp_path / "none.duckdb"))
    assert res.returncode == 2 and res.stderr.startswith("error:")


def test_empty_store_says_so(tmp_path):
    db = tmp_path / "empty.duckdb"
    DuckDBStore(db).close()
    res = run_cli("load", "--db", str(db))
    assert res.returncode == 0 and "No load samples" in res.stdout
    text = " ".join(res.stdout.split())
    for source in ("run/iofwd/<svc>/stats", "route_bytes", "obdfilter/<ost>/stats", "md_stats"):
        assert source in text, source  # each kind says what it was not given


def test_analyze_since_runs_jobs_ended_since_and_the_components(sim_db, tmp_path):
    """`anomalies` counts the component detectors' episodes (cli.md). The jobs' interference
    analysis stores its `n1_interference` episodes in the same table; those it stored for
    the jobs of this window must be N-1 culprits the simulator's truth lists."""
    db = tmp_path / "copy.duckdb"
    shutil.copy(sim_db.path, db)
    since = "2025-03-03T09:00:00"
    with DuckDBStore(db, create=False) as store:
        ended = set(
            store.query('SELECT job_id FROM jobs WHERE "end" >= ?', [datetime.fromisoformat(since)])
            .column("job_id")
            .to_pylist()
        )
        store.execute("DELETE FROM anomalies")
    assert 0 < len(ended) < len(sim_db.truth["jobs"])
    res = run_cli("analyze", "--db", str(db), "--since", since, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["jobs"] == len(ended)
    with DuckDBStore(db, create=False) as store:
        stored = store.query(
            "SELECT kind, detector, component_id, evidence FROM anomalies"
        ).to_pylist()
    detectors = {d().name for d in DETECTORS}
    by_detectors = [r for r in stored if r["detector"] in detectors]
    assert len(by_detectors) == doc["anomalies"]
    # The storm starts after `since` (truth): the component run must have found it.
    (storm,) = [f for f in sim_db.truth["faults"] if f["kind"] == "metadata_storm"]
    assert storm["start"] > since
    assert "metadata_storm" in {r["kind"] for r in by_detectors}
    truth_n1 = {
        (f["component"], f["culprit"])
        for f in sim_db.truth["faults"]
        if f["kind"] == "n1_interference"
    }
    for r in stored:
        if r["detector"] in detectors:
            continue
        assert (r["detector"], r["kind"]) == (INTERFERENCE, "n1_interference")
        ev = json.loads(r["evidence"])
        assert (r["component_id"], ev["culprit"]) in truth_n1, ev
    both = run_cli("analyze", "100001", "--db", str(db), "--since", since)
    assert both.returncode == 2 and "not both" in both.stderr
