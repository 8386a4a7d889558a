"""Per-job diagnosis: wavelet phases, history outliers, interference culprits, cross-layer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from iolens.analyze.jobs import crosslayer, history, phases
from iolens.analyze.jobs.interference import culprits
from iolens.simulate.score import score_episodes, score_pairs
from tests.conftest import run_cli

# -- phases --------------------------------------------------------------------------


def test_wavelet_phases_find_known_boundaries():
    rng = np.random.default_rng(0)
    n = 900
    read, write, md = np.zeros(n), np.zeros(n), np.zeros(n)
    truth = [(100, 160, "w", 1e9), (400, 523, "r", 5e8), (700, 705, "w", 2e9)]
    for a, b, kind, bw in truth:
        x = bw * np.clip(1 + 0.3 * rng.standard_normal(b - a), 0.2, None)
        (write if kind == "w" else read)[a:b] = x
    md[[100, 159]] = 512  # opens and closes at the phase edges
    write[300] = 1e5  # a stray small write and a stray stat: noise, not phases
    md[250] = 3
    found = phases.detect(1_000.0, read, write, md)
    assert len(found) == len(truth)
    for p, (a, b, kind, _) in zip(found, truth, strict=True):
        assert abs(p.start - (1_000 + a)) <= 1 and abs(p.end - (1_000 + b)) <= 1
        moved = write[a:b].sum() if kind == "w" else read[a:b].sum()
        assert p.nbytes == pytest.approx(moved, rel=1e-9)
        assert p.bw == pytest.approx(p.nbytes / p.duration)


def test_throttled_phase_is_joined_by_its_open_close_span():
    parts = [
        phases.Phase(0, 10, 0, 5, 0),
        phases.Phase(60, 70, 0, 5, 0),
        phases.Phase(200, 210, 0, 9, 0),
    ]
    joined = phases.merge_within(parts, [(0, 80), (195, 215)])
    assert [(p.start, p.end, p.write_bytes) for p in joined] == [(0, 70, 10), (200, 210, 9)]


def test_no_activity_no_phase():
    z = np.zeros(50)
    assert phases.detect(0.0, z, z, z) == []


# -- history ---------------------------------------------------------------------------


def _run(rng: np.random.Generator, job: str, start: float, slow: float = 1.0) -> history.Run:
    jitter = rng.uniform(0.85, 1.15, 3)
    return history.Run(
        job,
        start,
        [
            history.PhasePoint(60 * jitter[0] * slow, 8e9),
            history.PhasePoint(120 * jitter[1], 16e9),
            history.PhasePoint(30 * jitter[2], 2e9),
        ],
    )


def test_dbscan_flags_a_planted_outlier_run():
    rng = np.random.default_rng(7)
    runs = [_run(rng, f"j{i}", float(i)) for i in range(8)]
    runs.append(_run(rng, "slow", 100.0, slow=5.0))  # first phase 5x longer, same volume
    runs.append(_run(rng, "normal", 101.0))
    verdict = history.judge(runs)
    assert verdict["slow"] == [True, False, False]
    assert verdict["normal"] == [False, False, False]
    # The first runs have no history to be judged against.
    assert all(not any(verdict[f"j{i}"]) for i in range(history.MIN_RUNS))


# -- interference on the session simulation --------------------------------------------


def _planted(sim_db) -> dict:
    return next(f for f in sim_db.truth["faults"] if f["kind"] == "n1_interference")


def test_interference_pairs_match_the_truth(sim_db):
    with sim_db.store() as store:
        found = store.query("SELECT DISTINCT victim, culprit FROM interference").to_pylist()
    score = score_pairs(sim_db.truth["interference"], found)
    assert score.precision >= 0.9, score.false_alarms
    assert score.recall >= 0.9, score.misses


def test_planted_culprit_ranks_first_for_its_victim(sim_db):
    planted = _planted(sim_db)
    with sim_db.store() as store:
        rows = culprits(store, planted["victim"])
    assert rows and rows[0]["job_id"] == planted["culprit"]
    assert rows[0]["feature"] == "n1" and rows[0]["component"] == planted["component"]


def test_n1_interference_episode_matches_the_truth(sim_db):
    with sim_db.store() as store:
        episodes = store.query(
            "SELECT * FROM anomalies WHERE kind = 'n1_interference' AND detector = 'interference'"
        ).to_pylist()
    truth = [f for f in sim_db.truth["faults"] if f["kind"] == "n1_interference"]
    score = score_episodes(truth, episodes)["n1_interference"]
    assert score.precision >= 0.9 and score.recall == 1.0
    evidence = json.loads(episodes[0]["evidence"])
    assert evidence["culprit"] == _planted(sim_db)["culprit"]


def test_phases_stored_for_every_job_with_io(sim_db):
    with sim_db.store() as store:
        rows = store.query(
            "SELECT job_id, sum(read_bytes) AS r, sum(write_bytes) AS w FROM job_phases "
            "GROUP BY job_id"
        ).to_pylist()
    by_job = {r["job_id"]: r for r in rows}
    for job_id, t in sim_db.truth["jobs"].items():
        if t["read_bytes"] + t["write_bytes"] > 0:
            assert job_id in by_job
            # Phases hold (almost) all of the job's bytes: only stray records fall outside.
            moved = by_job[job_id]["r"] + by_job[job_id]["w"]
            assert moved >= 0.99 * (t["read_bytes"] + t["write_bytes"])


def test_cross_layer_bytes_agree(sim_db):
    victim = _planted(sim_db)["victim"]
    with sim_db.store() as store:
        view = crosslayer.layer_series(store, victim)
    t = sim_db.truth["jobs"][victim]
    layers = view["layers"]
    assert view["path"]["forwarders"] == [_planted(sim_db)["component"]]
    for layer in ("compute", "forwarder", "ost"):
        assert sum(layers[layer]["write_bytes"]) == pytest.approx(t["write_bytes"], rel=1e-6)
    assert len(layers["compute"]["write_bytes"]) == view["bins"]


# -- CLI --------------------------------------------------------------------------------


def test_cli_interference_json(sim_db):
    planted = _planted(sim_db)
    res = run_cli("interference", planted["victim"], "--db", str(sim_db.path), "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert rows[0]["job_id"] == planted["culprit"]
    for r in rows:
        assert {"job_id", "component", "feature", "delay_s", "start", "end", "score"} <= set(r)
        assert isinstance(r["evidence"], dict)
    human = run_cli("interference", planted["victim"], "--db", str(sim_db.path))
    assert human.returncode == 0 and planted["culprit"] in human.stdout


def test_cli_interference_unknown_job(sim_db):
    res = run_cli("interference", "424242", "--db", str(sim_db.path))
    assert res.returncode == 2 and "job 424242 is not in" in res.stderr


def test_cli_job_json_has_phases_and_titled_findings(sim_db):
    planted = _planted(sim_db)
    res = run_cli("job", planted["culprit"], "--db", str(sim_db.path), "--json")
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["phases"] and {"start", "end", "bw", "anomalous"} <= set(rep["phases"][0])
    assert rep["findings"]
    for f in rep["findings"]:
        assert {"code", "severity", "title", "evidence", "recommendation"} <= set(f)
