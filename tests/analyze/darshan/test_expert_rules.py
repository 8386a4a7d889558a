"""The expert rules X01-X05 (issue 21) on real Darshan logs.

Real logs show four of the five patterns:
- X02 and X04: the darshan package's MACSio log (16 ranks, HDF5 over MPI-IO): POSIX wrote
  4.1x the bytes MPI-IO was asked to write and read 38 MiB the application never read,
  and MPI-IO took 13.9 s over 0.13 s of POSIX I/O.
- X03: the ppc64 Darshan 3.1.5 release log (mpi-io-test, 4 ranks, DXT): the ranks' POSIX
  writes to the shared file on NFS ran strictly one after another while their MPI-IO
  calls overlapped (ROMIO's NFS driver locks every write).
- X01: no log in the corpus has more than 1,000 zero-byte or read-modify-write reads (the
  305,008-read case of the issue is not among them). The HDF5 diagonal-write logs have 200
  zero-byte reads (Python reading each .pyc until read() returns 0) that only DXT shows:
  the rule counts them exactly, stays silent at its defaults, and reports them at `info`
  when a site lowers ZERO_READS_MIN.
- X05: no log has a single-stripe shared file written collectively through aggregators,
  and the Darshan runtime is not available here to make one. example.darshan (2,048
  ranks, 16,384 collective writes to one Lustre file) is edited as the test says: stripe
  count 1, and the POSIX record's slowest/fastest-rank bytes as Darshan records them when
  one aggregator writes everything. With the stripe count alone changed (every rank still
  wrote its own 1 GiB, so ROMIO did not aggregate) the rule must stay silent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from iolens.analyze.catalog import catalog
from iolens.analyze.darshan import CODES, diagnose, expert
from iolens.analyze.darshan.expert import RULES
from iolens.analyze.darshan.expert.common import ExpertRule
from iolens.analyze.darshan.expert.x01_zero_byte_reads import unrequested_reads
from iolens.analyze.darshan.expert.x03_serialised_access import serialised_files
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding
from tests.analyze.darshan.zoomin_logs import example, job, shared

MACSIO = "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"
PPC_315 = ("darshan-logs", "release_logs", "mpi-io-test-ppc64-3.1.5.darshan")
X86_316 = ("darshan-logs", "release_logs", "mpi-io-test-x86_64-3.1.6.darshan")
X86_350 = ("darshan-logs", "release_logs", "mpi-io-test-x86_64-3.5.0.darshan")
APXC = ("darshan-logs", "apmpi_apxc", "mpi-io-test.darshan")  # Lustre, MPI-IO = POSIX time
PNETCDF = (
    "darshan-logs",
    "ior_pnetcdf_hdf5",
    "shane_ior-PNETCDF_id438100-438100_11-9-41525-10280033558448664385_1.darshan",
)
HDF5_DIAG = ("darshan-logs", "hdf5_diagonal_write_only", "hdf5_diagonal_write_1_byte_dxt.darshan")
PARTIAL_DXT = ("darshan-logs", "partial_data_dxt", "partial_data_dxt.darshan")
DIAGONAL = (  # 32 ranks, one byte each to its own file, staggered on purpose
    "darshan-logs",
    "runtime_and_dxt_heatmaps_diagonal_write_only",
    "runtime_and_dxt_heatmaps_diagonal_write_only.darshan",
)
IOR_1M = ("darshan-logs-generated", "ior-dxt-1m.darshan")  # 2 ranks writing concurrently


def log(where: str | tuple[str, ...]) -> Path:
    return example(where) if isinstance(where, str) else shared(*where)


def check(code: str, j: DarshanJob, ctx: RuleContext | None = None) -> Finding | None:
    rule = next(r for r in RULES if r.code == code)
    return rule.check(j, ctx or RuleContext())


def well_formed(f: Finding) -> None:
    assert f.severity in ("info", "warning", "critical")
    assert f.target in ("user", "developer", "admin")
    json.dumps(f.evidence)
    assert "`" in f.recommendation, f.recommendation
    if f.gain is not None:
        assert f.gain["factor"] >= 1.0 and f.gain["basis"]


#: code -> (log that shows it, logs that do not, severity, golden evidence subset)
GOLDEN: dict[str, tuple[Any, tuple[Any, ...], str, dict[str, Any]]] = {
    "X02": (
        MACSIO,
        (PNETCDF, "example.darshan", X86_350),
        # 77 MiB extra is under the 1 GiB byte floor: info, though 86 % of the bytes
        "info",
        {
            "mpiio_bytes": 13286360,
            "excess_write_bytes": 41293056,
            "excess_read_bytes": 39816960,
            "write_factor": 4.11,
            "read_factor": None,
            "share_of_bytes": 0.8578,
        },
    ),
    "X03": (
        PPC_315,
        (X86_316, DIAGONAL, IOR_1M),
        # 0.27 s of MPI-IO write time, under the 1 s floor
        "info",
        {"serialised_files": 1, "ranks": 4, "seconds": 0.2684},
    ),
    "X04": (
        MACSIO,
        (X86_350, APXC, PNETCDF),
        "critical",
        {"mpiio_s": 13.9, "posix_s": 0.132, "skew_s": 13.769, "share_of_io_time": 0.6597},
    ),
}


@pytest.mark.parametrize("code", sorted(GOLDEN))
def test_rule_on_real_logs(code: str) -> None:
    hit, misses, severity, evidence = GOLDEN[code]
    f = check(code, job(log(hit)))
    assert f is not None, f"{code} should fire on {hit}"
    well_formed(f)
    assert f.severity == severity
    assert {k: f.evidence[k] for k in evidence} == evidence
    for miss in misses:
        assert check(code, job(log(miss))) is None, f"{code} fired on {miss}"


def test_amplification_names_rmw_and_explains_redundant_traffic() -> None:
    f = check("X02", job(example(MACSIO)))
    assert f is not None
    assert "4.11x" in f.recommendation and "romio_ds_write" in f.recommendation
    # /tmp is not Lustre: no Lustre-only hint
    assert "romio_lustre" not in f.recommendation
    assert f.explains == ["DP10", "DP09", "X01"] == f.evidence["explains"]
    top = f.evidence["files"][0]
    assert top["path"] == "/tmp/test/macsio_hdf5_000.h5"
    assert (top["collective_writes"], top["independent_writes"]) == (64, 7695)


def test_serialised_writes_on_nfs_name_the_lock_and_the_way_out() -> None:
    j = job(log(PPC_315))
    f = check("X03", j)
    assert f is not None
    w = f.evidence["files"][0]
    assert (w["op"], w["overlap_share"], w["fs"]) == ("write", 0.0, "nfs")
    assert w["duty"] >= 0.9 and w["mpiio_overlap_share"] > 0.5  # MPI-IO calls overlapped
    assert "fully serialised" in f.recommendation and "/gpfs/mira-fs0/" in f.recommendation
    assert f.explains == ["X04", "DP19"]
    # the reads of the same log partly overlap (two ranks at once): not serialised
    assert [s["op"] for s in serialised_files(j, RuleContext())] == ["write"]


def test_skew_is_explained_by_serialisation_when_dxt_shows_it() -> None:
    f = check("X04", job(log(PPC_315)))
    assert f is not None and f.explained_by == ["X03"] == f.evidence["explained_by"]
    # read in the log's byte order (tests/ingest/test_darshan_byte_order.py): seconds, not
    # the 8e-303 an unswapped value gave
    assert 0.0 < f.evidence["posix_meta_s"] < 1.0
    assert f.severity == "info"  # 0.8 s explained, under the 1 s floor
    macsio = check("X04", job(example(MACSIO)))
    assert macsio is not None and macsio.explained_by is None
    assert "collective" in macsio.recommendation


def test_zero_byte_reads_counted_from_dxt_and_reported_only_past_the_bar() -> None:
    j = job(log(HDF5_DIAG))
    files = unrequested_reads(j, RuleContext())
    assert int(files["zero"].sum()) == 200 and bool(files["from_dxt"].all())
    assert check("X01", j) is None  # 200 reads, microseconds: under Drishti's 1,000
    site = RuleContext(extra={"thresholds": {"ZERO_READS_MIN": 0}})
    f = check("X01", j, site)
    assert f is not None
    well_formed(f)
    assert (f.evidence["zero_byte_reads"], f.evidence["zero_byte_source"]) == (200, "dxt")
    assert f.evidence["share_of_reads"] == 0.5
    assert f.severity == "info"  # a few milliseconds of the job's I/O
    assert f.explains == ["DP05"]


def test_one_byte_reads_are_not_zero_byte_reads() -> None:
    """partial_data_dxt: 1,000,000 reads of 1 byte, all in Darshan's 0-100 bin."""
    files = unrequested_reads(job(log(PARTIAL_DXT)), RuleContext())
    assert int(files["zero"].sum()) == 0 if len(files) else True


