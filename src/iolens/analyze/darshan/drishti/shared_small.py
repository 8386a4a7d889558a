"""DP15, DP16 (Drishti P15, P16): small requests to files shared by all ranks."""

from __future__ import annotations

from typing import ClassVar

from iolens.analyze.darshan.drishti.common import (
    DrishtiRule,
    mpich_hints,
    request_gain,
    share_severity,
    small_share,
    stripe_clause,
    top_files,
)
from iolens.analyze.darshan.drishti.hdf5 import mpio_collective, uses_hdf5
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class _SharedSmall(DrishtiRule):
    target = "developer"
    drishti_level = "HIGH"
    op: ClassVar[str]

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        if not job.has("POSIX"):
            return None
        c = job.counters("POSIX")
        c = c[c["rank"] == -1]  # Darshan's shared records: files opened by every rank
        if not len(c):
            return None
        sm = small_share(c, self.op)
        if sm is None:
            return None
        verb, share = sm.verb, sm.share
        worst = sm.files[f"small_{verb}s"].idxmax()
        advice = (
            f"{sm.small} of {sm.ops} {verb}s to shared files ({share:.0%}) are under 1 MiB. "
            f"Coalesce them with collective MPI-IO (`{sm.collective_call}(fh, off, buf, n, type, "
            f"&st)`) and collective buffering: "
            f"`{mpich_hints(**{sm.cb_hint: 'enable', 'cb_buffer_size': 16777216})}`"
            f"{stripe_clause(job, ctx, worst, 'stripe the shared file widely')}."
        )
        if uses_hdf5(job):
            advice += " " + mpio_collective()
        return self.finding(
            job,
            {
                f"shared_{verb}s": sm.ops,
                f"small_shared_{verb}s": sm.small,
                "small_share": round(share, 4),
                "exact_1MiB_not_counted": sm.exact_mib,
                "files": top_files(job, sm.files, f"small_{verb}s"),
                "ranks": [-1],
            },
            advice,
            severity=share_severity(share),
            gain=request_gain(sm.ops, sm.nbytes, f"shared_{verb}"),
        )


class SharedSmallReads(_SharedSmall):
    """Many small reads to files shared by all ranks.

    Symptom: on Darshan's shared records (files every rank opened), more than 10 % of
    the reads, and more than 1,000, are under 1 MiB (not counting reads of exactly
    1 MiB, which Drishti counts as small).
    Why it hurts: the ranks' small reads reach the same OSTs at once, each paying a full
    RPC; the servers see thousands of tiny uncoordinated requests.
    What to do: coalesce them with collective MPI-IO reads and collective buffering.
    """

    code = "DP15"
    name = "shared-small-reads"
    drishti_code = "P15"
    op = "READ"


class SharedSmallWrites(_SharedSmall):
    """Many small writes to files shared by all ranks.

    Symptom: on Darshan's shared records (files every rank opened), more than 10 % of
    the writes, and more than 1,000, are under 1 MiB (not counting writes of exactly
    1 MiB, which Drishti counts as small).
    Why it hurts: small writes from many ranks to one file contend for its extent locks
    and stripes; throughput collapses as ranks are added.
    What to do: coalesce them with collective MPI-IO writes and collective buffering, and
    stripe the file over more OSTs.
    """

    code = "DP16"
    name = "shared-small-writes"
    drishti_code = "P16"
    op = "WRITE"
