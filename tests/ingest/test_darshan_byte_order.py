"""Old big-endian Darshan logs: the POSIX fcounters libdarshan-util leaves unswapped.

The release logs of Darshan 3.0.0-3.1.6 written on ppc64 keep POSIX records of module
version < 4. libdarshan-util (and so PyDarshan) upconverts them and byte-swaps every
fcounter except the three whose indices equal POSIX_RENAME_SOURCES, _TARGETS and
POSIX_RENAMED_FROM: F_META_TIME, F_MAX_READ_TIME and F_MAX_WRITE_TIME came out as 8e-303
and the like, and the zoom-in metadata-time factor with them. The reader swaps them back.
"""

from __future__ import annotations

import struct

import darshan
import pytest

from iolens.analyze.darshan.zoomin import job_factors
from iolens.ingest.darshan_reader import read_log
from tests.conftest import SHARED_DATA

RELEASE = SHARED_DATA / "darshan-logs" / "release_logs"
#: POSIX module version < 4 (Darshan < 3.1.7), big-endian
OLD_PPC = [f"mpi-io-test-ppc64-3.{v}.darshan" for v in
           ("0.0", "0.1", "1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6")]  # fmt: skip
UNSWAPPED = ("POSIX_F_META_TIME", "POSIX_F_MAX_READ_TIME", "POSIX_F_MAX_WRITE_TIME")


def _log(name: str):  # type: ignore[no-untyped-def]
    path = RELEASE / name
    if not path.is_file():
        pytest.skip(f"{path} is not available")
    return path


def _pydarshan(path: object) -> dict[str, float]:
    rep = darshan.DarshanReport(str(path), read_all=False)
    rep.mod_read_all_records("POSIX")
    row = rep.records["POSIX"].to_df()["fcounters"].iloc[0]
    return {k: float(v) for k, v in row.items() if k.startswith("POSIX_F_")}


def _swapped(v: float) -> float:
    return struct.unpack(">d", struct.pack("<d", v))[0]


@pytest.mark.parametrize("name", OLD_PPC)
def test_old_ppc64_posix_times_are_swapped_back(name: str) -> None:
    path = _log(name)
    job = read_log(path)
    ours = job.fcounters("POSIX").iloc[0]
    theirs = _pydarshan(path)
    for k, v in theirs.items():
        if k in UNSWAPPED:
            assert ours[k] == _swapped(v), k  # the same bytes, in the right order
        else:
            assert ours[k] == v, k  # everything else was right already
    # and now plausible: 16 opens take some time, within 4 ranks x the run time
    assert 0.01 < ours["POSIX_F_META_TIME"] < job.nprocs * max(job.run_time, 1.0)
    assert 0 < ours["POSIX_F_MAX_READ_TIME"] <= ours["POSIX_F_READ_TIME"]
    assert 0 < ours["POSIX_F_MAX_WRITE_TIME"] <= ours["POSIX_F_WRITE_TIME"]


@pytest.mark.parametrize("name", OLD_PPC)
def test_metadata_factor_of_old_ppc64_logs(name: str) -> None:
    """The zoom-in metadata share was 8e-303 % on mpi-io-test-ppc64-3.0.0 (a value read in
    the wrong byte order); the same benchmark's newer ppc64 logs say 19-36 %."""
    mtime = job_factors(read_log(_log(name)))["mtime_pct"]
    assert mtime is not None and 5.0 < mtime < 60.0


@pytest.mark.parametrize(
    "name", ["mpi-io-test-ppc64-3.1.7.darshan", "mpi-io-test-x86_64-3.0.0.darshan"]
)
def test_logs_libdarshan_util_reads_right_are_untouched(name: str) -> None:
    """POSIX version 4 on ppc64, and little-endian logs of any version: as PyDarshan."""
    path = _log(name)
    ours = read_log(path).fcounters("POSIX").iloc[0]
    assert {k: float(ours[k]) for k in _pydarshan(path)} == _pydarshan(path)
