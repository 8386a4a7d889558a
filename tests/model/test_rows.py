"""The light producers' plain columns stay the model's tables."""

from __future__ import annotations

from datetime import datetime

import pytest

from iolens.errors import InputError
from iolens.model.batch import Batch
from iolens.model.rows import NAMES, Columns
from iolens.model.schema import TABLES


def test_column_names_are_the_schemas():
    for table, names in NAMES.items():
        assert list(names) == TABLES[table].names, table


def test_columns_convert_to_the_model_schema_once():
    rows = [{"job_id": "7", "user": "ann", "nodes": ["n1", "n2"], "start": datetime(2026, 1, 1)}]
    cols = Columns.from_rows("jobs", rows)
    assert cols.num_rows == 1 and cols.to_pylist()[0]["app"] is None
    batch = Batch(jobs=cols)
    assert batch.rows() == 1
    arrow = batch.tables()["jobs"]
    assert arrow.schema == TABLES["jobs"] and arrow.to_pylist()[0]["nodes"] == ["n1", "n2"]
    assert batch.jobs is arrow  # converted in place, not at every call


def test_an_undecoded_tracer_file_is_not_loaded_as_nothing():
    batch = Batch(source="tracer:x", trace=("x.iolens", b"IOLTRACE..."))
    assert batch.rows() == 0
    with pytest.raises(InputError, match="not decoded"):
        batch.conformed()
