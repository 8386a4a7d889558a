"""The scheduler's live pass in-process: bounded work (K jobs per pass, once per job per
`live_every`), re-analysis only on new data, and owner alerts sent once per (job,
finding, channel) to a real webhook receiver on loopback."""

from __future__ import annotations

import threading

from iolens.ingest.load import load
from iolens.present import owner_alerts
from iolens.present.scheduling import AnalysisScheduler
from iolens.store import DuckDBStore
from tests.present.test_live import history_store, slice_batch
from tests.receivers import Webhook


def scheduler(store, **kw) -> AnalysisScheduler:
    opts = {"analyze_every": 0, "components_every": 0, "live_every": 60.0, **kw}
    return AnalysisScheduler(store, threading.Lock(), **opts)


def analysed(store) -> dict:
    rows = store.query("SELECT job_id, analyzed FROM job_summaries").to_pylist()
    return {r["job_id"]: r["analyzed"] for r in rows if r["job_id"].startswith("run")}


def test_live_passes_are_bounded_and_follow_new_data(tmp_path):
    history_store(tmp_path / "s.duckdb")
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        for j in ("run1", "run2", "run3"):
            load(store, slice_batch(j, 0, True))
        sched = scheduler(store, live_jobs=2, owner_alerts=False)
        sched.tick(0.0)
        first = analysed(store)
        assert sorted(first) == ["run1", "run2"]  # K = 2 per pass, in id order
        sched.tick(5.0)
        assert sorted(analysed(store)) == ["run1", "run2", "run3"]
        third = analysed(store)
        sched.tick(10.0)  # no new data: nothing redone
        assert analysed(store) == third
        load(store, slice_batch("run1", 1, False))
        sched.tick(15.0)  # new data, but run1 was analysed 15 s ago (< live_every)
        assert analysed(store) == third
        sched.tick(65.0)
        now = analysed(store)
        assert now["run1"] > third["run1"] and now["run2"] == third["run2"]
        assert sched.stats.live_analyzed == 4
        summary = store.query(
            "SELECT write_bytes FROM job_summaries WHERE job_id = 'run1'"
        ).to_pylist()[0]
        assert summary["write_bytes"] == 2 * 30 * 100 * (1 << 20)  # both slices


def test_owner_alerts_reach_the_webhook_once_and_only_for_the_owners_jobs(tmp_path):
    history_store(tmp_path / "s.duckdb")
    hook = Webhook()
    try:
        with DuckDBStore(tmp_path / "s.duckdb") as store:
            owner_alerts.subscribe(store, "alice", "webhook", hook.url)
            for k in range(14):  # 5 normal minutes, then 2 at a tenth of the speed
                load(store, slice_batch("run1", k, k == 0))
            bobs = slice_batch("bob1", 12, True)
            bobs.jobs = bobs.jobs.set_column(1, "user", [["bob"]])
            load(store, bobs)
            sched = scheduler(store)
            sched.tick(0.0)  # analyses both running jobs, then alerts
            assert sched.stats.owner_alerts_sent == 1, store.query("SELECT * FROM alerts")
            sched.tick(100.0)  # nothing new: nothing sent again
            load(store, slice_batch("run1", 14, False))
            sched.tick(200.0)  # re-analysed, the finding holds: still no second alert
            assert sched.stats.live_analyzed == 3
            rows = store.query("SELECT episode, channel, ok FROM alerts").to_pylist()
            slow = store.query("SELECT subject_id FROM findings WHERE code = 'IOL006'")
            assert sorted(slow.column("subject_id").to_pylist()) == ["bob1", "run1"]
    finally:
        hook.close()
    assert [(b["json"]["job_id"], b["json"]["code"]) for b in hook.bodies] == [("run1", "IOL006")]
    assert rows == [{"episode": "job:run1:IOL006:alice", "channel": "webhook", "ok": True}]
    # old findings of jobs that ended before the subscription were never candidates
    assert all(not b["json"]["job_id"].startswith("old") for b in hook.bodies)
