"""The scorer behind docs/accuracy.md: matching by kind, component and overlapping time."""

from __future__ import annotations

from datetime import datetime

from iolens.simulate.score import score_episodes, score_pairs


def ep(component: str, start: str, end: str | None) -> dict:
    return {"kind": "slow_ost", "component": component, "start": start, "end": end}


def test_episodes_match_on_component_and_overlap_only():
    window = ("2025-03-03T08:00:00Z", "2025-03-03T08:10:00Z")
    truth = [ep("a", *window), ep("b", *window)]
    detected = [
        {"kind": "slow_ost", "component_id": "a", "start": datetime(2025, 3, 3, 8, 5), "end": None},
        {"kind": "slow_ost", "component_id": "c", "start": datetime(2025, 3, 3, 8, 5), "end": None},
        # right component, but an hour later: not the injected fault
        {
            "kind": "slow_ost",
            "component_id": "b",
            "start": datetime(2025, 3, 3, 9, 10),
            "end": datetime(2025, 3, 3, 9, 20),
        },
    ]
    s = score_episodes(truth, detected)["slow_ost"]
    assert (s.true_pos, s.false_pos, s.found, s.missed) == (1, 2, 1, 1)
    assert [m["component"] for m in s.misses] == ["b"]
    assert s.precision == 1 / 3 and s.recall == 0.5
    assert score_episodes(truth, [])["slow_ost"].recall == 0.0


def test_pairs_count_once_however_many_components():
    truth = [{"victim": "2", "culprit": "1"}, {"victim": "3", "culprit": "1"}]
    detected = [
        {"victim": "2", "culprit": "1"},
        {"victim": "2", "culprit": "1"},  # the same pair on a second component
        {"victim": "3", "culprit": "4"},
    ]
    s = score_pairs(truth, detected)
    assert (s.true_pos, s.false_pos, s.found, s.missed) == (1, 1, 1, 1)
