"""The node agent against captured /proc trees, with failing and absent sources."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from iolens.collect.agent import Agent
from iolens.collect.base import Reading
from iolens.collect.config import AgentConfig, load_config, sample_toml
from iolens.collect.rates import WRAP, RateKeeper
from iolens.collect.sources import SOURCES
from iolens.collect.sources.node import NodeSource
from iolens.errors import InputError
from iolens.ingest.load import load
from iolens.store import DuckDBStore
from tests.conftest import run_cli

CASE = Path(__file__).resolve().parents[1] / "cases" / "collect" / "node" / "debian12-vm"


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


def test_node_source_reads_the_captured_tree():
    readings = {r.metric: r for r in NodeSource("vm", "compute").collect(CASE)}
    load1 = float((CASE / "proc" / "loadavg").read_text().split()[0])
    assert readings["load1"].value == load1 and not readings["load1"].counter
    mem_kb = next(
        int(line.split()[1])
        for line in (CASE / "proc" / "meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    assert readings["mem_total_bytes"].value == mem_kb * 1024
    assert readings["cpu_idle_jiffies"].counter
    assert any(m.startswith("net_") and m.endswith("_rx_bytes") for m in readings)
    assert all(r.kind == "compute" and r.component == "vm" for r in readings.values())


def test_absent_files_are_quiet(tmp_path):
    assert list(NodeSource("vm").collect(tmp_path)) == []


def test_malformed_file_names_file_and_line(tmp_path):
    shutil.copytree(CASE, tmp_path, dirs_exist_ok=True)
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:       12 kB\nMemAvailable: lots\n")
    with pytest.raises(InputError, match=r"meminfo:2: bad value for MemAvailable"):
        list(NodeSource("vm").collect(tmp_path))


class Broken:
    name = "broken"

    def collect(self, root: Path):
        raise RuntimeError("lustre went away")


def test_failing_source_is_logged_once_counted_and_does_not_stop_others(caplog):
    clock = Clock()
    agent = Agent("vm", CASE, [Broken(), NodeSource("vm")], clock=clock)
    batches = []
    for _ in range(3):
        batches.append(agent.collect_round())
        clock.t += 10
    assert agent.health["broken"].failures == 3
    assert sum("lustre went away" in r.message for r in caplog.records) == 1
    metrics = batches[-1].metrics.to_pylist()
    assert any(m["metric"] == "load1" for m in metrics)
    fails = [m for m in metrics if m["metric"] == "source_broken_failures_total"]
    assert fails[0]["value"] == 3


def test_counters_become_rates_across_rounds(tmp_path):
    root = tmp_path
    shutil.copytree(CASE, root, dirs_exist_ok=True)
    clock = Clock()
    agent = Agent("vm", root, [NodeSource("vm")], clock=clock)
    first = agent.collect_round().metrics.to_pylist()
    assert not any(m["metric"] == "cpu_idle_jiffies" for m in first)  # no rate yet
    stat = root / "proc" / "stat"
    fields = stat.read_text().splitlines()[0].split()
    fields[4] = str(int(fields[4]) + 500)  # idle += 500 jiffies
    stat.write_text(" ".join(fields) + "\n")
    clock.t += 5
    second = {m["metric"]: m for m in agent.collect_round().metrics.to_pylist()}
    assert second["cpu_idle_jiffies"]["value"] == pytest.approx(100.0)
    assert second["cpu_idle_jiffies"]["interval_s"] == pytest.approx(5.0)


def test_rates_survive_resets_and_wraps():
    rk = RateKeeper()
    key = ("ost", "OST0", "write_bytes", None)
    assert rk.rate(key, 1_000, 0.0) is None
    assert rk.rate(key, 3_000, 2.0) == (1_000.0, 2.0)
    assert rk.rate(key, 400, 3.0) == (400.0, 1.0)  # restart: count from zero, never negative
    assert rk.resets == 1
    rk.rate(key, WRAP - 100, 4.0)
    assert rk.rate(key, 50, 5.0) == (150.0, 1.0)  # 64-bit wrap


def test_counter_state_persists_for_once_runs(tmp_path):
    clock = Clock()
    state = tmp_path / "counters.json"
    Agent("vm", CASE, [NodeSource("vm")], state_file=state, clock=clock).collect_round()
    assert json.loads(state.read_text())
    clock.t += 10
    again = Agent("vm", CASE, [NodeSource("vm")], state_file=state, clock=clock)
    metrics = again.collect_round().metrics.to_pylist()
    assert any(m["metric"] == "cpu_idle_jiffies" for m in metrics)


def test_config_rejects_unknown_keys_and_sources(tmp_path):
    bad = tmp_path / "a.toml"
    bad.write_text("[agent]\nintervall = 5\n")
    with pytest.raises(InputError, match=r"agent\.intervall"):
        load_config(bad, list(SOURCES))
    bad.write_text("[sources.lustre_osss]\nenabled = true\n")
    with pytest.raises(InputError, match="unknown source"):
        load_config(bad, list(SOURCES))
    bad.write_text("[agent\n")
    with pytest.raises(InputError, match="not valid TOML"):
        load_config(bad, list(SOURCES))


def test_sample_config_loads_back(tmp_path):
    path = tmp_path / "sample.toml"
    path.write_text(sample_toml(list(SOURCES)))
    cfg = load_config(path, list(SOURCES))
    assert cfg.agent.interval == AgentConfig().agent.interval


def test_agent_once_spools_without_a_server_then_store_gets_it(tmp_path):
    spool = tmp_path / "spool"
    for _ in range(2):
        res = run_cli("agent", "--once", "--root", str(CASE), "--spool", str(spool), "--json")
        assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["pending"] == 2
    # Deliver the spool straight into a store through the same ingest code the server runs.
    from iolens.ship import wire
    from iolens.ship.spool import DiskSpool

    outbox = DiskSpool(spool / "outbox")
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        for key in outbox.pending():
            load(store, wire.decode(outbox.get(key)))
        n = store.query("SELECT count(*) AS n FROM metrics WHERE metric = 'load1'").to_pylist()
    assert n == [{"n": 2}]


class WaitTime:
    """A service that reports a cumulative wait sum and its event count, like ost_io."""

    name = "waits"

    def __init__(self) -> None:
        self.total = 0.0
        self.events = 0.0

    def collect(self, root: Path):
        yield Reading("oss", "oss1", "wait_us", self.total, per=self.events)


def test_sum_over_count_becomes_the_interval_mean():
    clock, src = Clock(), WaitTime()
    agent = Agent("oss1", Path("/nonexistent"), [src], clock=clock)
    agent.collect_round()  # first round: nothing to compare with
    src.total, src.events = 3_000.0, 10.0  # 10 requests waited 300 us on average
    clock.t += 5
    second = agent.collect_round()
    src.total += 500.0  # no new events: no mean, rather than a made-up zero
    clock.t += 5
    third = agent.collect_round()
    waits = [m["value"] for m in second.metrics.to_pylist() if m["metric"] == "wait_us"]
    assert waits == [300.0]
    assert second.server_samples.to_pylist()[0]["wait_us"] == 300.0
    assert not [m for m in third.metrics.to_pylist() if m["metric"] == "wait_us"]


class JobEntries:
    """job_stats entries that appear between rounds, with or without a 2.14 start time."""

    name = "jobs"

    def __init__(self) -> None:
        self.entries: dict[str, tuple[float, float, float]] = {}  # job -> (bytes, usecs, born)

    def collect(self, root: Path):
        for job, (nbytes, usecs, born) in self.entries.items():
            yield Reading("ost", "OST0", "write_bytes", nbytes, True, job, fresh=born)
            yield Reading("ost", "OST0", "service_us", usecs, False, job, per=4, fresh=born)


@pytest.mark.parametrize("born", [float("-inf"), 1_004.0])
def test_a_job_entry_born_between_rounds_is_rated_from_zero(born):
    """A job's first interval of I/O is not lost: the entry did not exist at the previous
    round (or says it was created since), so everything it counts happened since."""
    clock, src = Clock(), JobEntries()
    agent = Agent("oss1", Path("/nonexistent"), [src], clock=clock)
    agent.collect_round()
    clock.t += 10
    src.entries["7"] = (4_000_000.0, 800.0, born)
    second = agent.collect_round()
    rows = [r for r in second.server_samples.to_pylist() if r["job_id"] == "7"]
    assert rows == [dict(rows[0], interval_s=10.0, write_bytes=4_000_000, service_us=200.0)]


def test_an_entry_born_before_the_previous_round_waits_for_a_second_reading():
    """Seen for the first time but older than the previous round (the agent missed it, e.g.
    a restarted agent): its counts are not all from this interval, so no rate yet."""
    clock, src = Clock(), JobEntries()
    agent = Agent("oss1", Path("/nonexistent"), [src], clock=clock)
    agent.collect_round()
    clock.t += 10
    src.entries["7"] = (4_000_000.0, 800.0, 900.0)
    second = agent.collect_round()
    assert not [r for r in second.server_samples.to_pylist() if r["job_id"] == "7"]


@pytest.fixture
def full_disk(tmp_path):
    """A 2 MiB tmpfs (root only) filled to the last byte."""
    from tests.tmpfs import small_tmpfs

    def fill() -> None:
        with open(disk / "filler", "ab", buffering=0) as fh:
            for size in (2**16, 4096, 1):
                try:
                    while True:
                        fh.write(b"\0" * size)
                except OSError:
                    continue

    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        yield disk, fill


def test_an_agent_on_a_full_spool_disk_survives_and_drains_its_spool(tmp_path, full_disk):
    from iolens.ship.shipper import Shipper
    from iolens.ship.spool import DiskSpool
    from iolens.ship.transport import InMemoryTransport
    from tests.loopback import TOKEN, free_port, start_server, stop
    from tests.ship.helpers import samples_batch

    disk, fill = full_disk
    spool = disk / "spool"
    backlog = Shipper(DiskSpool(spool / "outbox"), InMemoryTransport(lambda p: {}))
    for i in range(3):  # what the agent could not deliver before the disk filled
        backlog.submit(samples_batch(i))
    fill()
    port = free_port()
    agent = ["agent", "--once", "--root", str(CASE), "--spool", str(spool), "--json"]
    url = ["--server", f"http://127.0.0.1:{port}", "--token", TOKEN]

    offline = run_cli(*agent, *url)  # the server is down too: nothing can go anywhere
    assert offline.returncode == 0, offline.stderr
    assert "Traceback" not in offline.stderr and "No space left" in offline.stderr
    result = json.loads(offline.stdout)
    assert result["spool_errors"] == 1 and result["pending"] == 4  # 3 on disk, 1 in memory

    db = tmp_path / "s.duckdb"
    server = start_server(db, port, tmp_path / "server.log")
    try:
        fill()
        online = run_cli(*agent, *url)
    finally:
        stop(server)
    assert online.returncode == 0, online.stderr
    assert "Traceback" not in online.stderr
    assert json.loads(online.stdout)["pending"] == 0
    assert not list((spool / "outbox").glob("*.iolb"))
    with DuckDBStore(db, create=False) as store:
        samples = store.query("SELECT count(*) AS n FROM server_samples WHERE kind = 'ost'")
        load1 = store.query("SELECT count(*) AS n FROM metrics WHERE metric = 'load1'")
    assert samples.to_pylist() == [{"n": 150}]  # the backlog, drained
    assert load1.to_pylist() == [{"n": 1}]  # and this round's reading


def test_the_agent_spool_and_its_state_are_private(tmp_path):
    import os
    import stat

    spool = tmp_path / "spool"
    res = run_cli("agent", "--once", "--root", str(CASE), "--spool", str(spool), "--json")
    assert res.returncode == 0, res.stderr
    assert stat.S_IMODE(os.stat(spool).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(spool / "outbox").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(spool / "counters.json").st_mode) == 0o600
    (batch,) = (spool / "outbox").glob("*.iolb")
    assert stat.S_IMODE(os.stat(batch).st_mode) == 0o600
