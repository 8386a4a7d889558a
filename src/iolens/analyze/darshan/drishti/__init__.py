"""Drishti 0.8's insights as iolens findings, with its known defects corrected.

Every trigger of Drishti 0.8 (PyPI `drishti-io==0.8`, `drishti/includes/module.py`) is a
`DarshanRule` here with code "D" + Drishti's code: S01 -> DS01, M01..M07 -> DM01..DM07,
P01..P22 -> DP01..DP22 (Drishti has no P20). Drishti's M08-M10 (MPI-IO aggregators,
`cb_nodes`, against compute nodes) have no counterpart: they read `cb_nodes` from the
log's `h=` metadata, which is the hints Darshan wrote its own log with
(`iolens.model.darshan_own`), never the application's, and a Darshan log records no
other; their codes DM08-DM10 are retired (`RETIRED_CODES`). The two DXT Explorer
insights Drishti shows when given `--json` keep their codes D01 (rank 0 heavy) -> DD01
and D02 (unbalanced workload) -> DD02. Thresholds are Drishti's defaults (`thresholds.py`).

Drishti levels map to severities: HIGH -> critical when the offending share is >= 50 %,
else warning; WARN -> warning; INFO and OK -> info (iolens emits info findings exactly
where Drishti emits INFO/OK insights).

`RULES` holds rule instances, in Drishti's CSV column order; `diagnose(job)` runs them.
"""

from __future__ import annotations

from iolens.analyze.darshan.drishti.collective import (
    CollectiveReads,
    CollectiveWrites,
    NoCollectiveReads,
    NoCollectiveWrites,
)
from iolens.analyze.darshan.drishti.common import DrishtiRule
from iolens.analyze.darshan.drishti.imbalance import ReadSizeImbalance, WriteSizeImbalance
from iolens.analyze.darshan.drishti.intensity import (
    ReadCountIntensive,
    ReadSizeIntensive,
    WriteCountIntensive,
    WriteSizeIntensive,
)
from iolens.analyze.darshan.drishti.metadata import MetadataTime
from iolens.analyze.darshan.drishti.misaligned import MisalignedFile, MisalignedMemory
from iolens.analyze.darshan.drishti.mpiio_usage import NoMpiio
from iolens.analyze.darshan.drishti.nonblocking import BlockingReads, BlockingWrites
from iolens.analyze.darshan.drishti.random_access import (
    RandomReads,
    RandomWrites,
    SequentialReads,
    SequentialWrites,
)
from iolens.analyze.darshan.drishti.rank_zero import RankZeroHeavy
from iolens.analyze.darshan.drishti.redundant import RedundantReads, RedundantWrites
from iolens.analyze.darshan.drishti.shared_small import SharedSmallReads, SharedSmallWrites
from iolens.analyze.darshan.drishti.small_io import SmallReads, SmallWrites
from iolens.analyze.darshan.drishti.stdio import StdioHeavy
from iolens.analyze.darshan.drishti.stragglers import SharedDataImbalance, SharedTimeImbalance
from iolens.analyze.darshan.drishti.unbalanced import UnbalancedWorkload
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding

#: one instance of every rule, in the column order of Drishti's `--csv` export
RULES: tuple[DrishtiRule, ...] = (
    StdioHeavy(),
    WriteCountIntensive(),
    ReadCountIntensive(),
    WriteSizeIntensive(),
    ReadSizeIntensive(),
    SmallReads(),
    SmallWrites(),
    MisalignedMemory(),
    MisalignedFile(),
    RedundantReads(),
    RedundantWrites(),
    RandomReads(),
    SequentialReads(),
    RandomWrites(),
    SequentialWrites(),
    SharedSmallReads(),
    SharedSmallWrites(),
    MetadataTime(),
    SharedDataImbalance(),
    SharedTimeImbalance(),
    WriteSizeImbalance(),
    ReadSizeImbalance(),
    NoMpiio(),
    NoCollectiveReads(),
    NoCollectiveWrites(),
    CollectiveReads(),
    CollectiveWrites(),
    BlockingReads(),
    BlockingWrites(),
    RankZeroHeavy(),
    UnbalancedWorkload(),
)

#: Codes of rules removed for reading Darshan's own log-writing hints as the application's:
#: a re-diagnosis deletes their old findings.
RETIRED_CODES: frozenset[str] = frozenset({"DM08", "DM09", "DM10"})

#: iolens code -> Drishti (or DXT Explorer) code
DRISHTI_CODES: dict[str, str] = {r.code: r.drishti_code for r in RULES}


def diagnose(
    job: DarshanJob, ctx: RuleContext | None = None, rules: tuple[DrishtiRule, ...] = RULES
) -> list[Finding]:
    """Every finding of `rules` on `job`, in rule order."""
    ctx = ctx or RuleContext()
    return [f for r in rules if (f := r.check(job, ctx)) is not None]


__all__ = ["DRISHTI_CODES", "RETIRED_CODES", "RULES", "DrishtiRule", "diagnose"]
