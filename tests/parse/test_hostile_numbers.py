"""Hostile numbers in parsed text (issue 19): digits `int` refuses, host lists that would
name billions of hosts. Each is one clear error, quickly."""

from __future__ import annotations

import time

import pytest

from iolens.errors import InputError
from iolens.parse._common import is_digits, parse_int
from iolens.parse.slurm import MAX_HOSTS, expand_hostlist


@pytest.mark.parametrize("text", ["\u00b2", "1\u00b2", "\u0663", "\u00bd", ""])
def test_non_ascii_digits_are_not_digits(text):
    assert not is_digits(text)
    with pytest.raises(InputError, match="non-negative integer"):
        parse_int(text, "stats", 3, "read_bytes")


def test_ascii_digits_still_parse():
    assert is_digits("0042") and parse_int("18446744073709551615", "s", 1, "x") == 2**64 - 1


@pytest.mark.parametrize(
    "expr", ["n[1-999999999]", "m[0-3,9][4710-620100907]", "a[1-2000][1-2000]", "x[\u00b2-9]"]
)
def test_hostlists_beyond_any_cluster_are_refused_fast(expr):
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"hostlist|bad range"):
        expand_hostlist(expr)
    assert time.perf_counter() - t0 < 0.5


def test_hostlists_of_real_size_expand():
    assert len(expand_hostlist("cn[000001-100000]")) == 100_000
    assert expand_hostlist("r[1-2]n[01-02],gpu5") == ["r1n01", "r1n02", "r2n01", "r2n02", "gpu5"]
    assert MAX_HOSTS >= 1_000_000
