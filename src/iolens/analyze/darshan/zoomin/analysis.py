"""One job's zoom-in analysis, computed once and shared by the ten root-cause rules.

Each rule needs some of the same things (factors, covering set, per-OST figures, phases);
`zoom(job, ctx)` builds them lazily and keeps the result in `ctx.extra` for that job, so
running all ten rules reads the log's counters once. Besides `weather`, `ost_bw` and
`ost_total`, the rules read two optional `ctx.extra` keys: `"thresholds"` (site overrides
of `thresholds.py`) and `"nodes"` (the scheduler's node list or count, for `nnodes`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pandas as pd

from iolens.analyze.bandwidth import Bandwidth, of_log
from iolens.analyze.darshan.rule import RuleContext
from iolens.analyze.darshan.zoomin import thresholds as th
from iolens.analyze.darshan.zoomin.covering import CoveringSet, cover_files, covering_set
from iolens.analyze.darshan.zoomin.factors import (
    RankLoad,
    factors_from,
    io_time,
    ost_load,
    rank_load,
)
from iolens.analyze.darshan.zoomin.files import file_stats
from iolens.analyze.darshan.zoomin.phases import IOPhase, io_phases
from iolens.analyze.darshan.zoomin.records import data_records
from iolens.model.darshan import DarshanJob

_KEY = "zoomin"


@dataclass
class OneOst:
    """The OST that files covering most of the I/O time all live on, with its figures."""

    ost: int
    cover_s: float  # I/O time covered by files on this OST alone
    cover_share: float  # of the job's I/O wall time
    bytes: float  # bytes of the job's files that live on this OST alone
    ranks: int  # most ranks sharing one of those files
    files: list[dict[str, Any]]  # covering-set files on it
    bandwidth: float | None  # observed bandwidth of this OST (single-OST files)
    peers_bandwidth: float | None  # median observed bandwidth of the job's other OSTs
    peers: int  # how many other OSTs that median is over


class ZoomIn:
    """Lazily computed figures of one job; see the module docstring."""

    def __init__(self, job: DarshanJob, ctx: RuleContext) -> None:
        self.job = job
        self.ctx = ctx

    def t(self, name: str) -> Any:
        """A threshold, with the site's override from `ctx.extra["thresholds"]`."""
        return th.get(name, self.ctx.extra)

    @cached_property
    def records(self) -> pd.DataFrame:
        return data_records(self.job)

    @cached_property
    def factors(self) -> dict[str, Any]:
        return factors_from(
            self.job,
            self.records,
            self.ranks,
            self.osts,
            self.ctx.weather,
            self.ctx.extra.get("nodes"),
            bw=self.bandwidth,
        )

    @cached_property
    def bandwidth(self) -> Bandwidth:
        """The job's one bandwidth (`analyze.bandwidth`), no time above the run time."""
        return of_log(self.job)

    @cached_property
    def io_time(self) -> float:
        return io_time(self.job, self.records)

    @cached_property
    def ranks(self) -> RankLoad:
        return rank_load(self.job, self.records)

    @cached_property
    def osts(self) -> pd.DataFrame:
        return ost_load(self.job, self.records)

    @cached_property
    def files(self) -> pd.DataFrame:
        return file_stats(self.job, self.records)

    @cached_property
    def cover(self) -> CoveringSet:
        return covering_set(self.job, self.records)

    @cached_property
    def cover_files(self) -> list[dict[str, Any]]:
        return cover_files(self.job, self.cover, self.files)

    @cached_property
    def phases(self) -> tuple[list[IOPhase], str]:
        return io_phases(self.job)

    @property
    def datasize(self) -> float:
        return float(self.factors["datasize"] or 0.0)

    @property
    def material(self) -> bool:
        """Whether the job's I/O takes long enough, absolutely and relatively, to tune."""
        t = self.io_time
        return t >= self.t("MIN_IO_S") and t >= self.t("MIN_IO_SHARE") * self.job.run_time

    def cover_evidence(self, n: int = 5) -> list[dict[str, Any]]:
        """The covering set's top files, trimmed to what a finding's evidence needs."""
        keys = ("path", "size", "ranks", "bytes", "osts", "stripe_count", "bandwidth")
        out = []
        for f in self.cover_files[:n]:
            d = {k: f[k] for k in keys}
            d["osts"] = d["osts"][:16]
            d["cover_share"] = round(f["cover_share"], 4)
            out.append(d)
        return out

    @cached_property
    def ost_bandwidth(self) -> dict[int, float]:
        """Observed bandwidth per OST, from the files that live on that OST alone.

        Those files are served concurrently, so an OST's figure is their bytes over the
        longest of their I/O times (multi-OST files cannot be split by time and are left
        out).
        """
        f = self.files
        single = f[f["osts"].map(len) == 1]
        acc: dict[int, list[float]] = {}
        for osts, b, t in zip(single["osts"], single["bytes"], single["io_time"], strict=True):
            a = acc.setdefault(int(osts[0]), [0.0, 0.0])
            a[0] += float(b)
            a[1] = max(a[1], float(t))
        return {o: b / t for o, (b, t) in acc.items() if t > 0 and b > 0}

    @cached_property
    def one_ost(self) -> OneOst | None:
        """The single OST whose files cover the most I/O time, if any covering file is on one."""
        total = self.cover.io_time
        by_ost: dict[int, float] = {}
        files: dict[int, list[dict[str, Any]]] = {}
        for cf in self.cover_files:
            if len(cf["osts"]) == 1:
                o = cf["osts"][0]
                by_ost[o] = by_ost.get(o, 0.0) + cf["cover_s"]
                files.setdefault(o, []).append(cf)
        if not by_ost or total <= 0:
            return None
        o = max(by_ost, key=lambda k: (by_ost[k], -k))
        f = self.files
        on = f[f["osts"].map(lambda x: list(x) == [o])]
        bw = self.ost_bandwidth
        others = [v for k, v in bw.items() if k != o]
        return OneOst(
            ost=o,
            cover_s=by_ost[o],
            cover_share=by_ost[o] / total,
            bytes=float(on["bytes"].sum()),
            ranks=int(on["ranks"].max()) if len(on) else 0,
            files=files[o],
            bandwidth=bw.get(o),
            peers_bandwidth=statistics.median(others) if others else None,
            peers=len(others),
        )


def zoom(job: DarshanJob, ctx: RuleContext) -> ZoomIn:
    """The job's analysis, cached in `ctx.extra` for as long as the same job is asked for."""
    return ctx.per_job(_KEY, job, lambda: ZoomIn(job, ctx))
