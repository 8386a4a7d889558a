"""Agent sources, one per file. `SOURCES` (readings) and `BATCH_SOURCES` (ready-made
batches) are the registries the agent and its config read."""

from iolens.collect.base import BatchSource, Source
from iolens.collect.sources.diskstats import DiskstatsSource
from iolens.collect.sources.fabric import FabricSource
from iolens.collect.sources.infiniband import InfinibandSource
from iolens.collect.sources.iofwd import IofwdSource
from iolens.collect.sources.lnet_router import LnetRouterSource
from iolens.collect.sources.lustre_client import LustreClientSource
from iolens.collect.sources.lustre_mds import LustreMdsSource
from iolens.collect.sources.lustre_oss import LustreOssSource
from iolens.collect.sources.moosefs import MoosefsSource
from iolens.collect.sources.moosefs_client import MoosefsClientSource
from iolens.collect.sources.node import NodeSource
from iolens.collect.sources.procio import ProcioSource
from iolens.collect.sources.tracer_spool import TracerSpoolSource

SOURCES: dict[str, type[Source]] = {
    NodeSource.name: NodeSource,
    DiskstatsSource.name: DiskstatsSource,
    ProcioSource.name: ProcioSource,
    InfinibandSource.name: InfinibandSource,
    FabricSource.name: FabricSource,
    LnetRouterSource.name: LnetRouterSource,
    LustreOssSource.name: LustreOssSource,
    LustreMdsSource.name: LustreMdsSource,
    LustreClientSource.name: LustreClientSource,
    MoosefsSource.name: MoosefsSource,
    MoosefsClientSource.name: MoosefsClientSource,
    # Last: on a forwarding node that also runs `lnet_router` or `lustre_client` with role
    # `forwarder`, the daemon's own gauges (queue_len ...) are the ones `server_samples` keeps.
    IofwdSource.name: IofwdSource,
}

BATCH_SOURCES: dict[str, type[BatchSource]] = {
    TracerSpoolSource.name: TracerSpoolSource,
}


def source_names() -> list[str]:
    return [*SOURCES, *BATCH_SOURCES]


def source_samples() -> dict[str, str]:
    """The sample config sections of sources that are off by default or take settings."""
    return {n: c.SAMPLE for n, c in SOURCES.items() if getattr(c, "SAMPLE", None)}  # type: ignore[attr-defined]


__all__ = ["BATCH_SOURCES", "SOURCES", "source_names", "source_samples"]
