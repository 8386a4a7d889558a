"""Predicted against measured savings, scored one way wherever the runs come from (issue 22,
part 5): the Slurm mini cluster (`tests/cluster/test_savings.py`) and the MooseFS lab
(`bench/lab_savings.py`).

A change runs before and after in interleaved pairs; iolens predicts the saving from each
"before" run alone (a finding's `gain.seconds`), the measurement is the programs' own
clocks, that "before" run minus the next "after" one, so each pair shares the machine's
state. A change whose pairs do not agree on moving the I/O time by NO_GAIN or more made "no
difference": its prediction is tabled, not scored (the noise is as large). The others are
scored by relative error (medians over the pairs) and must be predicted with the right sign.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The goal of issue 22: median relative error of the predicted saving, and the sign.
MAX_MEDIAN_ERROR = 0.30
#: A saving under this share of the I/O time is no gain (run-to-run noise is about that).
NO_GAIN = 0.10
#: The share of pairs that must agree on the sign of the saving for it to count.
AGREE = 0.8

HEADER = [
    "| change | finding | I/O time before (s) | measured saving (s), median [range] "
    "| verdict | predicted (s) | error |",
    "|---|---|---|---|---|---|---|",
]


def io_seconds(records: Sequence[dict[str, Any]]) -> float:
    """A program's own I/O time from the JSON lines it printed: `mpiio_bench`'s write +
    read spans (rank 0 prints the job's), `mdstorm`'s slowest rank."""
    if not records:
        raise ValueError("the program printed no JSON line")
    if "write_s" in records[0]:
        return float(records[0]["write_s"]) + float(records[0]["read_s"])
    if all("seconds" in r for r in records):
        return max(float(r["seconds"]) for r in records)
    raise ValueError(f"neither write_s/read_s nor seconds in {records[0]}")


def verdict(before: float, pairs: Sequence[float], no_gain: float = NO_GAIN) -> str:
    """What the change did: "saved" or "cost" when the median pair moved the I/O time by
    `no_gain` of `before` or more and AGREE of the pairs agree on the sign, else "no
    difference"."""
    if not pairs:
        raise ValueError("no pairs of runs")
    med = statistics.median(pairs)
    agree = sum((x > 0) == (med > 0) for x in pairs) >= AGREE * len(pairs)
    if abs(med) < no_gain * before or not agree:
        return "no difference"
    return "saved" if med > 0 else "cost"


@dataclass
class Row:
    """One change: its label, the finding column, and per pair the "before" run's I/O
    time, the measured saving and the predicted one. `recommended`=False: no finding
    recommended the change, so there is no estimate to score (a saving it would have
    brought is a miss of the rules, reported apart: `Score.missed`)."""

    label: str
    finding: str
    before: list[float]
    pairs: list[float]
    predicted: list[float]
    recommended: bool = True
    verdict: str = field(init=False)
    error: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if not (len(self.before) == len(self.pairs) == len(self.predicted) > 0):
            raise ValueError(f"{self.label}: before, pairs and predicted differ in length")
        self.verdict = verdict(statistics.median(self.before), self.pairs)
        if self.verdict == "saved" and self.recommended:
            self.error = abs(self.predicted_median - self.measured) / self.measured

    @property
    def measured(self) -> float:
        return statistics.median(self.pairs)

    @property
    def predicted_median(self) -> float:
        return statistics.median(self.predicted)

    @property
    def wrong_sign(self) -> bool:
        """A saving that happened, predicted as none or as a cost."""
        return self.verdict == "saved" and self.recommended and self.predicted_median <= 0

    def line(self) -> str:
        err = "-" if self.error is None else f"{self.error:.0%}"
        if not self.recommended:
            err = "- (no finding)"
        return (
            f"| {self.label} | {self.finding} | {statistics.median(self.before):.3f} | "
            f"{self.measured:.3f} [{min(self.pairs):.3f}, {max(self.pairs):.3f}] | "
            f"{self.verdict} | {self.predicted_median:.3f} | {err} |"
        )


@dataclass
class Score:
    rows: list[Row]

    @property
    def errors(self) -> list[float]:
        return [r.error for r in self.rows if r.error is not None]

    @property
    def median_error(self) -> float | None:
        return statistics.median(self.errors) if self.errors else None

    @property
    def wrong(self) -> list[str]:
        return [r.label for r in self.rows if r.wrong_sign]

    @property
    def missed(self) -> list[str]:
        """Changes that saved time which no finding recommended."""
        return [r.label for r in self.rows if r.verdict == "saved" and not r.recommended]

    def table(self) -> str:
        pairs = sorted({len(r.pairs) for r in self.rows})
        med = self.median_error
        tail = (
            f"median error {med:.0%} over the {len(self.errors)} changes that saved time"
            if med is not None
            else "no change saved time: nothing to score"
        )
        if self.missed:
            tail += f"; saved time without a finding recommending it: {'; '.join(self.missed)}"
        n = "/".join(str(k) for k in pairs)
        return "\n".join(
            [*HEADER, *(r.line() for r in self.rows), "", f"{tail}; {n} pairs of runs each"]
        )


def score(rows: Iterable[Row]) -> Score:
    return Score(list(rows))
