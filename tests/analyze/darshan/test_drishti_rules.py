"""Golden tests of the Drishti rules (issue 6) on real Darshan logs.

Each rule has a log that triggers it and one that does not. The darshan package's example
logs are always present; the shared logs (../shared/data) are skipped when absent. Where
no real log triggers a rule (DP13, DP21, DP22, DM03, DM04, and the
defect-fix cases), the test builds the job from a real log by editing counters, and says
so. Drishti's M08-M10 have no rule (they read Darshan's own log-writing hints:
tests/analyze/darshan/test_darshan_own.py).
"""

from __future__ import annotations

import copy
import csv
import functools
import io
import re
from pathlib import Path
from typing import Any

import darshan
import pytest

from iolens.analyze.darshan.drishti import DRISHTI_CODES, RETIRED_CODES, RULES, diagnose
from iolens.analyze.darshan.drishti.common import per_rank
from iolens.analyze.darshan.drishti.csv import COLUMNS, drishti_csv
from iolens.analyze.darshan.rule import RuleContext
from iolens.analyze.darshan.zoomin.factors import rank_load
from iolens.ingest.darshan_reader import read_log
from iolens.model.darshan import DarshanJob
from iolens.model.darshan_own import log_write_hints
from iolens.model.finding import Finding

EXAMPLES = Path(darshan.__file__).parent / "examples"
SHARED = Path(__file__).resolve().parents[4] / "shared" / "data"

NOPOSIX = EXAMPLES / "example_logs" / "noposix.darshan"
EXAMPLE = EXAMPLES / "example_logs" / "example.darshan"  # 2,048 ranks, MPI-IO, HDF5 file
DXT = EXAMPLES / "example_logs" / "dxt.darshan"  # 1 process, Java, many small reads
IOR_HDF5 = EXAMPLES / "example_logs" / "ior_hdf5_example.darshan"  # 4 ranks, DXT, HDF5
BADOST = EXAMPLES / "example_logs" / "sample-badost.darshan"  # 2,048 ranks, file per process
MACSIO = (
    EXAMPLES
    / "example_logs"
    / ("shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan")
)
READ_AB = (
    EXAMPLES
    / "darshan-graph"
    / ("pq_app_readAB_writeC_id71326_7-31-5658-2037904274838284930_55623.darshan")
)
READ_ONLY = (
    EXAMPLES / "darshan-graph" / ("pq_app_read_id71317_7-31-5657-2037904274838284930_55623.darshan")
)
IOR_1M = SHARED / "darshan-logs-generated" / "ior-dxt-1m.darshan"
PARTIAL_DXT = SHARED / "darshan-logs" / "partial_data_dxt" / "partial_data_dxt.darshan"
PARTIAL_STDIO = SHARED / "darshan-logs" / "partial_data_stdio" / "partial_data_stdio.darshan"


@functools.cache
def _read(path: Path) -> DarshanJob:
    return read_log(path)


def job(path: Path) -> DarshanJob:
    """A private copy of the log's job (tests may edit it)."""
    if not path.exists():
        pytest.skip(f"{path} absent (shared data not mounted)")
    return copy.deepcopy(_read(path))


def run(j: DarshanJob, ctx: RuleContext | None = None) -> dict[str, Finding]:
    return {f.code: f for f in diagnose(j, ctx)}


def edit(j: DarshanJob, module: str, rows: Any = None, fc: bool = False, **values: Any) -> None:
    """Set counters of `module` (on the rows where `rows(frame)` holds, else all)."""
    m = j.modules[module]
    frame = m.fcounters if fc else m.counters
    mask = rows(frame) if rows is not None else slice(None)
    for k, v in values.items():
        frame.loc[mask, k] = v
    j.forget()  # the rules' records and rank loads of the unedited log


# --- one trigger and one non-trigger per rule, on real logs --------------------------------

