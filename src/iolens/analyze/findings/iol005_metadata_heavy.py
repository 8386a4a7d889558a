"""IOL005: a high metadata-operation rate (Beacon's "high-MDOPS" jobs)."""

from __future__ import annotations

from iolens.analyze.findings.base import JobRule
from iolens.analyze.jobreport import JobReport
from iolens.model.finding import Finding

MIN_RATE = 300.0  # metadata ops/s during I/O phases (Beacon 4.1)


class MetadataHeavy(JobRule):
    """The job issues metadata operations at a high rate.

    Symptom: more than 300 metadata ops/s on average while doing I/O.
    Why it hurts: there is one metadata server for everyone, and forwarders serve
    metadata with priority, so such jobs slow neighbours' reads and writes (Beacon: 13.6x
    longer request latency for jobs sharing forwarders with high-MDOPS jobs).
    What to do: create fewer, larger files (pack small outputs into one HDF5/NetCDF file or
    an archive), keep scratch files on node-local storage, avoid repeated stat/open.
    """

    code = "IOL005"
    name = "metadata-heavy"

    def check(self, report: JobReport) -> Finding | None:
        if report.md_ops_rate <= MIN_RATE:
            return None
        return self.finding(
            report,
            {"md_ops": report.md_ops, "md_ops_rate": report.md_ops_rate, "files": report.files},
            f"{report.md_ops_rate:.0f} metadata ops/s; pack small files into fewer large "
            "ones or use node-local storage for scratch files.",
        )
