"""Component anomaly detectors: the simulator's injected faults, and hand-built stores.

The simulation tests check every injected fault of the detectors' kinds is found on the
right component at an overlapping time, and nothing else of those kinds (the scorer's
own matching, `iolens.simulate.score`). The synthetic tests build a tiny store per
detector with one abnormal component among normal ones, and the same store all normal.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from iolens.analyze.components import DETECTORS, analyze_components, analyzed_until
from iolens.analyze.components.base import Detector
from iolens.analyze.components.low_bandwidth import LowBandwidth
from iolens.model.schema import COMPONENTS, FORWARDING, JOBS, SERVER_SAMPLES
from iolens.simulate.score import score_episodes
from iolens.store import DuckDBStore
from tests.conftest import run_cli

KINDS = ("slow_ost", "slow_forwarder", "metadata_storm", "cache_thrashing")
T0 = datetime(2025, 1, 6, 8, 0)


# -- the simulation ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def analyzed(sim_db, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """A copy of the session simulation with the component detectors run on it."""
    path = tmp_path_factory.mktemp("components") / "iolens.duckdb"
    shutil.copy(sim_db.path, path)
    with DuckDBStore(path) as store:
        analyze_components(store)
        rows = store.query("SELECT * FROM anomalies WHERE detector != 'interference'").to_pylist()
    return path, rows


def test_every_injected_fault_is_found_and_nothing_else(sim_db, analyzed):
    _path, rows = analyzed
    truth = [f for f in sim_db.truth["faults"] if f["kind"] in KINDS]
    assert {f["kind"] for f in truth} >= {"slow_ost", "slow_forwarder", "metadata_storm"}
    mine = [r for r in rows if r["kind"] in KINDS]
    scores = score_episodes(truth, mine)
    for kind in KINDS:
        s = scores[kind]
        assert not s.misses, f"{kind}: missed {s.misses}"
        assert not s.false_alarms, f"{kind}: false alarms {s.false_alarms}"
    assert not [r for r in rows if r["kind"] == "low_bandwidth"]


def test_episodes_carry_evidence(sim_db, analyzed):
    _path, rows = analyzed
    for r in rows:
        ev = json.loads(r["evidence"])
        assert ev["summary"] and r["detector"] in {d().name for d in DETECTORS}
        assert r["severity"] in {"info", "warning", "critical"}
    storm = next(r for r in rows if r["kind"] == "metadata_storm")
    ev = json.loads(storm["evidence"])
    source = next(f["source"] for f in sim_db.truth["faults"] if f["kind"] == "metadata_storm")
    assert ev["source_share"] >= 0.5 and source in ev["source_candidates"]
    thrash = [r for r in rows if r["kind"] == "cache_thrashing"]
    culprits = {f["job_id"] for f in sim_db.truth["faults"] if f["kind"] == "cache_thrashing"}
    named = {j["job_id"] for r in thrash for j in json.loads(r["evidence"])["jobs"]}
    assert culprits & named
    for r in rows:
        if r["kind"] in ("slow_ost", "slow_forwarder"):
            assert json.loads(r["evidence"])["verdict"] in ("transient", "persistent")


def test_rerun_replaces_instead_of_duplicating(analyzed):
    path, rows = analyzed
    with DuckDBStore(path) as store:
        assert analyze_components(store) == len(rows)
        again = store.query(
            "SELECT kind, component_id, start FROM anomalies WHERE detector != 'interference'"
        ).to_pylist()
        assert len(again) == len(rows)
        assert analyzed_until(store) is not None


def test_cli_anomalies_json(sim_db, tmp_path):
    path = tmp_path / "cli.duckdb"
    shutil.copy(sim_db.path, path)  # not analysed yet: the command runs the detectors
    res = run_cli("anomalies", "--db", str(path), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert isinstance(doc["not_assessed"], list)
    rows = doc["episodes"]
    for r in rows:
        assert set(r) >= {
            "kind",
            "component",
            "component_kind",
            "start",
            "end",
            "severity",
            "evidence",
            "detector",
        }
        assert isinstance(r["evidence"], dict)
    truth = [f for f in sim_db.truth["faults"] if f["kind"] in KINDS]
    scores = score_episodes(truth, [r for r in rows if r["kind"] in KINDS])
    assert all(not scores[k].misses and not scores[k].false_alarms for k in KINDS)
    slow = next(f for f in truth if f["kind"] == "slow_ost")
    res = run_cli("anomalies", "--db", str(path), "--json", "--kind", "slow_ost")
    assert {r["component"] for r in json.loads(res.stdout)["episodes"]} == {slow["component"]}
    res = run_cli("anomalies", "--db", str(path), "--component", slow["component"])
    assert res.returncode == 0 and "slow_ost" in res.stdout
    res = run_cli("anomalies", "--db", str(path), "--since", "yesterday")
    assert res.returncode == 2 and "--since" in res.stderr


# -- hand-built stores ------------------------------------------------------------------------


def sample(t: int, kind: str, comp: str, job: str | None = None, **v: float) -> dict[str, Any]:
    """One 10-second sample ending `t` seconds after T0."""
    return {
        "ts": T0 + timedelta(seconds=t),
        "interval_s": 10.0,
        "kind": kind,
        "component_id": comp,
        "job_id": job,
        **v,
    }


def make_store(
    tmp_path: Path,
    components: list[tuple[str, str, float | None, float | None]],
    samples: list[dict[str, Any]],
    jobs: Sequence[dict[str, Any]] = (),
    forwarding: Sequence[tuple[str, str]] = (),
) -> DuckDBStore:
    store = DuckDBStore(tmp_path / "hand.duckdb")
    store.append(
        "components",
        pa.Table.from_pylist(
            [
                {"component_id": c, "kind": k, "parent": None, "peak_bw": bw, "peak_ops": ops}
                for c, k, bw, ops in components
            ],
            schema=COMPONENTS,
        ),
    )
    store.append("server_samples", pa.Table.from_pylist(samples, schema=SERVER_SAMPLES))
    if jobs:
        store.append("jobs", pa.Table.from_pylist(list(jobs), schema=JOBS))
    if forwarding:
        store.append(
            "forwarding",
            pa.Table.from_pylist(
                [{"compute_node": n, "forwarder": f} for n, f in forwarding], schema=FORWARDING
            ),
        )
    return store


def episodes(store: DuckDBStore, *detectors: Detector) -> list[dict[str, Any]]:
    analyze_components(store, detectors=list(detectors) if detectors else None)
    return store.query("SELECT * FROM anomalies ORDER BY start").to_pylist()


def server_rows(kind: str, comp: str, minutes: int, slow: range = range(0), **base: float):
    """Busy component samples every 10 s; during `slow` minutes service is 10x and work piles up."""
    rows = []
    for t in range(10, minutes * 60 + 1, 10):
        s = (t - 1) // 60 in slow
        rows.append(
            sample(
                t,
                kind,
                comp,
                read_bytes=int(base.get("bw", 2e8) * 10 * (0.1 if s else 1)),
                write_bytes=0,
                read_ops=int(base.get("ops", 200) * 10 * (0.1 if s else 1)),
                write_ops=0,
                md_ops=0,
                service_us=base.get("svc", 2000.0) * (10 if s else 1),
                wait_us=50_000.0 if s else 500.0,
                queue_len=base.get("queue", 0.5) * (100 if s else 1),
                active_threads=16.0 if s else 4.0,
            )
        )
    return rows


OSTS = [f"lustre-OST{i:04x}" for i in range(6)]


@pytest.mark.parametrize("slow", [True, False])
def test_slow_ost_among_peers(tmp_path, slow):
    rows = []
    for i, ost in enumerate(OSTS):
        rows += server_rows("ost", ost, 90, range(30, 60) if slow and i == 3 else range(0))
    comps = [(o, "ost", 6e8, 3e4) for o in OSTS]
    with make_store(tmp_path, comps, rows) as store:
        found = [e for e in episodes(store) if e["kind"] == "slow_ost"]
    if not slow:
        assert found == []
        return
    assert [e["component_id"] for e in found] == [OSTS[3]]
    e = found[0]
    assert e["start"] == T0 + timedelta(minutes=30) and e["end"] == T0 + timedelta(minutes=60)
    ev = json.loads(e["evidence"])
    assert ev["baseline"] == "peers" and ev["slowdown"] == pytest.approx(10)


def test_slow_forwarder_without_peers_uses_history(tmp_path):
    rows = server_rows("forwarder", "fwd001", 120, range(40, 80), svc=1000.0)
    with make_store(tmp_path, [("fwd001", "forwarder", 2.5e9, 6e4)], rows) as store:
        found = episodes(store)
    assert [(e["kind"], e["component_id"]) for e in found] == [("slow_forwarder", "fwd001")]
    assert json.loads(found[0]["evidence"])["baseline"] == "history"


def test_clogged_forwarder_is_not_slow(tmp_path):
    """N-1 requests pile up in the queue (Beacon Table 5) but each is served at normal speed."""
    rows = server_rows("forwarder", "fwd001", 120, svc=1000.0)
    for r in rows[240:480]:
        r.update(queue_len=300.0, wait_us=90_000.0, active_threads=16.0)
    with make_store(tmp_path, [("fwd001", "forwarder", 2.5e9, 6e4)], rows) as store:
        assert episodes(store) == []


@pytest.mark.parametrize(
    ("minutes", "queue", "expected"),
    [(70, 5.0, 1), (50, 5.0, 0), (70, 0.0, 0)],
    ids=["70min-with-demand", "too-short", "idle"],
)
def test_low_bandwidth_rule(tmp_path, minutes, queue, expected):
    rows = []
    for t in range(10, 100 * 60 + 1, 10):
        low = 10 <= (t - 1) // 60 < 10 + minutes
        rows.append(
            sample(
                t,
                "ost",
                "ost0",
                read_bytes=int((0.05 if low else 0.6) * 6e8 * 10),
                read_ops=100,
                queue_len=queue if low else 2.0,
            )
        )
    with make_store(tmp_path, [("ost0", "ost", 6e8, 3e4)], rows) as store:
        found = episodes(store, LowBandwidth())
    assert len(found) == expected
    if expected:
        e = found[0]
        assert e["kind"] == "low_bandwidth" and e["component_id"] == "ost0"
        assert (e["end"] - e["start"]) >= timedelta(minutes=60)


def test_window_rerun_keeps_other_windows(tmp_path):
    rows = []
    for i, ost in enumerate(OSTS):
        rows += server_rows("ost", ost, 180, range(20, 40) if i == 1 else range(120, 150))
    # every OST but one is slow late: they are each other's peers, so only OST1 early is odd
    comps = [(o, "ost", 6e8, 3e4) for o in OSTS]
    with make_store(tmp_path, comps, rows) as store:
        first = episodes(store)
        n = analyze_components(store, T0 + timedelta(minutes=100), T0 + timedelta(minutes=180))
        after = store.query("SELECT * FROM anomalies ORDER BY start").to_pylist()
    early = [e for e in first if e["start"] < T0 + timedelta(minutes=60)]
    assert [e["component_id"] for e in early] == [OSTS[1]]
    assert [e["component_id"] for e in after] == [e["component_id"] for e in first]
    assert n == len(first) - len(early)
