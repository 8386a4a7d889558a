"""The simulated servers: cumulative counters, the files that show them, what agents read.

Each server host (`oss.py`, `mds.py`, `forwarder.py`, with `node.py` for /proc and the
HCAs) advances its counters every agent round from what the engine did (`activity.py`,
timed by `model.py`), renders them as the text files a Lustre 2.15 server exposes
(`lustre_text.py`), and says which readings the real agent sources take from those files
(the fast path, `simulate/fastpath.py`).
"""

from __future__ import annotations

#: A `collect.base.Reading` as a plain tuple, same fields in the same order (kind,
#: component, metric, value, counter, job_id, per, bits, sparse, fresh): what a host tells
#: the fast path its sources would read. Tuples, because a simulated day has millions.
Raw = tuple[str, str, str, float, bool, str | None, float | None, int, bool, float | None]


def raw(
    kind: str,
    component: str,
    metric: str,
    value: float,
    counter: bool = True,
    job_id: str | None = None,
    per: float | None = None,
    bits: int = 64,
    sparse: bool = False,
    fresh: float | None = None,
) -> Raw:
    """`Reading(...)`, as the tuple the fast path takes."""
    return (kind, component, metric, value, counter, job_id, per, bits, sparse, fresh)


class Block:
    """Readings that repeat unchanged from round to round (an idle client's counters): the
    fast path resolves their keys once and reuses them (`DirectAgent.add`). Equal to
    yielding `raws` one by one."""

    __slots__ = ("raws", "resolved")

    def __init__(self, raws: list[Raw]) -> None:
        self.raws = raws
        self.resolved: tuple[object, tuple[list, ...], dict[str, str]] | None = None
