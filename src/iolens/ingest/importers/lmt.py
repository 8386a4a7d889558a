"""LMT databases -> the server-side samples a Lustre agent on each server would have sent.

LMT (the Lustre Monitoring Tool) stores what its collectors read on every OSS and MDS each
5 s in a database sites keep for years (FORMATS.md 2; pytokio ships SQLite copies).
Imported, that history gives the analyses what the live Lustre sources give: OST traffic,
metadata operations, server CPU, capacity; among them the zoom-in weather factors (OSS
and MDS CPU, OST traffic in the seconds before a job starts).

Rows, as `collect/sources/lustre_oss.py`, `lustre_mds.py` and the agent write them:

- `server_samples` kind `ost` (component: the OST's name, `snx11025-OST0000`):
  `read_bytes`/`write_bytes` moved in (previous sample, this sample]. LMT's counters are
  cumulative; a decrease is a counter reset (LMT or server restart), after which the new
  value counts as the bytes since (`parse.rates.counter_delta`). Kind `mdt`: `md_ops`,
  every metadata operation the MDT counted in the interval.
- `metrics`, counters as per-second rates over the interval: the same `read_bytes`,
  `write_bytes`, `md_ops`, and `md_<op>` for each operation that moved at all; gauges as
  read (no interval): capacity (`space_total_bytes`, `space_free_bytes`, `files_total`,
  `files_free`) per OST and MDT, and `cpu_pct` (LMT's %CPU) per OSS and MDS host, with
  `mem_pct` per OSS.
- `components`: every OST with its OSS as parent, every MDT with its MDS; the hosts.

LMT's timestamps are the servers' local time without a zone; `tz` names it (default:
this machine's zone), as for sacct. A database is one batch keyed by its content, so
importing it again changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from iolens.ingest.importers.identity import content_key
from iolens.ingest.importers.sacct import to_utc
from iolens.model.batch import Batch
from iolens.model.rows import Columns
from iolens.parse.lmt import LmtData, read_lmt
from iolens.parse.rates import counter_delta

SOURCE = "lmt"

#: LMT's operation counters that are not metadata: the data path and connection
#: management (as the OSS source leaves out of `md_ops`).
NOT_METADATA = frozenset(
    {"brw", "brw_async", "preprw", "commitrw", "read", "write", "read_bytes", "write_bytes",
     "connect", "reconnect", "disconnect", "ping"}
)  # fmt: skip

_Key = tuple[str, str]  # (kind, component)


def lmt_batch(path: Path, tz: tzinfo | None = None) -> Batch:
    """The database as one batch; `InputError` naming it when it is not an LMT database."""
    data = read_lmt(path)
    rows = _Rows(tz)
    rows.ost_traffic(data)
    rows.metadata_ops(data)
    rows.gauges(data)
    return Batch(
        source=f"{SOURCE}:{path}",
        key=content_key(path, SOURCE),
        components=Columns.from_rows("components", _components(data)),
        server_samples=Columns.from_rows("server_samples", rows.samples),
        metrics=Columns.from_rows("metrics", rows.metrics),
    )


class _Rows:
    """`server_samples` and `metrics` rows, built per family of LMT table."""

    def __init__(self, tz: tzinfo | None) -> None:
        self.tz = tz
        self.samples: list[dict[str, Any]] = []
        self.metrics: list[dict[str, Any]] = []
        self._utc: dict[datetime, datetime] = {}

    def utc(self, t: datetime) -> datetime:
        if t not in self._utc:
            self._utc[t] = to_utc(t, self.tz)  # type: ignore[assignment]
        return self._utc[t]

    def counters(self, key: _Key, t: datetime, dt: float, deltas: dict[str, int]) -> None:
        """One interval of `key`'s counters: a server sample and a rate per counter."""
        ts = self.utc(t)
        kind, comp = key
        sample = {"ts": ts, "interval_s": dt, "kind": kind, "component_id": comp}
        for metric, delta in deltas.items():
            if metric in ("read_bytes", "write_bytes", "md_ops"):
                sample[metric] = delta
            self.metrics.append(
                {"ts": ts, "interval_s": dt, "kind": kind, "component_id": comp,
                 "metric": metric, "value": delta / dt}
            )  # fmt: skip
        self.samples.append(sample)

    def gauge(self, key: _Key, t: datetime, metric: str, value: float | None) -> None:
        if value is not None:
            self.metrics.append(
                {"ts": self.utc(t), "interval_s": None, "kind": key[0], "component_id": key[1],
                 "metric": metric, "value": float(value)}
            )  # fmt: skip

    def ost_traffic(self, data: LmtData) -> None:
        prev: dict[str, Any] = {}
        for s in data.ost:
            before, prev[s.ost] = prev.get(s.ost), s
            dt = (s.time - before.time).total_seconds() if before is not None else 0.0
            if before is None or dt <= 0:
                continue
            rd = counter_delta(before.read_bytes, s.read_bytes)[0]
            wr = counter_delta(before.write_bytes, s.write_bytes)[0]
            self.counters(("ost", s.ost), s.time, dt, {"read_bytes": rd, "write_bytes": wr})

    def metadata_ops(self, data: LmtData) -> None:
        """`md_ops` per MDT and interval, and `md_<op>` for the operations that moved."""
        at: dict[tuple[str, datetime], dict[str, int]] = {}
        for o in data.mds_ops:
            if o.op not in NOT_METADATA:
                at.setdefault((o.mds, o.time), {})[o.op] = o.samples
        prev: dict[str, tuple[datetime, dict[str, int]]] = {}
        steps: list[tuple[str, datetime, float, dict[str, int]]] = []
        for (mdt, t), now in sorted(at.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            before, prev[mdt] = prev.get(mdt), (t, now)
            dt = (t - before[0]).total_seconds() if before is not None else 0.0
            if before is None or dt <= 0:
                continue
            deltas = {op: counter_delta(before[1].get(op, 0), n)[0] for op, n in now.items()}
            steps.append((mdt, t, dt, deltas))
        moved = {op for *_, d in steps for op, n in d.items() if n}
        for mdt, t, dt, d in steps:
            per_op = {f"md_{op}": n for op, n in sorted(d.items()) if op in moved}
            self.counters(("mdt", mdt), t, dt, {"md_ops": sum(d.values()), **per_op})

    def gauges(self, data: LmtData) -> None:
        """Capacity per target, %CPU (and %memory of an OSS) per host."""
        targets: Iterable[tuple[str, Any]] = [*(("ost", s) for s in data.ost),
                                              *(("mdt", s) for s in data.mds)]  # fmt: skip
        for kind, s in targets:
            key = (kind, s.ost if kind == "ost" else s.mds)
            for metric, v in _capacity(s.kbytes_free, s.kbytes_used, s.inodes_free, s.inodes_used):
                self.gauge(key, s.time, metric, v)
        for s in data.oss:
            self.gauge(("oss", s.oss), s.time, "cpu_pct", s.pct_cpu)
            self.gauge(("oss", s.oss), s.time, "mem_pct", s.pct_memory)
        hosts = _mds_hosts(data)
        seen: set[tuple[str, datetime]] = set()
        for s in data.mds:  # one row per MDT; its host's CPU once per time
            host = hosts.get(s.mds, s.mds)
            if (host, s.time) not in seen:
                seen.add((host, s.time))
                self.gauge(("mds", host), s.time, "cpu_pct", s.pct_cpu)


def _capacity(
    kb_free: int | None, kb_used: int | None, files_free: int | None, files_used: int | None
) -> Iterator[tuple[str, float | None]]:
    """The Lustre sources' capacity gauges from LMT's free/used pairs (totals are sums)."""
    total = None if kb_free is None or kb_used is None else (kb_free + kb_used) * 1024
    yield "space_total_bytes", total
    yield "space_free_bytes", None if kb_free is None else kb_free * 1024
    yield (
        "files_total",
        None if files_free is None or files_used is None else files_free + files_used,
    )
    yield "files_free", files_free


def _mds_hosts(data: LmtData) -> dict[str, str]:
    """MDT name -> its MDS host (LMT's MDS_INFO.HOSTNAME); the MDT's name without one."""
    return {mdt: host or mdt for mdt, host in data.mdt_hosts}


def _components(data: LmtData) -> list[dict[str, Any]]:
    osts = {s.ost: s.oss for s in data.ost}
    mdts = _mds_hosts(data)
    hosts = {(h, "oss") for h in osts.values() if h} | {(s.oss, "oss") for s in data.oss}
    hosts |= {(h, "mds") for h in mdts.values() if h}
    rows = [{"component_id": h, "kind": k, "parent": None} for h, k in sorted(hosts)]
    rows += [{"component_id": o, "kind": "ost", "parent": h} for o, h in sorted(osts.items())]
    rows += [{"component_id": m, "kind": "mdt", "parent": h} for m, h in sorted(mdts.items())]
    return rows