#: code -> (log that triggers it, log that does not, severity, golden evidence subset)
GOLDEN: dict[str, tuple[Path, Path, str, dict[str, Any]]] = {
    "DS01": (NOPOSIX, EXAMPLE, "critical", {"stdio_bytes": 1841971138, "stdio_share": 1.0}),
    "DP01": (EXAMPLE, DXT, "info", {"write_requests": 16402, "read_requests": 0}),
    "DP02": (DXT, EXAMPLE, "info", {"read_requests": 6126, "write_requests": 1497}),
    "DP03": (EXAMPLE, DXT, "info", {"write_bytes": 2199023259968}),
    "DP04": (DXT, EXAMPLE, "info", {"read_bytes": 22517726, "write_bytes": 13021781}),
    "DP05": (DXT, EXAMPLE, "critical", {"reads": 6126, "small_reads": 6126}),
    "DP06": (MACSIO, EXAMPLE, "critical", {"writes": 7816, "small_writes": 7812}),
    "DP07": (READ_AB, EXAMPLE, "warning", {"requests": 41, "mem_not_aligned": 20}),
    "DP08": (EXAMPLE, BADOST, "critical", {"file_not_aligned": 16401, "requests": 16402}),
    "DP09": (MACSIO, EXAMPLE, "warning", {"bytes_read": 39816960, "extent_bytes": 13286720}),
    "DP10": (MACSIO, EXAMPLE, "warning", {"bytes_written": 54737540, "files_affected": 3}),
    "DP11": (DXT, EXAMPLE, "warning", {"random": 1430, "consecutive": 3166}),
    "DP12": (IOR_HDF5, DXT, "info", {"requests": 36, "random": 10}),
    "DP14": (EXAMPLE, READ_ONLY, "info", {"requests": 16402, "sequential": 16384}),
    "DP15": (PARTIAL_DXT, EXAMPLE, "critical", {"small_shared_reads": 1000000}),
    "DP16": (MACSIO, EXAMPLE, "critical", {"small_shared_writes": 7812}),
    "DP17": (DXT, EXAMPLE, "critical", {"ranks_over": 1}),
    "DP18": (MACSIO, EXAMPLE, "critical", {"files_affected": 3}),
    "DP19": (IOR_HDF5, EXAMPLE, "warning", {"files_affected": 1}),
    "DM01": (NOPOSIX, EXAMPLE, "warning", {"nprocs": 512}),
    "DM02": (PARTIAL_DXT, EXAMPLE, "warning", {"independent": 1000000, "collective": 0}),
    "DM05": (EXAMPLE, IOR_HDF5, "info", {"collective": 16384, "independent": 18}),
    "DM06": (IOR_HDF5, EXAMPLE, "warning", {"blocking_reads": 36}),
    "DM07": (EXAMPLE, NOPOSIX, "warning", {"blocking_writes": 16402}),
}


@pytest.mark.parametrize("code", sorted(GOLDEN))
def test_rule_on_real_logs(code: str) -> None:
    hit, miss, severity, evidence = GOLDEN[code]
    f = run(job(hit)).get(code)
    assert f is not None, f"{code} should fire on {hit.name}"
    assert f.severity == severity
    assert {k: f.evidence[k] for k in evidence} == evidence
    assert f.target in ("user", "developer", "admin") and f.recommendation
    assert code not in run(job(miss)), f"{code} should not fire on {miss.name}"


def test_findings_name_the_offending_files_and_ranks() -> None:
    f = run(job(DXT))["DP05"]
    files = f.evidence["files"]
    assert len(files) == 5 and files[0]["path"].endswith("/jre/lib/rt.jar")
    assert files[0]["small_reads"] == 3347 and f.evidence["ranks"] == [0]
    assert f.gain == {
        "metric": "read_requests",
        "factor": 278.5,
        "current": 6126,
        "at_1MiB": 22,
        "basis": "6126 requests move 21.5 MiB; in 1 MiB requests that is 22",
    }
    dp08 = run(job(EXAMPLE))["DP08"]
    assert dp08.evidence["files"][0]["path"].endswith("vpicio/vpicio.hdf5")
    assert dp08.evidence["stripe"] == {"count": 24, "size": 1048576}
    assert "lfs setstripe -c 48 -S 4M /scratch2/scratchdirs/glock/" in dp08.recommendation
    assert dp08.gain is not None and dp08.gain["fraction"] == 0.9999


