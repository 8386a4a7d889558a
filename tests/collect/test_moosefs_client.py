"""The MooseFS client source: a real `.oplog` (tests/cases/collect/moosefs_client) turned
into Lustre-style jobstats tags, checked against the loops the two processes ran."""

from __future__ import annotations

from pathlib import Path

from iolens.collect.sources import SOURCES
from iolens.collect.sources.moosefs_client import MoosefsClientSource, mfs_mounts

CASE = Path(__file__).resolve().parents[1] / "cases" / "collect" / "moosefs_client"
JOB_AND_PROCESS = CASE / "login-job-and-process"
MDT = "mfsmeta@192.0.2.2:19421"


def test_ops_are_tagged_by_job_else_process_and_uid_as_lustre_does() -> None:
    got = {
        (r.component, r.job_id): r.value
        for r in MoosefsClientSource("login").collect(JOB_AND_PROCESS)
    }
    # ground truth (PROVENANCE.md): 6 master operations per create+stat+unlink loop
    assert got[(MDT, "77")] == 40 * 6
    # the lone process: 200 loops, and one lookup of its directory before the first
    assert abs(got[(MDT, "python3.65534")] - 200 * 6) <= 1
    # the reader itself (`cat .oplog`) touches only the internal node: not counted
    assert set(got) == {(MDT, "77"), (MDT, "python3.65534")}


def test_counts_are_cumulative_counters_read_once() -> None:
    src = MoosefsClientSource("login")
    first = {r.job_id: r for r in src.collect(JOB_AND_PROCESS)}
    second = {r.job_id: r for r in src.collect(JOB_AND_PROCESS)}
    assert {k: r.value for k, r in first.items()} == {k: r.value for k, r in second.items()}
    assert all(r.counter and r.kind == "mdt" and r.metric == "md_ops" for r in first.values())


def test_only_moosefs_mounts_are_followed(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "mounts").write_text(
        "mfs#192.0.2.8:9421 /a fuse rw 0 0\n"
        "mfs\\043192.0.2.9:19421 /b\\040c fuse rw 0 0\n"
        "/dev/sda1 / ext4 rw 0 0\n"
        "sshfs#x:/ /d fuse rw 0 0\n"
    )
    got = mfs_mounts(tmp_path)
    assert [m for m, _ in got] == ["/a", "/b c"]
    assert got[1][1] == "mfsmeta@192.0.2.9:19421"
    assert list(MoosefsClientSource("h").collect(tmp_path)) == []  # no .oplog there: nothing


def test_registered_and_off_by_default() -> None:
    assert SOURCES["moosefs_client"] is MoosefsClientSource
    assert MoosefsClientSource.DEFAULT_ENABLED is False
