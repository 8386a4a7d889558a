"""A batch of observations in model form: what every collector and importer hands to ingest.

The tracer decoder, the node agent, the scheduler importer and the simulator all produce
`Batch`es; `iolens.ingest.load()` is the only way they enter the store. Anything the
simulator knows but a real collector could not observe has no place here.

A table is an Arrow table, or `Columns` (plain lists) when built by the light agent or the
Slurm hook, which run without pyarrow; `tables()` hands out Arrow either way, so only the
producers and the wire format see the difference. pyarrow is imported lazily for that
reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from iolens.errors import InputError
from iolens.model.rows import Columns

if TYPE_CHECKING:
    import pyarrow as pa

#: The fields of `Batch` that hold tables (store table names).
TABLE_FIELDS = (
    "components", "forwarding", "component_aliases", "jobs", "files", "client_io",
    "server_samples", "metrics", "mpi_hints",
)  # fmt: skip


def conform(table: pa.Table, name: str, source: str) -> pa.Table:
    """Cast `table` to the model schema of `name`, or say which column is wrong."""
    import pyarrow as pa

    from iolens.model.schema import LATER_COLUMNS, TABLES

    schema = TABLES[name]
    for col in LATER_COLUMNS.get(name, ()):  # a batch from an older agent: NULL
        if col not in table.column_names:
            f = schema.field(col)
            table = table.append_column(f, pa.nulls(table.num_rows, f.type))
    missing = [n for n in schema.names if n not in table.column_names]
    if missing:
        raise InputError(source, f"{name}: missing columns {', '.join(missing)}")
    try:
        return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise InputError(source, f"{name}: {exc}") from None


@dataclass
class Batch:
    """Tables keyed by store table name (Arrow or `Columns`); any may be absent."""

    source: str = "unknown"
    # Identity of what the batch came from (a trace file's host:pid:start, an agent's
    # batch id): a batch whose key was loaded before is skipped, so retries are harmless.
    key: str | None = None
    # Job rows from a partial view (one process's trace) must not replace what the
    # scheduler said about the same job: with this set, known jobs keep their rows.
    keep_known_jobs: bool = False
    components: pa.Table | Columns | None = None
    forwarding: pa.Table | Columns | None = None
    component_aliases: pa.Table | Columns | None = None
    jobs: pa.Table | Columns | None = None
    files: pa.Table | Columns | None = None
    client_io: pa.Table | Columns | None = None
    server_samples: pa.Table | Columns | None = None
    metrics: pa.Table | Columns | None = None
    mpi_hints: pa.Table | Columns | None = None
    # One tracer file as written (name, bytes), for the server to decode: the light agent
    # has no decoder (numpy, pyarrow). `ship.wire.decode` replaces it by its tables.
    trace: tuple[str, bytes] | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def parts(self) -> dict[str, Any]:
        """The tables as built (Arrow or `Columns`), absent ones left out."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name in TABLE_FIELDS and getattr(self, f.name) is not None
        }

    def tables(self) -> dict[str, pa.Table]:
        """The tables as Arrow; `Columns` are converted (once: the batch keeps the result)."""
        out = {}
        for name, t in self.parts().items():
            if isinstance(t, Columns):
                t = t.to_arrow()
                setattr(self, name, t)
            out[name] = t
        return out

    def conformed(self) -> dict[str, pa.Table]:
        """`tables()` cast to the model schemas; InputError naming the source and the
        column that does not fit, or when a tracer file is still undecoded (it would load
        nothing, silently)."""
        if self.trace is not None:
            raise InputError(self.source, "a tracer file not decoded yet (ship.wire.decode)")
        return {name: conform(t, name, self.source) for name, t in self.tables().items()}

    def rows(self) -> int:
        return sum(t.num_rows for t in self.parts().values())
