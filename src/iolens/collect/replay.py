"""Replay captured /proc and /sys snapshots as if the agent had run at each capture time.

Sites that cannot run an agent often already snapshot /proc and /sys from cron, one folder
per sample time. Running the real :class:`~iolens.collect.agent.Agent` over those folders in
time order, with its clock set to each folder's time and its counter state carried from one
folder to the next, gives exactly the batches a live agent would have shipped: same rates,
same reset handling, same batch keys. The keys are what make a re-import add nothing.

This module only produces batches (collect may not import ingest); `iolens import lustre`
loads them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

import pyarrow.compute as pc

from iolens.collect.agent import Agent
from iolens.collect.base import Source
from iolens.collect.sources import SOURCES
from iolens.collect.sources.node import NodeSource
from iolens.errors import InputError
from iolens.model.batch import Batch

__all__ = ["Replay", "Sample", "find_samples", "folder_time"]

_EPOCH = re.compile(r"^\d+(\.\d+)?$")
NAMING = (
    "name sample folders by their UTC time: ISO-8601 (2024-03-01T12:00:00Z, "
    "20240301T120000Z) or Unix seconds (1709294400)"
)


@dataclass(frozen=True)
class Sample:
    """One captured tree and the time it was taken (Unix seconds)."""

    path: Path
    time: float


def folder_time(name: str) -> float | None:
    """Unix seconds named by a sample folder, or None if the name is not a time.

    All digits is Unix seconds. Otherwise an ISO-8601 date *and* time (a bare date would
    silently put a day's samples at midnight); without an offset it is taken as UTC.
    """
    if _EPOCH.match(name):
        return float(name)
    if "T" not in name:
        return None
    try:
        t = datetime.fromisoformat(name)
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def find_samples(directory: Path) -> list[Sample]:
    """The sample folders of `directory` in time order.

    Files and dot-folders are ignored (notes, capture scripts, `.snapshot`). Any other
    folder whose name is not a time is an error, raised before anything is read: a
    misnamed folder silently left out would leave a hole in the history.
    """
    if not directory.is_dir():
        raise InputError(str(directory), "no such directory")
    samples: list[Sample] = []
    for path in sorted(directory.iterdir()):
        if not path.is_dir() or path.name.startswith("."):
            continue
        t = folder_time(path.name)
        if t is None:
            raise InputError(str(path), f"not a sample time; {NAMING}")
        samples.append(Sample(path, t))
    if not samples:
        raise InputError(str(directory), f"no sample folders; {NAMING}")
    samples.sort(key=lambda s: s.time)
    for before, after in pairwise(samples):
        if after.time == before.time:
            raise InputError(str(after.path), f"same time as {before.path.name}")
    return samples


def _captured_hostname(sample: Sample) -> str | None:
    path = sample.path / "proc" / "sys" / "kernel" / "hostname"
    if not path.is_file():
        return None
    name = path.read_text(errors="replace").strip()
    return name or None


def _build(cls: type[Source], host: str, role: str | None) -> Source:
    """A source as the live agent's runner builds it: the role only to those that take one."""
    takes_role = cls is NodeSource or getattr(cls, "takes_role", False)
    return cls(host, role) if role is not None and takes_role else cls(host)  # type: ignore[call-arg]


class Replay:
    """The agent over every sample folder of `directory`, oldest first.

    `host` defaults to the captured `/proc/sys/kernel/hostname` of the first folder, else
    the directory's name; it must be the same on every import of the same captures, since
    batch keys are `agent:<host>:<time>`. `role` is the node's role, given to the sources
    that take one as the runner does; without it each uses its own default (`node`,
    `forwarder`, ...).
    """

    def __init__(
        self,
        directory: Path,
        host: str | None = None,
        role: str | None = None,
        sources: Mapping[str, type[Source]] | None = None,
    ) -> None:
        self.samples = find_samples(directory)
        self.host = host or _captured_hostname(self.samples[0]) or directory.resolve().name
        classes = SOURCES if sources is None else sources
        built = [_build(cls, self.host, role) for cls in classes.values()]
        self._now = 0.0
        self.agent = Agent(self.host, self.samples[0].path, built, clock=lambda: self._now)

    def batches(self) -> Iterator[tuple[Sample, Batch]]:
        """One batch per folder. The first has gauges only: rates need a previous sample.

        The agent's self-metrics (source durations, failure counts) describe this import,
        not the captured node, so they are left out; `failures()` reports them instead.
        """
        for sample in self.samples:
            self.agent.root = sample.path
            self._now = sample.time
            batch = self.agent.collect_round()
            batch.tables()  # the agent builds plain columns: Arrow from here on
            if batch.metrics is not None:
                batch.metrics = batch.metrics.filter(pc.not_equal(batch.metrics["kind"], "agent"))
            yield sample, batch

    def failures(self) -> dict[str, int]:
        """Folders each failing source could not read, by source name."""
        return {name: h.failures for name, h in self.agent.health.items() if h.failures}