def test_recommendations_carry_concrete_snippets() -> None:
    found = run(job(EXAMPLE))
    assert "MPI_File_iwrite_at" in found["DM07"].recommendation
    assert "H5Pset_alignment(fapl, 1048576, 1048576)" in found["DP08"].recommendation
    ior = run(job(IOR_HDF5))
    assert "H5ESwait" in ior["DM06"].recommendation  # HDF5 async VOL advice
    macsio = run(job(MACSIO))
    assert "romio_cb_write=enable" in macsio["DP16"].recommendation
    assert "H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE)" in macsio["DP16"].recommendation


# --- rules no real log triggers: jobs built from real logs by editing counters ------------


def test_dp13_random_writes_built_from_example() -> None:
    """example.darshan with its sequential writes made random (edited counters)."""
    j = job(EXAMPLE)
    edit(j, "POSIX", POSIX_SEQ_WRITES=0, POSIX_CONSEC_WRITES=0)
    found = run(j)
    assert found["DP13"].evidence["random"] == 16402 and found["DP13"].severity == "critical"
    assert "DP14" not in found


def test_dp21_dp22_size_imbalance_built_from_read_ab() -> None:
    """pq_app_readAB: ranks 0 and 2 read file B, 5,000 bytes each (balanced); edited so
    rank 0 reads 20,000 and writes 10,000 against rank 2's 5,000 and 1,000."""
    j = job(READ_AB)
    assert not {"DP21", "DP22"} & set(run(j))
    b = next(i for i, p in j.names.items() if p.endswith("darshan-graph/B"))
    edit(j, "POSIX", lambda c: (c["id"] == b) & (c["rank"] == 0), POSIX_BYTES_READ=20000)
    edit(j, "POSIX", lambda c: (c["id"] == b) & (c["rank"] == 0), POSIX_BYTES_WRITTEN=10000)
    edit(j, "POSIX", lambda c: (c["id"] == b) & (c["rank"] == 2), POSIX_BYTES_WRITTEN=1000)
    found = run(j)
    read = found["DP22"].evidence["files"][0]
    assert read["path"].endswith("darshan-graph/B") and read["imbalance"] == 0.75
    assert read["max_rank"] == 0 and read["min_rank"] == 2
    assert found["DP21"].evidence["files"][0]["imbalance"] == 0.9
    assert "NC_NOFILL" in found["DP21"].recommendation


def test_dm03_dm04_collectives_built_from_example() -> None:
    """example.darshan's collective writes made independent (DM03), and ten collective
    reads added (DM04)."""
    j = job(EXAMPLE)
    edit(j, "MPI-IO", MPIIO_INDEP_WRITES=16402, MPIIO_COLL_WRITES=0)
    found = run(j)
    assert found["DM03"].evidence["independent"] == 16402 and "DM05" not in found
    assert "MPI_File_write_at_all" in found["DM03"].recommendation
    assert found["DM03"].gain is None  # 2 TiB in 16,402 requests: already 128 MiB each
    j = job(EXAMPLE)
    edit(j, "MPI-IO", MPIIO_COLL_READS=10)
    found = run(j)
    assert found["DM04"].severity == "info" and found["DM04"].evidence["collective"] == 10
    assert "DM02" not in found


def test_dd01_rank_zero_heavy_built_from_badost() -> None:
    """sample-badost: 2,048 ranks writing 256 MiB each. Balanced, so not rank-0 heavy
    (DXT Explorer flags it: no rank exceeds rank 0); rank 0 made to write 10x (edited)."""
    j = job(BADOST)
    assert "DD01" not in run(j)
    edit(j, "POSIX", lambda c: c["rank"] == 0, POSIX_BYTES_WRITTEN=2684354560)
    edit(j, "POSIX", lambda c: c["rank"] == 0, POSIX_WRITES=640)
    f = run(j)["DD01"]
    assert 2684354560 <= f.evidence["rank0_bytes"] < 2684354560 + 2**20  # + a little STDIO
    assert f.evidence["others_max_bytes"] < 2**28 + 2**20
    assert f.gain is not None and f.gain["factor"] == 10.0
    assert f.severity == "warning" and f.evidence["ranks"] == [0]


