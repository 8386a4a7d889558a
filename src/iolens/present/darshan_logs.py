"""Darshan logs diagnosed without a store: what `iolens darshan LOG...` shows.

Each log is read (`ingest.darshan_fork`: libdarshan-util in a forked child, so a log
that crashes it fails alone) and diagnosed by the same rules `iolens import darshan`
runs (`analyze.darshan.diagnose`, with no site context: no weather, no node list, no
OST peak). Logs of the same job (one per executable a job ran) are one diagnosis: a
finding several of its logs raise is listed once, the most severe instance, with the
number of logs it came from. The figures per log are the zoom-in factors (Table I) the
rules computed on the way, so nothing is computed twice.

Nothing here opens a store or resolves a user: a log's uid stays a number.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iolens.errors import InputError

if TYPE_CHECKING:
    from iolens.analyze.bandwidth import Bandwidth
    from iolens.model.darshan import DarshanJob
    from iolens.model.finding import Finding

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}


@dataclass
class LogResult:
    """One log: the job it read, its findings and its zoom-in figures."""

    path: Path
    job: DarshanJob
    findings: list[Finding]
    factors: dict[str, Any]
    bandwidth: Bandwidth  # the one definition (`analyze.bandwidth`), within the run time

    # bytes and time of that definition: each file's at the layer the application called
    @property
    def bytes_read(self) -> int:
        return self.bandwidth.read_bytes

    @property
    def bytes_written(self) -> int:
        return self.bandwidth.write_bytes

    @property
    def io_time(self) -> float:
        return self.bandwidth.io_time_s


@dataclass
class JobDiagnosis:
    """One job's logs, diagnosed; `findings` merged over the logs."""

    job_id: str
    logs: list[LogResult] = field(default_factory=list)

    @property
    def findings(self) -> list[tuple[Finding, int]]:
        """(finding, how many of the job's logs raised its code), the largest estimated
        saving first (`analyze.darshan.savings`), then the most severe: merged as
        `iolens import darshan` merges a job's logs (`chains.merge_repeated`, the largest
        occurrence kept), then linked into causal chains again."""
        from iolens.analyze.darshan import chains
        from iolens.analyze.darshan.savings import saved_seconds

        merged = chains.merged(f for log in self.logs for f in log.findings)
        counted = [(f, int(f.evidence.get("occurrences", 1))) for f in merged]
        return sorted(
            counted,
            key=lambda fc: (-saved_seconds(fc[0]), SEVERITY_RANK[fc[0].severity], fc[0].code),
        )

    @property
    def run_time(self) -> float:
        """One log: Darshan's own run time; several: the span from first start to last end."""
        jobs = [r.job for r in self.logs]
        if len(jobs) == 1:
            return float(jobs[0].run_time)
        return (max(j.end for j in jobs) - min(j.start for j in jobs)).total_seconds()

    @property
    def bandwidth(self) -> Bandwidth:
        """The job's one bandwidth over all its logs: logs that ran at the same time count
        their slowest process, logs that ran one after the other add up; never more I/O
        time than the run time (a sum over 24 concurrent logs was)."""
        if len(self.logs) == 1:
            return self.logs[0].bandwidth
        from iolens.analyze.bandwidth import of_darshan

        return of_darshan([r.job for r in self.logs]).clipped(self.run_time)

    def to_dict(self, titles: dict[str, str] | None = None) -> dict[str, Any]:
        """The JSON of `iolens darshan --json` for this job."""
        titles = titles or {}
        jobs = [r.job for r in self.logs]
        bw = self.bandwidth
        return {
            "job_id": self.job_id,
            "uid": jobs[0].uid,
            "exe": sorted({j.exe for j in jobs}),
            "nprocs": max(j.nprocs for j in jobs),
            "start": min(j.start for j in jobs),
            "end": max(j.end for j in jobs),
            "run_time_s": self.run_time,
            "bytes_read": bw.read_bytes,
            "bytes_written": bw.write_bytes,
            "io_time_s": bw.io_time_s,
            "bandwidth": _bandwidth_dict(bw),
            "logs": [_log_dict(r) for r in self.logs],
            "findings": [
                {**_finding_dict(f), "title": titles.get(f.code, f.name), "logs": n}
                for f, n in self.findings
            ],
        }


