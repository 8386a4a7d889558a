"""Causal chains, severity caps, merged repeats and the activity-weighted covering set
(issue 21), on real Darshan logs.

- MACSio (darshan package example, 16 ranks, HDF5 over MPI-IO): its 142 KiB text log
  `/tmp/test/macsio-log.log` is written from the first second to the last beside the
  90 MiB `macsio_hdf5_000.h5`; the greedy cover gave the text log 97 % of the I/O time.
  It also has small writes (DP06) and small writes to shared files (DP16), one cause.
- stdio_no_posix: 151 B written through STDIO, "critical" before.
- dlio_logs: one job (3116902) of 24 single-process logs; the same findings 24 times.
- partial_data_dxt (0 % collective) and example.darshan (16,384 of 16,402 MPI-IO writes
  collective): advice to go collective holds on the first, contradicts the second.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iolens.analyze.darshan import chains, diagnose, diagnose_job, rule_findings
from iolens.analyze.darshan.drishti.collective import NoCollectiveReads
from iolens.analyze.darshan.rule import RuleContext
from iolens.analyze.darshan.zoomin import cover_files, covering_set, sweep
from iolens.analyze.darshan.zoomin.covering import intervals, weighted_cover
from tests.analyze.darshan.zoomin_logs import LOGS, example, job, shared
from tests.conftest import run_cli

MACSIO = "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"
STDIO = (
    "darshan-logs",
    "stdio_no_posix",
    "laytonjb_test1_id28730_6-7-43012-2131301613401632697_1.darshan",
)
PARTIAL_DXT = ("darshan-logs", "partial_data_dxt", "partial_data_dxt.darshan")


def test_a_small_long_lived_file_does_not_take_the_cover() -> None:
    j = job(example(MACSIO))
    files = cover_files(j, covering_set(j))
    top = files[0]
    assert top["path"] == "/tmp/test/macsio_hdf5_000.h5" and top["bytes"] > 90 << 20
    text = next(f for f in files if f["path"] == "/tmp/test/macsio-log.log")
    assert text["bytes"] < 200 << 10 and text["cover_share"] < 0.5
    # the same union (the job's I/O time) as the paper's minimum cover
    ivs = intervals(j)
    assert sum(c.covered for c in weighted_cover(ivs)) == pytest.approx(
        sum(c.covered for c in sweep(ivs))
    )


def test_weighted_cover_keeps_the_union_on_every_shared_log() -> None:
    logs = sorted((LOGS).rglob("*.darshan")) if LOGS.is_dir() else []
    if not logs:
        pytest.skip("shared logs not available")
    for p in logs:
        try:
            j = job(p)
        except Exception:
            continue
        ivs = intervals(j)
        got = sum(c.covered for c in weighted_cover(ivs))
        assert got == pytest.approx(sum(c.covered for c in sweep(ivs)), rel=1e-9, abs=1e-9), p


def test_effects_point_to_their_root_cause() -> None:
    j = job(example(MACSIO))
    raw = {f.code: f for f in rule_findings(j)}
    assert {"DP06", "DP16"} <= set(raw) and "collective" in raw["DP16"].recommendation
    found = {f.code: f for f in diagnose(j)}
    small, shared_small = found["DP06"], found["DP16"]
    assert "DP16" in (small.explains or []) and "DP06" in (shared_small.explained_by or [])
    assert shared_small.evidence["root_cause"] == "DP06"
    assert shared_small.evidence["explained_by"] == ["DP06"]
    assert shared_small.recommendation.startswith("Explained by DP06")
    assert shared_small.gain is None
    assert "`" in small.recommendation  # the root keeps its concrete advice
    json.dumps([f.evidence for f in found.values()])


def test_collective_advice_is_dropped_on_a_collective_job() -> None:
    indep = job(shared(*PARTIAL_DXT))
    advice = NoCollectiveReads().check(indep, RuleContext())
    assert advice is not None and advice.code == "DM02"
    assert chains.collective_share(indep) == 0.0
    assert [f.code for f in chains.contradictions([advice], indep)] == ["DM02"]
    coll = job(example("example.darshan"))
    share = chains.collective_share(coll)
    assert share is not None and share > 0.99
    assert chains.contradictions([advice], coll) == []


def test_stdio_bytes_are_under_the_noise_floor() -> None:
    j = job(shared(*STDIO))
    before = {f.code: f.severity for f in rule_findings(j)}
    assert before["DS01"] == "critical"
    ds01 = next(f for f in diagnose(j) if f.code == "DS01")
    assert ds01.severity == "info" and ds01.evidence["rule_severity"] == "critical"
    assert "noise floor" in ds01.evidence["severity_capped"]
    floors = {"NOISE_FLOOR_BYTES": 100, "NOISE_FLOOR_IO_SHARE": 0.0}  # a site's own
    ctx = RuleContext(extra={"thresholds": floors})
    assert next(f for f in diagnose(j, ctx) if f.code == "DS01").severity == "critical"


def _dlio() -> list[Path]:
    d = LOGS / "dlio_logs"
    logs = sorted(d.glob("*.darshan")) if d.is_dir() else []
    if len(logs) < 24:
        pytest.skip("dlio_logs not available")
    return logs


def test_a_finding_repeated_over_a_jobs_logs_is_one() -> None:
    logs = [job(p) for p in _dlio()]
    assert {j.job_id for j in logs} == {"3116902"}
    raw = [f for j in logs for f in rule_findings(j)]
    assert sum(f.code == "DP09" for f in raw) >= 10
    merged = diagnose_job(logs)
    codes = [f.code for f in merged]
    assert len(codes) == len(set(codes))
    dp09 = next(f for f in merged if f.code == "DP09")
    assert dp09.evidence["occurrences"] == sum(f.code == "DP09" for f in raw)
    # the occurrence kept is the one over the most bytes
    assert dp09.evidence["bytes_read"] == max(
        f.evidence["bytes_read"] for f in raw if f.code == "DP09"
    )


def test_import_stores_one_finding_per_code_of_a_job(tmp_path: Path) -> None:
    _dlio()
    db = str(tmp_path / "d.duckdb")
    res = run_cli("import", "darshan", str(LOGS / "dlio_logs"), "--db", db, "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["findings_merged"] > 100
    from iolens.store import DuckDBStore

    with DuckDBStore(Path(db), create=False) as store:
        rows = store.query(
            "SELECT code, count(*) AS n FROM findings WHERE subject_id = '3116902' GROUP BY code"
        ).to_pylist()
    assert rows and all(r["n"] == 1 for r in rows)
    assert sum(r["n"] for r in rows) == summary["findings"]
