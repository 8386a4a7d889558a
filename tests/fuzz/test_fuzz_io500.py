"""IO500 result directories, fuzzed: one file of a real submission (or of a constructed run
with per-rank CSVs) damaged per input, then read and turned into the rows `load_runs`
appends. The importer must report a bad directory as an InputError and go on."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone, tzinfo

from hypothesis import example, given
from hypothesis import strategies as st

from iolens.ingest.importers import io500
from tests.fuzz.harness import fuzz, scratch
from tests.fuzz.seeds import SHARED_DATA
from tests.fuzz.trees import Edit, Trees
from tests.io500 import write_legacy_run, write_run

_BUILT = scratch("io500-src")
write_run(_BUILT / "sys-a" / "results" / "2024.05.03-09.00.00", rank_csv=True)
write_legacy_run(_BUILT / "sys-b" / "2019.06.01-10.00.00")
RUNS = Trees(
    [_BUILT, *sorted((SHARED_DATA / "io500-submission-data").glob("*-sub*"))],
    keep=lambda rel: rel.endswith((".txt", ".ini", ".csv", ".sh")),
)


ZONES = st.sampled_from([UTC, None, timezone(timedelta(hours=5)), timezone(timedelta(hours=-5))])


RUN = "sys-a/results/2024.05.03-09.00.00"
PLUS5 = timezone(timedelta(hours=5))


@given(RUNS.edits(), ZONES)
@example(Edit(0, f"{RUN}/result.txt", b"[run]\nprocs = 1e30\n"), UTC)  # OverflowError
@example(
    Edit(
        0,
        f"{RUN}/ior-easy-write.txt",
        b"clients = " + b"9" * 30 + b" (1 per node)\n"
        b"stonewalling pairs accessed min: 1 max: " + b"9" * 5000,
    ),
    UTC,
)
@example(
    Edit(
        0,
        f"{RUN}/result_summary.txt",
        b"[RESULT] ior-easy-write 1.0 GiB/s : time 1 seconds\n"
        b"[RESULT] mdtest-easy-write 1e308 kIOPS : time 1e308 seconds\n",
    ),
    UTC,
)
@example(Edit(0, f"{RUN}/ior-easy-write.txt", b"clients = 9 (0 per node)"), UTC)
@example(  # `\d+\.?\d*` backtracked quadratically: 9 s on 5,000 digits (long fuzz run)
    Edit(0, f"{RUN}/result_summary.txt", b"[RESULT] md 1 kIOPS : time " + b"1" * 5000 + b"\0"),
    UTC,
)
@example(  # year 1 moved before year 1 by the zone: OverflowError
    Edit(0, f"{RUN}/result.txt", b"; START 0001-01-01 00:00:00\n[ior-easy-write]\nscore = 1\n"),
    PLUS5,
)
@fuzz(250)
def test_result_directory(edit: Edit, tz: tzinfo | None) -> None:
    with RUNS.applied(edit) as root:
        result = io500.read_paths([root], tz=tz)
        io500.runs_table(result.runs)  # what load_runs appends: must build
        io500.phases_table(result.runs)
    for err in result.errors:  # each names its directory or file, in one short line
        assert str(root) in str(err) and "\n" not in str(err) and len(str(err)) < 1000, err
