"""DP09, DP10 (Drishti P09, P10): files read or written more than once, checked per file.

Drishti 0.8 compares the job-wide highest offset with the job-wide byte total, and the
wrong way round (it fires when the highest offset exceeds the bytes moved, i.e. on any
sparse or partial access), and it appends P10 twice. iolens checks each file: bytes moved
beyond the file's extent (highest offset + 1) were moved more than once; at least
REDUNDANT_MIN_BYTES of them over the job make a finding.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.drishti.common import (
    DrishtiRule,
    human,
    per_file,
    ranks_of,
    top_files,
)
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class _Redundant(DrishtiRule):
    target = "developer"
    drishti_level = "WARN"
    bytes_col: ClassVar[str]
    max_col: ClassVar[str]
    verb: ClassVar[str]
    advice: ClassVar[str]

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        if not job.has("POSIX"):
            return None
        c = job.counters("POSIX")
        moved = per_file(c, {"bytes": c[self.bytes_col]})
        extent = per_file(c, {"extent": c[self.max_col] + 1}, "max")
        files = moved.join(extent)
        files = files[(files["bytes"] > 0) & (files["bytes"] > files["extent"])]
        if not len(files):
            return None
        files["redundant_bytes"] = files["bytes"] - files["extent"]
        files["factor"] = np.round(files["bytes"] / files["extent"], 2)
        nbytes, ext = int(files["bytes"].sum()), int(files["extent"].sum())
        if nbytes - ext < T.REDUNDANT_MIN_BYTES:
            return None
        return self.finding(
            job,
            {
                "files_affected": len(files),
                f"bytes_{self.verb}": nbytes,
                "extent_bytes": ext,
                "redundant_bytes": nbytes - ext,
                "files": top_files(job, files, "redundant_bytes"),
                "ranks": ranks_of(c, files.index),
            },
            f"{len(files)} file(s) had {human(nbytes)} {self.verb} over {human(ext)} of extent "
            f"({nbytes / ext:.1f}x). {self.advice}",
            gain={
                "metric": f"bytes_{self.verb}",
                "factor": round(nbytes / ext, 2),
                "saved_bytes": nbytes - ext,
                "basis": f"each byte of these files {self.verb} once",
            },
        )


class RedundantReads(_Redundant):
    """Files are read more than once.

    Symptom: files whose bytes read exceed their extent (POSIX_BYTES_READ >
    POSIX_MAX_BYTE_READ + 1), by at least 1 MiB over the job: the same data was read
    again, by one rank or by several.
    Why it hurts: every re-read costs file-system bandwidth and server load that a read
    once, kept in memory or broadcast, would not.
    What to do: read once and share (`MPI_Bcast` from one reader per file or node), use
    collective reads so ROMIO reads each block once, or cache re-read data.
    """

    code = "DP09"
    name = "redundant-reads"
    drishti_code = "P09"
    bytes_col = "POSIX_BYTES_READ"
    max_col = "POSIX_MAX_BYTE_READ"
    verb = "read"
    advice = (
        "Read each block once and share it: one reader per file (or node) plus "
        "`MPI_Bcast(buf, n, MPI_BYTE, 0, comm)`, or collective reads "
        "(`MPI_File_read_all`) so ROMIO fetches each block once; cache re-read data."
    )


class RedundantWrites(_Redundant):
    """Files are written more than once.

    Symptom: files whose bytes written exceed their extent (POSIX_BYTES_WRITTEN >
    POSIX_MAX_BYTE_WRITTEN + 1), by at least 1 MiB over the job: regions were
    overwritten, e.g. by checkpoints rewritten in place or by ROMIO data sieving.
    Why it hurts: every rewrite costs bandwidth and, on shared files, extent locks.
    What to do: assemble data in memory and write each region once; write successive
    checkpoints to new files; disable data sieving for writes if ROMIO causes it.
    """

    code = "DP10"
    name = "redundant-writes"
    drishti_code = "P10"
    bytes_col = "POSIX_BYTES_WRITTEN"
    max_col = "POSIX_MAX_BYTE_WRITTEN"
    verb = "written"
    advice = (
        "Write each region once: assemble it in memory first, write successive checkpoints "
        "to new files, and if ROMIO data sieving rewrites blocks, turn it off: "
        '`export MPICH_MPIIO_HINTS="*:romio_ds_write=disable"`.'
    )
