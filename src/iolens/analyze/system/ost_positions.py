"""OSTs laid out by their place in the storage system (the K computer, section 6.5).

The OST x time heatmap shows when an OST fell behind; the positional map shows where:
OSTs drawn on a grid of their OSS (rows) and their index within it (columns), each cell
the bytes moved in the window. A striping hot spot, an OSS whose OSTs all sit idle, or one
fail-slow OST among busy neighbours stands out by position the way it does on the K
computer's rack maps. An OST's OSS is its `components.parent` (the site topology or the
agent); its index is the Lustre target index in its name (`lustre-OST000a` -> 10), and
OSTs without one follow in name order. Every OST the topology knows is drawn, so one
that moved nothing shows as an empty cell, not as a missing one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from iolens.analyze.system._common import window_sql
from iolens.store.base import Store

NO_OSS = "(no OSS known)"
_INDEX = re.compile(r"OST([0-9a-fA-F]{4,})$")


@dataclass
class OstCell:
    ost: str
    index: int | None  # Lustre target index from the name
    read_bytes: int
    write_bytes: int


@dataclass
class OstPositions:
    job_id: str | None  # None: every client's traffic (the OSTs' own counters)
    servers: list[str]  # rows: OSS names, then NO_OSS when any OST lacks one
    grid: list[list[OstCell]]  # grid[i]: servers[i]'s OSTs by index
    max_bytes: int  # the busiest cell's read + write
    since: datetime | None
    until: datetime | None


def ost_index(name: str) -> int | None:
    """The Lustre target index in an OST name (hexadecimal, as Lustre writes it)."""
    m = _INDEX.search(name)
    return int(m.group(1), 16) if m else None


def ost_positions(
    store: Store,
    start: datetime | None = None,
    end: datetime | None = None,
    job_id: str | None = None,
) -> OstPositions:
    """Bytes per OST over (start, end], on an OSS x index grid; a job's own when given."""
    where, params = window_sql(start, end)
    who = "job_id = ?" if job_id else "job_id IS NULL"
    rows = store.query(
        f"""
        SELECT component_id, sum(coalesce(read_bytes, 0))::BIGINT AS r,
               sum(coalesce(write_bytes, 0))::BIGINT AS w
        FROM server_samples WHERE kind = 'ost' AND {who} {where}
        GROUP BY 1
        """,
        ([job_id] if job_id else []) + params,
    ).to_pylist()
    moved = {r["component_id"]: (int(r["r"]), int(r["w"])) for r in rows}
    parent = {
        r["component_id"]: r["parent"]
        for r in store.query(
            "SELECT component_id, parent FROM components WHERE kind = 'ost'"
        ).to_pylist()
    }
    by_oss: dict[str, list[OstCell]] = {}
    for ost in sorted(set(parent) | set(moved)):
        r, w = moved.get(ost, (0, 0))
        by_oss.setdefault(parent.get(ost) or NO_OSS, []).append(OstCell(ost, ost_index(ost), r, w))
    servers = sorted(s for s in by_oss if s != NO_OSS) + ([NO_OSS] if NO_OSS in by_oss else [])
    grid = [
        sorted(by_oss[s], key=lambda c: (c.index is None, c.index or 0, c.ost)) for s in servers
    ]
    top = max((c.read_bytes + c.write_bytes for row in grid for c in row), default=0)
    return OstPositions(job_id, servers, grid, top, start, end)