def _log_dict(r: LogResult) -> dict[str, Any]:
    j = r.job
    return {
        "path": str(r.path),
        "exe": j.exe,
        "nprocs": j.nprocs,
        "start": j.start,
        "end": j.end,
        "run_time_s": j.run_time,
        "darshan": j.lib_version,
        "log_version": j.log_version,
        "modules": {
            k: {"records": v.get("records"), "partial": v.get("partial")}
            for k, v in j.module_info.items()
        },
        "partial": j.partial_modules,
        "bytes_read": r.bytes_read,
        "bytes_written": r.bytes_written,
        "io_time_s": r.io_time,
        "bandwidth": r.bandwidth.bw or None,
        "factors": {k: v for k, v in r.factors.items() if k not in ("job_id", "user", "app")},
        "findings": len(r.findings),
    }


def _bandwidth_dict(bw: Bandwidth) -> dict[str, Any]:
    return {
        "bytes_per_s": bw.bw or None,
        "read_bytes_per_s": bw.read_bw or None,
        "write_bytes_per_s": bw.write_bw or None,
        "definition": bw.described(),
    }


def _finding_dict(f: Finding) -> dict[str, Any]:
    return {
        "code": f.code,
        "name": f.name,
        "severity": f.severity,
        "target": f.target,
        "recommendation": f.recommendation,
        "evidence": f.evidence,
        "gain": f.gain,
    }


def diagnose_log(path: Path, job: DarshanJob) -> LogResult:
    """One log's findings and figures, from the rules' shared zoom-in analysis."""
    from iolens.analyze.darshan import RuleContext, diagnose
    from iolens.analyze.darshan.zoomin import zoom

    ctx = RuleContext()
    found = diagnose(job, ctx)
    z = zoom(job, ctx)  # what the zoom-in rules computed, cached in ctx
    return LogResult(path, job, found, z.factors, z.bandwidth)


def read(path: Path) -> DarshanJob:
    """The log, or an `InputError` naming it (missing, unreadable, crashing, empty)."""
    from iolens.ingest.darshan_fork import ForkedRead

    return _checked(path, ForkedRead(path).result())


def _checked(path: Path, job: DarshanJob) -> DarshanJob:
    from iolens.ingest.darshan_input import EMPTY_LOG

    if not job.module_info:
        raise InputError(str(path), EMPTY_LOG)
    return job


def _collect_from_now() -> None:
    """The command's start-up (`cli.darshan_log.main`) runs with the cycle collector off;
    once the modules are imported their objects are frozen (never traversed again: they
    live as long as the process) and collection resumes for the logs' own objects. A
    caller that left the collector on is left as it is."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def diagnose_logs(
    paths: Sequence[Path],
) -> tuple[list[JobDiagnosis], list[InputError]]:
    """The logs grouped by job and diagnosed, in the order given; and the logs that
    could not be read, each as the error that names it.

    Each log is read in a child while this process works: the first while the rules are
    imported, the next while the current one is diagnosed (two cores do both at once).
    """
    from iolens.ingest.darshan_fork import ForkedRead

    jobs: dict[tuple[str, int], JobDiagnosis] = {}
    failed: list[InputError] = []
    pending = ForkedRead(paths[0]) if paths else None
    import iolens.analyze.darshan  # noqa: F401  (while the first log is read)

    _collect_from_now()
    for i, path in enumerate(paths):
        assert pending is not None
        current, pending = pending, ForkedRead(paths[i + 1]) if i + 1 < len(paths) else None
        try:
            job = _checked(path, current.result())
        except InputError as exc:
            failed.append(exc)
            continue
        try:
            result = diagnose_log(path, job)
        except Exception as exc:  # a rule's bug: this log fails, the others are shown
            why = f"diagnosis failed ({type(exc).__name__}: {exc}); an iolens bug, please report"
            failed.append(InputError(str(path), why))
            continue
        key = (job.job_id, job.uid)  # job ids of two sites can meet; their uids rarely
        jobs.setdefault(key, JobDiagnosis(job.job_id)).logs.append(result)
    return list(jobs.values()), failed
