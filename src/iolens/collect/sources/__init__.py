"""Agent sources, one per file. `SOURCES` is the registry the agent and config read."""

from iolens.collect.base import Source
from iolens.collect.sources.node import NodeSource

SOURCES: dict[str, type[Source]] = {
    NodeSource.name: NodeSource,
}

__all__ = ["SOURCES"]
