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


#: Per-second bytes and metadata ops of a fio job (1 GB, O_DIRECT, then `rm`) on the mini
#: cluster's throttled disk: three runs alone, then one beside an N-1 writer (CI run of
#: 2026-11-27). The edges carry fio's opens, /sys status reads and the unlink.
_FIO_ALONE = [
    ([540, 79861343] + [99000392] * 9 + [28441000, 0, 0], [17, 775] + [8] * 9 + [3, 3, 0]),
    ([13419093] + [100663414] * 9 + [79916558, 0, 0], [787] + [8] * 10 + [3, 0]),
    ([52702262] + [100627850] * 9 + [40953493, 0, 0], [790] + [8] * 9 + [5, 3, 0]),
]
_FIO_BESIDE_N1 = ([27227226] + [50434994] * 19 + [13820330, 0, 0], [790] + [8] * 19 + [3, 3, 0])


def _fio_phases(data: list[int], md: list[int]) -> list[phases.Phase]:
    x = np.array(data, float)
    found = phases.detect(0.0, np.zeros_like(x), x, np.array(md, float))
    return phases.busy_span(found, 0.0, np.zeros_like(x), x, np.array(md, float))


def test_busy_span_leaves_the_edges_metadata_out():
    alone = [_fio_phases(*run) for run in _FIO_ALONE]
    beside = _fio_phases(*_FIO_BESIDE_N1)
    assert [len(p) for p in [*alone, beside]] == [1, 1, 1, 1]
    # the phases run to the last unlink; their volume took 11 s alone, 21 s beside
    assert [p[0].duration for p in alone] == [13, 12, 12] and beside[0].duration == 22
    assert [p[0].busy_s for p in alone] == [11, 11, 11] and beside[0].busy_s == 21

    def judged(seconds: list[float]) -> bool:
        runs = [
            history.Run(f"r{i}", i, [history.PhasePoint(d, 1e9)]) for i, d in enumerate(seconds)
        ]
        return history.judge(runs)["r3"] == [True]

    # the CI run's stored phases (the first widened to its open..close span) hid the 2x
    # slowdown in the edges' noise: 14 s to 22 s is within DBSCAN's 1.6x
    assert not judged([14, 12, 12, 22])
    assert judged([p[0].busy_s for p in [*alone, beside]])


def test_busy_span_of_a_metadata_phase_counts_its_operations():
    md = np.zeros(40)
    md[5:25] = 5000.0  # a create/stat storm
    md[30] = 2.0  # a close 5 s later: part of the phase, not of the storm's time
    z = np.zeros(40)
    (p,) = phases.busy_span(phases.detect(0.0, z, z, md), 0.0, z, z, md)
    assert p.nbytes == 0 and p.duration == 26 and p.busy_s == 20


# -- interference on the session simulation --------------------------------------------


def _planted(sim_db) -> dict:
    """The truth's clearest N-1 episode (Beacon's criterion): the one whose victims lost
    most to it, with `victim` its most hurt victim."""
    episodes = [f for f in sim_db.truth["faults"] if f["kind"] == "n1_interference"]
    assert episodes, "the session simulation has no N-1 interference to check"
    ep = max(episodes, key=lambda f: sum(f["victims"].values()))
    return {**ep, "victim": max(ep["victims"], key=ep["victims"].__getitem__)}


def test_interference_pairs_match_the_truth(sim_db):
    with sim_db.store() as store:
        found = store.query("SELECT DISTINCT victim, culprit FROM interference").to_pylist()
    score = score_pairs(sim_db.truth["interference"], found)
    # Measured from the latencies real servers report, not from the simulator's own
    # throttling (docs/accuracy.md gives the figures over fresh seeds): the floor here
    # guards against regressions on this seed (0.78 / 0.55 when written).
    assert score.precision >= 0.7, score.false_alarms
    assert score.recall >= 0.5, score.misses


def test_planted_culprit_ranks_first_for_its_victim(sim_db):
    planted = _planted(sim_db)
    with sim_db.store() as store:
        rows = culprits(store, planted["victim"])
    assert rows and rows[0]["job_id"] == planted["culprit"]
    assert rows[0]["feature"] == "n1"


def test_n1_interference_episode_matches_the_truth(sim_db):
    with sim_db.store() as store:
        episodes = store.query(
            "SELECT * FROM anomalies WHERE kind = 'n1_interference' AND detector = 'interference'"
        ).to_pylist()
    truth = [f for f in sim_db.truth["faults"] if f["kind"] == "n1_interference"]
    score = score_episodes(truth, episodes)["n1_interference"]
    # Beacon's criterion on both sides; the truth counts the simulator's own losses, so
    # culprits near the 10 s / 25 % line fall either side (0.67 / 0.75 when written)
    assert score.precision >= 0.6 and score.recall >= 0.5, (score.misses, score.false_alarms)
    # the clearest one (its victims lost most) is found, with its culprit
    planted = _planted(sim_db)
    mine = [
        json.loads(e["evidence"]) for e in episodes if e["component_id"] == planted["component"]
    ]
    assert planted["culprit"] in {e["culprit"] for e in mine}


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
            # Phases hold (almost) all of the job's bytes: only stray records and the slow
            # tail of a throttled phase (below 2 % of its peak) fall outside.
            moved = by_job[job_id]["r"] + by_job[job_id]["w"]
            assert moved >= 0.99 * (t["read_bytes"] + t["write_bytes"])


def test_cross_layer_bytes_agree(sim_db):
    victim = _planted(sim_db)["victim"]
    with sim_db.store() as store:
        view = crosslayer.layer_series(store, victim)
    t = sim_db.truth["jobs"][victim]
    layers = view["layers"]
    assert _planted(sim_db)["component"] in view["path"]["forwarders"]
    # the tracer, the forwarding daemon's per-client counters of the job's nodes and the
    # OSTs' jobstats all count the job's own bytes (entries are rated from their birth)
    for layer in ("compute", "forwarder", "ost"):
        assert sum(layers[layer]["write_bytes"]) == pytest.approx(t["write_bytes"], rel=1e-6)
        assert sum(layers[layer]["read_bytes"]) == pytest.approx(t["read_bytes"], rel=1e-6)
    assert len(layers["compute"]["write_bytes"]) == view["bins"]


# -- CLI --------------------------------------------------------------------------------


def test_cli_interference_json(sim_db):
    planted = _planted(sim_db)
    res = run_cli("interference", planted["victim"], "--db", str(sim_db.path), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert isinstance(doc["not_assessed"], list)
    rows = doc["culprits"]
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
