"""Helpers: simulate into a DuckDB file, and compare two stores table by table."""

from __future__ import annotations

from pathlib import Path

import duckdb

from iolens.simulate import SimConfig, Simulation, simulate
from iolens.store import DuckDBStore

#: The tables a simulation writes (the analyses' tables stay empty).
TABLES = (
    "components",
    "forwarding",
    "jobs",
    "files",
    "client_io",
    "server_samples",
    "metrics",
    "ingested",
)
#: Columns that say when something was loaded, not what.
WALL_CLOCK = {"ingested": {"loaded_at"}}


def load_simulation(path: Path, config: SimConfig, workdir: Path | None = None) -> Simulation:
    sim = simulate(config)
    with DuckDBStore(path) as store:
        sim.load(store, workdir=workdir)
    return sim


def differences(a: Path, b: Path) -> dict[str, tuple[int, int, int]]:
    """Per table: (rows, rows only in a, rows only in b), comparing rows as multisets."""
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{a}' AS a (READ_ONLY)")
        con.execute(f"ATTACH '{b}' AS b (READ_ONLY)")
        out = {}
        for table in TABLES:
            cols = [
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_catalog = 'a' AND table_name = ? ORDER BY ordinal_position",
                    [table],
                ).fetchall()
                if r[0] not in WALL_CLOCK.get(table, set())
            ]
            sel = ", ".join(f'"{c}"' for c in cols)
            only = [
                con.execute(
                    f"SELECT count(*) FROM (SELECT {sel} FROM {x}.{table} "
                    f"EXCEPT ALL SELECT {sel} FROM {y}.{table})"
                ).fetchone()[0]
                for x, y in (("a", "b"), ("b", "a"))
            ]
            rows = con.execute(f"SELECT count(*) FROM a.{table}").fetchone()[0]
            out[table] = (rows, only[0], only[1])
        return out
    finally:
        con.close()
