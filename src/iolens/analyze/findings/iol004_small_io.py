"""IOL004: many small data requests."""

from __future__ import annotations

from iolens.analyze.findings.base import JobRule
from iolens.analyze.jobreport import JobReport
from iolens.model.finding import Finding

MAX_AVG_REQUEST = 64 * 2**10
MIN_OPS = 10_000


class SmallIO(JobRule):
    """The job moves its data in small requests.

    Symptom: >= 10,000 data requests averaging under 64 KiB.
    Why it hurts: every request costs a forwarder thread and an RPC whatever its size, so
    small requests reach a fraction of the bandwidth and load servers with per-op overhead.
    What to do: buffer in the application (larger write sizes, HDF5 chunking, MPI-IO
    collective buffering) or let stdio buffer (setvbuf with a large buffer).
    """

    code = "IOL004"
    name = "small-io"

    def check(self, report: JobReport) -> Finding | None:
        ops = report.read_ops + report.write_ops
        if ops < MIN_OPS or report.avg_request >= MAX_AVG_REQUEST:
            return None
        return self.finding(
            report,
            {"data_ops": ops, "avg_request": report.avg_request, "iops_avg": report.iops_avg},
            f"{ops} requests averaging {report.avg_request / 1024:.1f} KiB; buffer writes "
            "into >= 1 MiB requests.",
        )
