"""Anomaly detection plug-ins (SIOX's AnomalyDetectionPlugIns), one small module each.

A detector watches one process's activities in time order and says, per activity,
whether it is anomalous against that process's own recent past. The site config picks
which run and with which parameters (`[reasoner.detectors.NAME]`, see
`iolens.analyze.reasoner.config`).
"""

from __future__ import annotations

from typing import Any, Protocol

from iolens.analyze.reasoner.activity import Activity
from iolens.analyze.reasoner.detectors import latency, throughput


class Detector(Protocol):
    name: str

    def observe(self, a: Activity) -> dict[str, Any] | None:
        """What is anomalous about `a` (JSON-ready), or None; then learn from it."""
        ...


#: name -> factory(**params); the names a site config may use.
DETECTORS: dict[str, type] = {
    latency.Latency.name: latency.Latency,
    throughput.Throughput.name: throughput.Throughput,
}
DEFAULT = ("latency",)
