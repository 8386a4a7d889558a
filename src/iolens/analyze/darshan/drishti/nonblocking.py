"""DM06, DM07 (Drishti M06, M07): blocking MPI-IO reads or writes.

Drishti 0.8 reports both whenever the MPI-IO module has no non-blocking request, also for
a job that never reads (or never writes) through MPI-IO; iolens requires blocking requests
of that kind. Its HDF5 advice (the async VOL) works and is kept.
"""

from __future__ import annotations

from typing import ClassVar

from iolens.analyze.darshan.drishti.common import (
    DrishtiRule,
    col,
    per_file,
    ranks_of,
    top_files,
)
from iolens.analyze.darshan.drishti.hdf5 import async_vol, uses_hdf5
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class _Blocking(DrishtiRule):
    target = "developer"
    drishti_level = "WARN"
    op: ClassVar[str]

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        if not job.has("MPI-IO"):
            return None
        m = job.counters("MPI-IO")
        op = self.op
        blocking = (
            col(m, f"MPIIO_INDEP_{op}S")
            + col(m, f"MPIIO_COLL_{op}S")
            + col(m, f"MPIIO_SPLIT_{op}S")
        )
        nb = int(col(m, f"MPIIO_NB_{op}S").sum())
        if nb or not int(blocking.sum()):
            return None
        verb = op.lower()
        f = job.fcounters("MPI-IO")
        seconds = float(col(f, f"MPIIO_F_{op}_TIME").sum())
        per_rank = seconds / max(job.nprocs, 1)
        files = per_file(m, {f"blocking_{verb}s": blocking})
        files = files[files[f"blocking_{verb}s"] > 0]
        call = "MPI_File_iread_at" if op == "READ" else "MPI_File_iwrite_at"
        advice = (
            f"All {int(blocking.sum())} MPI-IO {verb}s block. Overlap them with computation: "
            f"`{call}(fh, off, buf, n, MPI_BYTE, &req); /* compute */ MPI_Wait(&req, &st);` "
            f"(collective: `MPI_File_i{verb}_all`, MPI 3.1)."
        )
        if uses_hdf5(job):
            advice += " " + async_vol(verb)
        return self.finding(
            job,
            {
                f"blocking_{verb}s": int(blocking.sum()),
                f"nonblocking_{verb}s": nb,
                f"mpiio_{verb}_seconds": round(seconds, 3),
                "files": top_files(job, files, f"blocking_{verb}s"),
                "ranks": ranks_of(m, files.index),
            },
            advice,
            gain=(
                {
                    "metric": f"{verb}_seconds_overlappable",
                    "seconds": round(per_rank, 3),
                    "basis": f"mean MPI-IO {verb} time per rank, the most overlap can hide",
                }
                if per_rank > 0
                else None
            ),
        )


class BlockingReads(_Blocking):
    """MPI-IO reads are all blocking.

    Symptom: the job reads through MPI-IO and issues no non-blocking read
    (MPIIO_NB_READS is 0).
    Why it hurts: each rank waits for every read to finish before computing again; the
    I/O time adds to the run time instead of overlapping with it.
    What to do: post reads early with `MPI_File_iread_at` (or `MPI_File_iread_all`) and
    wait just before the data is needed; with HDF5, the async VOL connector.
    """

    code = "DM06"
    name = "blocking-reads"
    drishti_code = "M06"
    op = "READ"


class BlockingWrites(_Blocking):
    """MPI-IO writes are all blocking.

    Symptom: the job writes through MPI-IO and issues no non-blocking write
    (MPIIO_NB_WRITES is 0).
    Why it hurts: each rank waits for every write to reach the file system before
    computing again; checkpoint time adds to the run time.
    What to do: write with `MPI_File_iwrite_at` (or `MPI_File_iwrite_all`) and complete
    the request later; with HDF5, the async VOL connector.
    """

    code = "DM07"
    name = "blocking-writes"
    drishti_code = "M07"
    op = "WRITE"
