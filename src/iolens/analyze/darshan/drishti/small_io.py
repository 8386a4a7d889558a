"""DP05, DP06 (Drishti P05, P06): many small read or write requests.

Drishti sums Darshan's size bins up to 100K_1M, whose upper bound is inclusive, so a job
moving exactly 1 MiB per request (Drishti's own recommendation) is reported as issuing
small requests. iolens takes the 1 MiB requests back out (`common.exact_mib`).
"""

from __future__ import annotations

from typing import ClassVar

from iolens.analyze.darshan.drishti.common import (
    DrishtiRule,
    mpich_hints,
    ranks_of,
    request_gain,
    share_severity,
    small_share,
    top_files,
    uses_mpiio,
)
from iolens.analyze.darshan.drishti.hdf5 import mpio_collective, uses_hdf5
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class _SmallRequests(DrishtiRule):
    target = "developer"
    drishti_level = "HIGH"
    op: ClassVar[str]  # READ or WRITE

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        if not job.has("POSIX"):
            return None
        c = job.counters("POSIX")
        sm = small_share(c, self.op)
        if sm is None:
            return None
        verb, share, call = sm.verb, sm.share, sm.collective_call
        advice = [f"Buffer {verb}s into requests of >= 1 MiB."]
        if uses_mpiio(job):
            advice.append(
                f"The job uses MPI-IO: make these calls collective (`{call}(fh, off, buf, n, "
                f"type, &st)`) so ROMIO aggregates them: `{mpich_hints(**{sm.cb_hint: 'enable'})}`."
            )
        else:
            advice.append(
                f"For data shared by ranks, use MPI-IO collectives (`{call}`) to aggregate; "
                "for serial streams, read/write whole blocks (e.g. 4 MiB) into a buffer."
            )
        if uses_hdf5(job):
            advice.append(mpio_collective())
        return self.finding(
            job,
            {
                f"{verb}s": sm.ops,
                f"small_{verb}s": sm.small,
                "small_share": round(share, 4),
                "exact_1MiB_not_counted": sm.exact_mib,
                f"bytes_{'written' if self.op == 'WRITE' else 'read'}": sm.nbytes,
                "files": top_files(job, sm.files, f"small_{verb}s"),
                "ranks": ranks_of(c, sm.files.index),
            },
            f"{sm.small} of {sm.ops} {verb}s ({share:.0%}) are under 1 MiB. " + " ".join(advice),
            severity=share_severity(share),
            gain=request_gain(sm.ops, sm.nbytes, verb),
        )


class SmallReads(_SmallRequests):
    """The job issues many small read requests.

    Symptom: more than 10 % of the POSIX reads, and more than 1,000 of them, are under
    1 MiB (Drishti's small_requests and small_requests_absolute). Unlike Drishti, reads
    of exactly 1 MiB, which Darshan's 100K_1M bin holds, are not counted as small.
    Why it hurts: each request pays the full latency of a file-system RPC whatever its
    size, so small reads reach a fraction of the bandwidth and load the servers.
    What to do: read larger contiguous blocks; with MPI-IO, use collective reads
    (`MPI_File_read_at_all`) so ROMIO aggregates the ranks' requests.
    """

    code = "DP05"
    name = "small-reads"
    drishti_code = "P05"
    op = "READ"


class SmallWrites(_SmallRequests):
    """The job issues many small write requests.

    Symptom: more than 10 % of the POSIX writes, and more than 1,000 of them, are under
    1 MiB (Drishti's small_requests and small_requests_absolute). Unlike Drishti, writes
    of exactly 1 MiB, which Darshan's 100K_1M bin holds, are not counted as small.
    Why it hurts: each request pays the full latency of a file-system RPC and, on shared
    files, takes extent locks; small writes reach a fraction of the bandwidth.
    What to do: buffer writes into >= 1 MiB requests; with MPI-IO, use collective writes
    (`MPI_File_write_at_all`) with collective buffering enabled.
    """

    code = "DP06"
    name = "small-writes"
    drishti_code = "P06"
    op = "WRITE"
