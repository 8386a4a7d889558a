"""The bounding box of user expectation (Liem et al., "User-Centric System Fault
Identification Using IO500 Benchmark"), as pure functions over phase results.

An IO500 run gives, for bandwidth (GiB/s) and metadata (kIOPS), an 'easy' result (free to
tune: the best case) and a 'hard' one (small unaligned I/O to one shared file, one shared
directory: the worst case). Plotted on bandwidth x metadata axes, the hard point is the
box's worst corner and the easy point its best corner. Three views:

=========  ===============================  ========================================
view       bandwidth easy / hard            metadata easy / hard
=========  ===============================  ========================================
aggregate  geomean(ior-*-write, ior-*-read) easy: geomean(mdtest-easy-write, -stat,
                                            -delete); hard: geomean(mdtest-hard-write,
                                            -stat, -read, -delete)  (the paper's Table I)
write      ior-*-write                      mdtest-*-write
read       ior-*-read                       easy: mdtest-easy-stat; hard:
                                            geomean(mdtest-hard-stat, mdtest-hard-read)
=========  ===============================  ========================================

`find` is left out, as in the paper: it is a field for each file system's own tricks.

Since 'hard' is the worst case by design, a run where a hard result beats its easy
counterpart points at a fault during the easy phase (the paper found a broken node this
way): such runs are flagged with the reason and kept out of the box unless asked.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

BW_UNIT = "GiB/s"
MD_UNIT = "kIOPS"

#: view -> (bandwidth easy phases, hard phases, metadata easy phases, hard phases)
VIEWS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "aggregate": (
        ("ior-easy-write", "ior-easy-read"),
        ("ior-hard-write", "ior-hard-read"),
        ("mdtest-easy-write", "mdtest-easy-stat", "mdtest-easy-delete"),
        ("mdtest-hard-write", "mdtest-hard-stat", "mdtest-hard-read", "mdtest-hard-delete"),
    ),
    "write": (
        ("ior-easy-write",),
        ("ior-hard-write",),
        ("mdtest-easy-write",),
        ("mdtest-hard-write",),
    ),
    "read": (
        ("ior-easy-read",),
        ("ior-hard-read",),
        ("mdtest-easy-stat",),
        ("mdtest-hard-stat", "mdtest-hard-read"),
    ),
}

#: Phases with an easy and a hard version of the same operation: (easy, hard).
PAIRS: tuple[tuple[str, str], ...] = (
    ("ior-easy-write", "ior-hard-write"),
    ("ior-easy-read", "ior-hard-read"),
    ("mdtest-easy-write", "mdtest-hard-write"),
    ("mdtest-easy-stat", "mdtest-hard-stat"),
    ("mdtest-easy-delete", "mdtest-hard-delete"),
)

#: The phases the boxes use (everything but find and the extended-mode phases).
BOX_PHASES: tuple[str, ...] = tuple(sorted({p for v in VIEWS.values() for ps in v for p in ps}))


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean (IO500 combines its phases this way); None if any value is missing
    or not positive."""
    xs = list(values)
    if not xs or any(x is None or not x > 0 for x in xs):
        return None
    if len(xs) == 1:
        return float(xs[0])  # type: ignore[arg-type]
    return math.exp(sum(math.log(float(x)) for x in xs if x is not None) / len(xs))


@dataclass(frozen=True)
class Box:
    """A rectangle on bandwidth (GiB/s) x metadata (kIOPS): lo is the worst case, hi the best."""

    bw_lo: float
    bw_hi: float
    md_lo: float
    md_hi: float

    def union(self, other: Box) -> Box:
        return Box(
            min(self.bw_lo, other.bw_lo),
            max(self.bw_hi, other.bw_hi),
            min(self.md_lo, other.md_lo),
            max(self.md_hi, other.md_hi),
        )

    @property
    def width(self) -> float:
        return self.bw_hi - self.bw_lo

    @property
    def height(self) -> float:
        return self.md_hi - self.md_lo

    @property
    def area(self) -> float:
        return self.width * self.height


@dataclass(frozen=True)
class Corners:
    """A run's easy and hard results in one view (None where a phase is missing)."""

    easy_bw: float | None
    hard_bw: float | None
    easy_md: float | None
    hard_md: float | None

    def box(self) -> Box | None:
        """The run's box; its corners sorted, so an inverted (anomalous) run still has one."""
        vals = (self.easy_bw, self.hard_bw, self.easy_md, self.hard_md)
        if any(v is None for v in vals):
            return None
        eb, hb, em, hm = (float(v) for v in vals if v is not None)
        return Box(min(eb, hb), max(eb, hb), min(em, hm), max(em, hm))


def corners(values: Mapping[str, float | None]) -> dict[str, Corners]:
    """Every view's corners from phase values ({phase: value in IO500 units})."""
    return {
        view: Corners(*(geomean(values.get(p) for p in phases) for phases in spec))
        for view, spec in VIEWS.items()
    }


