"""Agents over captured trees -> real server over loopback, killed and restarted -> store.

Three agents (a compute node with the tracer's spool, an OSS, an MDS) read the fixture
trees of every source under tests/cases/collect, whose counters grow between rounds. The
server is SIGKILLed mid-stream and restarted a few rounds later. Whatever each agent
handed to its shipper is written down as it is spooled; at the end the store must hold
exactly that: same row counts, same sums, no sample twice.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pytest

from iolens.collect.agent import Agent
from iolens.collect.sources import SOURCES
from iolens.collect.sources.tracer_spool import DEFAULT_DIR, TracerSpoolSource
from iolens.model.batch import Batch
from iolens.ship import wire
from iolens.ship.shipper import Backoff, Shipper
from iolens.ship.spool import DiskSpool
from iolens.ship.transport import HttpTransport
from iolens.store import DuckDBStore
from tests.collect.trees import build_root, grow
from tests.loopback import free_port, start_server
from tests.traced import traced_python, tracer_library

#: Which sources' fixture trees each agent's node is made of.
NODES = {
    "cn1": ("compute", ["node", "lustre_client", "infiniband"]),
    "oss1": ("oss", ["node", "lustre_oss", "infiniband", "lnet_router"]),
    "mds1": ("mds", ["node", "lustre_mds"]),
}
ROUNDS, KILL_AT, RESTART_AT = 12, 4, 8

WRITER = "import sys; open(sys.argv[1], 'wb').write(b'x' * int(sys.argv[2]))"


class Ledger:
    """What the agents handed over: rows and sums per table, batch keys."""

    def __init__(self) -> None:
        self.rows: Counter[str] = Counter()
        self.sums: Counter[str] = Counter()
        self.keys: list[str] = []

    def record(self, batch: Batch) -> None:
        if batch.trace is not None:  # a tracer file as written: count what the server decodes
            batch = wire.decode(wire.encode(batch))
        assert batch.key is not None
        self.keys.append(batch.key)
        for name, table in batch.tables().items():
            self.rows[name] += table.num_rows
        if batch.server_samples is not None:
            for col in ("read_bytes", "write_bytes", "read_ops", "write_ops", "md_ops"):
                self.sums[f"server_samples.{col}"] += pc.sum(batch.server_samples[col]).as_py() or 0
        if batch.metrics is not None:
            self.sums["metrics.value"] += pc.sum(batch.metrics["value"]).as_py() or 0.0
        if batch.client_io is not None:
            cio = batch.client_io
            self.sums["client_io.bytes"] += pc.sum(pc.multiply(cio["size"], cio["count"])).as_py()


def traced_write(spool: Path, out: Path, size: int) -> None:
    traced_python(spool, WRITER, str(out), str(size), job="77")


def test_agents_to_a_server_that_dies_and_returns(tmp_path):
    tracer_library()
    now = [time.time()]
    agents: dict[str, tuple[Agent, Shipper]] = {}
    port = free_port()
    db = tmp_path / "iolens.duckdb"
    transport = HttpTransport(f"http://127.0.0.1:{port}", token="t0k", timeout=5)
    used: set[str] = {"tracer_spool"}
    for host, (role, names) in NODES.items():
        root = tmp_path / host
        root.mkdir()
        present = build_root(root, names)
        used.update(present)
        sources = [
            cls(host, role) if name in ("node", "lustre_client") else cls(host)
            for name, cls in SOURCES.items()
            if name in present
        ]
        agent = Agent(
            host,
            root,
            sources,
            clock=lambda: now[0],
            batch_sources=[TracerSpoolSource(host)] if role == "compute" else [],
        )
        spool = DiskSpool(tmp_path / f"{host}-outbox")
        agents[host] = (agent, Shipper(spool, transport, Backoff(base=0.0, cap=0.0)))
    assert used == {n for _, names in NODES.values() for n in names} | {"tracer_spool"}

    ledger = Ledger()
    written = 0
    server = start_server(db, port, tmp_path / "server.log")
    try:
        for rnd in range(ROUNDS):
            if rnd == KILL_AT:
                os.kill(server.pid, signal.SIGKILL)
                server.wait()
            if rnd == RESTART_AT:
                server = start_server(db, port, tmp_path / "server.log")
            for host, (agent, shipper) in agents.items():
                grow(agent.root, rnd + 1)
                if host == "cn1":
                    size = 10_000 * (rnd + 1)
                    traced_write(agent.root / DEFAULT_DIR.relative_to("/"), tmp_path / "out", size)
                    written += size
                batch = agent.collect_round()
                ledger.record(batch)
                shipper.submit(batch)
                for traced, done in agent.collect_batches():
                    ledger.record(traced)
                    shipper.submit(traced)
                    done()
                shipper.deliver(now=float(rnd))
            now[0] += 10.0
        for _ in range(3):
            for _, shipper in agents.values():
                shipper.deliver(now=1e9)
        for host, (_, shipper) in agents.items():
            assert shipper.spool.pending() == [], host
        assert sum(s.stats.failures for _, s in agents.values()) > 0  # the outage was felt
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        transport.close()

    assert ledger.rows["server_samples"] > 0 and ledger.sums["server_samples.read_bytes"] > 0
    with DuckDBStore(db, create=False) as store:

        def one(sql: str) -> dict:
            return store.query(sql).to_pylist()[0]

        for table, n in ledger.rows.items():
            if table in ("jobs", "files"):  # upserts: one row per job / file, checked below
                continue
            assert one(f"SELECT count(*) AS n FROM {table}")["n"] == n, table
        assert store.query("SELECT job_id FROM jobs").column("job_id").to_pylist() == ["77"]
        ss = one(
            "SELECT sum(read_bytes) AS read_bytes, sum(write_bytes) AS write_bytes, "
            "sum(read_ops) AS read_ops, sum(write_ops) AS write_ops, sum(md_ops) AS md_ops "
            "FROM server_samples"
        )
        for col, value in ss.items():
            assert value == ledger.sums[f"server_samples.{col}"], col
        got = one("SELECT sum(value) AS v FROM metrics")["v"]
        assert got == pytest.approx(ledger.sums["metrics.value"], rel=1e-12)
        assert (
            one("SELECT sum(size * count) AS b FROM client_io")["b"]
            == ledger.sums["client_io.bytes"]
        )
        out = one(
            "SELECT sum(size * count) AS b FROM client_io JOIN files USING (file_id) "
            f"WHERE op = 'write' AND path = '{tmp_path / 'out'}'"
        )
        assert out["b"] == written  # what the traced processes wrote, by their own count
        assert one("SELECT count(*) AS n FROM ingested")["n"] == len(set(ledger.keys))
        dup = one(
            "SELECT count(*) AS n FROM (SELECT ts, kind, component_id, job_id, metric, "
            "count(*) AS c FROM metrics GROUP BY ALL HAVING c > 1)"
        )
        assert dup["n"] == 0
