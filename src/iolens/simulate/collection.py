"""The servers' side of a simulation, collected the way a site collects it.

Every server host (each OSS, the MDS, each forwarding node) keeps cumulative counters
(`servers/`) that advance every agent interval from what the engine did. Each round, per
host, an `iolens.collect.agent.Agent` (the code `iolens agent` runs) takes its readings
with its clock set to the host's time:

* **files** (the real path): the host's files are rendered under the agent's root, a
  directory rewritten each round, and read by the sources a real node of that role runs
  (`node`, `infiniband`, and `lustre_oss`, `lustre_mds` or `lnet_router`);
* **direct** (the fast path): the agent gets from each host the readings those sources
  would take from those files, without text in between. `tests/simulate/test_paths.py`
  checks that both paths give the same store, table by table.

The agents' batches are then loaded as the ingest server loads them (`load_many`, group
commit). Collection misbehaves as at a real site (`Realism`): each host's clock is off by
its skew, some rounds never arrive (the agent was stalled; the next round covers the gap),
and servers restart (every Lustre counter from zero, a new `start_time`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow.compute as pc

from iolens.collect.agent import Agent
from iolens.collect.base import Source
from iolens.collect.sources.infiniband import InfinibandSource
from iolens.collect.sources.node import NodeSource
from iolens.model.batch import Batch
from iolens.simulate.engine import EngineResult
from iolens.simulate.fastpath import DirectAgent
from iolens.simulate.realism import Realism
from iolens.simulate.servers import Raw
from iolens.simulate.servers.activity import Activity, ActivityBuilder, Rounds
from iolens.simulate.servers.forwarder import ForwarderHost
from iolens.simulate.servers.mds import MdsHost
from iolens.simulate.servers.model import ServiceModel
from iolens.simulate.servers.oss import OssHost
from iolens.simulate.topology import Topology

PATHS = ("files", "direct")


class Host(Protocol):
    """A simulated server host (`servers/`)."""

    name: str
    role: str
    #: The agent sources particular to the role (`node` and `infiniband` run everywhere).
    sources: list[type[Source]]

    def boot(self, now: float, rng: np.random.Generator) -> None: ...
    def reset(self, now: float) -> None: ...
    def advance(self, k: int, now: float) -> None: ...
    def files(self, now: float) -> dict[str, str]: ...
    def readings(self) -> Iterator[Raw]: ...


@dataclass(frozen=True)
class Disturbances:
    """Per host: clock offset (s), rounds whose batch never arrives, rounds in which the
    server restarts (and the restart's offset into the round, s)."""

    skew: dict[str, float]
    missing: dict[str, np.ndarray]
    resets: dict[str, dict[int, float]]

    @classmethod
    def draw(
        cls, realism: Realism, rng: np.random.Generator, hosts: list[str], rounds: Rounds
    ) -> Disturbances:
        horizon = (rounds.count - 1) * rounds.interval
        resets: dict[str, dict[int, float]] = {}
        for host, times in realism.resets(rng, hosts, horizon).items():
            at = {}
            for t in times:
                k = max(1, int(np.ceil(t / rounds.interval)))
                at[k] = t - (k - 1) * rounds.interval
            resets[host] = at
        missing = realism.missing(rng, hosts, rounds.count)
        return cls(realism.skew(rng, hosts), missing, resets)


def real_sources(host: Host) -> list[Source]:
    """The sources a real node of the host's role runs, built as the agent's runner builds
    them (the role goes to those that take one)."""
    own = [
        cls(host.name, host.role) if getattr(cls, "takes_role", False) else cls(host.name)  # type: ignore[call-arg]
        for cls in host.sources
    ]
    return [NodeSource(host.name, host.role), InfinibandSource(host.name), *own]


def memory_dir() -> str | None:
    """A RAM-backed directory for the rendered trees when there is one (`/dev/shm`): /proc
    and /sys are in memory on a real node too, and rewriting thousands of small files on a
    disk file system (ext4 flushes a truncated file on close) costs milliseconds each."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


class Tree:
    """A host's files under the agent's root: written when they change, removed when gone."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written: dict[str, str] = {}
        self.dirs: set[Path] = set()

    def update(self, files: dict[str, str]) -> None:
        for rel in [r for r in self.written if r not in files]:
            path = self.root / rel
            path.unlink()
            del self.written[rel]
            if not any(path.parent.iterdir()):  # an export gone: its directory too
                path.parent.rmdir()
                self.dirs.discard(path.parent)
        for rel, text in files.items():
            if self.written.get(rel) == text:
                continue
            path = self.root / rel
            if path.parent not in self.dirs:
                path.parent.mkdir(parents=True, exist_ok=True)
                self.dirs.add(path.parent)
            path.write_text(text)
            self.written[rel] = text


class Collection:
    """Server hosts, their disturbances and their agents, for one simulation."""

    def __init__(
        self,
        topo: Topology,
        result: EngineResult,
        *,
        start: float,
        interval: float,
        realism: Realism,
        seed: int,
        storm_id: str | None,
        forwarder_export: str = "iofwd",
    ) -> None:
        self.start = start
        self.rounds = Rounds.covering(result.end, interval)
        rng = np.random.default_rng([seed, 17])
        self.activity: Activity = ActivityBuilder(topo, result, self.rounds).build(
            storm_id, np.random.default_rng([seed, 18])
        )
        self.model = ServiceModel.build(result, self.rounds, realism, rng)
        hosts: list[Host] = []
        for i, oss in enumerate(topo.oss):
            osts = {int(j): topo.osts[j] for j in np.flatnonzero(topo.ost_oss == i)}
            hosts.append(OssHost(oss, osts, self.activity, self.model, rng))
        hosts.append(MdsHost(topo, self.activity, self.model, rng))
        for f, fwd in enumerate(topo.forwarders):
            hosts.append(
                ForwarderHost(fwd, f, self.activity, self.model, rng, export=forwarder_export)
            )
        self.hosts = hosts
        self.disturbances = Disturbances.draw(
            realism, np.random.default_rng([seed, 19]), [h.name for h in hosts], self.rounds
        )
        for h in hosts:
            h.boot(self.clock(h.name, 0), rng)

    def clock(self, host: str, k: int) -> float:
        """What `host`'s clock says at round k (Unix seconds)."""
        return self.start + k * self.rounds.interval + self.disturbances.skew[host]

    def batches(self, path: str = "direct", workdir: Path | None = None) -> Iterator[Batch]:
        """The agents' batches, round by round, host by host, in the order they arrive."""
        if path not in PATHS:
            raise ValueError(f"collection path must be one of {', '.join(PATHS)}, got {path!r}")
        tmp = None
        if path == "files" and workdir is None:
            tmp = workdir = Path(tempfile.mkdtemp(prefix="iolens-sim-", dir=memory_dir()))
        try:
            yield from self._rounds(path, workdir)
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    def advance(self, k: int) -> list[tuple[Host, float]]:
        """Move every host to round k; (host, its clock) for those whose round arrives."""
        d = self.disturbances
        arrived = []
        for h in self.hosts:
            t = self.clock(h.name, k)
            if k in d.resets[h.name]:
                h.reset(t - self.rounds.interval + d.resets[h.name][k])
            if k > 0:
                h.advance(k, t)
            if not d.missing[h.name][k]:
                arrived.append((h, t))
        return arrived

    def _rounds(self, path: str, workdir: Path | None) -> Iterator[Batch]:
        if path == "direct":
            yield from self._direct()
            return
        assert workdir is not None
        now = {h.name: 0.0 for h in self.hosts}
        agents: dict[str, Agent] = {}
        trees: dict[str, Tree] = {}
        for h in self.hosts:
            clock = (lambda name: lambda: now[name])(h.name)
            trees[h.name] = Tree(workdir / h.name)
            agents[h.name] = Agent(h.name, workdir / h.name, real_sources(h), clock=clock)
        for k in range(self.rounds.count):
            for h, t in self.advance(k):
                now[h.name] = t
                trees[h.name].update(h.files(t))
                batch = agents[h.name].collect_round()
                batch.tables()  # the agent builds plain columns: Arrow from here on
                if batch.metrics is not None:  # the agent's self-metrics describe this run
                    batch.metrics = batch.metrics.filter(
                        pc.not_equal(batch.metrics["kind"], "agent")
                    )
                if batch.rows():
                    yield batch

    def write_captures(self, directory: Path, host: str) -> int:
        """`host`'s files of every round that arrives, one folder per round named by the
        host's clock, as a site's cron captures are: `iolens import lustre DIR --host H`
        replays them. Advances every host (use a fresh simulation); the folders written."""
        written = 0
        for k in range(self.rounds.count):
            for h, t in self.advance(k):
                if h.name == host:
                    Tree(directory / repr(t)).update(h.files(t))  # the exact time
                    written += 1
        return written

    def _direct(self, chunk: int = 60) -> Iterator[Batch]:
        """The fast path: readings straight from each host, rated `chunk` rounds at a time."""
        agents = {h.name: DirectAgent(h.name) for h in self.hosts}
        for first in range(0, self.rounds.count, chunk):
            arrived: list[list[str]] = []
            for k in range(first, min(first + chunk, self.rounds.count)):
                names = []
                for h, t in self.advance(k):
                    agents[h.name].add(t, h.readings())
                    names.append(h.name)
                arrived.append(names)
            done = {name: iter(a.batches()) for name, a in agents.items()}
            for names in arrived:
                for name in names:
                    batch = next(done[name])
                    if batch.rows():
                        yield batch
