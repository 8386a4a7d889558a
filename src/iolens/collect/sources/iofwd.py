"""Forwarding daemon: what a forwarding node's clients asked, how fast it served them, and
what it asked of the parallel file system.

Reads the files a site's forwarding daemon writes in iolens' forwarder format
(`docs/forwarder-format.md`, parsed by `iolens.parse.iofwd`), one directory per service
under `run/iofwd/` (all services of the node are added up):

Per forwarding node (kind `forwarder`, component = host), from `run/iofwd/<svc>/stats`:

- `read_bytes`, `write_bytes` (counters): `read_bytes` / `write_bytes` sums, the bytes
  returned to and received from the clients; `read_ops`, `write_ops`: their sample counts
  (client requests);
- `md_ops` (counter): samples of every other `[usecs]` operation (`open`, `getattr` ...),
  reported only when the daemon times at least one;
- `service_us` (mean per request): `read` + `write` `[usecs]` sums over their samples,
  the time a thread spent serving a data request. Metadata requests are left out (their
  mean is `md_service_us`): a `getattr` takes a hundredth of a 1 MiB read, so mixing them
  would make the mean follow the request mix rather than the node's speed;
- `wait_us`, `queue_len`, `active_threads` (means per request): `req_waittime`,
  `req_qdepth`, `req_active`, as for a Lustre service (`ost/OSS/ost_io/stats`);
- `backend_read_bytes`, `backend_write_bytes`, `backend_read_ops`, `backend_write_ops`
  (counters) and `backend_service_us` (mean): the daemon's own requests to the file system,
  read-ahead included; they stay in the `metrics` table;
- `threads_max`, `threads_started` (gauges): the files of those names, when present.

Per client node and forwarder (kind `fwd_client`, component = `<host>:<client>`), from
`run/iofwd/<svc>/clients/<client>/stats`: `read_bytes`, `write_bytes`, `read_ops`,
`write_ops`, `md_ops` and `service_us` as above, for that client's requests. The component
names the forwarder too because a client can be served by several (failover, dynamic
forwarder allocation), and the analyses need to know which served it.

A counter the daemon does not print gives no reading at all (the format prints every
supported counter from the start, so absence means "not measured"), and the analyses then
say what they could not assess instead of reading a zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import ClassVar

from iolens.collect.base import Reading
from iolens.errors import InputError
from iolens.parse import iofwd
from iolens.parse._common import is_digits, parse_int
from iolens.parse.iofwd import ForwarderStats, Tally

#: Kind of the per-client rows.
CLIENT_KIND = "fwd_client"


class IofwdSource:
    """A forwarding node's daemon statistics: kind `forwarder`, and `fwd_client` per client."""

    name: ClassVar[str] = "iofwd"

    def __init__(self, host: str) -> None:
        self.host = host

    def collect(self, root: Path) -> Iterator[Reading]:
        services = _services(root / iofwd.RUN_DIR)
        if not services:
            return
        totals = [iofwd.parse_file(svc / iofwd.STATS_FILE) for svc in services]
        gauges = {}
        for gauge in ("threads_max", "threads_started"):
            values = [v for svc in services if (v := _integer(svc / gauge)) is not None]
            if values:
                gauges[gauge] = float(sum(values))
        clients: dict[str, list[ForwarderStats]] = {}
        for svc in services:
            for path in sorted((svc / iofwd.CLIENTS_DIR).glob(f"*/{iofwd.STATS_FILE}")):
                clients.setdefault(path.parent.name, []).append(iofwd.parse_file(path, client=True))
        yield from readings(self.host, totals, clients, gauges)


