"""Drishti 0.8 itself against iolens's Drishti rules on the same logs (issue 6).

Drishti runs as the `drishti` command from PyPI (`drishti-io==0.8`, in the test extra),
one subprocess per log with `--csv`; the test is skipped when it is not installed. iolens
must report every insight Drishti reports, except where Drishti is wrong: each such
defect is listed in KNOWN_DEFECTS with its reason and a check, on the log, that the
defect is what made Drishti report it. bench/darshan/drishti_compare.py prints the full
table for docs/accuracy.md from the same code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import darshan
import pytest
from bench.darshan.drishti_compare import drishti_command, run_drishti, run_iolens

from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.drishti.common import col, small_bins, small_requests
from iolens.analyze.darshan.drishti.csv import drishti_codes, drishti_csv
from iolens.analyze.darshan.drishti.metadata import metadata_per_rank
from iolens.model.darshan import DarshanJob
from iolens.model.darshan_own import log_write_hints

pytestmark = pytest.mark.skipif(
    drishti_command() is None, reason="drishti not installed (pip install drishti-io==0.8)"
)

EXAMPLES = Path(darshan.__file__).parent / "examples"
SHARED = Path(__file__).resolve().parents[4] / "shared" / "data"


@dataclass(frozen=True)
class Defect:
    """A Drishti 0.8 defect that makes it report an insight iolens rightly does not."""

    short: str  # for the table in docs/accuracy.md
    reason: str
    applies: Callable[[DarshanJob], bool]  # the defect is what fired Drishti on this job


def _sparse(job: DarshanJob, op: str) -> bool:
    """Drishti's P09/P10 test: job-wide highest offset above the job-wide bytes."""
    c = job.counters("POSIX")
    moved = "POSIX_BYTES_READ" if op == "READ" else "POSIX_BYTES_WRITTEN"
    highest = "POSIX_MAX_BYTE_READ" if op == "READ" else "POSIX_MAX_BYTE_WRITTEN"
    return bool(col(c, highest).max() > col(c, moved).sum())


def _no_mpiio_requests(job: DarshanJob, op: str) -> bool:
    m = job.counters("MPI-IO")
    kinds = ("INDEP", "COLL", "SPLIT", "NB")
    return sum(int(col(m, f"MPIIO_{k}_{op}S").sum()) for k in kinds) == 0


def _one_mib_small(job: DarshanJob, op: str, shared: bool) -> bool:
    """Small by Drishti's count, not once the requests of exactly 1 MiB are left out."""
    c = job.counters("POSIX")
    if shared:
        c = c[c["rank"] == -1]
    ops = int(col(c, f"POSIX_{op}S").sum())

    def small(n: int) -> bool:
        return bool(ops and n / ops > T.SMALL_REQUESTS and n > T.SMALL_REQUESTS_ABSOLUTE)

    return small(int(small_bins(c, op).sum())) and not small(int(small_requests(c, op).sum()))


def _summed_shared_metadata(job: DarshanJob) -> bool:
    f = job.fcounters("POSIX")
    shared = col(f, "POSIX_F_META_TIME")[f["rank"] == -1]
    return bool((shared > T.METADATA_TIME_RANK).any()) and not bool(
        (metadata_per_rank(job) > T.METADATA_TIME_RANK).any()
    )


def _log_hints_cb_nodes(job: DarshanJob) -> bool:
    """cb_nodes comes from Darshan's own log-writing hints, the only hints a log has."""
    return "cb_nodes" in log_write_hints(job.metadata)


def _unswapped_meta_time(job: DarshanJob) -> bool:
    """PyDarshan reads POSIX_F_META_TIME of an old big-endian log in the wrong byte order
    (`tests/ingest/test_darshan_byte_order.py`); iolens swaps it back."""
    rep = darshan.DarshanReport(job.path, read_all=False)
    rep.mod_read_all_records("POSIX")
    theirs = rep.records["POSIX"].to_df()["fcounters"]["POSIX_F_META_TIME"].to_numpy()
    return bool((theirs != col(job.fcounters("POSIX"), "POSIX_F_META_TIME").to_numpy()).any())


