"""slow_forwarder: a forwarding node serving far slower than its peers or its history.

Beacon 4.2 (Figure 7): in a 6,000-process LAMMPS run spread over three forwarders, one
was a straggler "serving at a bandwidth much slower than its peak", stretching the
checkpoint 20x. A forwarder whose per-request service time stays several times the
baseline while it has requests is reported; with fewer than `min_peers` forwarders busy
at once (a 1,024-node machine has two) the baseline is the forwarders' healthy history.
A forwarder clogged by slow N-1 requests keeps its service time (the requests wait in its
queue, Beacon Table 5), so interference is not mistaken for a slow node. Evidence lists
the jobs behind it in the episode (requests attributed through their client nodes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iolens.analyze.components.base import Context, Episode
from iolens.analyze.components.peers import SlowThresholds, slow_episodes


@dataclass
class SlowForwarder:
    name: str = "slow_forwarder"
    kind: str = "slow_forwarder"
    thresholds: SlowThresholds = field(default_factory=SlowThresholds)

    def detect(self, ctx: Context) -> list[Episode]:
        return slow_episodes(ctx, "forwarder", self.kind, self.name, self.thresholds)
