"""Severity from what a finding explains, and the noise floor below which nothing is urgent.

A rule sets its level from its own trigger (a share of requests, a count); an expert asks
first how much of the job's I/O the finding accounts for. So every Darshan finding's
severity is capped here, never raised:

- noise floor: a log whose I/O moved fewer than `NOISE_FLOOR_BYTES` (data files, standard
  streams excluded) or took under `NOISE_FLOOR_IO_SHARE` of the run time has nothing above
  `info` (the issue's "critical" on 151 B of STDIO, and the 20 % of warnings on jobs moving
  under 10 MiB);
- explained share: a finding whose evidence says what share of the job's I/O time, bytes
  or operations it covers is `info` under `WARNING_SHARE` and at most `warning` under
  `CRITICAL_SHARE` (a finding on 0.1 % of the I/O is never critical).

The thresholds are overridable per site like every Darshan threshold
(`RuleContext.extra["thresholds"]`, the names below).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding

MiB = 1 << 20

#: a log moving less than this is too small to tune (the issue's floor; the zoom-in paper
#: leaves jobs under 1 GB out altogether, §IV)
NOISE_FLOOR_BYTES = 10 * MiB
#: ... or whose I/O takes less than this share of its run time (I/O cannot be what limits it)
NOISE_FLOOR_IO_SHARE = 0.01
#: below this share of the job's I/O a finding is info (Drishti's 10 % bar for an issue)
WARNING_SHARE = 0.1
#: from this share on a finding may stay critical: it explains most of the job's I/O
CRITICAL_SHARE = 0.5

#: evidence keys that hold the share of the job's I/O a finding explains (time, bytes or
#: operations), by the rule families that write them
SHARE_KEYS = (
    "share_of_io_time",  # X01-X05: seconds of the job's I/O time
    "cover_share",  # Z02: I/O wall time covered by the single-OST files
    "stdio_share",  # DS01: bytes through STDIO
    "read_after_write_share",  # Z09: bytes read back
    "small_share",  # DP05/06/15/16: requests under 1 MiB
    "random_share",  # DP11/13: random requests
    "share",  # DP07/08 (misaligned requests), Z04 (the heavy rank's share)
)

_DEFAULTS = {
    "NOISE_FLOOR_BYTES": NOISE_FLOOR_BYTES,
    "NOISE_FLOOR_IO_SHARE": NOISE_FLOOR_IO_SHARE,
    "WARNING_SHARE": WARNING_SHARE,
    "CRITICAL_SHARE": CRITICAL_SHARE,
}
_RANK = {"info": 0, "warning": 1, "critical": 2}


def get(name: str, extra: dict[str, Any] | None = None) -> Any:
    """A threshold, overridden by `extra["thresholds"][name]` when the site sets one."""
    over = (extra or {}).get("thresholds") or {}
    return over.get(name, _DEFAULTS[name])


@dataclass(frozen=True)
class JobIO:
    """What the noise floor is judged on: the log's data bytes, I/O time and run time."""

    bytes: float
    io_time: float
    run_time: float

    @classmethod
    def of(cls, job: DarshanJob) -> JobIO:
        from iolens.analyze.darshan.zoomin.factors import io_time
        from iolens.analyze.darshan.zoomin.records import data_records

        recs = data_records(job)
        nbytes = float(recs["bytes"].sum()) if len(recs) else 0.0
        return cls(nbytes, io_time(job, recs) if len(recs) else 0.0, float(job.run_time or 0))

    def below_floor(self, extra: dict[str, Any] | None = None) -> str | None:
        """Why the job is under the noise floor, or None."""
        if self.bytes < get("NOISE_FLOOR_BYTES", extra):
            return (
                f"moved {self.bytes:,.0f} B, under the {get('NOISE_FLOOR_BYTES', extra):,} B floor"
            )
        share = get("NOISE_FLOOR_IO_SHARE", extra)
        if self.run_time > 0 and self.io_time < share * self.run_time:
            return f"I/O took {self.io_time:.3g} s of a {self.run_time:.0f} s run (< {share:.0%})"
        return None


def explained_share(f: Finding) -> float | None:
    """The share of the job's I/O the finding says it explains, if its evidence says."""
    for k in SHARE_KEYS:
        v = f.evidence.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
    return None


def cap(level: str, ceiling: str) -> str:
    return level if _RANK.get(level, 0) <= _RANK[ceiling] else ceiling


def calibrate(findings: list[Finding], io: JobIO, ctx: RuleContext | None = None) -> None:
    """Cap each finding's severity by the noise floor and its explained share, in place;
    a capped finding keeps the rule's level and the reason in its evidence."""
    extra = ctx.extra if ctx is not None else None
    floor = io.below_floor(extra)
    for f in findings:
        ceiling, why = "critical", None
        share = explained_share(f)
        if floor is not None:
            ceiling, why = "info", f"noise floor: the log {floor}"
        elif share is not None and share < get("WARNING_SHARE", extra):
            ceiling, why = "info", f"explains {share:.1%} of the job's I/O"
        elif share is not None and share < get("CRITICAL_SHARE", extra):
            ceiling, why = "warning", f"explains {share:.0%} of the job's I/O"
        level = cap(f.severity, ceiling)
        if level != f.severity:
            f.evidence = {**f.evidence, "rule_severity": f.severity, "severity_capped": why}
            f.severity = level
