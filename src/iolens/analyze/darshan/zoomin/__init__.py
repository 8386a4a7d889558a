"""Zoom-in analysis of Darshan logs (Wang et al., CCGrid'19): factors, covering set, causes.

Platform view (`platform.correlation`), application view (`platform.application_view`) and
job view (`covering.covering_set`, `covering.cover_files`) over the Table I factors of
`factors.job_factors`, and the paper's ten root causes of Table II as rules Z01-Z10.
"""

from __future__ import annotations

from iolens.analyze.darshan.rule import DarshanRule, RuleContext
from iolens.analyze.darshan.zoomin.analysis import ZoomIn, zoom
from iolens.analyze.darshan.zoomin.covering import (
    CoveringSet,
    Interval,
    cover_files,
    covering_set,
    sweep,
)
from iolens.analyze.darshan.zoomin.factors import FACTORS, factors_table, job_factors
from iolens.analyze.darshan.zoomin.phases import io_phases
from iolens.analyze.darshan.zoomin.weather import job_weather, weather_before
from iolens.analyze.darshan.zoomin.z01_io_phases import TooManyPhases
from iolens.analyze.darshan.zoomin.z02_single_ost import SingleOstBound
from iolens.analyze.darshan.zoomin.z03_small_data import SmallDataSize
from iolens.analyze.darshan.zoomin.z04_rank_imbalance import RankImbalance
from iolens.analyze.darshan.zoomin.z05_small_requests import SmallRequests
from iolens.analyze.darshan.zoomin.z06_ost_imbalance import OstImbalance
from iolens.analyze.darshan.zoomin.z07_fs_weather import BadWeather
from iolens.analyze.darshan.zoomin.z08_file_per_process import FilePerProcess
from iolens.analyze.darshan.zoomin.z09_read_caching import ReadCaching
from iolens.analyze.darshan.zoomin.z10_wide_striping import BalancedWideStriping
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding

#: The root causes of the paper's Table II, in its order (Z01 = cause 1, ...).
RULES: tuple[type[DarshanRule], ...] = (
    TooManyPhases,
    SingleOstBound,
    SmallDataSize,
    RankImbalance,
    SmallRequests,
    OstImbalance,
    BadWeather,
    FilePerProcess,
    ReadCaching,
    BalancedWideStriping,
)


def diagnose_zoomin(job: DarshanJob, ctx: RuleContext | None = None) -> list[Finding]:
    """Every zoom-in finding for the job, in code order (the analysis is shared by all)."""
    ctx = ctx if ctx is not None else RuleContext()
    out = []
    for rule in RULES:
        f = rule().check(job, ctx)
        if f is not None:
            out.append(f)
    return out


__all__ = [
    "FACTORS",
    "RULES",
    "CoveringSet",
    "Interval",
    "ZoomIn",
    "cover_files",
    "covering_set",
    "diagnose_zoomin",
    "factors_table",
    "io_phases",
    "job_factors",
    "job_weather",
    "sweep",
    "weather_before",
    "zoom",
]
