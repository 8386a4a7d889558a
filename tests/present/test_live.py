"""Live diagnosis end to end: a real `iolens serve` on loopback gets a running job's
records in 30-s slices, as the tracer ships them; its I/O slows down 10x mid-run. The
server's own scheduler re-analyses the job as data arrives; the job's live endpoint must
report the slowdown (flag and IOL006 finding) within 2 minutes of data time after the
slowdown began, only to its owner, and the owner's webhook must get one alert for it."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pyarrow as pa

from iolens.analyze.pipeline import analyze_jobs
from iolens.ingest.load import load
from iolens.model.batch import Batch
from iolens.model.schema import CLIENT_IO, JOBS
from iolens.present.web.accounts import add_user
from iolens.ship import wire
from iolens.ship.transport import INGEST_PATH
from iolens.store import DuckDBStore
from tests.loopback import TOKEN, free_port, start_server, stop
from tests.receivers import Webhook

MIB = 1 << 20
NORMAL = 100  # MiB per second while writing
SLICE_S = 30  # the tracer ships every 30 s
T0 = datetime.now(UTC).replace(tzinfo=None, microsecond=0) - timedelta(hours=1)
SLOW_AT = T0 + timedelta(minutes=5)  # the slowdown starts 5 min into the run
BUDGET_S = 120


def job_row(job_id: str, start: datetime, end: datetime | None) -> dict:
    return {"job_id": job_id, "user": "alice", "app": "climate", "nodes": ["cn1"],
            "nprocs": 1, "start": start, "end": end,
            "state": "COMPLETED" if end else "RUNNING", "source": "slurm"}  # fmt: skip


def records(job_id: str, t0: datetime, seconds: int, mib_per_s: int) -> list[dict]:
    """One rank writing 1-MiB requests for `seconds`, one record per second, busy all along."""
    return [
        {
            "job_id": job_id,
            "node": "cn1",
            "rank": 0,
            "pid": 7,
            "layer": "posix",
            "op": "write",
            "file_id": 11,
            "offset": 0,
            "size": MIB,
            "stride": MIB,
            "count": mib_per_s,
            "t_start": t0 + timedelta(seconds=s),
            "t_end": t0 + timedelta(seconds=s + 1),
            "dur_ns": 10**9,
        }
        for s in range(seconds)
    ]


def slice_batch(job_id: str, k: int, first: bool) -> Batch:
    t = T0 + timedelta(seconds=k * SLICE_S)
    rate = NORMAL if t < SLOW_AT else NORMAL // 10
    jobs = pa.Table.from_pylist([job_row(job_id, T0, None)] if first else [], schema=JOBS)
    io = pa.Table.from_pylist(records(job_id, t, SLICE_S, rate), schema=CLIENT_IO)
    return Batch(source="tracer", key=f"live:{job_id}:{k}", jobs=jobs, client_io=io)


def history_store(db) -> dict[str, str]:
    """A store with three earlier full-speed runs of the app, analysed (their phases are
    the baseline), and the accounts alice (the owner) and bob; returns their tokens."""
    with DuckDBStore(db) as store:
        for i in range(3):
            start = T0 - timedelta(days=3 - i)
            end = start + timedelta(minutes=12)
            load(store, Batch(
                source="test", key=f"old{i}",
                jobs=pa.Table.from_pylist([job_row(f"old{i}", start, end)], schema=JOBS),
                client_io=pa.Table.from_pylist(
                    records(f"old{i}", start + timedelta(seconds=30), 600, NORMAL),
                    schema=CLIENT_IO),
            ))  # fmt: skip
        analyze_jobs(store)
        return {n: add_user(store, n) for n in ("alice", "bob")}


def ship(base: str, job_id: str, k: int) -> datetime:
    """POST slice `k` of the running job as the tracer would; returns its data end."""
    body = wire.encode(slice_batch(job_id, k, k == 0))
    agent = {"Authorization": f"Bearer {TOKEN}"}
    res = httpx.post(base + INGEST_PATH, content=body, headers=agent, timeout=60)
    assert res.status_code == 200, res.text
    return T0 + timedelta(seconds=(k + 1) * SLICE_S)


def wait_for(check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


def test_a_mid_run_slowdown_shows_on_the_live_endpoint_within_two_minutes(tmp_path):
    db, port, log = tmp_path / "s.duckdb", free_port(), tmp_path / "serve.log"
    tokens = history_store(db)
    hook = Webhook()
    server = start_server(
        db, port, log, "--analyze-every", "0", "--components-every", "0", "--live-every", "1"
    )
    base = f"http://127.0.0.1:{port}"
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    bob = {"Authorization": f"Bearer {tokens['bob']}"}
    live_url = f"{base}/api/v1/jobs/run1/live"
    try:
        sub = {"channel": "webhook", "target": hook.url}
        assert httpx.post(f"{base}/api/subscriptions", json=sub, headers=alice).status_code == 201
        theirs = {**sub, "user": "alice"}
        assert httpx.post(f"{base}/api/subscriptions", json=theirs, headers=bob).status_code == 403

        seen: list[dict] = []
        for k in range(16):
            data_end = ship(base, "run1", k)

            def arrived(data_end=data_end):
                snap = httpx.get(live_url, headers=alice, timeout=10).json()
                newest = snap["bandwidth"]["newest_record"]
                return newest is not None and datetime.fromisoformat(newest.rstrip("Z")) >= data_end

            wait_for(arrived)
            visible = datetime.now(UTC).replace(tzinfo=None)

            def analysed(visible=visible):  # the scheduler's pass after the data landed
                snap = httpx.get(live_url, headers=alice, timeout=10).json()
                ok = (
                    snap["analyzed"]
                    and datetime.fromisoformat(snap["analyzed"].rstrip("Z")) >= visible
                )
                return snap if ok else None

            snap = wait_for(analysed)
            seen.append({"data_end": data_end, **snap})
            if data_end > SLOW_AT + timedelta(seconds=BUDGET_S + SLICE_S):
                break
        assert httpx.get(live_url, headers=bob, timeout=10).status_code == 404
        wait_for(lambda: hook.bodies, timeout=30)
        time.sleep(3)  # more passes find the finding again: no second alert
    finally:
        stop(server)
        hook.close()
    assert "Traceback" not in log.read_text()

    before = [s for s in seen if s["data_end"] <= SLOW_AT]
    after = [s for s in seen if s["data_end"] > SLOW_AT]
    assert before and after
    for s in before:  # normal I/O: neither flag nor finding, but a provisional summary
        assert s["running"] and s["provisional"] and s["state"] == "RUNNING"
        assert not s["slower"], s["bandwidth"]
        assert "IOL006" not in {f["code"] for f in s["findings"]}
        assert s["phase"] is not None
        assert 0.7 < s["bandwidth"]["ratio"] < 1.3  # at the earlier runs' pace
    flagged = [s for s in after if s["slower"] and "IOL006" in {f["code"] for f in s["findings"]}]
    assert flagged, [(s["data_end"], s["bandwidth"]) for s in after]
    latency = (flagged[0]["data_end"] - SLOW_AT).total_seconds()
    print(f"slowdown reported {latency:.0f} s (data time) after it began")
    assert latency <= BUDGET_S
    assert flagged[0]["bandwidth"]["ratio"] < 1 / 3
    assert flagged[0]["bandwidth"]["baseline"] == "earlier runs"
    assert flagged[0]["bandwidth"]["earlier_runs"] == 3
    assert flagged[0]["write_bytes"] > seen[0]["write_bytes"]  # totals grow with the data

    alerts = [b["json"] for b in hook.bodies]
    assert [(a["job_id"], a["code"], a["running"]) for a in alerts] == [("run1", "IOL006", True)]
    assert alerts[0]["evidence"]["live"] is True and alerts[0]["evidence"]["slowdown"] > 3
