"""Run the agent: collect every interval, spool, deliver; or once, for cron."""

from __future__ import annotations

import logging
import signal
import time
from types import FrameType

from iolens.collect.agent import Agent
from iolens.collect.config import AgentConfig, site_server
from iolens.collect.sources import SOURCES
from iolens.collect.sources.node import NodeSource
from iolens.collect.sources.tracer_spool import TracerSpoolSource
from iolens.ship.shipper import Shipper
from iolens.ship.spool import DiskSpool
from iolens.ship.transport import HttpTransport, Transport, TransportError

log = logging.getLogger(__name__)


class _Offline:
    """No server configured: everything waits in the spool."""

    def send(self, payload: bytes) -> dict[str, object]:
        raise TransportError("no --server configured")


def build_agent(cfg: AgentConfig) -> Agent:
    a = cfg.agent
    sources = []
    for name, cls in SOURCES.items():
        if not cfg.source_enabled(name):
            continue
        takes_role = cls is NodeSource or getattr(cls, "takes_role", False)
        sources.append(cls(a.host, a.role) if takes_role else cls(a.host))
    batch_sources = []
    if cfg.source_enabled(TracerSpoolSource.name):
        batch_sources.append(TracerSpoolSource(a.host, a.trace_spool))
    a.spool.mkdir(parents=True, exist_ok=True)
    return Agent(
        a.host, a.root, sources, state_file=a.spool / "counters.json", batch_sources=batch_sources
    )


def build_shipper(cfg: AgentConfig) -> Shipper:
    a = cfg.agent
    server = site_server(a)
    transport: Transport = HttpTransport(server, a.token) if server else _Offline()
    return Shipper(DiskSpool(a.spool / "outbox", a.spool_max_mb * 2**20), transport)


def run(cfg: AgentConfig, once: bool = False) -> dict[str, int]:
    agent = build_agent(cfg)
    shipper = build_shipper(cfg)
    stop = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    if not once:
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    next_tick = time.monotonic()
    while True:
        batch = agent.collect_round()
        if batch.rows():
            shipper.submit(batch)
        for traced, done in agent.collect_batches():
            shipper.submit(traced)  # on disk (fsync'd) before the input is released
            done()
        shipper.deliver(now=0.0 if once else None)
        if once or stop:
            break
        next_tick += cfg.agent.interval
        while not stop and time.monotonic() < next_tick:
            time.sleep(min(0.2, max(0.0, next_tick - time.monotonic())))
        if stop:
            break
    return {
        "sent": shipper.stats.sent,
        "pending": len(shipper.spool.pending()),
        "dropped": shipper.spool.dropped,
        "failures": shipper.stats.failures,
    }
