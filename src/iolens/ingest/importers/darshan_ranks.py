"""Who moved a shared Darshan record's data: the ranks the counters name, not an even split.

A shared record (rank -1) sums all of a job's ranks. Darshan keeps the slowest and the
fastest rank with their bytes and seconds, and the variance of the bytes over the ranks;
`rank_shares.rest_ranks` turns that variance into how many other ranks moved the rest.
So a collective write through one aggregator gives rank 0 the bytes it moved, and a
file's write-op count no longer reads as the number of processes sharing it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iolens.ingest.darshan_records import Block
from iolens.model.rank_shares import rest_ranks

#: the three parts of a shared record, in column order
SLOWEST, FASTEST, REST = 0, 1, 2


@dataclass(frozen=True)
class RankPlan:
    """Per record of one counter block: its named ranks and how its bytes divide."""

    nprocs: int
    slow: np.ndarray  # slowest rank
    fast: np.ndarray  # fastest rank
    part_bytes: np.ndarray  # (records, 3) bytes of the slowest, the fastest, the rest
    tfrac: np.ndarray  # (records, 3) shares of the record's time, the same parts
    rest: np.ndarray  # how many other ranks moved the rest
    known: np.ndarray  # the counters are there and agree with each other

    @classmethod
    def of(cls, b: Block, prefix: str, nprocs: int) -> RankPlan:
        def col(name: str) -> np.ndarray:
            return b.col(f"{prefix}_{name}").astype(np.float64)

        n = max(int(nprocs), 1)
        total = col("BYTES_READ") + col("BYTES_WRITTEN")
        bs, bf = col("SLOWEST_RANK_BYTES"), col("FASTEST_RANK_BYTES")
        slow, fast = col("SLOWEST_RANK").astype(np.int64), col("FASTEST_RANK").astype(np.int64)
        rest = rest_ranks(total, n, bs, bf, col("F_VARIANCE_RANK_BYTES"))
        left = total - bs - bf
        named = (slow != fast) & (slow >= 0) & (fast >= 0) & (slow < n) & (fast < n)
        known = named & (n >= 2) & (total > 0) & (bs >= 0) & (bf >= 0) & (left >= 0)
        known &= (left == 0) | (rest > 0)
        io = col("F_READ_TIME") + col("F_WRITE_TIME") + col("F_META_TIME")

        def tshare(t: np.ndarray, most: np.ndarray | float) -> np.ndarray:
            return np.clip(np.divide(t, io, out=np.zeros(len(b)), where=io > 0), 0, most)

        ts = tshare(col("F_SLOWEST_RANK_TIME"), 1.0)
        tf = tshare(col("F_FASTEST_RANK_TIME"), 1 - ts)
        return cls(
            n,
            slow,
            fast,
            np.stack([bs, bf, np.maximum(left, 0)], 1).astype(np.int64),
            np.stack([ts, tf, 1 - ts - tf], 1),
            rest,
            known,
        )

    def apply(self, it: dict[str, np.ndarray], rec: np.ndarray, cap: int) -> dict[str, np.ndarray]:
        """Shared data rows (`rec`: each row's record) -> one row per rank with a part.

        Each record's bytes go to its parts as Darshan counted them (`split_record`); a
        part's ops and bytes of the rest go evenly to at most `rest` ranks (never more
        than its ops; fewer when all rows would pass `cap`), evenly spaced among the
        ranks other than the two named ones. Durations follow the parts' time shares.
        """
        c3, b3 = self.split(it["count"], it["bytes"], rec)
        t3 = np.where(c3 > 0, self.tfrac[rec], 0.0)
        t3 /= np.maximum(t3.sum(1, keepdims=True), 1e-300)
        m = np.minimum(self.rest[rec], c3[:, REST])
        if m.sum() > cap:  # a huge job's many shared files: fewer, bigger shares
            m = np.minimum(m, max(1, cap // len(m)))
        has_s = (c3[:, SLOWEST] > 0).astype(np.int64)
        has_f = (c3[:, FASTEST] > 0).astype(np.int64)
        k = has_s + has_f + m
        row = np.repeat(np.arange(len(rec)), k)
        j = np.arange(len(row)) - np.repeat(np.cumsum(k) - k, k)
        has_s, has_f = has_s[row], has_f[row]
        part = np.where(j < has_s, SLOWEST, np.where(j < has_s + has_f, FASTEST, REST))
        i = j - has_s - has_f  # index among the rest's ranks
        mm = np.maximum(m[row], 1)
        cr, br = c3[row, REST], b3[row, REST]
        slow, fast = self.slow[rec][row], self.fast[rec][row]
        lo, hi = np.minimum(slow, fast), np.maximum(slow, fast)
        r = i * (self.nprocs - 2) // mm
        r = r + (r >= lo)
        r = r + (r >= hi)
        out = {name: v[row] for name, v in it.items()}
        out.update(
            rank=np.where(part == SLOWEST, slow, np.where(part == FASTEST, fast, r)),
            count=np.where(part == REST, cr // mm + (i < cr % mm), c3[row, part]),
            bytes=np.where(part == REST, br // mm + (i < br % mm), b3[row, part]),
            dur=out["dur"] * t3[row, part] / np.where(part == REST, mm, 1),
        )
        return out

    def split(
        self, cnt: np.ndarray, nbytes: np.ndarray, rec: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """`split_record` over all rows at once (a record has a read and/or a write row);
        the few rows with fewer ops than parts with bytes go through `split_record`."""
        if not len(rec):
            return np.zeros((0, 3), np.int64), np.zeros((0, 3), np.int64)
        order = np.argsort(rec, kind="stable")
        r = rec[order]
        first = np.r_[True, r[1:] != r[:-1]]
        starts = np.flatnonzero(first)
        grp = np.cumsum(first) - 1
        live = np.add.reduceat(nbytes[order], starts)
        parts = self.part_bytes[r[starts]]
        want = _hamilton(live, _fractions(parts))
        b3 = np.empty((len(r), 3), np.int64)
        b3[first] = _hamilton(nbytes[order][first], _fractions(want))
        b3[~first] = want[grp[~first]] - b3[starts[grp[~first]]]  # the other row: the rest
        c = cnt[order]
        need = (b3 > 0).sum(1)
        c3 = (b3 > 0) * (c >= need)[:, None] + _hamilton(
            np.maximum(c - need, 0), _fractions(np.where((b3 > 0).any(1)[:, None], b3, want[grp]))
        )
        odd = (c > 0) & (c < need)
        odd |= np.r_[np.diff(grp) == 0, False] & np.r_[False, np.diff(grp) == 0]  # > 2 rows
        for g in np.unique(grp[odd]):
            rows = np.flatnonzero(grp == g)
            cc, bb = split_record(c[rows].tolist(), nbytes[order][rows].tolist(), parts[g].tolist())
            c3[rows], b3[rows] = cc, bb
        out_c, out_b = np.empty_like(c3), np.empty_like(b3)
        out_c[order], out_b[order] = c3, b3
        return out_c, out_b


def _fractions(w: np.ndarray) -> np.ndarray:
    """Rows of weights as fractions; a row of zeros goes to the first part (the slowest)."""
    tot = w.sum(1, keepdims=True)
    return np.where(tot > 0, w / np.maximum(tot, 1), np.array([1.0, 0.0, 0.0]))


def _hamilton(total: np.ndarray, frac: np.ndarray) -> np.ndarray:
    """`_apportion` per row: integer parts of `total` in proportion to `frac` (rows of 3),
    summing to `total` exactly."""
    want = total[:, None] * frac
    base = np.floor(want).astype(np.int64)
    left = total - base.sum(1)
    over = left < 0  # float rounding pushed a part up: take it back from the largest
    if over.any():
        big = np.argmax(base, 1)
        base[np.flatnonzero(over), big[over]] += left[over]
        left = np.maximum(left, 0)
    order = np.argsort(-(want - base), axis=1, kind="stable")
    place = np.empty_like(order)
    np.put_along_axis(place, order, np.broadcast_to(np.arange(3), order.shape), 1)
    return base + (place < left[:, None])


def split_record(
    counts: list[int], nbytes: list[int], parts: list[int]
) -> tuple[list[list[int]], list[list[int]]]:
    """One record's rows (its read and/or write row) -> ops and bytes per part.

    The parts' byte totals are Darshan's (scaled when a direction is covered elsewhere,
    e.g. by DXT); each row's bytes go to the parts in proportion, and its ops in
    proportion to those bytes with at least one op for a part given bytes. A row with
    fewer ops than parts with bytes hands a part's bytes to the row's largest part and
    takes them back from it in the other row, so the parts' totals stay Darshan's.
    """
    live = sum(nbytes)
    total = sum(parts)
    want = _apportion(live, _norm(parts)) if total > 0 else [live, 0, 0]
    b3, left = [], list(want)
    for x in nbytes[:-1]:  # a row's share of each part never passes the part (x <= live)
        b3.append(_apportion(x, _norm(want)))
        left = [lv - v for lv, v in zip(left, b3[-1], strict=True)]
    b3.append(left)  # the last row takes what is left: the parts' totals stay exact
    for r, c in enumerate(counts):
        need = [p for p in range(3) if b3[r][p] > 0]
        if 0 < c < len(need):  # too few ops: the row's largest part takes its bytes
            big = _argmax(b3[r])
            for p in need:
                if p != big:
                    _swap(b3, r, p, big, b3[r][p])
    c3 = []
    for c, row in zip(counts, b3, strict=True):
        need = [p for p in range(3) if row[p] > 0][: max(c, 0)]
        share = _apportion(max(c - len(need), 0), _norm(row if sum(row) > 0 else want))
        c3.append([share[p] + (p in need) for p in range(3)])
    return c3, b3


def _swap(b3: list[list[int]], r: int, p: int, big: int, amount: int) -> None:
    """Move `amount` bytes of part p to part `big` in row r, and back in another row."""
    b3[r][p] -= amount
    b3[r][big] += amount
    for o in range(len(b3)):
        if o != r:
            give = min(amount, b3[o][big])
            b3[o][big] -= give
            b3[o][p] += give
            return


def _apportion(total: int, frac: list[float]) -> list[int]:
    """`total` in integer parts proportional to `frac`, summing to it (largest remainder)."""
    want = [total * f for f in frac]
    base = [int(w) for w in want]
    order = sorted(range(len(frac)), key=lambda p: base[p] - want[p])
    for p in order[: max(total - sum(base), 0)]:
        base[p] += 1
    return base


def _norm(w: list[int]) -> list[float]:
    s = sum(w)
    return [x / s for x in w] if s > 0 else [1.0, 0.0, 0.0]  # nothing to weigh: slowest


def _argmax(xs: list[int]) -> int:
    return max(range(len(xs)), key=lambda p: xs[p])
