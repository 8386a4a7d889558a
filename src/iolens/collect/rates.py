"""Counters -> per-second rates across samples, resets and wraps, for the running agent.

The arithmetic (what a decrease means) lives in :func:`iolens.parse.rates.counter_delta`;
this keeps the previous value of every counter between rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iolens.parse.rates import counter_delta

WRAP = 2**64

Key = tuple[str, str, str, str | None]


@dataclass
class RateKeeper:
    last: dict[Key, tuple[float, float]] = field(default_factory=dict)
    resets: int = 0

    def rate(
        self, key: Key, value: float, now: float, bits: int = 64, born: float | None = None
    ) -> tuple[float, float] | None:
        """(rate per second, interval) since the previous value of `key`; None the first
        time. A counter `born` (from zero) at that time and not read since is rated from
        zero: its entry appeared, or came back after it was dropped."""
        prev = self.last.get(key)
        if born is not None and (prev is None or prev[1] < born):
            prev = (0.0, born)
        self.last[key] = (value, now)
        if prev is None:
            return None
        before, then = prev
        interval = now - then
        if interval <= 0:
            return None
        delta, reset, _ = counter_delta(before, value, bits=bits)  # type: ignore[arg-type]
        self.resets += reset
        return delta / interval, interval
