"""Spool first, deliver later: at-least-once delivery with server-side de-duplication.

Every batch gets an idempotency key before it is spooled; the server records loaded keys
(`ingested` table), so a batch delivered twice (the ack was lost, the agent restarted) is
loaded once. Delivery goes oldest first and stops at the first failure, backing off
exponentially with full jitter, so a server outage only delays data: nothing already
collected is lost while it fits in the spool.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from dataclasses import dataclass, field

from iolens.model.batch import Batch
from iolens.ship import wire
from iolens.ship.spool import Spool
from iolens.ship.transport import Rejected, Transport, TransportError

log = logging.getLogger(__name__)


@dataclass
class Backoff:
    base: float = 1.0
    cap: float = 300.0
    failures: int = 0
    rng: random.Random = field(default_factory=random.Random)

    def next_delay(self) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2^failures)]."""
        self.failures += 1
        return self.rng.uniform(0, min(self.cap, self.base * 2 ** (self.failures - 1)))

    def reset(self) -> None:
        self.failures = 0


@dataclass
class ShipStats:
    sent: int = 0
    duplicates: int = 0
    rejected: int = 0
    failures: int = 0


class Shipper:
    def __init__(self, spool: Spool, transport: Transport, backoff: Backoff | None = None) -> None:
        self.spool = spool
        self.transport = transport
        self.backoff = backoff or Backoff()
        self.stats = ShipStats()
        self.retry_at = 0.0

    def submit(self, batch: Batch) -> str:
        """Give the batch a key if it has none and spool it; returns the key."""
        if batch.key is None:
            batch.key = uuid.uuid4().hex
        spool_key = uuid.uuid5(uuid.NAMESPACE_URL, batch.key).hex
        self.spool.put(spool_key, wire.encode(batch))
        return batch.key

    def deliver(self, now: float | None = None) -> int:
        """Send what is spooled, oldest first; returns how many were acknowledged."""
        now = time.monotonic() if now is None else now
        if now < self.retry_at:
            return 0
        done = 0
        for key in self.spool.pending():
            try:
                answer = self.transport.send(self.spool.get(key))
            except Rejected as exc:
                log.error("dropping a batch the server refused: %s", exc)
                self.stats.rejected += 1
                self.spool.ack(key)
                continue
            except TransportError as exc:
                self.stats.failures += 1
                delay = self.backoff.next_delay()
                self.retry_at = now + delay
                log.warning("delivery failed (%s); retrying in %.1f s", exc, delay)
                return done
            self.spool.ack(key)
            self.backoff.reset()
            done += 1
            self.stats.sent += 1
            if answer.get("duplicate"):
                self.stats.duplicates += 1
        return done