def readings(
    host: str,
    totals: list[ForwarderStats],
    clients: dict[str, list[ForwarderStats]],
    gauges: dict[str, float],
) -> Iterator[Reading]:
    """The readings of one node's services (`totals`, one per service), their clients' files
    and the thread gauges, once parsed. A client's counters are born with its file (its
    `start_time`: `Reading.fresh`) and reported only when they move (thousands of clients,
    mostly idle at any moment)."""
    yield from _traffic("forwarder", host, totals)
    yield from _queue(host, totals)
    yield from _backend(host, totals)
    for gauge, value in gauges.items():
        yield Reading("forwarder", host, gauge, value, counter=False)
    for client, files in sorted(clients.items()):
        yield from client_readings(host, client, files)


def client_readings(host: str, client: str, files: list[ForwarderStats]) -> Iterator[Reading]:
    """One client's readings from its files (one per service): they depend on nothing else,
    which lets the simulator's fast path reuse them while the client's counters stand still."""
    starts = [f.start_time for f in files if f.start_time is not None]
    born = max(starts) if len(starts) == len(files) else float("-inf")
    yield from _traffic(CLIENT_KIND, f"{host}:{client}", files, born)


def _services(run: Path) -> list[Path]:
    """Service directories holding a stats file, sorted; none when the daemon is absent."""
    try:
        return sorted(p for p in run.iterdir() if (p / iofwd.STATS_FILE).is_file())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _total(tallies: Iterable[Tally | None]) -> Tally | None:
    """Sum of the tallies present; None when no file has the counter (not measured)."""
    present = [t for t in tallies if t is not None]
    if not present:
        return None
    out = Tally()
    for t in present:
        out = out + t
    return out


def _mean(
    kind: str, component: str, metric: str, t: Tally | None, fresh: float | None = None
) -> Iterator[Reading]:
    """A per-event mean over the interval: cumulative sum, with the event count as `per`."""
    if t is not None:
        yield Reading(
            kind, component, metric, float(t.total), counter=False, per=float(t.count), fresh=fresh
        )


def _traffic(
    kind: str, component: str, files: list[ForwarderStats], fresh: float | None = None
) -> Iterator[Reading]:
    """Client-facing bytes, requests and service times of one node or one client (a client's
    counters `fresh` from its file's birth and sparse)."""
    sparse = fresh is not None
    for op in ("read", "write"):
        t = _total(getattr(f, f"{op}_bytes") for f in files) or Tally()
        yield Reading(kind, component, f"{op}_bytes", float(t.total), sparse=sparse, fresh=fresh)
        yield Reading(kind, component, f"{op}_ops", float(t.count), sparse=sparse, fresh=fresh)
    md = _total(f.md_ops for f in files)
    if md is not None:
        yield Reading(kind, component, "md_ops", float(md.count), sparse=sparse, fresh=fresh)
    yield from _mean(kind, component, "service_us", _total(f.data_ops for f in files), fresh)
    if kind == "forwarder":
        yield from _mean(kind, component, "md_service_us", md)


def _queue(host: str, files: list[ForwarderStats]) -> Iterator[Reading]:
    for field, metric in (
        ("req_waittime", "wait_us"),
        ("req_qdepth", "queue_len"),
        ("req_active", "active_threads"),
    ):
        yield from _mean("forwarder", host, metric, _total(getattr(f, field) for f in files))


def _backend(host: str, files: list[ForwarderStats]) -> Iterator[Reading]:
    for op in ("read", "write"):
        t = _total(getattr(f, f"backend_{op}_bytes") for f in files)
        if t is not None:
            yield Reading("forwarder", host, f"backend_{op}_bytes", float(t.total))
            yield Reading("forwarder", host, f"backend_{op}_ops", float(t.count))
    timed = _total(t for f in files for t in (f.backend_read, f.backend_write))
    yield from _mean("forwarder", host, "backend_service_us", timed)


def _integer(path: Path) -> int | None:
    """A one-number file (`threads_max`), or None when absent."""
    try:
        token = path.read_text(encoding="utf-8", errors="replace").strip()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    if not is_digits(token):
        raise InputError(str(path), f"expected a non-negative integer, got {token[:40]!r}", 1)
    return parse_int(token, str(path), 1, path.name)  # a u64: 400 digits overflowed float()
