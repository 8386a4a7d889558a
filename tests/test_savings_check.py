"""The scoring shared by the mini cluster's and the lab's savings checks (issue 22)."""

from __future__ import annotations

import pytest

from tests.savings_check import NO_GAIN, Row, io_seconds, score, verdict


def test_io_seconds_reads_each_program_s_own_clock():
    bench = [{"write_s": 1.25, "read_s": 0.5, "ranks": 4}]
    assert io_seconds(bench) == pytest.approx(1.75)
    md = [{"rank": 0, "seconds": 2.0}, {"rank": 1, "seconds": 3.5}, {"rank": 2, "seconds": 1.0}]
    assert io_seconds(md) == 3.5  # the slowest rank
    with pytest.raises(ValueError, match="no JSON"):
        io_seconds([])
    with pytest.raises(ValueError, match="neither"):
        io_seconds([{"rank": 0}])


def test_verdict_needs_a_large_enough_saving_that_the_pairs_agree_on():
    assert verdict(10.0, [4.0, 5.0, 6.0]) == "saved"
    assert verdict(10.0, [-4.0, -5.0, -6.0]) == "cost"
    # below NO_GAIN of the I/O time: noise
    small = NO_GAIN * 10.0 * 0.9
    assert verdict(10.0, [small, small, small]) == "no difference"
    # a large median, but one pair of three says the opposite: not 80 % agreement
    assert verdict(10.0, [5.0, 6.0, -3.0]) == "no difference"
    # 4 of 5 agree: enough
    assert verdict(10.0, [5.0, 6.0, 4.0, 5.5, -3.0]) == "saved"
    with pytest.raises(ValueError):
        verdict(10.0, [])


def test_rows_are_scored_only_where_the_change_saved_time():
    saved = Row("a", "IOL005", [10.0, 11.0, 9.0], [4.0, 5.0, 6.0], [4.5, 5.0, 4.0])
    assert saved.verdict == "saved"
    assert saved.measured == 5.0 and saved.predicted_median == 4.5
    assert saved.error == pytest.approx(0.1)
    cost = Row("b", "IOL004", [1.0, 1.0, 1.0], [-0.5, -0.4, -0.6], [0.0, 0.0, 0.0])
    assert cost.verdict == "cost" and cost.error is None and not cost.wrong_sign
    missed = Row("c", "IOL004", [8.0, 8.0, 8.0], [3.0, 2.5, 3.5], [0.0, 0.0, 0.0])
    assert missed.wrong_sign  # time saved, none promised
    none = Row("d", "none fired", [8.0, 8.0, 8.0], [3.0, 2.5, 3.5], [0.0] * 3, recommended=False)
    assert none.verdict == "saved" and none.error is None and not none.wrong_sign
    result = score([saved, cost, missed, none])
    assert result.wrong == ["c"]
    assert result.missed == ["d"]
    assert result.errors == pytest.approx([0.1, 1.0])
    assert result.median_error == pytest.approx(0.55)
    table = result.table().splitlines()
    assert table[0].startswith("| change | finding |")
    assert table[2] == "| a | IOL005 | 10.000 | 5.000 [4.000, 6.000] | saved | 4.500 | 10% |"
    assert table[3].endswith("| cost | 0.000 | - |")
    assert table[5].endswith("| saved | 0.000 | - (no finding) |")
    assert table[-1] == (
        "median error 55% over the 2 changes that saved time; saved time without a finding "
        "recommending it: d; 3 pairs of runs each"
    )
    assert score([cost]).median_error is None
    assert "nothing to score" in score([cost]).table()


def test_a_row_needs_one_prediction_per_pair():
    with pytest.raises(ValueError, match="differ in length"):
        Row("a", "IOL004", [1.0, 2.0], [0.5, 0.4], [0.3])
