"""Darshan's own instrumentation never passes for the application's (issue 21).

A log's `h=` metadata is the MPI-IO hints Darshan wrote its own log with
(darshan-core.c `darshan_log_record_hints_and_ver`, default
`romio_no_indep_rw=true;cb_nodes=4`): read as the application's `cb_nodes` it gave false
aggregator findings (Drishti's M08-M10). Records named after Darshan itself (its log
files, its modules' pseudo-records) are not the application's I/O either.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path

import darshan
import pytest

from iolens.analyze.darshan import diagnose
from iolens.analyze.darshan.drishti import RETIRED_CODES
from iolens.analyze.darshan.rule import RuleContext
from iolens.ingest.darshan_reader import read_log
from iolens.model.darshan import DarshanJob
from iolens.model.darshan_own import (
    DEFAULT_LOG_HINTS,
    application_view,
    is_darshan_own,
    job_metadata,
    log_write_hints,
)
from iolens.model.finding import Finding
from tests.conftest import SHARED_DATA

EXAMPLES = Path(darshan.__file__).parent / "examples" / "example_logs"
IOR_HDF5 = EXAMPLES / "ior_hdf5_example.darshan"  # 4 ranks on 1 node (DXT), h=...cb_nodes=4
RELEASE = SHARED_DATA / "darshan-logs" / "release_logs"
MPIIO_DXT = RELEASE / "mpi-io-test-x86_64-3.1.3.darshan"  # DXT: 1 host
MPIIO = RELEASE / "mpi-io-test-x86_64-3.4.0.darshan"
REAL_LOGS = sorted((SHARED_DATA / "darshan-logs").rglob("*.darshan")) + sorted(
    (SHARED_DATA / "darshan-logs-generated").rglob("*.darshan")
)


@functools.cache
def _read(path: Path) -> DarshanJob:
    return read_log(path)


def _job(path: Path) -> DarshanJob:
    if not path.exists():
        pytest.skip(f"{path} absent (shared data not mounted)")
    return _read(path)


def _text(f: Finding) -> str:
    return f.recommendation + json.dumps(f.evidence) + json.dumps(f.gain)


def test_every_real_log_carries_darshans_log_writing_hints_not_the_apps():
    """The h= of every real log is one of darshan-runtime's defaults (or none): the same
    string whatever the application did, so it cannot describe the application."""
    if not REAL_LOGS:
        pytest.skip("shared data not mounted")
    seen = set()
    for p in REAL_LOGS:
        try:
            j = _read(p)
        except Exception:  # empty_log and friends: nothing to read
            continue
        seen.add(json.dumps(log_write_hints(j.metadata), sort_keys=True))
        assert "h" not in job_metadata(j.metadata)
    default = dict(kv.split("=") for kv in DEFAULT_LOG_HINTS.split(";"))
    allowed = {json.dumps(x, sort_keys=True) for x in ({}, default, {"cb_nodes": "1"})}
    assert seen <= allowed and json.dumps(default, sort_keys=True) in seen


@pytest.mark.parametrize("log", [IOR_HDF5, MPIIO_DXT], ids=lambda p: p.name)
@pytest.mark.parametrize("nnodes", [None, 1, 4, 8])
def test_no_aggregator_finding_from_darshans_own_hints(log: Path, nnodes: int | None):
    """Today's code found 'cb_nodes=4 aggregators on 1 node' (DM09) and the like: the 4
    is Darshan's hint for writing its log, the application's is unknown."""
    ctx = RuleContext(extra={"nnodes": nnodes} if nnodes else {})
    found = diagnose(_job(log), ctx)
    assert not RETIRED_CODES & {f.code for f in found}
    for f in found:
        assert "cb_nodes" not in f.evidence, f.code
        assert "cb_nodes=4" not in _text(f) and "cb_nodes 4" not in _text(f), f.code


def test_a_darshan_log_file_in_the_records_is_not_the_applications_io():
    """mpi-io-test's data file renamed as Darshan names its logs: its findings go."""
    j = _job(MPIIO)
    rid = next(k for k, v in j.names.items() if v.endswith("mpi-io-test.tmp.dat"))
    assert any("mpi-io-test.tmp.dat" in _text(f) for f in diagnose(j))  # the app's file
    own = "/home/u/darshan-logs/2022/6/1/u_mpi-io-test_id7-77_6-1-300-1234.darshan_partial"
    renamed = replace(j, names={**j.names, rid: own})
    view = application_view(renamed)
    assert rid not in set(view.counters("POSIX")["id"]) | set(view.counters("MPI-IO")["id"])
    assert not any("darshan_partial" in _text(f) for f in diagnose(renamed))


def test_no_application_file_of_a_real_log_is_taken_for_darshans():
    """Paths under directories named darshan (Darshan's own regression runs) stay the
    application's; only pseudo-records and log files are Darshan's."""
    if not REAL_LOGS:
        pytest.skip("shared data not mounted")
    for p in REAL_LOGS:
        try:
            j = _read(p)
        except Exception:
            continue
        assert application_view(j) is j, p.name
    assert is_darshan_own("darshan-apmpi-header") and is_darshan_own("heatmap:POSIX")
    assert is_darshan_own("/lus/logs/2024/1/2/u_a.out_id1-2_1-2-3-4.darshan")
    path = "/home/snyder/.jacamar-ci/builds/x/darshan/scratch/mpi-io-test.tmp.dat"
    assert not is_darshan_own(path) and not is_darshan_own("<STDERR>")
