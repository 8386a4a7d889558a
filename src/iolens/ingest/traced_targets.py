"""Per-job work on each storage target, from the job's traced calls and its files' layouts.

Lustre servers count every job's requests themselves (jobstats): the `ost` rows with a
`job_id` that the interference analysis, the component detectors' culprit lists and the
job page's server layer read. A MooseFS chunkserver counts only its totals. Where a
traced job's files have a layout (`files.osts`: Lustre
stripes from the tracer, MooseFS chunkservers from `mfsfileinfo`), its read and write
calls say which targets served it, so the trace is attributed to them here, at ingest:

* a record of `count` calls between `t_start` and `t_end` is spread over the minutes it
  overlaps in proportion to the overlap (the tracer merges a run of like calls into one
  record, so finer placement in time is not known);
* its calls and bytes are split evenly over the file's targets (exact for a MooseFS file
  whose chunks sit on one chunkserver, and on average for stripes and spread chunks: the
  offsets of a merged record cover all of them alike);
* `service_us` is the client-side time per call (the calls' measured duration), not the
  server's handling time: it includes the network and the client's own queue, which is
  what the job waited. Reads and writes get rows of their own: a row has one time per
  call, and a read-back from the server's cache and a write to its disk differ a
  hundredfold (a mixed row is judged as its larger direction, at the wrong cost).

Rows are binned on whole minutes (stamped at the minute's end, `interval_s` 60), the
sample a MooseFS chunkserver reports, so they sit beside the target's own totals. They
carry `source = 'trace'`. Only targets whose source said they keep no per-job statistics
get them (the `ost` gauge `jobstats` = 0, which the `moosefs` source reports for every
chunkserver): a Lustre OST's jobstats are the better measure, and counting both would
count the job twice, whichever of the trace and the jobstats arrived first. The source
must have reported the target once before the trace arrives (it does every round).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from iolens.model.schema import SERVER_SAMPLES
from iolens.store.base import Store

BIN_S = 60
SOURCE = "trace"

_SQL = f"""
WITH r AS (
  SELECT c.job_id, c.op, c.count::DOUBLE AS n, c.count::DOUBLE * coalesce(c.size, 0) AS b,
    coalesce(c.dur_ns, 0)::DOUBLE AS dur, epoch(c.t_start) AS t0,
    greatest(epoch(c.t_end), epoch(c.t_start)) AS t1, f.osts
  FROM _iolens_tt_io c JOIN _iolens_tt_lay f USING (file_id)
  WHERE c.op IN ('read', 'write') AND c.count > 0),
binned AS (
  SELECT *, unnest(range(floor(t0 / {BIN_S})::BIGINT,
                         floor(t1 / {BIN_S})::BIGINT + 1)) AS bin FROM r),
split AS (
  SELECT job_id, op, n, b, dur, bin, unnest(osts) AS ost, len(osts) AS k,
    CASE WHEN t1 > t0
      THEN greatest(least(t1, (bin + 1) * {BIN_S}) - greatest(t0, bin * {BIN_S}), 0) / (t1 - t0)
      ELSE 1.0 END AS frac
  FROM binned)
SELECT make_timestamp(((bin + 1) * {BIN_S} * 1000000)::BIGINT) AS ts,
  {float(BIN_S)} AS interval_s, 'ost' AS kind, ost AS component_id, job_id,
  round(sum(b * frac / k) FILTER (WHERE op = 'read'))::BIGINT AS read_bytes,
  round(sum(b * frac / k) FILTER (WHERE op = 'write'))::BIGINT AS write_bytes,
  round(sum(n * frac / k) FILTER (WHERE op = 'read'))::BIGINT AS read_ops,
  round(sum(n * frac / k) FILTER (WHERE op = 'write'))::BIGINT AS write_ops,
  sum(dur * frac / k) / 1000.0 / nullif(sum(n * frac / k), 0) AS service_us,
  '{SOURCE}' AS source
