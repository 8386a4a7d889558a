"""Background analyses of `iolens serve`: a real server on loopback analyses a job that has
ended (and not one still running), and sends a due alert once across restarts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import httpx
import pyarrow as pa

from iolens.model.batch import Batch
from iolens.model.schema import ANOMALIES, CLIENT_IO, JOBS
from iolens.present.scheduling import AnalysisScheduler, ended_unanalyzed_jobs
from iolens.ship import wire
from iolens.ship.transport import INGEST_PATH
from iolens.store import DuckDBStore
from tests.loopback import TOKEN, free_port, start_server, stop
from tests.receivers import Webhook

NOW = datetime.now(UTC).replace(tzinfo=None, microsecond=0)


def metric(port: int, name: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def wait_for(check, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


def job_batch(job_id: str, start: datetime, end: datetime | None) -> Batch:
    """A job and its tracer records: 20,000 writes of 4 KiB (trips IOL004 small-io)."""
    jobs = pa.Table.from_pylist(
        [
            {
                "job_id": job_id,
                "user": "alice",
                "app": "smallio",
                "nodes": ["cn1"],
                "nprocs": 1,
                "start": start,
                "end": end,
                "state": "COMPLETED" if end else "RUNNING",
                "source": "slurm",
            }
        ],
        schema=JOBS,
    )
    io = pa.Table.from_pylist(
        [
            {
                "job_id": job_id,
                "node": "cn1",
                "rank": 0,
                "pid": 100,
                "layer": "posix",
                "op": "write",
                "file_id": 1,
                "offset": 0,
                "size": 4096,
                "stride": 4096,
                "count": 20_000,
                "t_start": start + timedelta(seconds=10),
                "t_end": start + timedelta(seconds=70),
                "dur_ns": 5 * 10**9,
            }
        ],
        schema=CLIENT_IO,
    )
    return Batch(source="test", key=f"test:{job_id}", jobs=jobs, client_io=io)


def post(port: int, batch: Batch) -> None:
    res = httpx.post(
        f"http://127.0.0.1:{port}{INGEST_PATH}",
        content=wire.encode(batch),
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )
    assert res.status_code == 200, res.text


def test_server_analyses_a_job_once_it_has_ended(tmp_path):
    db, port, log = tmp_path / "s.duckdb", free_port(), tmp_path / "serve.log"
    server = start_server(db, port, log, "--analyze-every", "1", "--live-every", "0")
    try:
        post(port, job_batch("done-1", NOW - timedelta(minutes=10), NOW - timedelta(minutes=5)))
        post(port, job_batch("running-1", NOW - timedelta(minutes=10), None))
        wait_for(lambda: metric(port, "iolens_analysis_jobs_total") >= 1)
        time.sleep(2)  # two more passes: the running job must still be left alone
        assert metric(port, "iolens_analysis_jobs_total") == 1
        assert metric(port, 'iolens_analysis_runs_total{task="components"}') == 1  # at start
        assert metric(port, 'iolens_analysis_failures_total{task="jobs"}') == 0
    finally:
        stop(server)
    assert "Traceback" not in log.read_text()
    with DuckDBStore(db, create=False) as store:
        summaries = store.query("SELECT job_id, io_mode, write_bytes FROM job_summaries")
        assert summaries.to_pylist() == [
            {"job_id": "done-1", "io_mode": "1-1", "write_bytes": 20_000 * 4096}
        ]
        codes = store.query(
            "SELECT subject_id, code FROM findings WHERE subject_kind = 'job'"
        ).to_pylist()
        assert {"subject_id": "done-1", "code": "IOL004"} in codes
        assert all(c["subject_id"] == "done-1" for c in codes)


def test_server_sends_a_due_alert_once_across_restarts(tmp_path):
    db, port, log = tmp_path / "s.duckdb", free_port(), tmp_path / "serve.log"
    with DuckDBStore(db) as store:
        row = {
            "kind": "slow_ost",
            "component_kind": "ost",
            "component_id": "lustre-OST0003",
            "start": NOW - timedelta(minutes=45),
            "end": None,
            "severity": "critical",
            "evidence": json.dumps({"bw_ratio": 0.1}),
            "detector": "test",
            "created": NOW,
        }
        store.append("anomalies", pa.Table.from_pylist([row], schema=ANOMALIES))
    hook = Webhook()
    conf = tmp_path / "alerts.toml"
    conf.write_text(f'[alerts]\nwebhook_url = "{hook.url}"\nmin_duration_minutes = 30\n')
    args = ("--components-every", "0", "--alerts-config", str(conf))
    try:
        for _ in range(2):
            server = start_server(db, port, log, *args)
            try:
                wait_for(lambda: metric(port, 'iolens_analysis_runs_total{task="alerts"}') >= 1)
            finally:
                stop(server)
    finally:
        hook.close()
    assert [b["json"]["component_id"] for b in hook.bodies] == ["lustre-OST0003"]
    with DuckDBStore(db, create=False) as store:
        rows = store.query("SELECT channel, ok FROM alerts").to_pylist()
    assert rows == [{"channel": "webhook", "ok": True}]


def test_bad_alerts_config_stops_serve_before_it_listens(tmp_path):
    conf = tmp_path / "alerts.toml"
    conf.write_text("[alerts]\nmin_duration_minutes = 5\n")
    cmd = [sys.executable, "-m", "iolens", "serve", "--db", str(tmp_path / "s.duckdb")]
    res = subprocess.run(
        [*cmd, "--port", str(free_port()), "--alerts-config", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and "webhook_url" in res.stderr, res.stderr


# -- the scheduler in-process --------------------------------------------------------------
def _load(store: DuckDBStore, batch: Batch) -> None:
    from iolens.ingest.load import load

    load(store, batch)


def test_ended_jobs_settle_and_early_analyses_are_redone(tmp_path):
    from iolens.analyze.pipeline import analyze_jobs

    now = datetime.now(UTC).replace(tzinfo=None)
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        _load(store, job_batch("old", now - timedelta(hours=2), now - timedelta(hours=1)))
        _load(store, job_batch("fresh", now - timedelta(minutes=5), now - timedelta(seconds=10)))
        _load(store, job_batch("running", now - timedelta(minutes=5), None))
        assert ended_unanalyzed_jobs(store, now, settle_s=30) == ["old"]
        assert ended_unanalyzed_jobs(store, now, settle_s=0) == ["old", "fresh"]
        analyze_jobs(store)  # what the query API does for every job, running or not
        assert ended_unanalyzed_jobs(store, now, settle_s=30) == []
        # "fresh" was analysed (about now) before its data could settle (now + 20 s):
        # redone once it has.
        assert ended_unanalyzed_jobs(store, now + timedelta(seconds=40), settle_s=30) == ["fresh"]


def test_a_failing_job_does_not_stall_the_others(tmp_path, monkeypatch):
    import iolens.analyze.pipeline as pipeline

    real = pipeline.analyze_jobs

    def flaky(store, job_ids=None, **kw):
        if "bad" in list(job_ids or []):
            raise RuntimeError("corrupt records")
        return real(store, job_ids, **kw)

    monkeypatch.setattr(pipeline, "analyze_jobs", flaky)
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        for j in ("a", "bad", "c"):
            _load(store, job_batch(j, NOW - timedelta(hours=2), NOW - timedelta(hours=1)))
        sched = AnalysisScheduler(store, threading.Lock(), components_every=0)
        assert sched.analyze_ended_jobs() == ["a", "c"]
        assert set(sched.broken) == {"bad"} and "corrupt" in sched.broken["bad"]
        assert sched.analyze_ended_jobs() == []  # not retried every minute
        sched.tick(0.0)
        assert sched.stats.jobs_analyzed == 2 and not sched.stats.failures
