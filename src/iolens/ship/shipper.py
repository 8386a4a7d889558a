"""Spool first, deliver later: at-least-once delivery with server-side de-duplication.

Every batch gets an idempotency key before it is spooled; the server records loaded keys
(`ingested` table), so a batch delivered twice (the ack was lost, the agent restarted) is
loaded once. Delivery goes oldest first and stops at the first failure, backing off
exponentially with full jitter, so a server outage only delays data: nothing already
collected is lost while it fits in the spool.

One batch must not hold up the rest. A batch the server refuses (a 4xx other than
401/403/408/429) is quarantined at once: set aside in the spool's `rejected` directory and
logged once with the server's reason. A 5xx for one batch lets the next be tried; when the
same batch keeps getting 5xx (`MAX_SERVER_ERRORS` times) while others get through, it is
quarantined too. Two 5xx in a row is the server failing: back off. With a disk spool the
count is kept beside it (`server-errors.json`), so agents run from cron count across runs.

A spool on a full disk (ENOSPC, EDQUOT, EFBIG) does not stop the agent: the batch waits in
memory (bounded, the oldest dropped and counted) and the disk spool is tried again later.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from iolens.model.batch import Batch
from iolens.ship import wire
from iolens.ship.spool import MemorySpool, Spool, write_private
from iolens.ship.transport import Rejected, ServerError, Transport, TransportError

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
    spool_errors: int = 0  # batches the disk spool could not take (held in memory)


#: A full disk, a quota, a file size limit: the spool's problem, not the agent's.
SPOOL_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class Shipper:
    #: 5xx answers for the same batch, while others get through, before it is set aside.
    MAX_SERVER_ERRORS = 5

    def __init__(
        self,
        spool: Spool,
        transport: Transport,
        backoff: Backoff | None = None,
        overflow_bytes: int = 16 * 2**20,
    ) -> None:
        self.spool = spool
        self.transport = transport
        self.backoff = backoff or Backoff()
        self.stats = ShipStats()
        self.retry_at = 0.0
        # batches the disk spool could not take, oldest dropped (and counted) past the bound
        self.overflow = MemorySpool(overflow_bytes)
        self._server_errors: dict[str, int] = {}  # key -> 5xx answers so far
        self._others_got_through: set[str] = set()  # keys with 5xx, others acked since
        self._spool_error: str | None = None  # logged once until the spool works again
        directory = getattr(spool, "dir", None)
        self._errors_file = Path(directory) / "server-errors.json" if directory else None
        self._load_errors()

    def submit(self, batch: Batch, hold: bool = True) -> bool:
        """Give the batch a key if it has none and spool it. True when it is on disk;
        False when the disk spool refused it (full): then it waits in memory if `hold`
        (a reading), or not at all (a file its source offers again next round)."""
        if batch.key is None:
            batch.key = uuid.uuid4().hex
        spool_key = uuid.uuid5(uuid.NAMESPACE_URL, batch.key).hex
        payload = wire.encode(batch)
        try:
            self.spool.put(spool_key, payload)
        except OSError as exc:
            if exc.errno not in SPOOL_FULL:
                raise
            self.stats.spool_errors += 1
            if self._spool_error is None:
                self._spool_error = exc.strerror or str(exc)
                log.error(
                    "the spool cannot take batches (%s): they wait in memory, up to %d MiB",
                    self._spool_error,
                    self.overflow.max_bytes // 2**20,
                )
            if hold:
                self.overflow.put(spool_key, payload)
            return False
        if self._spool_error is not None:
            log.warning("the spool takes batches again")
            self._spool_error = None
        return True

    @property
    def dropped(self) -> int:
        """Batches dropped unsent: the disk spool's and the memory overflow's."""
        return self.spool.dropped + self.overflow.dropped

    def pending(self) -> int:
        return len(self.spool.pending()) + len(self.overflow.pending())

    def deliver(self, now: float | None = None) -> int:
        """Send what is spooled, oldest first (then what waits in memory); returns how
        many were acknowledged."""
        now = time.monotonic() if now is None else now
        if now < self.retry_at:
            return 0
        done = 0
        try:
            for spool in (self.spool, self.overflow):
                sent = self._deliver(spool, now)
                if sent is None:
                    return done
                done += sent
            return done
        finally:
            self._save_errors()

    def _deliver(self, spool: Spool, now: float) -> int | None:
        """`spool`'s batches sent; None when the server failed (retry after a backoff)."""
        done, failed_in_a_row = 0, 0
        failure: ServerError | None = None
        for key in spool.pending():
            try:
                answer = self.transport.send(spool.get(key))
            except Rejected as exc:
                self._quarantine(spool, key, str(exc))
                continue
            except ServerError as exc:  # this batch's fault, or the server's?
                self.stats.failures += 1
                self._server_errors[key] = self._server_errors.get(key, 0) + 1
                if (
                    self._server_errors[key] >= self.MAX_SERVER_ERRORS
                    and key in self._others_got_through
                ):
                    self._quarantine(
                        spool, key, f"{exc} ({self._server_errors[key]} times, others got in)"
                    )
                    continue
                failure, failed_in_a_row = exc, failed_in_a_row + 1
                if failed_in_a_row >= 2:
                    break
                continue
            except TransportError as exc:
                self.stats.failures += 1
                self._back_off(now, exc)
                return None
            spool.ack(key)
            failed_in_a_row = 0
            self._others_got_through.update(self._server_errors)
            self._forget(key)
            done += 1
            self.stats.sent += 1
            if answer.get("duplicate"):
                self.stats.duplicates += 1
        if failure is not None:
            self._back_off(now, failure)
            return None
        self.backoff.reset()
        return done

    def _load_errors(self) -> None:
        if self._errors_file is None or not self._errors_file.exists():
            return
        try:
            saved = json.loads(self._errors_file.read_text())
            self._server_errors = {str(k): int(n) for k, n in saved["errors"].items()}
            self._others_got_through = {str(k) for k in saved["others"]}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self._server_errors, self._others_got_through = {}, set()

    def _save_errors(self) -> None:
        """The 5xx counts of batches still waiting; a hint: a failure to write it is
        ignored (the counts start again)."""
        if self._errors_file is None:
            return
        waiting = set(self.spool.pending())
        errors = {k: n for k, n in self._server_errors.items() if k in waiting}
        if not errors and not self._errors_file.exists():
            return
        text = json.dumps(
            {"errors": errors, "others": sorted(self._others_got_through & set(errors))}
        )
        tmp = self._errors_file.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            write_private(tmp, text.encode())
            os.replace(tmp, self._errors_file)

    def _back_off(self, now: float, exc: Exception) -> None:
        delay = self.backoff.next_delay()
        self.retry_at = now + delay
        log.warning("delivery failed (%s); retrying in %.1f s", exc, delay)

    def _forget(self, key: str) -> None:
        self._server_errors.pop(key, None)
        self._others_got_through.discard(key)

    def _quarantine(self, spool: Spool, key: str, reason: str) -> None:
        """Set the batch aside (not deleted: it can be looked at, and sent again by hand)
        and say so, once, with the server's reason."""
        self.stats.rejected += 1
        self._forget(key)
        try:
            where = spool.quarantine(key, reason)
        except OSError as exc:
            log.error(
                "the server refused batch %s (%s); cannot set it aside (%s): dropped",
                key,
                reason,
                exc.strerror or exc,
            )
            spool.ack(key)
            return
        log.error("the server refused batch %s: %s; set aside in %s", key, reason, where)
