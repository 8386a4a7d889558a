"""The source contract: one class per file, one method.

A source reads what its node exposes under an injected root (so the same code runs on a
live node or on a captured tree) and returns `Reading`s: raw counters and gauges with the
component they belong to. The agent, not the source, turns counters into rates, so every
source gets reset and wrap handling for free.

"Absent on this node" is not an error: a source whose files do not exist returns nothing
and stays quiet. Anything else a source raises is logged once, counted, and does not stop
the other sources.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from iolens.model.batch import Batch


# Not frozen: a frozen dataclass sets each field through object.__setattr__, which made
# building a Reading 4x slower (4 us against 1 us): over a Lustre server's ~500 readings a
# round, 1.5 ms of the node agent's 20. Nothing changes a Reading after it is made.
@dataclass(slots=True)
class Reading:
    kind: str  # component kind: ost, mdt, oss, mds, forwarder, ib_port, node, ...
    component: str
    metric: str
    value: float
    counter: bool = True  # cumulative counter (rated by the agent) or gauge
    job_id: str | None = None
    # For a cumulative sum whose mean per event is wanted (Lustre's req_waittime sum over
    # its sample count): the cumulative event count. The agent reports
    # delta(value) / delta(per) over the interval as a gauge, or nothing if no events.
    per: float | None = None
    bits: int = 64  # counter width: a 32-bit counter wraps far sooner than a target restarts
    # Report the rated counter only when it moved: per-client counters (an MDS keeps stats
    # for thousands of mostly idle client exports) would otherwise ship rows of zeros.
    sparse: bool = False
    # For a counter born with its entry (a job_stats entry is created at the job's first
    # request and starts from zero; it goes after an idle time and comes back from zero):
    # when it was born, host clock (2.14+ `start_time`), or -inf when the file does not
    # say. If it was born after the previous round (or, for -inf, was not read then), it
    # is rated from zero over that round instead of waiting a round or being rated as a
    # "reset" over the whole time it was away, so no interval of I/O is lost or smeared.
    fresh: float | None = None
    # For an amount the server itself measured over a known time window (MooseFS charts:
    # one row per minute, labelled by its start): (start, end), epoch seconds. The value is
    # that window's count (counter=True, shipped as a rate over the window), its sum of
    # times over `per` events (shipped as the mean), or a gauge; stamped at `end`, not at
    # the round's time, so a minute lands in its own minute. The agent ships each window
    # once, however many rounds list it.
    window: tuple[float, float] | None = None
    # The component serving this target when it is not the agent's own host (a source
    # that asks a remote server, e.g. `mfscli` asking the MooseFS master about every
    # chunkserver): the target's `components` row names it as parent.
    parent: str | None = None


class Source(Protocol):
    """What every agent source implements."""

    name: ClassVar[str]

    def collect(self, root: Path) -> Iterable[Reading]:
        """Read everything this source knows about, under `root`."""
        ...


class BatchSource(Protocol):
    """A source whose data are already batches (the tracer's per-process files).

    Each batch comes with `done`, which the agent calls once the batch is safely in its
    disk spool: only then may the source forget the input. A crash in between re-sends
    the same batch key, which the server loads once.
    """

    name: ClassVar[str]

    def batches(self, root: Path) -> Iterable[tuple[Batch, Callable[[], None]]]:
        """Batches ready under `root`, each with the function that releases its input."""
        ...
