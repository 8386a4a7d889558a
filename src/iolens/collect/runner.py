"""Run the agent: collect every interval, spool, deliver; or once, for cron.

Each round ships what is spooled before it collects, so an agent whose spool disk is full
drains it first (a full disk costs the new readings, held in memory meanwhile, never the
agent). The spool directory, its batches and the refused ones (`rejected/`) are private.
"""

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
from iolens.errors import InputError
from iolens.ship.shipper import Shipper
from iolens.ship.spool import DiskSpool, private_dir
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
        if not cfg.source_enabled(name) or (
            name not in cfg.sources and not getattr(cls, "DEFAULT_ENABLED", True)
        ):
            continue
        takes_role = cls is NodeSource or getattr(cls, "takes_role", False)
        options = cfg.source_options(name)
        unknown = set(options) - set(getattr(cls, "OPTIONS", ()))
        if unknown:
            raise InputError(
                f"[sources.{name}]",
                f"unknown setting(s) {', '.join(sorted(unknown))}; "
                f"known: {', '.join(getattr(cls, 'OPTIONS', ())) or 'none but enabled'}",
            )
        if takes_role:
            sources.append(cls(a.host, a.role, **options))  # type: ignore[call-arg]
        else:
            sources.append(cls(a.host, **options))  # type: ignore[call-arg]
    batch_sources = []
    if cfg.source_enabled(TracerSpoolSource.name):
        batch_sources.append(TracerSpoolSource(a.host, a.trace_spool))
    private_dir(a.spool)
    return Agent(
        a.host, a.root, sources, state_file=a.spool / "counters.json", batch_sources=batch_sources
    )


def build_shipper(cfg: AgentConfig) -> Shipper:
    a = cfg.agent
    server = site_server(a)
    transport: Transport = HttpTransport(server, a.token) if server else _Offline()
    outbox = DiskSpool(a.spool / "outbox", a.spool_max_mb * 2**20, rejected=a.spool / "rejected")
    return Shipper(outbox, transport)


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
        shipper.deliver(now=0.0 if once else None)  # room in the spool before collecting
        batch = agent.collect_round()
        if batch.rows():
            shipper.submit(batch)  # held in memory if the spool's disk is full
        for traced, done in agent.collect_batches():
            # on disk (fsync'd) before the input is released; else it stays where it is
            if shipper.submit(traced, hold=False):
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
        "pending": shipper.pending(),
        "dropped": shipper.dropped,
        "failures": shipper.stats.failures,
        "rejected": shipper.stats.rejected,
        "spool_errors": shipper.stats.spool_errors,
    }
