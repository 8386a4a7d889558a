"""Counter sets -> rates (`parse.rates`), fuzzed: whatever two readings of a counter are
(restarts, wraps, 32- or 64-bit, a changed epoch), the increase is never negative, never
more than the counter can hold, and exact when the counter simply grew."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iolens.parse.rates import counter_delta, rates
from tests.fuzz.harness import fuzz

U64 = st.integers(0, 2**64 - 1)
NAMES = st.sampled_from(["read_bytes", "write_bytes", "ops", "x"])


@given(
    st.sampled_from([32, 64]).flatmap(
        lambda b: st.tuples(st.just(b), st.integers(0, 2**b - 1), st.integers(0, 2**b - 1))
    ),
    st.booleans(),
)
@fuzz(300)
def test_counter_delta(bits_before_after: tuple[int, int, int], restarted: bool) -> None:
    bits, before, after = bits_before_after
    delta, reset, wrapped = counter_delta(before, after, bits=bits, restarted=restarted)
    assert 0 <= delta < 2**bits and not (reset and wrapped)
    if after >= before and not restarted:
        assert (delta, reset, wrapped) == (after - before, False, False)


@given(
    st.dictionaries(NAMES, U64),
    st.dictionaries(NAMES, U64),
    st.floats(min_value=1e-6, max_value=1e9),
)
@fuzz(300)
def test_rates(before: dict[str, int], after: dict[str, int], interval: float) -> None:
    out = rates(before, after, interval)
    assert set(out) == set(before) & set(after)
    assert all(r.delta >= 0 and r.rate >= 0 for r in out.values())
