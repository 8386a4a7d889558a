"""The `/metrics/site` route: the monitored state for Prometheus (`iolens.present.metrics`),
behind the `metrics` policy of `auth.authorize` (admins, or a `[web.metrics]` token)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from iolens.present.api import Readers
from iolens.present.metrics import (
    CONTENT_TYPE,
    MetricsConfig,
    SiteCollector,
    exposition,
    site_registry,
)
from iolens.present.web.auth import SITE_METRICS_PATH


def router(readers: Readers, config: MetricsConfig) -> APIRouter:
    registry = site_registry(SiteCollector(readers.reader, config))
    r = APIRouter(tags=["server"])

    @r.get(SITE_METRICS_PATH)
    def site_metrics() -> Response:
        """Throughput, requests, service times and queues of every forwarder, OST, MDT, OSS
        and MDS, the busiest jobs' rates and open anomalies, in Prometheus' text format
        (docs/monitoring.md). Admins, or a metrics token."""
        return Response(exposition(registry), media_type=CONTENT_TYPE)

    return r
