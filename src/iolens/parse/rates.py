"""Counter sets -> per-second rates, pure. Handles restarts and 64-bit wrap.

Lustre, IB and LMT counters only grow, except when a target restarts or is cleared (the
counter starts again near zero) or a u64 wraps. A decrease is read as a wrap when the previous
value was in the top half of the counter's range and the new one in the bottom quarter, and
otherwise as a restart: the new value is then the amount since the restart, so no rate is ever
negative and nothing is invented. A changed counter epoch (Lustre 2.14+ `start_time`) forces the
restart reading even when values happen to grow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["CounterRate", "counter_delta", "rates"]


@dataclass(frozen=True, slots=True)
class CounterRate:
    """Increase over the interval, its per-second rate, and how the increase was read."""

    delta: int
    rate: float
    reset: bool = False
    wrapped: bool = False


def counter_delta(
    before: int, after: int, *, bits: int = 64, restarted: bool = False
) -> tuple[int, bool, bool]:
    """(increase, reset, wrapped) between two readings of a `bits`-wide counter."""
    if restarted:
        return after, True, False
    if after >= before:
        return after - before, False, False
    top = 1 << bits
    if before >= top // 2 and after < top // 4:
        return after + top - before, False, True
    return after, True, False


def rates(
    before: Mapping[str, int],
    after: Mapping[str, int],
    interval_s: float,
    *,
    bits: int = 64,
    restarted: bool = False,
) -> dict[str, CounterRate]:
    """Rates for the counters present in both samples; a counter that appears or disappears
    between samples gives no rate. `interval_s` must be positive."""
    if interval_s <= 0:
        raise ValueError(f"interval must be positive, got {interval_s}")
    out: dict[str, CounterRate] = {}
    for name, new in after.items():
        old = before.get(name)
        if old is None:
            continue
        delta, reset, wrapped = counter_delta(old, new, bits=bits, restarted=restarted)
        out[name] = CounterRate(delta, delta / interval_s, reset, wrapped)
    return out