_REDUNDANT = (
    "job-wide and inverted: fires when the highest offset exceeds the bytes moved (a "
    "sparse or partial access), the opposite of its message; iolens checks each file for "
    "bytes beyond its extent"
)
_ONE_MIB = (
    "Darshan's 100K_1M size bin includes requests of exactly 1 MiB, which Drishti counts "
    "as small; iolens takes them out using the most common access sizes"
)
_BLOCKING = (
    "reported whenever MPI-IO has no non-blocking request of that kind, also when the job "
    "issues no MPI-IO request of that kind at all"
)
_AGGREGATORS = (
    "Drishti reads cb_nodes from the log's h= metadata, the MPI-IO hints Darshan wrote its "
    "own log with (default romio_no_indep_rw=true;cb_nodes=4), never the application's"
)

#: Drishti 0.8 code -> the defect that explains Drishti reporting it without iolens
KNOWN_DEFECTS: dict[str, Defect] = {
    "P05": Defect(
        "1 MiB reads counted as small", _ONE_MIB, lambda j: _one_mib_small(j, "READ", False)
    ),
    "P06": Defect(
        "1 MiB writes counted as small", _ONE_MIB, lambda j: _one_mib_small(j, "WRITE", False)
    ),
    "P09": Defect("inverted job-wide redundancy check", _REDUNDANT, lambda j: _sparse(j, "READ")),
    "P10": Defect("inverted job-wide redundancy check", _REDUNDANT, lambda j: _sparse(j, "WRITE")),
    "P15": Defect(
        "1 MiB reads counted as small", _ONE_MIB, lambda j: _one_mib_small(j, "READ", True)
    ),
    "P16": Defect(
        "1 MiB writes counted as small", _ONE_MIB, lambda j: _one_mib_small(j, "WRITE", True)
    ),
    "P17": Defect(
        "shared record's summed metadata time taken as one rank's",
        "Drishti counts records with POSIX_F_META_TIME > 30 s; a shared record's value is "
        "the sum over all ranks; iolens adds up each rank's time",
        _summed_shared_metadata,
    ),
    "P19": Defect(
        "metadata time of old big-endian logs read unswapped",
        "libdarshan-util leaves POSIX_F_META_TIME of POSIX records older than version 4 in "
        "the log's byte order (8e-303 s): without the metadata seconds the time spread "
        "passes Drishti's 15 %; iolens swaps the value back",
        _unswapped_meta_time,
    ),
    "M06": Defect(
        "blocking-read advice for a job without MPI-IO reads",
        _BLOCKING,
        lambda j: _no_mpiio_requests(j, "READ"),
    ),
    "M07": Defect(
        "blocking-write advice for a job without MPI-IO writes",
        _BLOCKING,
        lambda j: _no_mpiio_requests(j, "WRITE"),
    ),
    "M08": Defect("Darshan's log-writing hints as the app's", _AGGREGATORS, _log_hints_cb_nodes),
    "M09": Defect("Darshan's log-writing hints as the app's", _AGGREGATORS, _log_hints_cb_nodes),
    "M10": Defect("Darshan's log-writing hints as the app's", _AGGREGATORS, _log_hints_cb_nodes),
}

