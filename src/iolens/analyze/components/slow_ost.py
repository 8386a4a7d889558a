"""slow_ost: a fail-slow OST, found by comparing it with the OSTs busy at the same time.

Beacon 4.2 (Figure 8, the Shentu run): a few OSTs "significantly lagging behind" their
peers in the same parallel read, traced to failing RAID controllers. An OST whose
per-request service time stays several times the peer median while it has requests is
reported; the jobs it served in the episode (Lustre jobstats rows) are the evidence of
who was slowed. Engine and thresholds: `peers.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iolens.analyze.components.base import Context, Episode
from iolens.analyze.components.peers import SlowThresholds, slow_episodes


@dataclass
class SlowOst:
    name: str = "slow_ost"
    kind: str = "slow_ost"
    thresholds: SlowThresholds = field(default_factory=SlowThresholds)

    def detect(self, ctx: Context) -> list[Episode]:
        return slow_episodes(ctx, "ost", self.kind, self.name, self.thresholds)
