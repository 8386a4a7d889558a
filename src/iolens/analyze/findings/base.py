"""The findings contract: one rule per file, each with a stable code.

A rule looks at a `JobReport` and returns a `Finding` (`iolens.model.finding`) or None,
and says what its fix would save (`saving`, from the model in `iolens.analyze.savings`):
findings are ordered by that. Its class docstring has three parts (Symptom / Why it
hurts / What to do) that the docs and the UI show; evidence is data (numbers a person can
check), not prose. Sites silence codes in their config.
"""

from __future__ import annotations

from typing import Any, ClassVar

from iolens.analyze.jobreport import JobReport
from iolens.analyze.savings import Context, Saving
from iolens.model.finding import Finding

GiB = 2**30


class JobRule:
    """Base of the per-job rules; subclasses set the class attributes and `check`."""

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[str] = "warning"
    target: ClassVar[str] = "user"  # who acts on it: user | developer | admin

    def check(self, report: JobReport) -> Finding | None:
        raise NotImplementedError

    def saving(self, finding: Finding, report: JobReport, ctx: Context) -> Saving | None:
        """The time the recommended fix would save; None when the evidence says nothing."""
        return None

    def finding(
        self,
        report: JobReport,
        evidence: dict[str, Any],
        recommendation: str,
        severity: str | None = None,
    ) -> Finding:
        return Finding(
            self.code,
            self.name,
            severity or self.severity,
            "job",
            report.job_id,
            evidence,
            recommendation,
            report.start,
            report.end,
            target=self.target,
        )
