"""Two real ingest servers on loopback write one dataset; one is SIGKILLed mid-run.

The simulated site's batches are shipped by agents (disk spool, retry) of two groups, each
group to its own `iolens serve --dataset DIR --group G`. Group b's server is killed while
its agents are delivering and started again later. Afterwards the dataset must hold
exactly what the agents produced (rows and sums per table, every batch key once, no row
twice), both groups' segments, and a query server over the dataset must see all jobs.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import httpx
import pytest

from iolens.model.schema import MERGED_BY_KEY
from iolens.ship import wire
from iolens.ship.shipper import Backoff, Shipper
from iolens.ship.spool import DiskSpool
from iolens.ship.transport import INGEST_PATH, HttpTransport
from iolens.store import DuckDBStore
from iolens.store.dataset import DatasetStore
from iolens.store.dataset_layout import list_segments
from tests.conftest import run_cli
from tests.loopback import TOKEN, free_port, start_server, stop
from tests.scaleout.conftest import GROUPS

AGENTS_PER_GROUP = 2
ROUNDS, KILL_AT, RESTART_AT = 8, 3, 5


def serve(tmp_path, root, port, group=None):
    extra = ["--dataset", str(root), "--flush-every", "0.05"]
    extra += ["--group", group] if group else ["--analyze-every", "0"]
    log = tmp_path / f"{group or 'query'}.log"
    return start_server(tmp_path / "unused.duckdb", port, log, *extra)


@pytest.mark.slow
def test_two_ingest_servers_one_killed_and_restarted(site, tmp_path):
    root = tmp_path / "ds"
    ports = {g: free_port() for g in GROUPS}
    servers = {g: serve(tmp_path, root, ports[g], g) for g in GROUPS}
    transports = []
    agents: dict[str, list[Shipper]] = {}
    for g in GROUPS:
        agents[g] = []
        for k in range(AGENTS_PER_GROUP):
            t = HttpTransport(f"http://127.0.0.1:{ports[g]}", token=TOKEN, timeout=10)
            transports.append(t)
            spool = DiskSpool(tmp_path / f"{g}-{k}-outbox")
            agents[g].append(Shipper(spool, t, Backoff(base=0.0, cap=0.0)))
    per_round = -(-len(site.batches) // ROUNDS)

    def deliver(group: str) -> None:
        for shipper in agents[group]:
            shipper.deliver(now=1e9)

    try:
        for rnd in range(ROUNDS):
            for i, (group, batch) in enumerate(
                site.batches[rnd * per_round : (rnd + 1) * per_round]
            ):
                agents[group][i % AGENTS_PER_GROUP].submit(batch)
            if rnd == KILL_AT:  # mid-delivery: some batches committed, some acks lost
                busy = threading.Thread(target=deliver, args=("gb",))
                busy.start()
                time.sleep(0.15)
                os.kill(servers["gb"].pid, signal.SIGKILL)
                servers["gb"].wait()
                busy.join()
            if rnd == RESTART_AT:
                servers["gb"] = serve(tmp_path, root, ports["gb"], "gb")
            threads = [threading.Thread(target=deliver, args=(g,)) for g in GROUPS]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        for _ in range(3):
            for g in GROUPS:
                deliver(g)
        for g in GROUPS:
            for shipper in agents[g]:
                assert shipper.spool.pending() == [], g
        assert sum(s.stats.failures for s in agents["gb"]) > 0  # the outage was felt
        assert sum(s.stats.failures for s in agents["ga"]) == 0
        # a second server for a served group is refused while the first lives
        twin = run_cli("serve", "--dataset", str(root), "--group", "ga", "--port", "1")
        assert twin.returncode == 2 and "served by" in twin.stderr
    finally:
        for proc in servers.values():
            stop(proc)
        for t in transports:
            t.close()

    ledger = site.ledger
    groups = {f.split("/")[3] for f in list_segments(root)}
    assert groups == {"group=ga", "group=gb"}
    with DatasetStore(root, read_only=True) as ds, DuckDBStore(site.reference, create=False) as ref:

        def one(store, sql: str) -> dict:
            return store.query(sql).to_pylist()[0]

        for table, n in ledger.rows.items():
            if table == "jobs" or table in MERGED_BY_KEY:  # upserts: as the reference keeps
                q = f"SELECT count(*) AS n FROM {table}"
                assert one(ds, q) == one(ref, q), table
                continue
            assert one(ds, f"SELECT count(*) AS n FROM {table}")["n"] == n, table
        sums = one(
            ds,
            "SELECT sum(read_bytes) AS read_bytes, sum(write_bytes) AS write_bytes, "
            "sum(read_ops) AS read_ops, sum(write_ops) AS write_ops, sum(md_ops) AS md_ops "
            "FROM server_samples",
        )
        for col, value in sums.items():
            assert value == ledger.sums[f"server_samples.{col}"], col
        cio = one(ds, "SELECT sum(size * count) AS b, sum(count) AS c FROM client_io")
        assert (cio["b"], cio["c"]) == (
            ledger.sums["client_io.bytes"],
            ledger.sums["client_io.count"],
        )
        keys = one(ds, "SELECT count(*) AS n, count(DISTINCT key) AS d FROM ingested")
        assert keys["n"] == keys["d"] == len(set(ledger.keys))
        dup = (
            "SELECT count(*) AS n FROM "
            "(SELECT *, count(*) AS c FROM server_samples GROUP BY ALL HAVING c > 1)"
        )
        assert one(ds, dup) == one(ref, dup)

    # The query server reads what both groups wrote.
    port = free_port()
    query = serve(tmp_path, root, port)
    try:
        res = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/jobs",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=120,
        )
        assert res.status_code == 200, res.text
        assert len(res.json()) == len(site.sim.result.jobs)
        refused = httpx.post(  # it does not ingest: agents keep the batch and retry
            f"http://127.0.0.1:{port}{INGEST_PATH}",
            content=wire.encode(site.batches[-1][1]),
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )
        assert refused.status_code >= 500
    finally:
        stop(query)
    res = run_cli("jobs", "--db", str(root), "--json")
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)) == len(site.sim.result.jobs)
