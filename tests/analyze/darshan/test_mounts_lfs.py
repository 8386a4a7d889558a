"""The mount table gives every path its file system, and `lfs` is advised only on Lustre
(issue 21): never on /dev/shm, NFS, a local disk, or a file system's root directory.

Today's code advised `lfs setstripe` on `/dev/shm` (the generated IOR and micro logs),
on `/tmp/test` of a laptop's ext4 (mpi-io-test), on a conda tree under `/users`
(rootfs/NFS, the h5py logs) and on `//` (the anonymised non-MPI log), which each log's
own mount table rules out.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from iolens.analyze.darshan import diagnose
from iolens.ingest.darshan_reader import read_log
from iolens.model.darshan import DarshanJob
from iolens.model.mounts import MountTable, is_lustre_target, lfs_dir
from tests.conftest import SHARED_DATA

LOGS = SHARED_DATA / "darshan-logs"
GEN = SHARED_DATA / "darshan-logs-generated"
DLIO = (
    LOGS
    / "dlio_logs"
    / "snyder_python3_id3116902-2110483_12-19-66980-15861026832475351160_1.darshan"
)
APXC = LOGS / "apmpi_apxc" / "mpi-io-test.darshan"  # Cori: /global/cscratch1 is Lustre
REAL_LOGS = sorted(LOGS.rglob("*.darshan")) + sorted(GEN.rglob("*.darshan"))
_LFS = re.compile(r"`lfs (setstripe|migrate|find)[^`]*`")


@functools.cache
def _read(path: Path) -> DarshanJob:
    return read_log(path)


def _job(path: Path) -> DarshanJob:
    if not path.exists():
        pytest.skip(f"{path} absent (shared data not mounted)")
    return _read(path)


@pytest.mark.parametrize(
    ("log", "path", "fs"),
    [
        (GEN / "micro-posix.darshan", "/dev/shm/peers-w1.dat", "devtmpfs"),
        (LOGS / "nonmpi_dxt_anonymized" / "nonmpi_dxt_anonymized.darshan", "//1067575933", "ext4"),
        (
            LOGS / "hdf5_diagonal_write_only" / "hdf5_diagonal_write_1_byte_dxt.darshan",
            "/users/nawtrey/.conda/envs/pydarshan_hdf5_py38/lib/python3.8/copy.py",
            "rootfs",
        ),
        (LOGS / "release_logs" / "mpi-io-test-x86_64-3.4.0.darshan", "/tmp/test/x", "ext4"),
        (LOGS / "release_logs" / "mpi-io-test-ppc64-3.0.0.darshan", "/gpfs/mira-fs0/p/x", "gpfs"),
        (APXC, "/global/cscratch1/sd/ssnyder/tmp/mpi-io-test.tmp.dat", "lustre"),
        (APXC, "/global/cscratch1", "lustre"),
        (APXC, "/global/cscratch10/x", "overlay"),  # a prefix of the name is no mount
        (DLIO, "/home/snyder/software/dlio_benchmark/venv/x.py", "lustre"),
        (DLIO, "/soft/x", "nfs"),
        (DLIO, "/grand/projects/radix-io/usr/snyder/dlio/train/img.npz", "overlay"),  # a link
        (DLIO, "/lus/grand/projects/x", "lustre"),
    ],
    ids=lambda v: str(v)[-32:],
)
def test_fs_type_from_the_logs_mount_table(log: Path, path: str, fs: str):
    assert MountTable(_job(log).mounts).fs_type(path) == fs


def _lustre_dirs(job: DarshanJob) -> set[str]:
    """Directories of files the LUSTRE module recorded (Lustre whatever the mount says)."""
    if job.lustre is None:
        return set()
    return {job.names.get(int(i), "").rsplit("/", 1)[0] for i in job.lustre["id"]}


@pytest.mark.parametrize("log", REAL_LOGS, ids=lambda p: p.name[:40])
def test_lfs_advice_only_on_lustre_and_never_on_a_mount_point(log: Path):
    job = _job(log)
    table = MountTable(job.mounts)
    for f in diagnose(job):
        for m in _LFS.finditer(f.recommendation):
            target = m.group(0).strip("`").split()[-1]
            if target in ("DIR", "OUTDIR", "FILE"):
                continue
            on_lustre = table.fs_type(target) == "lustre" or target in _lustre_dirs(job)
            assert on_lustre, (f.code, m.group(0))
            assert not table.is_mount_point(target) and target != "/", (f.code, m.group(0))


def test_lustre_files_still_get_their_setstripe():
    """The DLIO training files sit on Lustre behind the /grand link (LUSTRE records), the
    Cori test file on /global/cscratch1 (mount table): both keep the advice."""
    dlio = {f.code: f for f in diagnose(_job(DLIO))}
    assert "lfs setstripe -c 320 -S 4M /grand/projects/radix-io/usr/snyder/dlio/train" in (
        dlio["DP08"].recommendation
    )
    apxc = {f.code: f for f in diagnose(_job(APXC))}
    assert "lfs setstripe -c 8 -S 4M /global/cscratch1/sd/ssnyder/tmp" in (
        apxc["DP19"].recommendation
    )


def test_not_on_lustre_the_advice_stays_without_lfs():
    """micro-posix writes misaligned to /dev/shm: DP08 still says what to do, minus lfs
    and the Lustre-only ROMIO striping hint."""
    dp08 = {f.code: f for f in diagnose(_job(GEN / "micro-posix.darshan"))}["DP08"]
    assert "lfs" not in dp08.recommendation and "striping_unit" not in dp08.recommendation
    assert "multiples of the alignment" in dp08.recommendation


def test_lfs_dir_and_targets():
    t = MountTable([("/lus/grand", "lustre"), ("/home", "lustre"), ("/", "ext4")])
    assert lfs_dir(t, "/lus/grand/p/out.h5") == "/lus/grand/p"
    assert lfs_dir(t, "/lus/grand/out.h5") == "DIR"  # the file system's root
    assert lfs_dir(t, "/homework/out.h5") is None  # ext4
    assert lfs_dir(t, "/grand/p/out.h5") is None
    assert lfs_dir(t, "/grand/p/out.h5", lustre_record=True) == "/grand/p"
    assert lfs_dir(MountTable([]), "/x/y") is None
    assert is_lustre_target("lustre-OST000a") and is_lustre_target("OST0001")
    assert not is_lustre_target("10.0.0.5:9422")