@dataclass(frozen=True)
class Inversion:
    """A 'hard' result that beat its 'easy' counterpart."""

    what: str  # a phase pair ("ior-hard-write") or a view axis ("aggregate bandwidth")
    easy_name: str
    hard_name: str
    easy: float
    hard: float
    unit: str

    @property
    def excess(self) -> float:
        """How much better hard did, as a fraction of easy (0.25 = 25 % better)."""
        return self.hard / self.easy - 1.0

    def text(self) -> str:
        return (
            f"{self.hard_name} {number(self.hard)} {self.unit} > {self.easy_name} "
            f"{number(self.easy)} {self.unit} (+{100 * self.excess:.0f} %)"
        )


def number(x: float) -> str:
    """4 significant digits, without exponents for the magnitudes IO500 reports."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def inversions(values: Mapping[str, float | None], tolerance: float = 0.0) -> list[Inversion]:
    """Pairs and view axes where hard beat easy by more than `tolerance` (a fraction)."""
    out: list[Inversion] = []
    for easy, hard in PAIRS:
        e, h = values.get(easy), values.get(hard)
        if e is not None and h is not None and e > 0 and h > e * (1.0 + tolerance):
            out.append(Inversion(hard, easy, hard, e, h, _unit(easy)))
    for view, c in corners(values).items():
        spec = VIEWS[view]
        for axis, e, h, unit, es, hs in (
            ("bandwidth", c.easy_bw, c.hard_bw, BW_UNIT, spec[0], spec[1]),
            ("metadata", c.easy_md, c.hard_md, MD_UNIT, spec[2], spec[3]),
        ):
            if len(es) == 1 and len(hs) == 1:
                continue  # a single phase pair: reported above
            if e is not None and h is not None and h > e * (1.0 + tolerance):
                out.append(
                    Inversion(
                        f"{view} {axis}", f"{view} easy {axis}", f"{view} hard {axis}", e, h, unit
                    )
                )
    return out


def _unit(phase: str) -> str:
    return BW_UNIT if phase.startswith("ior") else MD_UNIT


def anomaly_reason(found: Sequence[Inversion]) -> str | None:
    """The sentence a person reads for an anomalous run; None when nothing is inverted."""
    if not found:
        return None
    bw = any(i.unit == BW_UNIT for i in found)
    what = "; ".join(i.text() for i in found)
    hint = (
        "IOR 'hard' (small unaligned writes to one shared file) should be the worst case for "
        "bandwidth"
        if bw
        else "mdtest 'hard' (one shared directory) should be the worst case for metadata"
    )
    return (
        f"'hard' beat 'easy': {what}. {hint}, so this is a probable system fault during the "
        "'easy' phase (a degraded node, server or link; check the run's nodes and the "
        "servers' health at that time), unless this file system's worst case is another "
        "pattern."
    )


# -- many runs -------------------------------------------------------------------------------


def union(boxes: Iterable[Box | None]) -> Box | None:
    """The bounding box of the union of `boxes` (the paper's box of user expectation)."""
    out: Box | None = None
    for b in boxes:
        if b is not None:
            out = b if out is None else out.union(b)
    return out


@dataclass(frozen=True)
class Step:
    """The union box after the first `runs` runs."""

    runs: int
    run_id: str
    box: Box
    change: float | None  # largest relative change of width or height against the step before


def stability(ordered: Sequence[tuple[str, Box | None]]) -> list[Step]:
    """How the union box grows as runs accumulate, in the order given (oldest first)."""
    steps: list[Step] = []
    acc: Box | None = None
    n = 0
    for run_id, b in ordered:
        if b is None:
            continue
        n += 1
        prev = acc
        acc = b if acc is None else acc.union(b)
        change = None
        if prev is not None:
            change = max(_rel(acc.width, prev.width), _rel(acc.height, prev.height))
        steps.append(Step(n, run_id, acc, change))
    return steps


def _rel(new: float, old: float) -> float:
    if old == 0:
        return 0.0 if new == 0 else math.inf
    return abs(new / old - 1.0)


def stable_after(steps: Sequence[Step], threshold: float = 0.05, confirm: int = 3) -> int | None:
    """The run count after which no run grew the box by more than `threshold`, with at least
    `confirm` runs added since to show it; None while that has not happened."""
    for i, s in enumerate(steps):
        later = steps[i + 1 :]
        if (
            s.runs >= 2
            and len(later) >= confirm
            and all(x.change is not None and x.change <= threshold for x in later)
        ):
            return s.runs
    return None


def percentiles(
    values: Sequence[float], qs: Sequence[float] = (0.5, 0.9, 0.99)
) -> dict[str, float]:
    """min, the `qs` quantiles (linear interpolation), max and mean of `values`."""
    xs = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if not xs.size:
        return {}
    out = {"min": float(xs.min())}
    out |= {f"p{round(100 * p)}": float(np.quantile(xs, p)) for p in qs}
    return out | {"max": float(xs.max()), "mean": float(xs.mean())}
