"""The fast path's agent: `collect/agent.py`'s arithmetic on many rounds at once.

A live agent turns one round of readings into one batch: counters become rates over the
time since the same counter was last read (a decrease is a restart, or a wrap near the
top of a 32-bit counter), means become delta(sum) / delta(count), gauges stay as read,
and the standard metrics also fill the wide `server_samples` row of their component (and
job). `Agent._to_batch` does that reading by reading in Python; for the thousands of
rounds of a simulated day that is most of the time spent. `DirectAgent` does the same
arithmetic, in the same floating-point operations, with numpy over a chunk of rounds,
and returns the same batches (same keys, same rows).

It must stay equal to the real agent: `tests/simulate/test_paths.py` loads a small
simulation through the real agent reading rendered files and through this, and compares
the stores table by table.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from iolens.collect.agent import SERVED_BY, STANDARD, STANDARD_GAUGES, served_rows
from iolens.model.batch import Batch
from iolens.model.schema import METRICS, SERVER_SAMPLES
from iolens.simulate.servers import Block, Raw

GAUGE, COUNTER, MEAN = 0, 1, 2
#: Columns of the wide row, in the order of `server_samples`.
WIDE = (*STANDARD, *STANDARD_GAUGES)

Key = tuple[str, str, str, str | None]  # kind, component, metric, job


class DirectAgent:
    """One host's agent over many rounds: `add` each round's readings, then `batches`."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.keys: dict[Key, int] = {}
        self.key_list: list[Key] = []
        self.rows3: dict[tuple[str, str, str | None], int] = {}  # (kind, component, job) ids
        self.row3_list: list[tuple[str, str, str | None]] = []
        self.key_row3: list[int] = []
        self.key_wide: list[int] = []  # column in WIDE, or -1
        # The rate keeper's state, per key: last value (and event count) and when read.
        self.last_value = np.zeros(0)
        self.last_per = np.zeros(0)
        self.last_time = np.zeros(0)
        self.last_round: float | None = None
        self.served: dict[str, tuple[str, str]] = {}  # targets already reported (Agent.served)
        self._clear()

    def _clear(self) -> None:
        self.times: list[float] = []
        self.counts: list[int] = []  # readings per round
        self.key: list[int] = []
        self.value: list[float] = []
        self.per: list[float] = []
        self.mode: list[int] = []
        self.bits: list[int] = []
        self.sparse: list[bool] = []
        self.fresh: list[float] = []  # NaN: not a counter born with its entry
        self.targets: list[dict[str, str]] = []  # per round: the Lustre targets read

    def _key(self, k: Key) -> int:
        i = self.keys[k] = len(self.key_list)
        self.key_list.append(k)
        k3 = (k[0], k[1], k[3])
        g = self.rows3.get(k3)
        if g is None:
            g = self.rows3[k3] = len(self.row3_list)
            self.row3_list.append(k3)
        self.key_row3.append(g)
        self.key_wide.append(WIDE.index(k[2]) if k[2] in WIDE else -1)
        return i

    def add(self, now: float, readings: Iterable[Raw | Block]) -> None:
        n = len(self.key)
        targets: dict[str, str] = {}
        self._take(readings, targets)
        self.times.append(now)
        self.counts.append(len(self.key) - n)
        self.targets.append(targets)

    def _take(self, readings: Iterable[Raw | Block], targets: dict[str, str]) -> None:
        keys, key, value, per, mode, bits = (
            self.keys,
            self.key,
            self.value,
            self.per,
            self.mode,
            self.bits,
        )
        sparse, fresh = self.sparse, self.fresh
        for reading in readings:
            if reading.__class__ is Block:
                self._block(reading, targets)  # type: ignore[arg-type]
                continue
            kind, comp, metric, v, counter, job, p, b, sp, fr = reading  # type: ignore[misc]
            if job is None and kind in SERVED_BY:
                targets[comp] = kind
            sparse.append(sp)
            fresh.append(np.nan if fr is None else fr)
            k = (kind, comp, metric, job)
            i = keys.get(k)
            key.append(self._key(k) if i is None else i)
            value.append(v)
            if p is not None:  # a mean: the agent rates both sums as 64-bit counters
                mode.append(MEAN)
                per.append(p or 0.0)
                bits.append(64)
            else:
                mode.append(COUNTER if counter else GAUGE)
                per.append(0.0)
                bits.append(b)

    def _block(self, block: Block, targets: dict[str, str]) -> None:
        """Readings that repeat: their columns resolved once (by this agent), then appended
        whole; equal to taking `block.raws` one by one."""
        cols = (self.key, self.value, self.per, self.mode, self.bits, self.sparse, self.fresh)
        if block.resolved is None or block.resolved[0] is not self:
            mark, mine = len(self.key), {}
            self._take(block.raws, mine)
            block.resolved = (self, tuple(c[mark:] for c in cols), mine)
            targets.update(mine)
            return
        for col, part in zip(cols, block.resolved[1], strict=True):
            col.extend(part)
        targets.update(block.resolved[2])

    def batches(self) -> list[Batch]:
        """The batches of the rounds added since the last call, in round order."""
        if not self.times:
            return []
        out = self._compute()
        self._clear()
        return out

    # -- the arithmetic ---------------------------------------------------------------------
    def _state(self) -> None:
        """Grow the per-key state to the keys seen so far (never read: NaN time)."""
        pad = len(self.key_list) - len(self.last_time)
        if pad > 0:
            self.last_value = np.r_[self.last_value, np.zeros(pad)]
            self.last_per = np.r_[self.last_per, np.zeros(pad)]
            self.last_time = np.r_[self.last_time, np.full(pad, np.nan)]

    def _compute(self) -> list[Batch]:
        self._state()
        key = np.asarray(self.key, np.int64)
        value = np.asarray(self.value, float)
        per = np.asarray(self.per, float)
        mode = np.asarray(self.mode, np.int64)
        bits = np.asarray(self.bits, np.int64)
        rounds = np.repeat(np.arange(len(self.times)), self.counts)
        now = np.asarray(self.times, float)[rounds]
        before_round = [self.last_round, *self.times[:-1]]
        prev_round = np.array([np.nan if t is None else t for t in before_round], float)[rounds]
        fresh = np.asarray(self.fresh, float)
        sparse = np.asarray(self.sparse, bool)
        # The previous reading of each key: earlier in this chunk, else the carried state.
        order = np.lexsort((np.arange(len(key)), key))
        ks = key[order]
        first = np.r_[True, ks[1:] != ks[:-1]]
        before = np.r_[0, order[:-1]]
        prev_value, prev_per, prev_time = (np.empty_like(now) for _ in range(3))
        prev_value[order] = np.where(first, self.last_value[ks], value[before])
        prev_per[order] = np.where(first, self.last_per[ks], per[before])
        prev_time[order] = np.where(first, self.last_time[ks], now[before])
        # Agent._born: a counter first seen, born with its entry since the previous round,
        # is rated from zero over that round
        born = (
            ~(prev_time >= prev_round)  # never read, or not read at the previous round
            & ~np.isnan(fresh)
            & ~np.isnan(prev_round)
            & (np.isneginf(fresh) | (fresh >= prev_round))
        )
        prev_value = np.where(born, 0.0, prev_value)
        prev_per = np.where(born, 0.0, prev_per)
        prev_time = np.where(born, prev_round, prev_time)
        last = order[np.r_[first[1:], True]]
        self.last_value[key[last]] = value[last]
        self.last_per[key[last]] = per[last]
        self.last_time[key[last]] = now[last]
        # RateKeeper.rate and Agent._interval_mean, element by element.
        interval = now - prev_time
        seen = ~np.isnan(prev_time) & (interval > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = _delta(prev_value, value, bits) / interval
            events = _delta(prev_per, per, np.full_like(bits, 64)) / interval
            mean = rate / events
        is_mean, is_counter = mode == MEAN, mode == COUNTER
        has = np.where(is_mean, seen & (events > 0), np.where(is_counter, seen, True))
        has &= ~(is_counter & sparse & (rate == 0))
        out = np.where(is_mean, mean, np.where(is_counter, rate, value))[has]
        out_interval = np.where(mode == GAUGE, np.nan, interval)[has]
        out_key, out_round = key[has], rounds[has]
        metrics = self._metrics(out_key, out_round, out, out_interval)
        samples, sample_round = self._samples(out_key, out_round, out, out_interval)
        batches = []
        m_ends = np.searchsorted(out_round, np.arange(len(self.times)), side="right")
        s_ends = np.searchsorted(sample_round, np.arange(len(self.times)), side="right")
        m0 = s0 = 0
        for r, now_r in enumerate(self.times):
            batches.append(
                Batch(
                    source=f"agent:{self.host}",
                    key=f"agent:{self.host}:{int(now_r * 1_000_000)}",
                    metrics=metrics.slice(m0, m_ends[r] - m0),
                    server_samples=samples.slice(s0, s_ends[r] - s0),
                    components=served_rows(
                        self.served, {c: (k, self.host) for c, k in self.targets[r].items()}
                    ),
                )
            )
            m0, s0 = m_ends[r], s_ends[r]
        return batches

    def _stamps(self) -> np.ndarray:
        """Each round's `ts`, as the agent makes it (a datetime, to the microsecond)."""
        return np.array(
            [datetime.fromtimestamp(t, UTC).replace(tzinfo=None) for t in self.times],
            dtype="datetime64[us]",
        )

    def _metrics(
        self, key: np.ndarray, rnd: np.ndarray, value: np.ndarray, interval: np.ndarray
    ) -> pa.Table:
        names = [pa.array([k[i] for k in self.key_list], pa.string()) for i in (0, 1, 3, 2)]
        take = pa.array(key)
        return pa.table(
            {
                "ts": pa.array(self._stamps()[rnd], pa.timestamp("us")),
                "interval_s": pa.array(interval, pa.float64(), mask=np.isnan(interval)),
                "kind": names[0].take(take),
                "component_id": names[1].take(take),
                "job_id": names[2].take(take),
                "metric": names[3].take(take),
                "value": pa.array(value, pa.float64()),
            },
            schema=METRICS,
        )

    def _samples(
        self, key: np.ndarray, rnd: np.ndarray, value: np.ndarray, interval: np.ndarray
    ) -> tuple[pa.Table, np.ndarray]:
        """The wide rows (`Agent._to_batch`'s `wide` and `intervals`), and their rounds."""
        col = np.asarray(self.key_wide, np.int64)[key]
        pick = col >= 0
        col, value, interval, rnd = col[pick], value[pick], interval[pick], rnd[pick]
        row3 = np.asarray(self.key_row3, np.int64)[key[pick]]
        n3 = len(self.row3_list)
        group, inverse = np.unique(rnd * n3 + row3, return_inverse=True)
        standard = col < len(STANDARD)
        timed = ~np.isnan(interval)
        keep = ~standard | timed  # a standard counter counts only once rated
        n = len(group)
        columns: list[np.ndarray] = []
        present: list[np.ndarray] = []
        for c in range(len(WIDE)):
            sel = keep & (col == c)
            v = np.full(n, np.nan)
            if c < len(STANDARD):
                v[inverse[sel]] = np.round(value[sel] * interval[sel])
            else:
                v[inverse[sel]] = value[sel]
            mask = np.zeros(n, bool)
            mask[inverse[sel]] = True
            columns.append(v)
            present.append(mask)
        # intervals[k] = last standard counter's; else the first timed gauge's (setdefault)
        row_interval = np.full(n, np.nan)
        g = standard & timed
        row_interval[inverse[g]] = interval[g]
        gauge = ~standard & timed
        idx = np.flatnonzero(gauge)[::-1]
        fill = np.full(n, np.nan)
        fill[inverse[idx]] = interval[idx]
        row_interval = np.where(np.isnan(row_interval), fill, row_interval)
        # A row exists if some metric made it in, and has an interval (its own or the round's)
        group_round = group // n3
        round_interval = np.full(len(self.times), np.nan)
        last = self.last_round
        for r, t in enumerate(self.times):
            if last is not None:
                round_interval[r] = t - last
            last = t
        self.last_round = last
        row_interval = np.where(np.isnan(row_interval), round_interval[group_round], row_interval)
        exists = np.logical_or.reduce(present) & ~np.isnan(row_interval)
        ids = (group % n3)[exists]
        names = [pa.array([k[i] for k in self.row3_list], pa.string()) for i in range(3)]
        take = pa.array(ids)
        table = pa.table(
            {
                "ts": pa.array(self._stamps()[group_round[exists]], pa.timestamp("us")),
                "interval_s": pa.array(row_interval[exists], pa.float64()),
                "kind": names[0].take(take),
                "component_id": names[1].take(take),
                "job_id": names[2].take(take),
                **{
                    name: pa.array(
                        np.nan_to_num(columns[c][exists]).astype(np.int64)
                        if c < len(STANDARD)
                        else columns[c][exists],
                        pa.int64() if c < len(STANDARD) else pa.float64(),
                        mask=~present[c][exists],
                    )
                    for c, name in enumerate(WIDE)
                },
                "source": pa.nulls(int(exists.sum()), pa.string()),
            },
            schema=SERVER_SAMPLES,
        )
        return table, group_round[exists]


def _delta(before: np.ndarray, after: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """`parse.rates.counter_delta` on arrays: growth, a wrap near the top of a `bits`-wide
    counter, or a restart (the new value is what was counted since)."""
    top = np.ldexp(1.0, bits)
    wrapped = (after < before) & (before >= top / 2) & (after < top / 4)
    return np.where(after >= before, after - before, np.where(wrapped, after + top - before, after))