def test_dd02_unbalanced_workload_built_from_badost() -> None:
    """sample-badost with ranks 100-109 doing 3x the bytes, requests and time (edited)."""
    j = job(BADOST)
    assert "DD02" not in run(j)
    heavy = lambda c: c["rank"].between(100, 109)  # noqa: E731
    edit(j, "POSIX", heavy, POSIX_BYTES_WRITTEN=3 * 2**28, POSIX_WRITES=192)
    edit(j, "POSIX", heavy, fc=True, POSIX_F_WRITE_TIME=1000.0)
    f = run(j)["DD02"]
    assert f.evidence["ranks_over"] == 10 and f.evidence["ranks"][0]["rank"] in range(100, 110)
    assert f.gain is not None and f.gain["factor"] == 2.97
    assert "DD01" not in run(j)


# --- the Drishti defects iolens corrects ----------------------------------------------------


def test_redundant_traffic_is_checked_per_file() -> None:
    """Drishti flags P10 on example.darshan because its job-wide highest offset (2 TiB, a
    sparse file) exceeds the bytes written; nothing was written twice."""
    j = job(EXAMPLE)
    c = j.counters("POSIX")
    assert c["POSIX_MAX_BYTE_WRITTEN"].max() > c["POSIX_BYTES_WRITTEN"].sum()
    assert "DP10" not in run(j)
    # the same file written twice over its extent is redundant
    edit(j, "POSIX", POSIX_MAX_BYTE_WRITTEN=2199023259968 // 2 - 1)
    assert run(j)["DP10"].gain["factor"] == 2.0  # type: ignore[index]


def test_metadata_time_is_per_rank_for_shared_records() -> None:
    """ior_hdf5_example's shared record (4 ranks) given 100 s of metadata time: Drishti
    reports a rank over 30 s; each rank spent 25 s. At 200 s each rank spent 50 s."""
    j = job(IOR_HDF5)
    edit(j, "POSIX", lambda f: f["rank"] == -1, fc=True, POSIX_F_META_TIME=100.0)
    assert "DP17" not in run(j)
    edit(j, "POSIX", lambda f: f["rank"] == -1, fc=True, POSIX_F_META_TIME=200.0)
    f = run(j)["DP17"]
    assert f.evidence["ranks_over"] == 4 and f.evidence["ranks"][0]["meta_seconds"] == 50.0
    assert "H5Pset_all_coll_metadata_ops" in f.recommendation  # HDF5 advice reaches users


def test_hdf5_advice_reaches_hdf5_jobs_only() -> None:
    assert "H5Pset_alignment" in run(job(IOR_HDF5))["DP08"].recommendation
    assert "H5P" not in run(job(READ_AB))["DP08"].recommendation


def test_nonblocking_advice_needs_requests_of_that_kind() -> None:
    """Drishti reports M06 (no non-blocking reads) for write-only example.darshan."""
    found = run(job(EXAMPLE))
    assert "DM06" not in found and "DM07" in found


def test_one_mib_requests_are_not_small() -> None:
    """IOR with 1 MiB transfers: Darshan's 100K_1M bin holds them, Drishti calls them
    small (P05, P06, P15, P16)."""
    j = job(IOR_1M)
    c = j.counters("POSIX")
    assert c["POSIX_SIZE_READ_100K_1M"].sum() == 1536
    assert not {"DP05", "DP06", "DP15", "DP16"} & set(run(j))


def test_hints_h_no_and_partial_logs() -> None:
    """Drishti crashes on `h=no` (Darshan wrote its log without hints); iolens does not."""
    j = job(PARTIAL_STDIO)
    assert j.metadata["h"] == "no" and log_write_hints(j.metadata) == {}
    assert "DS01" in run(j)


def test_each_code_once_and_json_evidence() -> None:
    import json

    for path in (EXAMPLE, DXT, MACSIO, IOR_HDF5, READ_AB):
        found = diagnose(job(path))
        codes = [f.code for f in found]
        assert len(codes) == len(set(codes))  # no duplicate P10
        for f in found:
            json.dumps(f.evidence)
            json.dumps(f.gain)


def test_per_rank_workload_gives_shared_records_to_their_recorded_ranks() -> None:
    """ior_hdf5_example: the shared files' bytes are kept whole and given to the ranks
    their DXT segments name (issue 21: not an even split); the same ranks the zoom-in
    rules see."""
    j = job(IOR_HDF5)
    w = per_rank(j)
    assert list(w.index) == [0, 1, 2, 3]
    assert w["bytes"].sum() == pytest.approx(4202504 + 4195800)
    assert list(w["bytes"]) == pytest.approx(list(rank_load(j).bytes))


def test_rank_zero_moving_a_shared_file_is_seen_from_the_counters() -> None:
    """MACSio (16 ranks): rank 0, the one aggregator, wrote 92.9 MB of the 94.4 MB shared
    HDF5 file (POSIX_SLOWEST_RANK_BYTES). Split evenly, rank 0 "moved" 1/16 of it and
    neither DD01 nor DD02 fired; now rank 0 moves 98 %, 15.7x the mean rank (the truth:
    the other 15 ranks share 1.5 MB)."""
    f = run(job(MACSIO))
    assert f["DD01"].evidence["rank0_share"] == pytest.approx(0.984, abs=0.005)
    assert "98%" in f["DD01"].recommendation
    assert f["DD02"].gain is not None and f["DD02"].gain["factor"] == pytest.approx(15.7, abs=0.1)
    assert f["DD02"].evidence["ranks"][0]["rank"] == 0


# --- the rule set ---------------------------------------------------------------------------


def test_every_drishti_insight_has_a_rule() -> None:
    """All but M08-M10, which read Darshan's own log-writing hints (retired codes)."""
    codes = [r.code for r in RULES]
    assert len(codes) == len(set(codes)) == 31
    drishti = {r.drishti_code for r in RULES}
    assert drishti == {*COLUMNS, "D01", "D02"} - {"M08", "M09", "M10"}
    assert not RETIRED_CODES & set(codes)
    for r in RULES:
        assert r.code == "D" + r.drishti_code
        assert r.drishti_level in ("HIGH", "WARN", "INFO", "OK")
        if r.drishti_level in ("INFO", "OK"):
            assert r.severity == "info"
        assert r.target in ("user", "developer", "admin")


def test_every_rule_documents_symptom_why_and_fix() -> None:
    for r in RULES:
        doc = type(r).__doc__ or ""
        title, _, body = doc.partition("\n\n")
        assert title.strip() and "\n" not in title.strip(), r.code
        parts = [body.find(p) for p in ("Symptom:", "Why it hurts:", "What to do:")]
        assert -1 not in parts and parts == sorted(parts), f"{r.code} docstring"


# --- the Drishti-compatible CSV --------------------------------------------------------------


def test_drishti_csv_columns_and_flags() -> None:
    j = job(EXAMPLE)
    text = drishti_csv(j, diagnose(j))
    assert text.endswith("\r\n") and text.count("\r\n") == 2
    head, row = list(csv.reader(io.StringIO(text)))
    assert head[0] == "JOB" and row[0] == "4478544"
    assert head[1:] == list(COLUMNS) and len(head) == 33
    fired = {k for k, v in zip(head, row, strict=True) if v == "True"}
    assert fired == {"P01", "P03", "P08", "P14", "M05", "M07"}
    assert set(row[1:]) == {"True", "False"}


def test_drishti_csv_appends_dxt_explorer_codes() -> None:
    j = job(BADOST)
    edit(j, "POSIX", lambda c: c["rank"] == 0, POSIX_BYTES_WRITTEN=2684354560)
    edit(j, "POSIX", lambda c: c["rank"] == 0, POSIX_WRITES=640)
    head, row = list(csv.reader(io.StringIO(drishti_csv(j, diagnose(j)))))
    assert head[-1] == "D01" and row[-1] == "True"
    assert all(re.fullmatch(r"D[SPMD]\d\d", c) for c in DRISHTI_CODES)