def test_rmw_reads_counted_under_mpiio_writes() -> None:
    """MACSio: POSIX read 38 MiB in 6 reads of a file MPI-IO only wrote."""
    files = unrequested_reads(job(example(MACSIO)), RuleContext())
    assert (int(files["rmw"].sum()), int(files["rmw_bytes"].sum())) == (6, 39816960)
    assert check("X01", job(example(MACSIO))) is None  # 6 reads, 9 ms


def single_aggregator(edit_posix: bool) -> DarshanJob:
    """example.darshan with its shared file on one stripe and, if `edit_posix`, rank 0
    moving every POSIX byte (fastest rank 0 bytes, slowest rank 0 with all of them)."""
    j = job(example("example.darshan"))
    j.lustre["stripe_count"] = 1
    j.lustre["osts"] = [[5] for _ in range(len(j.lustre))]
    if edit_posix:
        c = j.modules["POSIX"].counters
        c["POSIX_SLOWEST_RANK"] = 0
        c["POSIX_SLOWEST_RANK_BYTES"] = c["POSIX_BYTES_WRITTEN"]
        c["POSIX_FASTEST_RANK_BYTES"] = 0
    return j


def test_single_aggregator_chain_from_stripe_count() -> None:
    f = check("X05", single_aggregator(edit_posix=True))
    assert f is not None
    well_formed(f)
    assert f.severity == "critical"  # 2 TB, all the job's bytes through one rank
    chain = f.evidence["chain"]
    assert [c["link"] for c in chain] == ["stripe_count", "aggregators", "aggregator_share"]
    assert (chain[0]["value"], chain[1]["value"], chain[2]["value"]) == (1, 1, 1.0)
    assert chain[2]["rank"] == 0 and "ad_lustre" in chain[1]["source"]
    assert "DD01" in f.explains and "Z04" in f.explains and f.explained_by == ["Z02"]
    assert "lfs setstripe -c" in f.recommendation and "striping_factor" in f.recommendation


