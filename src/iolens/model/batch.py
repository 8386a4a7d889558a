"""A batch of observations in model form: what every collector and importer hands to ingest.

The tracer decoder, the node agent, the scheduler importer and the simulator all produce
`Batch`es; `iolens.ingest.load()` is the only way they enter the store. Anything the
simulator knows but a real collector could not observe has no place here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import pyarrow as pa

from iolens.errors import InputError
from iolens.model.schema import TABLES


def conform(table: pa.Table, name: str, source: str) -> pa.Table:
    """Cast `table` to the model schema of `name`, or say which column is wrong."""
    schema = TABLES[name]
    missing = [n for n in schema.names if n not in table.column_names]
    if missing:
        raise InputError(source, f"{name}: missing columns {', '.join(missing)}")
    try:
        return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise InputError(source, f"{name}: {exc}") from None


@dataclass
class Batch:
    """Arrow tables keyed by store table name; any may be absent."""

    source: str = "unknown"
    # Identity of what the batch came from (a trace file's host:pid:start, an agent's
    # batch id): a batch whose key was loaded before is skipped, so retries are harmless.
    key: str | None = None
    # Job rows from a partial view (one process's trace) must not replace what the
    # scheduler said about the same job: with this set, known jobs keep their rows.
    keep_known_jobs: bool = False
    components: pa.Table | None = None
    forwarding: pa.Table | None = None
    component_aliases: pa.Table | None = None
    jobs: pa.Table | None = None
    files: pa.Table | None = None
    client_io: pa.Table | None = None
    server_samples: pa.Table | None = None
    metrics: pa.Table | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def tables(self) -> dict[str, pa.Table]:
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name in TABLES and getattr(self, f.name) is not None
        }

    def conformed(self) -> dict[str, pa.Table]:
        """`tables()` cast to the model schemas; InputError naming the source and the
        column that does not fit."""
        return {name: conform(t, name, self.source) for name, t in self.tables().items()}

    def rows(self) -> int:
        return sum(t.num_rows for t in self.tables().values())
