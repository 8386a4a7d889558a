"""DM01 (Drishti M01): the job does not use MPI-IO."""

from __future__ import annotations

from iolens.analyze.darshan.drishti.common import DrishtiRule, modules, uses_mpiio
from iolens.analyze.darshan.drishti.stdio import interface_bytes
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class NoMpiio(DrishtiRule):
    """The job does not use MPI-IO.

    Symptom: the log has no MPI-IO module: every access is POSIX or STDIO.
    Why it hurts: without MPI-IO (or HDF5/PnetCDF over it) the ranks cannot aggregate
    their requests through collective buffering, so a parallel job sends many small,
    uncoordinated requests to the file system. Drishti reports this for every such log;
    iolens keeps it a warning for parallel jobs and an info for single-process or
    I/O-free jobs, which have nothing to aggregate.
    What to do: for data shared by the ranks, open files with `MPI_File_open` and use
    collective calls, or an I/O library built on MPI-IO.
    """

    code = "DM01"
    name = "no-mpiio"
    target = "developer"
    drishti_code = "M01"
    drishti_level = "WARN"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        if uses_mpiio(job):
            return None
        stdio, posix, _ = interface_bytes(job)
        parallel = job.nprocs > 1 and stdio + posix > 0
        return self.finding(
            job,
            {
                "modules": sorted(modules(job)),
                "nprocs": int(job.nprocs),
                "posix_bytes": posix,
                "stdio_bytes": stdio,
            },
            "Use MPI-IO for data the ranks share: `MPI_File_open(comm, path, "
            "MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh); MPI_File_write_at_all(fh, off, "
            "buf, n, MPI_BYTE, &st);`, or HDF5/PnetCDF over MPI-IO.",
            severity="warning" if parallel else "info",
        )
