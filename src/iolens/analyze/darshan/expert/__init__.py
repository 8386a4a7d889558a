"""Rules an HPC I/O expert applies to a Darshan log beyond Drishti and the zoom-in paper.

They read what the counters of two layers say together (MPI-IO against the POSIX calls
beneath it, file by file), what the size bins hide (zero-byte reads), what DXT shows about
time (ranks taking turns on a file) and what the Lustre layout implies for ROMIO (one
stripe, one aggregator). Each finding says which other findings it explains and which
explain it (`Finding.explains` / `explained_by`, repeated in the evidence), so a later pass
can keep one root cause per chain; severity is the share of the job's I/O it explains.
Thresholds and their sources are in `thresholds.py`.
"""

from __future__ import annotations

from iolens.analyze.darshan.expert.common import ExpertRule
from iolens.analyze.darshan.expert.x01_zero_byte_reads import UnrequestedReads
from iolens.analyze.darshan.expert.x02_layer_amplification import LayerAmplification
from iolens.analyze.darshan.expert.x03_serialised_access import SerialisedAccess
from iolens.analyze.darshan.expert.x04_mpiio_time_skew import MpiioTimeSkew
from iolens.analyze.darshan.expert.x05_single_aggregator import SingleAggregator
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding

#: one instance of every rule, in code order
RULES: tuple[ExpertRule, ...] = (
    UnrequestedReads(),
    LayerAmplification(),
    SerialisedAccess(),
    MpiioTimeSkew(),
    SingleAggregator(),
)


def diagnose(job: DarshanJob, ctx: RuleContext | None = None) -> list[Finding]:
    """Every expert finding on `job`, in code order."""
    ctx = ctx if ctx is not None else RuleContext()
    return [f for r in RULES if (f := r.check(job, ctx)) is not None]


__all__ = ["RULES", "ExpertRule", "diagnose"]
