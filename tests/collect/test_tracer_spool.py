"""The agent ships the real tracer's files: every byte once, inputs released only when safe."""

from __future__ import annotations

from pathlib import Path

import pytest

from iolens.collect.agent import Agent
from iolens.collect.sources.tracer_spool import DEFAULT_DIR, TracerSpoolSource
from iolens.errors import InputError
from iolens.ingest.http import IngestService
from iolens.ship.shipper import Backoff, Shipper
from iolens.ship.spool import DiskSpool
from iolens.ship.transport import InMemoryTransport
from iolens.store import DuckDBStore
from iolens.tracefile import SUFFIX
from tests.traced import traced_python

WRITER = """
import sys
path, size, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "wb", buffering=0) as f:
    for i in range(0, size, chunk):
        f.write(b"x" * min(chunk, size - i))
"""


def traced_write(spool: Path, out: Path, size: int, chunk: int, job: str) -> None:
    traced_python(spool, WRITER, str(out), str(size), str(chunk), job=job)


def ship_all(agent: Agent, shipper: Shipper) -> int:
    n = 0
    for batch, done in agent.collect_batches():
        shipper.submit(batch)
        done()
        n += 1
    return n


def test_agent_ships_trace_files_once_and_quarantines_corrupt_ones(tmp_path):
    root = tmp_path / "root"
    spool = root / DEFAULT_DIR.relative_to("/")
    sizes = {"a.dat": (1_000_000, 4096), "b.dat": (123_457, 1000)}
    for name, (size, chunk) in sizes.items():
        traced_write(spool, tmp_path / name, size, chunk, job="4242")
    (spool / f"junk-1-1-0{SUFFIX}").write_bytes(b"IOLTRACE but not really")
    (spool / f"running-2-2-0{SUFFIX}.partial").write_bytes(b"still being written")
    assert len(list(spool.glob(f"*{SUFFIX}"))) == 3

    with DuckDBStore(tmp_path / "s.duckdb") as store:
        transport = InMemoryTransport(IngestService(store).receive)
        shipper = Shipper(DiskSpool(tmp_path / "outbox"), transport, Backoff(base=0.0, cap=0.0))
        source = TracerSpoolSource("n1")
        agent = Agent("n1", root, [], batch_sources=[source])

        transport.down = True  # shipped into the outbox while the server is away
        assert ship_all(agent, shipper) == 2
        assert shipper.deliver(now=0.0) == 0
        assert not list(spool.glob(f"*{SUFFIX}"))  # released: the outbox holds them
        assert (spool / "bad" / f"junk-1-1-0{SUFFIX}").exists() and source.quarantined == 1
        assert (spool / f"running-2-2-0{SUFFIX}.partial").exists()

        transport.down = False
        assert shipper.deliver(now=1e9) == 2
        assert ship_all(agent, shipper) == 0  # nothing left to send twice
        for name, (size, chunk) in sizes.items():
            row = store.query(
                "SELECT sum(c.size * c.count) AS bytes, sum(c.count) AS ops FROM client_io c "
                f"JOIN files f USING (file_id) WHERE c.op = 'write' AND f.path LIKE '%/{name}'"
            ).to_pylist()[0]
            assert row["bytes"] == size
            assert row["ops"] == -(-size // chunk)
        jobs = store.query("SELECT job_id, source FROM jobs").to_pylist()
        assert jobs == [{"job_id": "4242", "source": "tracer"}]
    assert agent.health["tracer_spool"].failures == 0


def test_absent_spool_is_quiet(tmp_path):
    agent = Agent("n1", tmp_path, [], batch_sources=[TracerSpoolSource("n1")])
    assert list(agent.collect_batches()) == []


def test_agent_framing_check_mirrors_the_decoder(tmp_path):
    from iolens.collect.sources import tracer_spool as light
    from iolens.tracefile import format as fmt
    from iolens.tracefile import trace

    assert light.SUFFIX == trace.SUFFIX and light.MAGIC == fmt.MAGIC
    assert light.READABLE_VERSIONS == fmt.READABLE_VERSIONS
    assert (light.ENDIAN_MARK, light.SEC_END) == (fmt.ENDIAN_MARK, fmt.SEC_END)
    assert light._PREAMBLE.size == fmt.PREAMBLE.itemsize
    assert light._SECTION.size == fmt.SECTION.itemsize
    spool = tmp_path / "spool"
    traced_write(spool, tmp_path / "c.dat", 10_000, 100, job="1")
    (good,) = spool.glob(f"*{SUFFIX}")
    data = good.read_bytes()
    light.check_framing(data, good.name)  # a real file passes
    for bad in (data[:-1], data[:20], data + b"\0" * 16):
        with pytest.raises(InputError):
            light.check_framing(bad, good.name)
