"""DP01-DP04 (Drishti P01-P04): the job is read- or write-intensive, by count or by size.

Drishti reports these as INFO: they describe the job rather than a problem, and tell which
direction to tune (output striping and write-behind, or input caching and read-ahead).
"""

from __future__ import annotations

from typing import ClassVar

from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.drishti.common import DrishtiRule, total
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding

#: the (reads, writes) POSIX counters compared, by unit: one pair serves both directions
COUNTERS = {
    "requests": ("POSIX_READS", "POSIX_WRITES"),
    "bytes": ("POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN"),
}


class _Intensive(DrishtiRule):
    severity = "info"
    target = "developer"
    drishti_level = "INFO"
    direction: ClassVar[str]  # "write" or "read": which side must dominate
    unit: ClassVar[str]  # "requests" or "bytes", a key of COUNTERS

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        if not job.has("POSIX"):
            return None
        c = job.counters("POSIX")
        read_col, write_col = COUNTERS[self.unit]
        reads, writes = total(c, read_col), total(c, write_col)
        both = reads + writes
        mine, other = (writes, reads) if self.direction == "write" else (reads, writes)
        if not both or mine <= other or (mine - other) / both <= T.IMBALANCE_OPERATIONS:
            return None
        advice = (
            "Tune for output: stripe output directories widely and write large requests."
            if self.direction == "write"
            else "Tune for input: read large requests and cache what is read more than once."
        )
        return self.finding(
            job,
            {
                f"read_{self.unit}": reads,
                f"write_{self.unit}": writes,
                f"{self.direction}_share": round(mine / both, 4),
            },
            f"{mine / both:.0%} of the POSIX {self.unit} are {self.direction}s. {advice}",
        )


class WriteCountIntensive(_Intensive):
    """The job issues mostly write requests.

    Symptom: writes outnumber reads by more than 10 % of all POSIX requests.
    Why it hurts: it does not by itself; it says the job's performance is its writes'.
    What to do: tune the write path first (striping of output directories, request size).
    """

    code = "DP01"
    name = "write-count-intensive"
    drishti_code = "P01"
    direction = "write"
    unit = "requests"


class ReadCountIntensive(_Intensive):
    """The job issues mostly read requests.

    Symptom: reads outnumber writes by more than 10 % of all POSIX requests.
    Why it hurts: it does not by itself; it says the job's performance is its reads'.
    What to do: tune the read path first (request size, caching of re-read data).
    """

    code = "DP02"
    name = "read-count-intensive"
    drishti_code = "P02"
    direction = "read"
    unit = "requests"


class WriteSizeIntensive(_Intensive):
    """The job writes more bytes than it reads.

    Symptom: bytes written exceed bytes read by more than 10 % of all POSIX bytes.
    Why it hurts: it does not by itself; output bandwidth bounds the job.
    What to do: stripe output directories over enough OSTs and write large requests.
    """

    code = "DP03"
    name = "write-size-intensive"
    drishti_code = "P03"
    direction = "write"
    unit = "bytes"


class ReadSizeIntensive(_Intensive):
    """The job reads more bytes than it writes.

    Symptom: bytes read exceed bytes written by more than 10 % of all POSIX bytes.
    Why it hurts: it does not by itself; input bandwidth bounds the job.
    What to do: read large requests, stripe input files widely, cache re-read data.
    """

    code = "DP04"
    name = "read-size-intensive"
    drishti_code = "P04"
    direction = "read"
    unit = "bytes"
