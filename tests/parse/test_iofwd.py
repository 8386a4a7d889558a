"""The forwarder-daemon format (`docs/forwarder-format.md`): what parses to what, what is
refused (one InputError naming the source and line), and render -> parse round trips."""

from __future__ import annotations

from pathlib import Path

import pytest

from iolens.errors import InputError
from iolens.parse import iofwd
from iolens.parse.iofwd import ForwarderStats, Tally

DOC = Path(__file__).resolve().parents[2] / "docs" / "forwarder-format.md"
SNAP = "snapshot_time             1736150400.000000000 secs.nsecs\n"
BYTES = (
    "read_bytes                10 samples [bytes] 4096 1048576 5242880\n"
    "write_bytes               0 samples [bytes] 0 0 0\n"
)


def doc_example() -> str:
    """The example file of the format's documentation (its first ``` block after 'What')."""
    text = DOC.read_text().split("## What", 1)[1]
    return text.split("```", 2)[1].strip() + "\n"


VALID: list[tuple[str, str, bool, dict[str, object]]] = [
    # (id, text, client file?, expected attributes)
    (
        "minimal",
        SNAP + BYTES,
        False,
        {
            "read_bytes": Tally(10, 5242880, 4096, 1048576),
            "write_bytes": Tally(),
            "ops": {},
            "data_ops": None,
            "md_ops": None,
            "req_qdepth": None,
            "backend_read_bytes": None,
            "start_time": None,
        },
    ),
    (
        "timed-and-2.14-headers",
        SNAP
        + "start_time                1736064000.000000000 secs.nsecs\n"
        + BYTES
        + "read                      10 samples [usec] 100 900 4000 2000000\n"
        + "getattr                   4 samples [usecs] 2 9 20\n",
        False,
        {
            "start_time": 1736064000.0,
            "ops": {"read": Tally(10, 4000, 100, 900), "getattr": Tally(4, 20, 2, 9)},
            "data_ops": Tally(10, 4000, 100, 900),
            "md_ops": Tally(4, 20, 2, 9),
        },
    ),
    (
        "elapsed-only-gives-the-start",
        SNAP + "elapsed_time              400.000000000 secs.nsecs\n" + BYTES,
        False,
        {"start_time": 1736150000.0},
    ),
    (
        "extra-counters-ignored",
        SNAP
        + BYTES
        + "cache_hit_bytes           3 samples [bytes] 1 1 3\n"
        + "req_timeout               3 samples [secs] 1 31 40\n"
        + "evictions                 12 samples [reqs]\n",
        False,
        {"ops": {}, "req_waittime": None},
    ),
    (
        "queue-and-backend",
        SNAP
        + BYTES
        + "backend_read_bytes        2 samples [bytes] 4194304 4194304 8388608\n"
        + "backend_read              2 samples [usecs] 500 700 1200\n"
        + "req_waittime              10 samples [usecs] 1 50 100\n"
        + "req_qdepth                10 samples [reqs] 0 3 12\n"
        + "req_active                10 samples [reqs] 1 4 25\n",
        False,
        {
            "backend_read_bytes": Tally(2, 8388608, 4194304, 4194304),
            "backend_read": Tally(2, 1200, 500, 700),
            "backend_write_bytes": None,
            "req_qdepth": Tally(10, 12, 0, 3),
            "req_active": Tally(10, 25, 1, 4),
        },
    ),
    (
        "client",
        SNAP + BYTES + "read 10 samples [usecs] 1 2 15\n",
        True,
        {"ops": {"read": Tally(10, 15, 1, 2)}},
    ),
]


@pytest.mark.parametrize(
    ("text", "client", "expected"), [v[1:] for v in VALID], ids=[v[0] for v in VALID]
)
def test_parses(text: str, client: bool, expected: dict[str, object]) -> None:
    got = iofwd.parse_stats(text, "t", client=client)
    assert got.snapshot_time == 1736150400.0
    for name, value in expected.items():
        assert getattr(got, name) == value, name


