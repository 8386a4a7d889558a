"""The reasoner tests' shared traced job: six processes on three nodes, one slowed
(`jobrun.py`), run once per session and stored once, for the reasoner, CLI and web tests.

The tracer is built once per session too (`tests/tracer/conftest.py`); importing it here,
not in each module, keeps pytest from setting it up once per module."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reasoner.jobrun import Proc, run_job
from tests.tracer.conftest import tracer_lib  # noqa: F401  (fixture)

NODES = ["n1", "n2", "n3"]


@pytest.fixture(scope="session")
def one_slow(tracer_lib: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Proc]]:  # noqa: F811
    """Process 1 of node n2 slowed: the spool and each process's own log."""
    return run_job(tmp_path_factory.mktemp("one"), tracer_lib, NODES, 2, {("n2", 1)})


@pytest.fixture(scope="session")
def stored(one_slow, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`one_slow` loaded into a DuckDB store, as `iolens reason` reads it."""
    from iolens.ingest.load import load_many
    from iolens.store import open_store
    from iolens.tracefile import batch_of, decode_dir

    spool, _ = one_slow
    db = tmp_path_factory.mktemp("db") / "s.duckdb"
    with open_store(str(db), create=True) as store:
        load_many(store, [batch_of(t) for t in decode_dir(spool)])
    return db
