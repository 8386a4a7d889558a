"""lustre_mds beyond the golden cases: per-client exports, per-job latency, idle clients dropped.

Numbers are read from the fixture files here with plain string splitting, independently
of the parsers the source uses.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow.compute as pc

from iolens.collect.agent import Agent
from iolens.collect.sources.lustre_mds import LustreMdsSource

CASES = Path(__file__).resolve().parents[1] / "cases" / "collect" / "lustre_mds"
HPE = CASES / "hpe-2.10.1"
DDN_JOBS = CASES / "ddn-2.14-jobstats"
EXPORTS = Path("proc/fs/lustre/mdt/lustrefs-MDT0000/exports")


def test_exports_become_per_client_rows() -> None:
    got = {
        (r.component, r.metric): r
        for r in LustreMdsSource("mds1").collect(HPE)
        if r.kind == "mdt_client"
    }
    nids = sorted(p.name for p in (HPE / EXPORTS).iterdir())
    assert set(got) == {(f"lustrefs-MDT0000:{n}", "md_ops") for n in nids}
    for nid in nids:
        lines = [x.split() for x in (HPE / EXPORTS / nid / "stats").read_text().splitlines()]
        counts = [int(f[1]) for f in lines if len(f) > 2 and f[2] == "samples"]
        assert got[(f"lustrefs-MDT0000:{nid}", "md_ops")].value == sum(counts)
    assert all(r.sparse and r.counter for r in got.values())
    assert got[("lustrefs-MDT0000:172.20.20.4@o2ib", "md_ops")].value == 96


def test_job_rows_carry_their_latency_when_the_entries_are_timed() -> None:
    """2.14 job_stats print `[usecs]` per op: service_us = their sums over their samples."""
    got = [r for r in LustreMdsSource("mds1").collect(DDN_JOBS) if r.metric == "service_us"]
    text = (DDN_JOBS / "proc/fs/lustre/mdt/es01a-MDT0000/job_stats").read_text()
    entry = text.split('job_id:          "vi:0:es-2-virt3-cosp"')[1].split("- job_id:")[0]
    timed = [
        (int(m[1]), int(m[2]))
        for m in re.finditer(
            r"samples:\s*(\d+), unit: usecs, min:\s*\d+, max:\s*\d+, sum:\s*(\d+)", entry
        )
    ]
    vi = next(
        r for r in got if r.job_id == "vi:0:es-2-virt3-cosp" and r.component == "es01a-MDT0000"
    )
    assert (vi.value, vi.per) == (sum(s for _, s in timed), sum(n for n, _ in timed))
    assert not vi.counter
    hpe = [r for r in LustreMdsSource("mds1").collect(HPE) if r.metric == "service_us" and r.job_id]
    assert hpe == []  # 2.10 counts [reqs] only


def test_the_agent_ships_only_clients_that_moved(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(HPE, root)
    busy = root / EXPORTS / "172.20.20.4@o2ib" / "stats"
    clock = iter([1000.0, 1060.0])
    agent = Agent("mds1", root, [LustreMdsSource("mds1")], clock=lambda: next(clock))
    agent.collect_round()
    busy.write_text(
        busy.read_text().replace("getattr                   16", "getattr                   616")
    )
    batch = agent.collect_round()
    batch.tables()  # the agent's plain columns as Arrow
    assert batch.metrics is not None and batch.server_samples is not None
    clients = batch.metrics.filter(pc.equal(batch.metrics["kind"], "mdt_client")).to_pylist()
    assert [(r["component_id"], r["metric"], r["value"]) for r in clients] == [
        ("lustrefs-MDT0000:172.20.20.4@o2ib", "md_ops", 10.0)  # 600 getattr in 60 s
    ]
    wide = batch.server_samples.filter(pc.equal(batch.server_samples["kind"], "mdt_client"))
    assert wide.to_pylist()[0]["md_ops"] == 600 and wide.num_rows == 1