def test_single_aggregator_needs_the_consequence() -> None:
    # 24 stripes: ROMIO has 24 aggregators
    assert check("X05", job(example("example.darshan"))) is None
    # one stripe, but every rank wrote its own 1 GiB: ROMIO did not aggregate
    assert check("X05", single_aggregator(edit_posix=False)) is None


@pytest.mark.parametrize(
    ("share", "seconds", "expected"),
    [(0.001, 10_000.0, "info"), (0.2, 5.0, "warning"), (0.6, 5.0, "critical"), (0.6, 0.5, "info")],
)
def test_severity_scales_with_the_share_explained(
    share: float, seconds: float, expected: str
) -> None:
    """A finding on 0.1 % of the I/O is never critical, however many seconds that is."""
    assert ExpertRule().severity_for(RuleContext(), share, seconds=seconds) == expected


def test_registered_and_documented() -> None:
    codes = {r.code for r in RULES}
    assert codes == {"X01", "X02", "X03", "X04", "X05"} and codes <= CODES
    docs = catalog()
    for code in codes:
        d = docs[code]
        assert d.symptom and d.why and d.what
        assert "Drishti" in d.thresholds or "ROMIO" in d.thresholds or "zoom-in" in d.thresholds
    assert "ad_lustre" in docs["X05"].why


def test_full_diagnosis_carries_the_expert_findings() -> None:
    found = {f.code: f for f in diagnose(job(example(MACSIO)))}
    assert {"X02", "X04"} <= set(found)
    assert [f.code for f in expert.diagnose(job(example(MACSIO)))] == ["X02", "X04"]


def test_other_families_keep_their_findings_unchanged() -> None:
    """The new optional fields default to None and add nothing to existing evidence."""
    for f in diagnose(job(example("example.darshan"))):
        assert f.explains is None and f.explained_by is None
        assert "explains" not in f.evidence and "explained_by" not in f.evidence
