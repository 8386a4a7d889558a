"""DM02-DM05 (Drishti M02-M05): MPI-IO without collective reads or writes.

When the job uses collective calls Drishti reports it as OK (M04, M05), kept by iolens as
info findings.
"""

from __future__ import annotations

import math
from typing import ClassVar

from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.drishti.common import (
    DrishtiRule,
    bytes_counter,
    col,
    collective_call,
    mpich_hints,
    node_count,
    per_file,
    ranks_of,
    top_files,
    total,
)
from iolens.analyze.darshan.drishti.hdf5 import mpio_collective, uses_hdf5
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


def counts(job: DarshanJob, op: str) -> dict[str, int] | None:
    """MPI-IO collective and independent requests; `op` is READ or WRITE."""
    if not job.has("MPI-IO"):
        return None
    m = job.counters("MPI-IO")
    coll, indep = total(m, f"MPIIO_COLL_{op}S"), total(m, f"MPIIO_INDEP_{op}S")
    return {"collective": coll, "independent": indep, "requests": coll + indep}


class _NoCollective(DrishtiRule):
    target = "developer"
    drishti_level = "HIGH"
    op: ClassVar[str]

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        n = counts(job, self.op)
        if n is None or n["collective"] or n["requests"] <= T.COLLECTIVE_OPERATIONS_ABSOLUTE:
            return None
        m = job.counters("MPI-IO")
        verb = self.op.lower()
        r, w = col(m, "MPIIO_INDEP_READS"), col(m, "MPIIO_INDEP_WRITES")
        mine = r if self.op == "READ" else w
        # Drishti's detail: records mostly of this kind, with > 1,000 independent requests
        rows = m[
            (mine / (r + w).where(r + w > 0) > T.COLLECTIVE_OPERATIONS)
            & (r + w > T.COLLECTIVE_OPERATIONS_ABSOLUTE)
        ]
        files = per_file(rows, {f"independent_{verb}s": mine[rows.index]})
        if not len(files):
            files = per_file(m, {f"independent_{verb}s": mine})
            files = files[files[f"independent_{verb}s"] > 0]
        nbytes = total(m, bytes_counter("MPIIO", self.op))
        nodes, exact = node_count(job, ctx)
        call = collective_call(self.op)
        hint = {f"romio_cb_{verb}": "enable"}
        if nodes and exact:
            hint["cb_nodes"] = str(nodes)
        advice = (
            f"{n['independent']} independent MPI-IO {verb}s and no collective one. Use "
            f"collective calls (`{call}(fh, offset, buf, count, type, &status)`) with one "
            f"aggregator per node: `{mpich_hints(**hint)}`."
        )
        if uses_hdf5(job):
            advice += " " + mpio_collective()
        after = max(1, math.ceil(nbytes / T.CB_BUFFER_SIZE))
        return self.finding(
            job,
            {
                **n,
                f"bytes_{verb}": nbytes,
                "files": top_files(job, files, f"independent_{verb}s"),
                "ranks": ranks_of(m, files.index),
            },
            advice,
            severity="warning",
            gain=(
                {
                    "metric": f"{verb}_requests",
                    "factor": round(n["independent"] / after, 1),
                    "current": n["independent"],
                    "after_aggregation": after,
                    "basis": "requests if aggregators move the bytes in 16 MiB "
                    "collective buffers (ROMIO's default cb_buffer_size)",
                }
                if n["independent"] > after
                else None
            ),
        )


class _Collective(DrishtiRule):
    severity = "info"
    target = "developer"
    drishti_level = "OK"
    op: ClassVar[str]

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        n = counts(job, self.op)
        if n is None or not n["collective"]:
            return None
        verb = self.op.lower()
        return self.finding(
            job,
            {**n, "collective_share": round(n["collective"] / n["requests"], 4)},
            f"{n['collective']} of {n['requests']} MPI-IO {verb}s are collective; "
            "nothing to change.",
        )


class NoCollectiveReads(_NoCollective):
    """MPI-IO reads are all independent.

    Symptom: the job issues more than 1,000 MPI-IO reads and none of them collective
    (Drishti's collective_operations_absolute).
    Why it hurts: independent reads reach the file system one rank at a time, small and
    interleaved; collective reads let a few aggregators fetch large contiguous blocks.
    What to do: use `MPI_File_read_all` / `MPI_File_read_at_all` with one aggregator per
    compute node.
    """

    code = "DM02"
    name = "no-collective-reads"
    drishti_code = "M02"
    op = "READ"


class NoCollectiveWrites(_NoCollective):
    """MPI-IO writes are all independent.

    Symptom: the job issues more than 1,000 MPI-IO writes and none of them collective
    (Drishti's collective_operations_absolute).
    Why it hurts: independent writes to a shared file contend for its extent locks; a
    collective write lets aggregators write large, stripe-aligned blocks.
    What to do: use `MPI_File_write_all` / `MPI_File_write_at_all` with one aggregator per
    compute node.
    """

    code = "DM03"
    name = "no-collective-writes"
    drishti_code = "M03"
    op = "WRITE"


class CollectiveReads(_Collective):
    """MPI-IO reads use collective calls.

    Symptom: some MPI-IO reads are collective.
    Why it hurts: it does not; Drishti reports it as OK.
    What to do: nothing.
    """

    code = "DM04"
    name = "collective-reads"
    drishti_code = "M04"
    op = "READ"


class CollectiveWrites(_Collective):
    """MPI-IO writes use collective calls.

    Symptom: some MPI-IO writes are collective.
    Why it hurts: it does not; Drishti reports it as OK.
    What to do: nothing.
    """

    code = "DM05"
    name = "collective-writes"
    drishti_code = "M05"
    op = "WRITE"
