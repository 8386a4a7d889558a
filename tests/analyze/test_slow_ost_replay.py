"""Golden replays: a fail-slow OST written into real Lustre captures, found end to end.

Each case writes two or three hours of one-minute sample folders from a real OSS capture
with ordinary striped traffic and mild noise (`oss_replay.write_replay`), one OST twice as
slow for 30 or 60 minutes (its latency sums grow twice as fast for the same RPCs), then
runs what a site runs: `iolens import lustre DIR --host H` (the real agent sources) and
`iolens anomalies --json`. Each asserts exactly one `slow_ost` episode, on the right OST,
starting and ending within a few minutes of the written fault; the healthy control of the
same capture and seed gives none.

- Lustre 2.15 (LLNL `lflood`, 4 OSTs, osd-zfs, `[usecs]`): GPL, read from ../shared/data
  and skipped when absent;
- Lustre 2.14 (DDN AI400X2, 2 OSTs, ldiskfs, `[usecs]`, job_stats from the DDN jobstats
  capture): too few OSTs for peers, so the OST's own history is the reference;
- Lustre 2.10 (HPE, 4 OSTs, osd-zfs, no `[usecs]`): the brw_stats I/O time histogram is
  the only latency; osd-zfs times reads only, so the traffic reads. A write-only variant
  has no latency at all and must say so (`not_assessed`), not stay silent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from iolens.analyze.components.slow_ost import IO_TIME, USECS
from tests.analyze.oss_replay import Fault, write_replay
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parents[1] / "shared" / "data"
DDN = ROOT / "cases" / "collect" / "lustre_oss" / "ddn-2.14-ai400x2"
DDN_JOBS = ROOT / "cases/collect/lustre_oss/ddn-2.14-jobstats/proc/fs/lustre/obdfilter"
HPE = ROOT / "cases" / "analyze" / "slow_ost" / "hpe-2.10.1-4osts"
LLNL = SHARED / "lustre-procfs-llnl-lmt" / "lustre-2.15.4_1"
START = datetime(2024, 3, 1, 12, 0)
SLACK = timedelta(minutes=4)


@dataclass(frozen=True)
class Case:
    capture: Path
    fault: Fault
    source: str  # the latency field the episode must name
    baseline: str  # peers or history
    options: tuple[tuple[str, Any], ...] = ()
    minutes: int = 120


CASES = {
    "lustre-2.15-llnl": Case(LLNL, Fault("lflood-OST0002", 50, 30, 2.0), USECS, "peers"),
    "lustre-2.14-ddn": Case(
        DDN,
        Fault("ai400x2-OST0001", 60, 60, 2.0),
        USECS,
        "history",
        (("job_stats_from", DDN_JOBS / "es01a-OST0001" / "job_stats"),),
        minutes=180,  # the own-history reference needs more normal minutes around the fault
    ),
    "lustre-2.10-hpe": Case(
        HPE,
        Fault("lustrefs-OST0004", 45, 30, 2.0),
        IO_TIME,
        "peers",
        (("rpc_bytes", 4 << 20), ("read_rpcs", 600.0), ("write_rpcs", 200.0), ("read_us", 8000.0)),
        minutes=180,  # power-of-two buckets add noise and correlation: a longer history
    ),
}


def replay(tmp: Path, case: Case, fault: Fault | None, **override: Any) -> dict[str, Any]:
    """Write the folders, import them, return `iolens anomalies --json`."""
    if not case.capture.exists():
        pytest.skip(f"capture not available: {case.capture}")
    folders, db = tmp / "samples", tmp / "replay.duckdb"
    options = dict(case.options) | override
    write_replay(
        case.capture, folders, start=START, minutes=case.minutes, seed=7, fault=fault, **options
    )
    res = run_cli("import", "lustre", str(folders), "--host", "oss1", "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["source_failures"] == {}
    res = run_cli("anomalies", "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def slow_osts(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["episodes"] if e["kind"] == "slow_ost"]


def at(minute: int) -> datetime:
    return START + timedelta(minutes=minute)


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.removesuffix("Z"))


@pytest.mark.parametrize("name", list(CASES))
def test_fail_slow_ost_is_one_episode_on_it_over_the_fault(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    f = case.fault
    found = slow_osts(replay(tmp_path, case, f))
    assert [e["component"] for e in found] == [f.ost], found
    e = found[0]
    assert abs(when(e["start"]) - at(f.start)) <= SLACK
    assert e["end"] is not None and abs(when(e["end"]) - at(f.start + f.minutes)) <= SLACK
    ev = e["evidence"]
    assert ev["latency_source"] == case.source and ev["baseline"] == case.baseline
    assert 1.4 <= ev["slowdown"] <= 2.6  # the written 2x, seen through noise
    assert ev["baseline_service_us"] < ev["service_us"]
    assert ev["detect_minutes"] <= f.minutes
    assert e["severity"] == "warning"
    if "job_stats_from" in dict(case.options):
        jobs = ev["jobs"]
        assert {j["job_id"] for j in jobs} >= {"4001", "4002", "4003"}
        assert all(j["service_us"] > 0 for j in jobs if j["job_id"].startswith("400"))


@pytest.mark.parametrize("name", list(CASES))
def test_healthy_control_gives_nothing(tmp_path: Path, name: str) -> None:
    doc = replay(tmp_path, CASES[name], None)
    assert slow_osts(doc) == []
    assert not [g for g in doc["not_assessed"] if g["detector"] == "slow_ost"]


def test_zfs_writes_without_usecs_are_not_assessed(tmp_path: Path) -> None:
    """2.10 on osd-zfs, writes only: no [usecs] and an empty I/O time histogram. The
    detector cannot judge these OSTs and says so, naming them and what is missing."""
    case = CASES["lustre-2.10-hpe"]
    doc = replay(tmp_path, case, case.fault, read_rpcs=0.0, write_rpcs=600.0)
    assert slow_osts(doc) == []
    gaps = [g for g in doc["not_assessed"] if g["detector"] == "slow_ost"]
    assert len(gaps) == 1
    assert set(gaps[0]["components"]) == {f"lustrefs-OST000{i}" for i in (0, 2, 4, 6)}
    assert "[usecs]" in gaps[0]["missing"] and gaps[0]["remedy"]
