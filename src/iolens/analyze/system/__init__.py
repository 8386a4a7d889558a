"""System views: how the machine as a whole is loaded, not one job (Beacon 4.1-4.4, the
K computer's log analysis).

One module per view, each a pure function over the store (SQL aggregation in DuckDB)
returning plain dataclasses; `to_plain` turns any of them into JSON-ready dicts.

- `load`: per-hour peak load of forwarders, OSTs and the MDS, level shares, imbalance
- `mds`: MDS load over time, split into jobs and other clients
- `network`: switch traffic histogram and imbalance; port R_BW and T_wait^max
- `routers`: LNet router traffic over time and the imbalance between routers
- `oss`: OSS request statistics (queue depth, wait, active threads) over time
- `heatmap`: one job's bytes per OST and time bin
- `anomaly_durations`: anomaly episodes by duration class and layer (Beacon Table 2)
- `volume_by_corehours`: average I/O volume per job by core-hours (Beacon Table 3)
- `io_mode_mix`: I/O modes by volume and job count (Beacon Table 4, Figure 9)
- `mds_clients`: MDS load by client system: compute, login, other (Beacon Fig. 10(b))
- `ost_positions`: bytes per OST on an OSS x index grid (the K computer's maps)
"""

from __future__ import annotations

from iolens.analyze.system._common import to_plain
from iolens.analyze.system.heatmap import Heatmap, ost_heatmap
from iolens.analyze.system.load import KindLoad, hourly_load, imbalance, level_of
from iolens.analyze.system.mds import MdsView, mds_load
from iolens.analyze.system.network import interconnect, job_interconnect, switch_traffic
from iolens.analyze.system.oss import OssView, job_oss_requests, oss_requests
from iolens.analyze.system.routers import router_traffic

__all__ = [
    "Heatmap",
    "KindLoad",
    "MdsView",
    "OssView",
    "hourly_load",
    "imbalance",
    "interconnect",
    "job_interconnect",
    "job_oss_requests",
    "level_of",
    "mds_load",
    "oss_requests",
    "ost_heatmap",
    "router_traffic",
    "switch_traffic",
    "to_plain",
]
