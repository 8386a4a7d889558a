"""Score what the analyses found against the simulator's ground truth.

Episodes match when they name the same kind and component and their windows overlap
(with `slack` seconds of tolerance, since detectors see whole samples and smoothing
windows); victim -> culprit pairs match exactly. Precision and recall are counted per fault
kind, so one easy kind cannot hide a hard one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

FAULT_KINDS = ("slow_ost", "slow_forwarder", "metadata_storm", "cache_thrashing", "n1_interference")


@dataclass
class Score:
    true_pos: int = 0  # detections that match a truth item
    false_pos: int = 0
    found: int = 0  # truth items matched by some detection
    missed: int = 0
    misses: list[Any] = field(default_factory=list)
    false_alarms: list[Any] = field(default_factory=list)

    @property
    def precision(self) -> float:
        n = self.true_pos + self.false_pos
        return self.true_pos / n if n else 1.0

    @property
    def recall(self) -> float:
        n = self.found + self.missed
        return self.found / n if n else 1.0

    def add(self, other: Score) -> None:
        self.true_pos += other.true_pos
        self.false_pos += other.false_pos
        self.found += other.found
        self.missed += other.missed
        self.misses += other.misses
        self.false_alarms += other.false_alarms


def _t(value: str | datetime) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    return datetime.fromisoformat(value.replace("Z", "+00:00")).replace(tzinfo=None)


def _overlap(a: Mapping[str, Any], b: Mapping[str, Any], slack: timedelta) -> bool:
    a_end = _t(a["end"]) if a.get("end") else datetime.max
    b_end = _t(b["end"]) if b.get("end") else datetime.max
    return _t(a["start"]) - slack <= b_end and _t(b["start"]) - slack <= a_end


def score_episodes(
    truth: Iterable[Mapping[str, Any]],
    detected: Iterable[Mapping[str, Any]],
    slack_s: float = 120.0,
) -> dict[str, Score]:
    """Per-kind scores; `truth` rows have kind/component/start/end, `detected` rows are
    `anomalies` rows (kind/component_id/start/end)."""
    slack = timedelta(seconds=slack_s)
    truth = list(truth)
    detected = [dict(d, component=d.get("component", d.get("component_id"))) for d in detected]
    scores: dict[str, Score] = {}
    for kind in {*FAULT_KINDS, *(d["kind"] for d in detected)}:
        t = [x for x in truth if x["kind"] == kind]
        d = [x for x in detected if x["kind"] == kind]
        hit = [[x["component"] == y["component"] and _overlap(x, y, slack) for y in d] for x in t]
        s = Score()
        s.false_alarms = [y for j, y in enumerate(d) if not any(row[j] for row in hit)]
        s.misses = [x for i, x in enumerate(t) if not any(hit[i])]
        s.false_pos, s.missed = len(s.false_alarms), len(s.misses)
        s.true_pos, s.found = len(d) - s.false_pos, len(t) - s.missed
        scores[kind] = s
    return scores


def score_pairs(truth: Iterable[Mapping[str, Any]], detected: Iterable[Mapping[str, Any]]) -> Score:
    """Victim -> culprit pairs: `truth` from `truth["interference"]`, `detected` from the
    `interference` table (several rows per pair, one per component, count once)."""
    t = {(x["victim"], x["culprit"]) for x in truth}
    d = {(x["victim"], x["culprit"]) for x in detected}
    return Score(
        true_pos=len(d & t),
        false_pos=len(d - t),
        found=len(t & d),
        missed=len(t - d),
        misses=sorted(t - d),
        false_alarms=sorted(d - t),
    )