FROM split WHERE frac > 0
GROUP BY bin, ost, job_id, op
HAVING sum(n * frac / k) >= 0.5
ORDER BY ts, component_id, job_id, read_ops NULLS FIRST
"""


def target_rows(store: Store, client_io: pa.Table, files: pa.Table | None) -> pa.Table | None:
    """The `server_samples` job rows the traced calls in `client_io` imply, or None.

    Layouts come from `files` (the batch's own); only targets whose source said they keep
    no per-job statistics get rows."""
    lay = _layouts(files)
    if client_io.num_rows == 0 or lay.num_rows == 0:
        return None
    targets = set(pc.list_flatten(lay.column("osts")).to_pylist())
    bare = _without_jobstats(store, targets, pc.min(client_io.column("t_start")).as_py())
    return _derive(store, client_io, lay, targets, bare)


class Engine(Protocol):
    """What the derivation needs of a SQL engine: a store, or `_Scratch`."""

    def register(self, name: str, data: pa.Table) -> None: ...
    def unregister(self, name: str) -> None: ...
    def query(self, sql: str, params: Sequence[Any] = ()) -> pa.Table: ...


def _derive(
    engine: Engine, client_io: pa.Table, lay: pa.Table, targets: set[str], bare: set[str]
) -> pa.Table | None:
    if not bare:  # Lustre: its servers count every job themselves
        return None
    io = client_io.select(["job_id", "op", "file_id", "count", "size", "dur_ns", "t_start",
                           "t_end"])  # fmt: skip
    engine.register("_iolens_tt_io", io)
    engine.register("_iolens_tt_lay", lay)
    try:
        rows = engine.query(_SQL)
    finally:
        engine.unregister("_iolens_tt_io")
        engine.unregister("_iolens_tt_lay")
    if bare != targets and rows.num_rows:  # a file's calls stay split over all its targets
        rows = rows.filter(pc.is_in(rows.column("component_id"), pa.array(sorted(bare))))
    if rows.num_rows == 0:
        return None
    missing = [f for f in SERVER_SAMPLES if f.name not in rows.column_names]
    for f in missing:
        rows = rows.append_column(f, pa.nulls(rows.num_rows, f.type))
    return rows.select(SERVER_SAMPLES.names).cast(SERVER_SAMPLES)


class _Scratch:
    """An in-memory DuckDB for a writer that cannot query its own data (the scale-out
    ingest server writes segments and never reads them)."""

    def __init__(self) -> None:
        import duckdb

        self.con = duckdb.connect()

    def register(self, name: str, data: pa.Table) -> None:
        self.con.register(name, data)

    def unregister(self, name: str) -> None:
        self.con.unregister(name)

    def query(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        from iolens.store.duckdb_store import arrow_query

        return arrow_query(self.con, sql, params, "trace attribution")


class Declared:
    """The targets declared without jobstats, learned from the batches passing through a
    segment writer (the same `jobstats` = 0 gauge the store is asked for). A restarted
    writer knows them again at the sources' next round (every minute); a trace loaded
    before that gets no target rows, as one loaded before the first round does."""

    def __init__(self) -> None:
        self.bare: set[str] = set()

    def learn(self, metrics: pa.Table) -> None:
        m = metrics
        keep = pc.and_(
            pc.and_(pc.equal(m.column("kind"), "ost"), pc.equal(m.column("metric"), "jobstats")),
            pc.and_(pc.equal(m.column("value"), 0.0), pc.is_null(m.column("job_id"))),
        )
        self.bare |= set(m.filter(pc.fill_null(keep, False)).column("component_id").to_pylist())

    def attribute(self, tables: dict[str, pa.Table]) -> pa.Table | None:
        """The target rows of one conformed batch's trace, or None."""
        client_io = tables.get("client_io")
        lay = _layouts(tables.get("files"))
        if client_io is None or client_io.num_rows == 0 or lay.num_rows == 0:
            return None
        targets = set(pc.list_flatten(lay.column("osts")).to_pylist())
        return _derive(_Scratch(), client_io, lay, targets, targets & self.bare)


def _layouts(files: pa.Table | None) -> pa.Table:
    """file_id -> distinct targets, from the batch's own files: a trace carries the layouts
    of the files it touched (the tracer's Lustre stripes, the agent's MooseFS answer), so
    ingest never searches the store for them."""
    ids, osts = [], []
    if files is not None and files.num_rows and "osts" in files.column_names:
        for fid, where in zip(
            files.column("file_id").to_pylist(), files.column("osts").to_pylist(), strict=True
        ):
            if where:
                ids.append(fid)
                osts.append(list(dict.fromkeys(where)))
    return pa.table(
        {"file_id": pa.array(ids, pa.int64()), "osts": pa.array(osts, pa.list_(pa.string()))}
    )


#: Per store, the targets known to keep no per-job statistics (a target does not gain
#: jobstats), and when each other target was last asked about: a Lustre site's traces
#: cost one query per new target every `REASK_S`, not one per batch.
_NO_JOBSTATS: weakref.WeakKeyDictionary[Store, set[str]] = weakref.WeakKeyDictionary()
_ASKED: weakref.WeakKeyDictionary[Store, dict[str, float]] = weakref.WeakKeyDictionary()
REASK_S = 600.0
#: The `jobstats` gauge is looked for this far (s) before the trace: sources report it
#: every round, and the bound lets the store skip older data.
LOOKBACK_S = 86400


def _without_jobstats(store: Store, targets: set[str], since: datetime) -> set[str]:
    """Those of `targets` whose source said they keep no per-job statistics (the gauge
    `jobstats` = 0 a MooseFS agent reports for every chunkserver)."""
    known = _NO_JOBSTATS.setdefault(store, set())
    asked = _ASKED.setdefault(store, {})
    now = time.monotonic()
    ask = sorted(t for t in targets - known if now - asked.get(t, -REASK_S) >= REASK_S)
    if ask:
        store.register("_iolens_tt_targets", pa.table({"c": pa.array(ask, pa.string())}))
        try:
            found = store.query(
                "SELECT DISTINCT component_id FROM metrics "
                "JOIN _iolens_tt_targets ON component_id = c "
                "WHERE kind = 'ost' AND metric = 'jobstats' AND value = 0 AND job_id IS NULL "
                f"AND ts >= ?::TIMESTAMP - INTERVAL {LOOKBACK_S} SECOND",
                [since],
            )
        finally:
            store.unregister("_iolens_tt_targets")
        known |= set(found.column("component_id").to_pylist())
        asked.update(dict.fromkeys(ask, now))
    return targets & known
