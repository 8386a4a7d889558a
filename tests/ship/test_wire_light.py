"""The light wire form (IOLB2, stdlib only): what the agent and the Slurm hook send."""

from __future__ import annotations

import json
import struct
import zlib
from datetime import datetime

import pytest

from iolens.collect.slurm_hook import hook_batch
from iolens.errors import InputError
from iolens.model.batch import Batch
from iolens.model.rows import Columns
from iolens.model.schema import TABLES
from iolens.ship import wire

TS = datetime(2026, 3, 1, 12, 0, 0, 123456)


def metrics_batch() -> Batch:
    rows = [
        {"ts": TS, "interval_s": 10.0, "kind": "ost", "component_id": "fs-OST0000",
         "job_id": None, "metric": "read_bytes", "value": 1.5e9},
        {"ts": TS, "interval_s": None, "kind": "node", "component_id": "n1",
         "job_id": "42", "metric": "load1", "value": float("nan")},
    ]  # fmt: skip
    return Batch(source="agent:n1", key="agent:n1:1", metrics=Columns.from_rows("metrics", rows))


def test_columns_batch_goes_light_and_decodes_to_the_model_schema():
    batch = metrics_batch()
    data = wire.encode(batch)
    assert data.startswith(wire.MAGIC_LIGHT)
    back = wire.decode(data)
    assert back.key == "agent:n1:1" and back.source == "agent:n1"
    got = back.metrics.to_pylist()
    assert got[0]["ts"] == TS and got[0]["value"] == 1.5e9 and got[0]["job_id"] is None
    assert got[1]["value"] != got[1]["value"]  # NaN survives
    assert back.conformed()["metrics"].schema == TABLES["metrics"]


def test_arrow_batches_still_go_as_arrow():
    batch = metrics_batch()
    batch.tables()  # now Arrow
    data = wire.encode(batch)
    assert data.startswith(wire.MAGIC)
    back = wire.decode(data).metrics
    assert back.schema == batch.metrics.schema and back.slice(0, 1).equals(
        batch.metrics.slice(0, 1)
    )


def test_hook_batch_with_list_column_round_trips():
    env = {"SLURM_JOB_ID": "9", "SLURM_JOB_USER": "bob", "SLURM_JOB_NODELIST": "n[1-3]"}
    batch = hook_batch("prolog", env, now=TS)
    back = wire.decode(wire.encode(batch))
    row = back.jobs.to_pylist()[0]
    assert (
        row["nodes"] == ["n1", "n2", "n3"] and row["start"] == TS and row["source"] == "slurm-hook"
    )


def _light(tables: dict[str, dict[str, list[object]]]) -> bytes:
    parts = [(n, zlib.compress(json.dumps({"columns": c}).encode())) for n, c in tables.items()]
    header = json.dumps({"key": "k", "source": "s", "tables": [[n, len(d)] for n, d in parts]})
    return (
        wire.MAGIC_LIGHT
        + struct.pack("<I", len(header))
        + header.encode()
        + b"".join(d for _, d in parts)
    )


@pytest.mark.parametrize(
    "tables,message",
    [
        ({"metrics": {"ts": [1], "colour": ["red"]}}, "unknown column 'colour'"),
        ({"metrics": {"value": ["fast"]}}, "column value"),
        ({"metrics": {"value": [1.0], "metric": ["a", "b"]}}, "different lengths"),
        ({"users_table": {"x": [1]}}, "unknown table"),
    ],
)
def test_light_payloads_are_checked_against_the_schema(tables, message):
    with pytest.raises(InputError, match=message):
        wire.decode(_light(tables), source="agent-7")


def test_light_payload_missing_a_column_fails_the_load_check():
    back = wire.decode(_light({"metrics": {"value": [1.0]}}))
    with pytest.raises(InputError, match="missing columns"):
        back.conformed()


def test_corrupt_light_part_is_named():
    data = _light({"metrics": {"value": [1.0]}})
    with pytest.raises(InputError, match="not compressed JSON"):
        wire.decode(data[:-3] + b"zzz")
