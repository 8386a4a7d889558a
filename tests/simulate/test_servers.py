"""The simulated servers: their files parse with the real parsers into their counters,
the counters hold every byte and operation the jobs did, and faults show where they should."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from iolens.parse.iofwd import Tally
from iolens.parse.iofwd import parse_stats as parse_iofwd
from iolens.parse.lnet import parse_stats as parse_lnet
from iolens.parse.lustre_hist import parse_histograms
from iolens.parse.lustre_jobstats import parse_job_stats
from iolens.parse.lustre_stats import parse_stats
from iolens.simulate import SimConfig, simulate
from iolens.simulate.emit import Emitter
from iolens.simulate.engine import THRASH_AMPLIFICATION
from iolens.simulate.realism import Realism
from iolens.simulate.servers.mds import MdsHost
from iolens.simulate.servers.oss import OssHost

QUIET = SimConfig(nodes=1024, hours=0.5, seed=4, realism=Realism.quiet())


def run_all(sim, every=None):
    """Advance every host through every round; call `every(k)` after each."""
    c = sim.collection
    for k in range(c.rounds.count):
        c.advance(k)
        if every is not None:
            every(k)


class Accumulated:
    """What entries that come and go held in all: an entry leaves job_stats ten idle
    minutes after its last request and starts again from zero with the next one."""

    def __init__(self) -> None:
        self.done: dict[tuple, int] = {}
        self.current: dict[tuple, int] = {}

    def see(self, values: dict[tuple, int], present: set[tuple]) -> None:
        for key in [k for k in self.current if k[:-1] not in present]:
            self.done[key] = self.done.get(key, 0) + self.current.pop(key)
        self.current.update(values)

    def totals(self) -> dict[tuple, int]:
        out = dict(self.done)
        for k, v in self.current.items():
            out[k] = out.get(k, 0) + v
        return out


@pytest.fixture(scope="module")
def conserved():
    """Per (job, OST, op) the bytes job_stats held, per (job, op) the MDT's operations,
    over a run without restarts."""
    sim = simulate(QUIET)
    osts, mdt = Accumulated(), Accumulated()

    def snapshot(_k: int) -> None:
        ost_values, ost_present, md_values, md_present = {}, set(), {}, set()
        for h in sim.collection.hosts:
            if isinstance(h, OssHost):
                for ost in h.osts.values():
                    for job, e in ost.jobs.entries.items():
                        ost_present.add((job, ost.name))
                        for op in ("read_bytes", "write_bytes"):
                            if op in e.stats:
                                ost_values[job, ost.name, op] = e.stats[op].total
            elif isinstance(h, MdsHost):
                for job, e in h.jobs.entries.items():
                    md_present.add((job,))
                    for op, st in e.stats.items():
                        md_values[job, op] = st.samples
        osts.see(ost_values, ost_present)
        mdt.see(md_values, md_present)

    run_all(sim, snapshot)
    return sim, osts.totals(), mdt.totals()


def test_job_stats_hold_every_byte_the_jobs_moved(conserved):
    sim, osts, _mdt = conserved
    thrashed = {f["job_id"] for f in sim.truth["faults"] if f["kind"] == "cache_thrashing"}
    num, den = THRASH_AMPLIFICATION
    for job, t in sim.truth["jobs"].items():
        read = sum(v for (j, _o, op), v in osts.items() if j == job and op == "read_bytes")
        write = sum(v for (j, _o, op), v in osts.items() if j == job and op == "write_bytes")
        assert write == t["write_bytes"], job  # writes never amplify
        if job in thrashed:
            assert t["read_bytes"] < read <= t["read_bytes"] * num // den, job
        else:
            assert read == t["read_bytes"], job
    assert thrashed, "the planted sequential reader thrashes at 1,024 nodes"


def test_the_mdt_counts_each_operation_the_tracer_saw(conserved):
    sim, _osts, mdt = conserved
    emitter = Emitter(sim.topology, sim.result, sim.base_us)
    tracer_op = {"open": "open", "close": "close", "stat": "getattr", "unlink": "unlink"}
    for i, run in enumerate(sim.result.jobs):
        _files, client = emitter.job_batch(i)
        seen: dict[str, int] = {}
        for r in client.select(["op", "count"]).to_pylist():
            if r["op"] in tracer_op:
                op = tracer_op[r["op"]]
                seen[op] = seen.get(op, 0) + r["count"]
        mine = {op: n for (j, op), n in mdt.items() if j == run.spec.job_id and n}
        assert mine == seen, run.spec.job_id


def test_totals_are_jobs_plus_login_node_plus_history():
    """An OST's `stats` grow by exactly its job_stats entries' growth (jobs and the login
    node's `cp.1002`), so no byte is in one and not the other."""
    sim = simulate(QUIET)
    c = sim.collection
    oss = next(h for h in c.hosts if isinstance(h, OssHost))
    before = {o.name: o.stats["write_bytes"].total for o in oss.osts.values()}
    grown: dict[str, int] = {}
    last: dict[tuple[str, str], int] = {}

    def snapshot(_k: int) -> None:
        for o in oss.osts.values():
            for job, e in o.jobs.entries.items():
                s = e.stats.get("write_bytes")
                if s is not None:
                    prev = last.get((o.name, job), 0)
                    grown[o.name] = grown.get(o.name, 0) + s.total - prev
                    last[o.name, job] = s.total

    run_all(sim, snapshot)
    for o in oss.osts.values():
        assert o.stats["write_bytes"].total - before[o.name] == grown.get(o.name, 0)


def test_files_parse_back_into_the_counters():
    """What the real parsers read from the rendered text is the servers' state."""
    sim = simulate(replace(QUIET, hours=0.25))
    c = sim.collection
    k = c.rounds.count * 2 // 3
    for j in range(k + 1):
        c.advance(j)
    oss = next(
        h
        for h in c.hosts
        if isinstance(h, OssHost) and any(o.jobs.entries for o in h.osts.values())
    )
    files = oss.files(c.clock(oss.name, k))
    ost = next(o for o in oss.osts.values() if o.jobs.entries)
    st = parse_stats(files[f"proc/fs/lustre/obdfilter/{ost.name}/stats"]).by_name()
    for name, s in ost.stats.items():
        if s.samples:
            lo, hi, total, squares = s.values()
            assert (st[name].samples, st[name].min, st[name].max, st[name].sum, st[name].sumsq) == (
                s.samples,
                lo,
                hi,
                total,
                squares,
            )
        else:
            assert name not in st  # Lustre prints a counter once it has samples
    jobs = parse_job_stats(files[f"proc/fs/lustre/obdfilter/{ost.name}/job_stats"])
    assert [j.job_id for j in jobs] == list(ost.jobs.entries)
    for parsed in jobs:
        entry = ost.jobs.entries[parsed.job_id]
        for counter in parsed.counters:
            s = entry.stats.get(counter.name)
            assert counter.samples == (s.samples if s else 0)
            assert counter.sum == (s.total if s else 0)
    brw = parse_histograms(files[f"sys/kernel/debug/lustre/osd-ldiskfs/{ost.name}/brw_stats"])
    pages = brw.section("pages per bulk r/w")
    assert {b.lower: list(b.counts) for b in pages.buckets if any(b.counts)} == {
        b: c for b, c in ost.brw["pages per bulk r/w"].buckets.items() if any(c)
    }
    fwd = c.hosts[-1]
    daemon = fwd.files(c.clock(fwd.name, k))
    totals = parse_iofwd(daemon["run/iofwd/lwfs/stats"])
    assert totals.read_bytes == fwd.export.total.t.get("read_bytes", Tally())
    assert totals.backend_read_bytes == fwd.export.total.t.get("backend_read_bytes", Tally())
    for name, counts in fwd.export.clients.items():
        client = parse_iofwd(daemon[f"run/iofwd/lwfs/clients/{name}/stats"], client=True)
        assert client.write_bytes == counts.t.get("write_bytes", Tally())


def test_an_lnet_router_prints_its_counters():
    """With LNet routers as the forwarding layer, the routers' own counters."""
    sim = simulate(replace(QUIET, hours=0.2, forwarder_export="lnet"))
    c = sim.collection
    fwd = c.hosts[-1]
    k = c.rounds.count // 2
    for i in range(k + 1):
        fwd.advance(i, c.clock(fwd.name, i))
    lnet = parse_lnet(fwd.files(c.clock(fwd.name, k))["sys/kernel/debug/lnet/stats"])
    assert lnet.route_length == fwd.export.c["route_length"] > 0


def test_a_fail_slow_ost_serves_each_request_factor_times_slower():
    config = SimConfig(
        nodes=1024,
        hours=1.0,
        seed=6,
        realism=Realism.quiet(),
        fault_kinds=("slow_ost",),
        ost_slow_factor=2.0,
        ost_slow_minutes=20,
    )
    sim = simulate(config)
    fault = next(f for f in sim.result.faults if f.kind == "slow_ost")
    model = sim.collection.model
    i = sim.topology.osts.index(fault.component)
    rounds = sim.collection.rounds
    first, last = rounds.of_second(np.array([fault.start, fault.end - 1]))
    inside = np.arange(first + 1, last)  # rounds wholly inside the fault
    assert np.allclose(model.osts.slow[inside, i], 2.0)
    assert np.allclose(np.delete(model.osts.slow[inside], i, axis=1), 1.0)
    outside = np.setdiff1d(np.arange(1, rounds.count), np.arange(first, last + 1))
    assert np.allclose(model.osts.slow[outside, i], 1.0)
    # The RPC times written into its counters: twice what the same load costs elsewhere.
    t = np.array([inside[len(inside) // 2]])
    sizes = np.array([1 << 20])
    for write in (np.array([False]), np.array([True])):
        slow = model.ost_rpc_us(t, np.array([i]), sizes, write)
        assert slow == pytest.approx(
            2.0
            * model.ost_rpc_us(t, np.array([(i + 1) % len(sim.topology.osts)]), sizes, write)
            * (1 + model.osts.util[t, i] ** 2)
            / (1 + model.osts.util[t, (i + 1) % len(sim.topology.osts)] ** 2)
        )


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_storm_is_untagged_or_a_procname_uid_and_named_by_its_nid(seed):
    sim = simulate(
        SimConfig(
            nodes=256,
            hours=1.0,
            seed=seed,
            realism=Realism.quiet(),
            fault_kinds=("metadata_storm",),
        )
    )
    storm = next(f for f in sim.truth["faults"] if f["kind"] == "metadata_storm")
    assert storm["job_stats_id"] in ("find.1003", None)
    assert storm["client_nid"] == sim.topology.nid(sim.topology.login)
    mds = next(h for h in sim.collection.hosts if isinstance(h, MdsHost))
    getattr_before = mds.exports[sim.topology.login].stats["getattr"].samples
    run_all(sim)
    login = mds.exports[sim.topology.login].stats["getattr"].samples - getattr_before
    served = int(np.floor(sim.result.storm_ops.sum() + 1e-6))
    assert login >= served  # the storm, plus interactive `ls.1001`
    in_job_stats = "find.1003" in mds.jobs.entries or any(
        j == "find.1003" for j in mds.jobs.entries
    )
    if storm["job_stats_id"] is None:
        assert not in_job_stats
    # entries leave 10 idle minutes after the storm; the files said so while it lasted


def test_n1_writes_pay_lock_contention_on_their_osts():
    sim = simulate(replace(QUIET, hours=0.25))
    oss = [h for h in sim.collection.hosts if isinstance(h, OssHost)]
    culprit = sim.truth["planted"]["n1_culprit"]["job_id"]
    model = sim.collection.model
    checked = 0
    for h in oss:
        for k, rows in h._rows.items():
            for ost, job, write, rpc_bytes, _n, _b, mean_us in rows:
                if job == culprit and write:
                    base = model.ost_rpc_us(
                        np.array([k]), np.array([ost]), np.array([rpc_bytes]), np.array([True])
                    )[0]
                    assert mean_us == pytest.approx(3.0 * base)
                    checked += 1
    assert checked
