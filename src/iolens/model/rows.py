"""Tables as plain Python columns: what the light producers (agent, Slurm hook) build.

A node agent must run without pyarrow (over 100 MB installed, ~30 MiB resident), so the
tables it and the Slurm hook produce are `Columns`: the model table's name and one Python
list per column, with the same column names and units as the Arrow schemas in
`schema.py` (timestamps as naive UTC datetimes). The wire format ships them as compressed
JSON (`ship/wire.py`); the server turns them into Arrow with the model schema and checks
them exactly as it checks Arrow batches. `tests/model/test_rows.py` keeps the names below
equal to the schemas'.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

#: Column names of the tables light producers build, in schema order.
NAMES: dict[str, tuple[str, ...]] = {
    "components": ("component_id", "kind", "parent", "peak_bw", "peak_ops"),
    "jobs": ("job_id", "user", "app", "nodes", "nprocs", "start", "end", "state", "source"),
    "server_samples": (
        "ts",
        "interval_s",
        "kind",
        "component_id",
        "job_id",
        "read_bytes",
        "write_bytes",
        "read_ops",
        "write_ops",
        "md_ops",
        "wait_us",
        "service_us",
        "queue_len",
        "active_threads",
        "source",
    ),
    "metrics": ("ts", "interval_s", "kind", "component_id", "job_id", "metric", "value"),
}


@dataclass
class Columns:
    """One model table as Python lists; enough of `pa.Table`'s surface for its readers."""

    table: str
    columns: dict[str, list[Any]]

    @classmethod
    def empty(cls, table: str) -> Columns:
        return cls(table, {n: [] for n in NAMES[table]})

    @classmethod
    def from_rows(cls, table: str, rows: Iterable[Mapping[str, Any]]) -> Columns:
        """Rows as dicts; a column a row leaves out is null there (as `from_pylist`)."""
        out = cls.empty(table)
        for row in rows:
            for name, values in out.columns.items():
                values.append(row.get(name))
        return out

    @property
    def num_rows(self) -> int:
        return len(next(iter(self.columns.values()), []))

    @property
    def column_names(self) -> list[str]:
        return list(self.columns)

    def to_pylist(self) -> list[dict[str, Any]]:
        names = list(self.columns)
        return [
            dict(zip(names, values, strict=True))
            for values in zip(*self.columns.values(), strict=True)
        ]

    def to_arrow(self) -> pa.Table:
        """The Arrow table with the model schema (needs pyarrow: server side only)."""
        import pyarrow as pa

        from iolens.model.schema import TABLES

        schema = TABLES[self.table]
        return pa.table(
            {n: self.columns.get(n, [None] * self.num_rows) for n in schema.names}, schema=schema
        )
