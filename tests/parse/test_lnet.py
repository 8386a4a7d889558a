"""LNet global stats (`/proc/sys/lnet/stats`, debugfs `lnet/stats`): good lines and bad ones."""

from __future__ import annotations

import pytest

from iolens.errors import InputError
from iolens.parse import lnet
from tests.parse.helpers import shared

HPE = "lustre-procfs-hpe-lustre_exporter/proc/sys/lnet/stats"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # Lustre 2.10.1, HPE lustre_exporter fixture (FORMATS.md 1.6)
            "0 28 0 101719323 101719291 0 0 21201322992 53029565353720 0 0\n",
            (0, 28, 0, 101719323, 101719291, 0, 0, 21201322992, 53029565353720, 0, 0),
        ),
        (  # a router: routed traffic, drops, messages in flight; blank lines around
            "\n12 434 3 758050 0 5861025 9 59832992 0 1391108595264 2080\n\n",
            (12, 434, 3, 758050, 0, 5861025, 9, 59832992, 0, 1391108595264, 2080),
        ),
        (  # u64 lengths beyond 2^63, tabs, no trailing newline
            "1\t2\t3\t4\t5\t6\t7\t8\t9\t18446744073709551615\t0",
            (1, 2, 3, 4, 5, 6, 7, 8, 9, 2**64 - 1, 0),
        ),
    ],
)
def test_stats_line(text: str, expected: tuple[int, ...]) -> None:
    stats = lnet.parse_stats(text)
    assert tuple(getattr(stats, f) for f in lnet.FIELDS) == expected


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("", 1, "empty"),
        ("\n  \n", 1, "empty"),
        ("0 28 0 101719323 101719291 0 0 21201322992 53029565353720 0\n", 1, "got 10"),
        ("0 28 0 1 2 0 0 3 4 0 0 99\n", 1, "got 12"),
        ("0 28 0 1 2 0 0 3 4 0 x\n", 1, "drop_length"),
        ("0 -28 0 1 2 0 0 3 4 0 0\n", 1, "msgs_max"),
        ("0 28 0 1 2 0 0 3 4 0 0\n0 28 0 1 2 0 0 3 4 0 0\n", 2, "one line"),
        ("\nmsgs_alloc msgs_max errors\n", 2, "expected 11"),
    ],
)
def test_malformed(text: str, line: int, words: str) -> None:
    with pytest.raises(InputError) as exc:
        lnet.parse_stats(text, "stats")
    assert exc.value.source == "stats" and exc.value.line == line
    assert words in exc.value.message


def test_file_errors_name_the_path(tmp_path) -> None:
    path = tmp_path / "stats"
    path.write_text("1 2 3\n")
    with pytest.raises(InputError, match=rf"^{path}:1: expected 11"):
        lnet.parse_stats_file(path)


@pytest.mark.parametrize(
    "rel",
    [
        HPE,
        "lustre-procfs-llnl-lmt/lustre-1.8.3/proc/sys/lnet/stats",
        "lustre-procfs-llnl-lmt/lustre-2.12.9_12/sys/kernel/debug/lnet/stats",
        "lustre-procfs-llnl-lmt/lustre-2.15.4_1/sys/kernel/debug/lnet/stats",
    ],
)
def test_every_shared_sample_parses(rel: str) -> None:
    stats = lnet.parse_stats_file(shared(rel))
    assert stats.msgs_max >= stats.msgs_alloc


def test_hpe_sample_values() -> None:
    stats = lnet.parse_stats_file(shared(HPE))
    assert (stats.send_count, stats.send_length, stats.recv_length) == (
        101719323,
        21201322992,
        53029565353720,
    )