MALFORMED: list[tuple[str, str, bool, int, str]] = [
    # (id, text, client file?, bad line, words the message must contain)
    ("no-snapshot", BYTES, False, 1, "snapshot_time"),
    ("no-read_bytes", SNAP + "write_bytes 0 samples [bytes] 0 0 0\n", False, 2, "read_bytes"),
    ("not-a-stats-line", SNAP + BYTES + "read: 5\n", False, 4, "not a stats line"),
    (
        "bytes-in-usecs",
        SNAP + "read_bytes 1 samples [usecs] 1 1 1\n" + BYTES.splitlines(keepends=True)[1],
        False,
        2,
        "[bytes]",
    ),
    ("no-values", SNAP + BYTES + "write 3 samples [usecs]\n", False, 4, "min, max and sum"),
    (
        "twice",
        SNAP + BYTES + "open 1 samples [usecs] 1 1 1\nopen 1 samples [usecs] 1 1 1\n",
        False,
        5,
        "twice",
    ),
    (
        "min-above-max",
        SNAP + BYTES + "open 2 samples [usecs] 9 1 10\n",
        False,
        4,
        "larger than max",
    ),
    (
        "sum-without-samples",
        SNAP + BYTES + "open 0 samples [usecs] 0 0 10\n",
        False,
        4,
        "0 samples",
    ),
    ("queue-unit", SNAP + BYTES + "req_qdepth 1 samples [usecs] 1 1 1\n", False, 4, "[reqs]"),
    (
        "backend-in-client",
        SNAP + BYTES + "backend_read_bytes 1 samples [bytes] 1 1 1\n",
        True,
        4,
        "per-service",
    ),
    ("negative", SNAP + BYTES + "open -1 samples [usecs] 1 1 1\n", False, 4, "integer"),
]


@pytest.mark.parametrize(
    ("text", "client", "line", "words"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed(text: str, client: bool, line: int, words: str) -> None:
    with pytest.raises(InputError) as err:
        iofwd.parse_stats(text, "fwd/stats", client=client)
    assert err.value.source == "fwd/stats" and err.value.line == line
    assert words in err.value.message


def test_the_documented_example_parses_and_round_trips() -> None:
    st = iofwd.parse_stats(doc_example(), str(DOC))
    assert st.read_bytes.count == 1853122 and st.backend_read_bytes is not None
    assert st.req_waittime is not None and st.data_ops is not None and st.md_ops is not None
    # every client request is sampled once by the queue counters
    assert st.req_waittime.count == st.data_ops.count + st.md_ops.count
    assert iofwd.parse_stats(iofwd.render(st)) == st


def test_render_tree_paths_and_round_trip() -> None:
    totals = ForwarderStats(
        snapshot_time=1736150400.25,
        start_time=1736064000.5,
        read_bytes=Tally(3, 3 * 2**20, 2**20, 2**20),
        write_bytes=Tally(),
        ops={"read": Tally(3, 9000, 2000, 4000), "open": Tally(1, 30, 30, 30)},
        req_active=Tally(4, 6, 1, 2),
    )
    client = ForwarderStats(totals.snapshot_time, totals.start_time, totals.read_bytes, Tally())
    files = iofwd.render_tree("lwfs", totals, {"cn0001": client}, threads_max=16)
    assert set(files) == {
        "run/iofwd/lwfs/stats",
        "run/iofwd/lwfs/clients/cn0001/stats",
        "run/iofwd/lwfs/threads_max",
    }
    assert iofwd.parse_stats(files["run/iofwd/lwfs/stats"]) == totals
    assert iofwd.parse_stats(files["run/iofwd/lwfs/clients/cn0001/stats"], client=True) == client
    # Lustre's own layout: a 25-wide name column, so Lustre tooling splits it the same way
    assert files["run/iofwd/lwfs/stats"].splitlines()[3].startswith("read_bytes" + " " * 16 + "3 ")
