"""DP07, DP08 (Drishti P07, P08): requests misaligned in memory or in the file."""

from __future__ import annotations

from typing import Any, ClassVar

import pandas as pd

from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.drishti.common import (
    DrishtiRule,
    human,
    mpich_hints,
    per_file,
    ranks_of,
    setstripe,
    share_severity,
    stripe_of,
    top_files,
    total,
)
from iolens.analyze.darshan.drishti.hdf5 import alignment, uses_hdf5
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class _Misaligned(DrishtiRule):
    """DP07 and DP08 differ only in the counter they test, the file rows and the advice."""

    target = "developer"
    drishti_level = "HIGH"
    counter: ClassVar[str]  # the POSIX counter of misaligned requests
    key: ClassVar[str]  # its name in the evidence and the file rows
    basis: ClassVar[str]  # the gain's basis

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        if not job.has("POSIX"):
            return None
        c = job.counters("POSIX")
        ops = total(c, "POSIX_READS", "POSIX_WRITES")
        bad = total(c, self.counter)
        if not ops or bad / ops <= T.MISALIGNED_REQUESTS:
            return None
        files = per_file(c, {self.key: c[self.counter]}).assign(**self.file_columns(c))
        files = files[files[self.key] > 0]
        share = bad / ops
        advice, more = self.advise(job, ctx, files, share)
        return self.finding(
            job,
            {
                "requests": ops,
                self.key: bad,
                "share": round(share, 4),
                "files": top_files(job, files, self.key),
                "ranks": ranks_of(c, files.index),
                **more,
            },
            advice,
            severity=share_severity(share),
            gain={
                "metric": "misaligned_requests",
                "fraction": round(share, 4),
                "basis": self.basis,
            },
        )

    def file_columns(self, c: pd.DataFrame) -> dict[str, pd.Series]:
        """Per file id, what the file rows show besides the misaligned requests."""
        raise NotImplementedError

    def advise(
        self, job: DarshanJob, ctx: RuleContext, files: pd.DataFrame, share: float
    ) -> tuple[str, dict[str, Any]]:
        """The recommendation, and evidence it adds, for `files` with misaligned requests."""
        raise NotImplementedError


class MisalignedMemory(_Misaligned):
    """Many requests use buffers misaligned in memory.

    Symptom: more than 10 % of the POSIX requests use a buffer not aligned to the memory
    alignment Darshan detected (POSIX_MEM_NOT_ALIGNED), Drishti's misaligned_requests.
    Why it hurts: misaligned buffers cost extra copies in the kernel and the network
    stack, and rule out direct I/O and RDMA straight from the user buffer.
    What to do: allocate I/O buffers aligned to the page size (`posix_memalign`).
    """

    code = "DP07"
    name = "misaligned-memory"
    drishti_code = "P07"
    counter = "POSIX_MEM_NOT_ALIGNED"
    key = "mem_not_aligned"
    basis = "share of requests that would use aligned buffers"

    def file_columns(self, c: pd.DataFrame) -> dict[str, pd.Series]:
        return {"mem_alignment": per_file(c, {"a": c["POSIX_MEM_ALIGNMENT"]}, "max")["a"]}

    def advise(
        self, job: DarshanJob, ctx: RuleContext, files: pd.DataFrame, share: float
    ) -> tuple[str, dict[str, Any]]:
        return (
            f"{share:.0%} of the requests use misaligned buffers. Allocate I/O buffers "
            "page-aligned: `posix_memalign(&buf, 4096, size);`",
            {},
        )


class MisalignedFile(_Misaligned):
    """Many requests are misaligned with the file system's blocks.

    Symptom: more than 10 % of the POSIX requests start or end off the file alignment
    Darshan detected (POSIX_FILE_NOT_ALIGNED; on Lustre the stripe size), Drishti's
    misaligned_requests.
    Why it hurts: a request that straddles a block or stripe boundary touches two
    blocks (two OSTs on Lustre) and takes two extent locks; on shared files the ranks'
    straddling requests contend for the same locks.
    What to do: align requests (and HDF5 objects) to the stripe size, or choose a stripe
    size that is a multiple of the request size.
    """

    code = "DP08"
    name = "misaligned-file"
    drishti_code = "P08"
    counter = "POSIX_FILE_NOT_ALIGNED"
    key = "file_not_aligned"
    basis = "share of requests that would stop straddling block boundaries"

    def file_columns(self, c: pd.DataFrame) -> dict[str, pd.Series]:
        return {
            "requests": per_file(c, {"r": c["POSIX_READS"] + c["POSIX_WRITES"]})["r"],
            "file_alignment": per_file(c, {"a": c["POSIX_FILE_ALIGNMENT"]}, "max")["a"],
        }

    def advise(
        self, job: DarshanJob, ctx: RuleContext, files: pd.DataFrame, share: float
    ) -> tuple[str, dict[str, Any]]:
        top = files.sort_values("file_not_aligned", ascending=False)
        worst = top.index[0] if len(top) else None
        stripe = stripe_of(job, worst) if worst is not None else None
        align = int(top["file_alignment"].iloc[0]) if len(top) else 0
        cmd = setstripe(job, ctx, worst) if worst is not None else None
        unit = "stripe size" if cmd else "alignment"
        advice = [
            f"{share:.0%} of the requests are misaligned"
            + (f" with the {human(align)} file alignment." if align > 1 else ".")
            + f" Make offsets and sizes multiples of the {unit}"
        ]
        if stripe and cmd:
            advice.append(
                f"(this file: {stripe[0]} stripes of {human(stripe[1])}), or pick a stripe size "
                f"that divides the request size: `{cmd}`."
            )
        elif cmd:  # on Lustre, layout not recorded
            advice.append(f"(`lfs getstripe FILE`), or pick a stripe size: `{cmd}`.")
        else:
            advice[-1] += "."
        if cmd:  # ROMIO's striping_unit sets the stripe size of files it creates on Lustre
            advice.append(f"MPI-IO: `{mpich_hints(striping_unit=4194304)}`.")
        if uses_hdf5(job):
            advice.append(alignment(stripe[1] if stripe else None))
        return (
            " ".join(advice),
            {"stripe": {"count": stripe[0], "size": stripe[1]} if stripe else None},
        )
