"""DS01 (Drishti S01): a large share of the data goes through STDIO."""

from __future__ import annotations

from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.drishti.common import (
    DrishtiRule,
    human,
    per_file,
    ranks_of,
    share_severity,
    top_files,
    total,
)
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


def interface_bytes(job: DarshanJob) -> tuple[int, int, int]:
    """(STDIO, POSIX-only, MPI-IO) bytes as Drishti counts them: MPI-IO traffic also shows
    in POSIX, so it is taken out of POSIX once."""
    stdio = total(job.counters("STDIO"), "STDIO_BYTES_READ", "STDIO_BYTES_WRITTEN")
    posix = total(job.counters("POSIX"), "POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN")
    mpiio = total(job.counters("MPI-IO"), "MPIIO_BYTES_READ", "MPIIO_BYTES_WRITTEN")
    if posix > 0 and posix >= mpiio:
        posix -= mpiio
    return stdio, posix, mpiio


class StdioHeavy(DrishtiRule):
    """The job moves much of its data through STDIO.

    Symptom: more than 10 % of the bytes read and written go through STDIO (fread, fwrite,
    fprintf), Drishti's interface_stdio threshold.
    Why it hurts: STDIO serialises through a per-stream buffer of a few KiB, so every rank
    issues many small system calls and nothing aggregates them across ranks.
    What to do: move bulk data to MPI-IO or a library over it (HDF5, PnetCDF); for output
    that stays serial, give the stream a large buffer with `setvbuf`.
    """

    code = "DS01"
    name = "stdio-heavy"
    target = "developer"
    drishti_code = "S01"
    drishti_level = "HIGH"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        stdio, posix, mpiio = interface_bytes(job)
        all_bytes = stdio + posix + mpiio
        if not all_bytes or stdio / all_bytes <= T.INTERFACE_STDIO:
            return None
        share = stdio / all_bytes
        c = job.counters("STDIO")
        files = per_file(
            c,
            {
                "bytes": c["STDIO_BYTES_READ"] + c["STDIO_BYTES_WRITTEN"],
                "ops": c["STDIO_READS"] + c["STDIO_WRITES"],
            },
        )
        files = files[files["bytes"] > 0]
        evidence = {
            "stdio_bytes": stdio,
            "posix_bytes": posix,
            "mpiio_bytes": mpiio,
            "stdio_share": round(share, 4),
            "files": top_files(job, files, "bytes"),
            "ranks": ranks_of(c, files.index),
        }
        return self.finding(
            job,
            evidence,
            f"{share:.0%} of the data ({human(stdio)}) goes through STDIO. Write bulk data "
            "through MPI-IO (`MPI_File_write_at_all(fh, offset, buf, n, MPI_BYTE, &st)`) or "
            "HDF5/PnetCDF; for serial text output use a large buffer: "
            "`setvbuf(fp, NULL, _IOFBF, 4 << 20);`",
            severity=share_severity(share),
        )
