"""sacct output and Slurm host lists, fuzzed; host lists must also expand in bounded time."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from iolens.errors import InputError
from iolens.parse import slurm
from tests.fuzz.harness import fuzz, only_input_errors, scratch
from tests.fuzz.mutate import inputs
from tests.fuzz.seeds import CASES, seeds, shared

SACCT = seeds(
    sorted((CASES / "parse" / "sacct").glob("*/input.*")),
    sorted((CASES / "import" / "sacct").rglob("*.txt")),
    shared("slurm-sacct/*/sacct*"),
)
NOHEADER = [
    json.loads(p.read_text()).get("fields")
    for p in sorted((CASES / "parse" / "sacct").glob("*/options.json"))
]
NOHEADER = [f for f in NOHEADER if f]
_DIR = scratch("slurm")

# Host lists: real shapes plus hostile ranges and brackets.
_RANGE = st.one_of(
    st.integers(0, 5000).map(str),
    st.integers(0, 10**12).map(str),
    st.sampled_from(["0", "00", "001", "9" * 30, "\u00b2", "\u0663", "", "-", "a"]),
)
_GROUP = st.lists(
    st.one_of(_RANGE, st.tuples(_RANGE, _RANGE).map("-".join)), min_size=1, max_size=4
).map(lambda rs: "[" + ",".join(rs) + "]")
HOSTLIST = st.one_of(
    st.lists(
        st.one_of(
            st.sampled_from(["n", "cn", "gpu", "r", "-", "x.y"]), _GROUP, st.text(max_size=4)
        ),
        max_size=5,
    ).map("".join),
    st.text(alphabet="[]-,0123456789n\u00b2 ", max_size=30),
)


@given(inputs(SACCT), st.sampled_from([None, *NOHEADER]), st.sampled_from(["|", "|", ",", "::"]))
@example(b"JobID|NodeList\n1|n[1-999999999]\n", None, "|")  # issue 19: >60 s, 3.9 GB
@example(b"JobID|NodeList\n1|m[0-3,9][4710-620100907]\n", None, "|")
@example(b"JobID|NNodes\n1|" + b"9" * 5000 + b"\n", None, "|")
@example(
    b"JobID|Elapsed|Start\n" + b"x" * 5000 + b"|" + b"1" * 3000 + b"|" + b"2" * 3000 + b"\n",
    None,
    "|",
)
@fuzz(400)
def test_sacct(data: bytes, fields: list[str] | None, delimiter: str) -> None:
    path = _DIR / "sacct.txt"
    path.write_bytes(data)
    only_input_errors(lambda: slurm.parse_file(path, fields=fields, delimiter=delimiter), str(path))


@given(HOSTLIST)
@example("m[0-3,9][4710-620100907]")  # issue 19: ran > 10 s before the cap
@example("n[1-999999999]")
@example("n[1-100000000,200000000-1]")  # a descending range hid 10^8 names from the cap: OOM
@example("x[\u00b2-9]")
@example("a[" + "1" * 5000 + "]")
@fuzz(300, deadline=timedelta(seconds=5))  # 2 M names (the cap): ~0.5 s, x2, on a busy CI
def test_hostlist(expr: str) -> None:
    """Names (never more than MAX_HOSTS), or ValueError, its documented error, which
    `parse_sacct` turns into an InputError naming the file and line."""
    try:
        names = slurm.expand_hostlist(expr)
    except ValueError as exc:
        assert len(str(exc)) < 400 and "\n" not in str(exc)
    else:
        assert len(names) <= slurm.MAX_HOSTS
    cell = "".join(c for c in expr if c not in "|\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
    text = f"JobID|NodeList\n1|{cell}\n"
    rows = only_input_errors(lambda: slurm.parse_sacct(text, "sacct.txt"), "sacct.txt:2")
    assert rows is None or len(rows) == 1


def test_a_file_of_huge_node_lists_costs_one_error(monkeypatch) -> None:
    """Rows just under the per-list cap add up: the file's budget stops them (scaled down
    here: 3 distinct lists of 400,000 names against a budget of 1,000,000)."""
    monkeypatch.setattr(slurm, "MAX_FILE_HOSTS", 1_000_000)
    rows = "".join(f"{i}|n{i}x[1-400000]\n" for i in range(1, 4))
    steps = "1.batch|n1x[1-400000]\n" * 50  # a job's steps repeat its list: expanded once
    with pytest.raises(InputError, match=r"more than 1,000,000 hosts") as err:
        slurm.parse_sacct("JobID|NodeList\n" + steps + rows, "big.txt")
    assert err.value.line == 54
    recs = slurm.parse_sacct("JobID|NodeList\n" + steps + "1|n1x[1-400000]\n", "ok.txt")
    assert len(recs) == 51 and all(r.nodes is recs[0].nodes for r in recs)
