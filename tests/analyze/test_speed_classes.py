"""Speed classes (SIOX histogram plug-in): learned cut points, classification, job
profiles, and the client-side evidence the slow-component detectors attach."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from iolens.analyze.components import analyze_components
from iolens.analyze.speed_classes import (
    CLASSES,
    NBINS,
    Histogram,
    bins_of,
    client_speed,
    learn,
    quantiles,
    speed_profile,
)
from iolens.model.schema import CLIENT_IO
from iolens.store import DuckDBStore

T0 = datetime(2025, 1, 6, 8, 0)


def _rows(job: str, op: str, size: int, per_call_ns: np.ndarray, calls: int = 1) -> list[dict]:
    return [
        {
            "job_id": job,
            "node": "n1",
            "rank": 0,
            "pid": 1,
            "layer": "posix",
            "op": op,
            "file_id": 1,
            "offset": 0 if size else -1,
            "size": size,
            "stride": size,
            "count": calls,
            "t_start": T0 + timedelta(seconds=i),
            "t_end": T0 + timedelta(seconds=i + 1),
            "dur_ns": int(d * calls),
        }
        for i, d in enumerate(per_call_ns)
    ]


@pytest.fixture()
def store(tmp_path: Path) -> DuckDBStore:
    """History: 4 KiB reads log-uniform over 10 us .. 1 ms, 4 MiB reads over 1 .. 10 ms,
    stats all at exactly 50 us (a source that rounds)."""
    s = DuckDBStore(tmp_path / "speed.duckdb")
    rng = np.random.default_rng(1)
    rows = _rows("hist", "read", 4096, 10 ** rng.uniform(4, 6, 2000), calls=3)
    rows += _rows("hist", "read", 4 << 20, 10 ** rng.uniform(6, 7, 500))
    rows += _rows("hist", "stat", 0, np.full(300, 50_000.0))
    s.append("client_io", pa.Table.from_pylist(rows, schema=CLIENT_IO))
    return s


def test_histogram_quantiles_are_log_interpolated():
    calls = np.zeros(NBINS)
    x = 10 ** np.linspace(3, 5, 10_001)  # 1 us .. 100 us, log-uniform
    np.add.at(calls, bins_of(x), 1)
    q = quantiles(calls, (0.05, 0.5, 0.95))
    assert q == pytest.approx(10 ** np.array([3.1, 4.0, 4.9]), rel=0.03)
    h = Histogram(calls, 10_001)
    # a call's rank is about (log10(ns) - 3) / 2 here
    got = h.classify(np.array([500.0, 1.1e3, 2.5e3, 1e4, 4e4, 9e4, 1e7]))
    assert [CLASSES[c] for c in got] == [
        "very fast",  # below everything seen
        "very fast",
        "fast",
        "normal",
        "slow",
        "very slow",
        "very slow",  # above everything seen
    ]


def test_learned_cuts_classify_new_calls(store):
    model = learn(store)
    cuts = model.to_dict()["read"]["cuts_us"]
    assert cuts["p5"] < cuts["p25"] < cuts["p75"] < cuts["p95"]
    codes = model.classify(
        ["read"] * 5 + ["read"] * 2,
        np.array([4096] * 5 + [4 << 20] * 2),
        np.array([1e3, 13_000, 100_000, 600_000, 5e6, 2e6, 5e8]),
    )
    assert [CLASSES[c] for c in codes] == [
        "very fast",
        "fast",
        "normal",
        "slow",
        "very slow",
        "normal",  # 2 ms is normal for a 4 MiB read (its own size class), not for 4 KiB
        "very slow",
    ]


def test_ties_are_normal_not_extreme(store):
    model = learn(store)
    codes = model.classify(["stat", "stat", "stat"], np.zeros(3), np.array([50_000.0, 1e3, 1e7]))
    assert [CLASSES[c] for c in codes] == ["normal", "very fast", "very slow"]
    assert list(model.classify(["mkdir"], np.zeros(1), np.array([1.0]))) == [-1]  # never seen


def test_speed_profile_of_a_slow_job(store):
    slow = _rows("slow", "read", 4096, np.full(100, 5e6))  # 5 ms per 4 KiB read
    slow += _rows("slow", "stat", 0, np.full(100, 50_000.0))
    store.append("client_io", pa.Table.from_pylist(slow, schema=CLIENT_IO))
    p = speed_profile(store, "slow")
    assert p["calls"] == 200 and p["unknown"] == 0
    assert p["classes"]["very slow"] == pytest.approx(0.5)
    assert p["by_op"]["read"]["classes"]["very slow"] == 1.0
    assert p["by_op"]["stat"]["classes"]["normal"] == 1.0
    assert p["very_slow_ratio"] == pytest.approx(10.0)
    assert sum(p["classes"].values()) == pytest.approx(1.0)
    # the history alone: shares close to the class definitions
    h = speed_profile(store, "hist", model=learn(store))
    read = h["by_op"]["read"]["classes"]
    assert read["very slow"] == pytest.approx(0.05, abs=0.03)
    assert read["normal"] == pytest.approx(0.5, abs=0.08)


# -- the simulation: a slow forwarder seen from the clients ---------------------------------


@pytest.fixture(scope="module")
def analyzed(sim_db, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("speed") / "iolens.duckdb"
    shutil.copy(sim_db.path, path)
    with DuckDBStore(path) as s:
        analyze_components(s)
    return path


def _fault(sim_db, kind: str) -> tuple[str, datetime, datetime]:
    f = next(f for f in sim_db.truth["faults"] if f["kind"] == kind)

    def t(x: str) -> datetime:
        return datetime.fromisoformat(x.replace("Z", "+00:00")).replace(tzinfo=None)

    return f["component"], t(f["start"]), t(f["end"])


def _shares_are_consistent(speed: dict) -> None:
    assert speed["calls"] > 0
    for k in ("slow_share", "very_slow_share"):
        assert 0.0 <= speed[k] <= 1.0
    assert speed["very_slow_share"] <= speed["slow_share"] + 1e-9
    # seen_by_clients is what the shares say, never more
    before = speed["slow_share_before"]
    if before is not None and speed["seen_by_clients"]:
        assert speed["slow_share"] >= 2 * before or speed["very_slow_share"] >= 3 * (
            speed["very_slow_share_before"] or 0.0
        )


def test_slow_forwarder_client_evidence_is_computed(sim_db):
    """The clients' side of a slow forwarder, on the simulation. The simulator's per-call
    durations are coarse (busy seconds over calls, whole processes throttled together), so
    this checks the evidence is computed and consistent, not that the simulated clients
    show the fault: `test_speed_profile_of_a_slow_job` checks the classes on known calls."""
    fwd, start, end = _fault(sim_db, "slow_forwarder")
    with sim_db.store() as s:
        model = learn(s)
        faulty = client_speed(s, model, "forwarder", fwd, start, end)
    assert faulty is not None
    _shares_are_consistent(faulty)
    assert faulty["jobs"] and all(j["calls"] > 0 for j in faulty["jobs"])


def test_slow_component_episodes_carry_client_speed(sim_db, analyzed):
    with DuckDBStore(analyzed) as s:
        rows = s.query(
            "SELECT kind, component_id, evidence FROM anomalies "
            "WHERE kind IN ('slow_ost', 'slow_forwarder')"
        ).to_pylist()
    ev = {(r["kind"], r["component_id"]): json.loads(r["evidence"]) for r in rows}
    for kind in ("slow_forwarder", "slow_ost"):
        comp, _s, _e = _fault(sim_db, kind)
        # the evidence is there, and does not claim what the data cannot show
        _shares_are_consistent(ev[(kind, comp)]["client_speed"])


def test_profiles_of_simulated_jobs_are_shares(sim_db):
    with sim_db.store() as s:
        model = learn(s)
        for job_id in list(sim_db.truth["jobs"])[:5]:
            p = speed_profile(s, job_id, model)
            if p["calls"]:
                assert sum(p["classes"].values()) == pytest.approx(1.0, abs=1e-3)
