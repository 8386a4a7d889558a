"""DP11-DP14 (Drishti P11-P14): random vs. sequential reads and writes.

Drishti counts a request as random when it is neither consecutive nor sequential
(requests - POSIX_SEQ_*; consecutive requests are a subset of sequential ones). When the
random share is below its bar it reports the access as mostly sequential, an OK (P12, P14),
which iolens keeps as an info finding.
"""

from __future__ import annotations

from typing import Any, ClassVar

from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.drishti.common import (
    DrishtiRule,
    per_file,
    ranks_of,
    share_severity,
    top_files,
    total,
)
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


def pattern(job: DarshanJob, op: str) -> dict[str, int] | None:
    """Requests split as Drishti does; `op` is READ or WRITE; None without requests."""
    if not job.has("POSIX"):
        return None
    c = job.counters("POSIX")
    ops = total(c, f"POSIX_{op}S")
    if not ops:
        return None
    consec = total(c, f"POSIX_CONSEC_{op}S")
    seq = total(c, f"POSIX_SEQ_{op}S") - consec
    return {"requests": ops, "consecutive": consec, "sequential": seq, "random": ops - consec - seq}


def is_random(p: dict[str, int]) -> bool:
    r = p["random"]
    return bool(r and r / p["requests"] > T.RANDOM_OPERATIONS and r > T.RANDOM_OPERATIONS_ABSOLUTE)


class _Random(DrishtiRule):
    target = "developer"
    drishti_level = "HIGH"
    op: ClassVar[str]
    advice: ClassVar[str]

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        p = pattern(job, self.op)
        if p is None or not is_random(p):
            return None
        c = job.counters("POSIX")
        files = per_file(c, {"random": c[f"POSIX_{self.op}S"] - c[f"POSIX_SEQ_{self.op}S"]})
        files["requests"] = per_file(c, {"r": c[f"POSIX_{self.op}S"]})["r"]
        files = files[files["random"] > 0]
        share = p["random"] / p["requests"]
        verb = self.op.lower()
        evidence: dict[str, Any] = {
            **p,
            "random_share": round(share, 4),
            "files": top_files(job, files, "random"),
            "ranks": ranks_of(c, files.index),
        }
        return self.finding(
            job,
            evidence,
            f"{p['random']} of {p['requests']} {verb}s ({share:.0%}) are random. {self.advice}",
            severity=share_severity(share),
            gain={
                "metric": f"random_{verb}s",
                "fraction": round(share, 4),
                "basis": f"share of {verb}s that would become sequential",
            },
        )


class _Sequential(DrishtiRule):
    severity = "info"
    target = "developer"
    drishti_level = "OK"
    op: ClassVar[str]

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        p = pattern(job, self.op)
        if p is None or is_random(p):
            return None
        n = p["requests"]
        return self.finding(
            job,
            {**p, "consecutive_share": round(p["consecutive"] / n, 4)},
            f"{(p['consecutive'] + p['sequential']) / n:.0%} of the {self.op.lower()}s are "
            "consecutive or sequential; nothing to change.",
        )


class RandomReads(_Random):
    """Many reads are random.

    Symptom: more than 20 % of the POSIX reads, and more than 1,000, go backwards in the
    file (neither consecutive nor sequential), Drishti's random_operations thresholds.
    Why it hurts: random reads defeat client read-ahead and server prefetching, so each
    one waits for a disk or network round trip.
    What to do: reorder reads by offset, read larger blocks and index them in memory, or
    let collective MPI-IO reads reorder the ranks' requests.
    """

    code = "DP11"
    name = "random-reads"
    drishti_code = "P11"
    op = "READ"
    advice = (
        "Sort reads by offset or read large contiguous blocks and index them in memory; "
        "with MPI-IO, collective reads (`MPI_File_read_at_all`) let ROMIO reorder them."
    )


class SequentialReads(_Sequential):
    """Reads are mostly consecutive or sequential.

    Symptom: random reads stay under Drishti's random_operations thresholds.
    Why it hurts: it does not; Drishti reports it as OK.
    What to do: nothing.
    """

    code = "DP12"
    name = "sequential-reads"
    drishti_code = "P12"
    op = "READ"


class RandomWrites(_Random):
    """Many writes are random.

    Symptom: more than 20 % of the POSIX writes, and more than 1,000, go backwards in the
    file (neither consecutive nor sequential), Drishti's random_operations thresholds.
    Why it hurts: random writes break write-behind aggregation and, on shared files,
    bounce extent locks between clients.
    What to do: write in offset order from a buffer, or use collective MPI-IO writes so
    aggregators turn the ranks' pieces into large sequential requests.
    """

    code = "DP13"
    name = "random-writes"
    drishti_code = "P13"
    op = "WRITE"
    advice = (
        "Write in offset order (assemble the data in memory first); with MPI-IO, "
        "collective writes (`MPI_File_write_at_all`) make aggregators write sequentially."
    )


class SequentialWrites(_Sequential):
    """Writes are mostly consecutive or sequential.

    Symptom: random writes stay under Drishti's random_operations thresholds.
    Why it hurts: it does not; Drishti reports it as OK.
    What to do: nothing.
    """

    code = "DP14"
    name = "sequential-writes"
    drishti_code = "P14"
    op = "WRITE"