_EX = EXAMPLES / "example_logs"
_GRAPH = EXAMPLES / "darshan-graph"
_LOGS = SHARED / "darshan-logs"
_GEN = SHARED / "darshan-logs-generated"
#: every example log of the darshan package, and one or two of each kind of shared log
LOGS = [
    *sorted(_EX.glob("*.darshan")),
    *sorted(_GRAPH.glob("*.darshan")),
    _LOGS / "release_logs" / "mpi-io-test-x86_64-3.1.3.darshan",  # with DXT
    _LOGS / "release_logs" / "mpi-io-test-x86_64-3.5.0.darshan",
    _LOGS / "release_logs" / "mpi-io-test-ppc64-3.0.0.darshan",
    _LOGS
    / "dlio_logs"
    / "snyder_python3_id3116902-2110366_12-19-66957-4077632997277538683_1.darshan",
    _LOGS / "apmpi" / "darshan-apmpi-2nodes-64mpi.darshan",
    _LOGS / "runtime_heatmap_inactive_ranks" / "treddy_runtime_heatmap_inactive_ranks.darshan",
    _LOGS / "hdf5_diagonal_write_only" / "hdf5_diagonal_write_half_ranks_dxt.darshan",
    _LOGS / "hdf5_diagonal_write_only" / "hdf5_file_opens_only.darshan",
    _LOGS / "hdf5_orthogonality" / "treddy_h5d_no_h5f.darshan",
    _LOGS
    / "ior_pnetcdf_hdf5"
    / "shane_ior-HDF5_id438090-438090_11-9-41522-17417065676046418211_1.darshan",
    _LOGS
    / "ior_pnetcdf_hdf5"
    / "shane_ior-PNETCDF_id438100-438100_11-9-41525-10280033558448664385_1.darshan",
    _LOGS
    / "ior_daos"
    / "snyder_ior-POSIX_id1057716-202103_11-8-64415-6936117869459351096_1.darshan",
    _LOGS / "stdio_no_posix" / "laytonjb_test1_id28730_6-7-43012-2131301613401632697_1.darshan",
    _LOGS / "empty_log" / "empty_log.darshan",
    _LOGS / "nonmpi_dxt_anonymized" / "nonmpi_dxt_anonymized.darshan",
    _LOGS / "partial_data_stdio" / "partial_data_stdio.darshan",
    _LOGS / "partial_data_dxt" / "partial_data_dxt.darshan",
    _GEN / "ior-dxt-1m.darshan",
    _GEN / "ior-dxt-4k.darshan",
    _GEN / "mdtest-20k.darshan",
    _GEN / "micro-posix.darshan",
]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name[:48])
def test_iolens_reports_what_drishti_reports(log: Path, tmp_path: Path) -> None:
    if not log.exists():
        pytest.skip(f"{log} absent (shared data not mounted)")
    drishti = run_drishti(log, tmp_path)
    job, findings, _ = run_iolens(log)
    mine = set(drishti_codes(findings))
    unexplained = [
        c
        for c in sorted(drishti.flags - mine)
        if c not in KNOWN_DEFECTS or not KNOWN_DEFECTS[c].applies(job)
    ]
    assert not unexplained, f"Drishti reports {unexplained} on {log.name}, iolens does not"
    if drishti.csv is not None and drishti.flags == mine:
        # same verdict: the CSV iolens exports is the one Drishti wrote, byte for byte
        assert drishti_csv(job, findings) == drishti.csv


def test_iolens_reports_more_than_drishti(tmp_path: Path) -> None:
    """MACSio rewrites and re-reads its HDF5 file 3-4x: Drishti misses it (P09, P10)."""
    log = _EX / "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"
    drishti = run_drishti(log, tmp_path)
    _, findings, _ = run_iolens(log)
    assert {"P09", "P10"} <= set(drishti_codes(findings)) - drishti.flags


def test_drishti_defects_are_real(tmp_path: Path) -> None:
    """Drishti lists P10 twice on example.darshan, and crashes on hints `h=no` and on an
    anonymised (empty) executable name; its insights up to the crash are recovered."""
    assert run_drishti(_EX / "example.darshan", tmp_path).codes.count("P10") == 2
    dxt = run_drishti(_EX / "dxt.darshan", tmp_path)
    assert dxt.error and "IndexError" in dxt.error and "P05" in dxt.flags
    partial = _LOGS / "partial_data_stdio" / "partial_data_stdio.darshan"
    if partial.exists():
        run = run_drishti(partial, tmp_path)
        assert run.error and "UnboundLocalError" in run.error and run.csv is None
