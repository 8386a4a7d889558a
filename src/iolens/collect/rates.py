"""Counters -> per-second rates across samples, resets and wraps.

Kernel and Lustre counters only grow, except when a target restarts (the counter starts
again near zero) or a 64-bit value wraps. A decrease is read as a reset: the new value is
the amount since the reset, so no negative rate is ever reported and nothing is invented.
"""

from __future__ import annotations

from dataclasses import dataclass, field

WRAP = 2**64


@dataclass
class RateKeeper:
    last: dict[tuple[str, str, str, str | None], tuple[float, float]] = field(default_factory=dict)
    resets: int = 0

    def rate(
        self, key: tuple[str, str, str, str | None], value: float, now: float
    ) -> tuple[float, float] | None:
        """(rate per second, interval) since the previous value of `key`; None the first time."""
        prev = self.last.get(key)
        self.last[key] = (value, now)
        if prev is None:
            return None
        before, then = prev
        interval = now - then
        if interval <= 0:
            return None
        delta = value - before
        if delta < 0:
            if before > WRAP / 2 and value < WRAP / 4:  # 64-bit wrap, not a restart
                delta += WRAP
            else:
                self.resets += 1
                delta = value
        return delta / interval, interval
