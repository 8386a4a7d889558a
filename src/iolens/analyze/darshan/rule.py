"""The contract of the Darshan rules: one rule per file, each with a stable code.

A rule reads a `DarshanJob` (plus optional site context) and returns a `Finding` or None.
Its class docstring has three parts (Symptom / Why it hurts / What to do) that
`iolens explain CODE`, the docs and the HTML report show. Evidence is data (counters,
files, ranks), the recommendation carries a concrete snippet (`lfs setstripe ...`,
ROMIO hints, HDF5 calls), and `gain` estimates what following it would buy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding

T = TypeVar("T")


@dataclass
class RuleContext:
    """What the site knows beyond the log; every field is optional."""

    #: file-system "weather" 5 s before the job started (zoom-in Table I, factors 13-15):
    #: {"oss_cpu_pct": .., "mds_cpu_pct": .., "ost_io_mb": ..}
    weather: dict[str, float] | None = None
    #: one OST's peak bandwidth in bytes/s (from the topology's peak_bw, or site config)
    ost_bw: float | None = None
    #: the file system's OST count (bounds a striping recommendation)
    ost_total: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def per_job(self, key: str, job: DarshanJob, build: Callable[[], T]) -> T:
        """What `build` makes of `job`, kept in `extra[key]` while the same job is asked
        for: every rule of a family shares one analysis of the log."""
        kept = self.extra.get(key)
        if kept is None or getattr(kept, "job", None) is not job:
            kept = self.extra[key] = build()
        return kept  # type: ignore[no-any-return]


class DarshanRule:
    """Base of the Darshan rules; subclasses set the class attributes and `check`."""

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[str] = "warning"  # info | warning | critical
    target: ClassVar[str] = "user"  # user | developer | admin

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        raise NotImplementedError

    def finding(
        self,
        job: DarshanJob,
        evidence: dict[str, Any],
        recommendation: str,
        *,
        severity: str | None = None,
        gain: dict[str, Any] | None = None,
        explains: list[str] | None = None,
        explained_by: list[str] | None = None,
    ) -> Finding:
        """The finding of this rule on `job`; `explains` / `explained_by` (finding codes)
        place it in a causal chain and are also written into the evidence."""
        if explains:
            evidence = {**evidence, "explains": list(explains)}
        if explained_by:
            evidence = {**evidence, "explained_by": list(explained_by)}
        return Finding(
            code=self.code,
            name=self.name,
            severity=severity or self.severity,
            subject_kind="job",
            subject_id=job.job_id,
            evidence=self.stored(evidence),
            recommendation=recommendation,
            start=job.start,
            end=job.end,
            target=self.target,
            gain=self.stored(gain) if gain is not None else None,
            explains=list(explains) if explains else None,
            explained_by=list(explained_by) if explained_by else None,
        )

    def stored(self, values: dict[str, Any]) -> dict[str, Any]:
        """Evidence or gain as the finding keeps it; a rule family may convert the values
        here rather than repeat `finding`."""
        return values
