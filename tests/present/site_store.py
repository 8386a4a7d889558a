"""A small store whose monitored state is known exactly: what the exporter tests read.

At T (the newest sample): OST0 moved 100 MiB read + 50 MiB written in 10 s, shared by
jobs 101 (alice) and 102 (bob) and three small jobs; the MDT served 500 metadata ops, 300
of them by an untagged `find.1003` on a login node; the OSS queue and the forwarder have
their own figures. OST1 last reported 10 minutes before T (a dead agent): not exported.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from iolens.model.schema import ANOMALIES, COMPONENTS, JOBS, SERVER_SAMPLES
from iolens.store import DuckDBStore

T = datetime(2025, 3, 3, 10, 0, 0)
MIB = 2**20


def _sample(ts: datetime, kind: str, comp: str, job: str | None = None, **v: Any) -> dict:
    return {"ts": ts, "interval_s": 10.0, "kind": kind, "component_id": comp, "job_id": job, **v}


def samples() -> list[dict[str, Any]]:
    old = T - timedelta(seconds=10)
    rows = [
        # An earlier round of OST0: must not count.
        _sample(old, "ost", "fs-OST0000", read_bytes=999 * MIB, write_bytes=0, read_ops=1,
                write_ops=0, md_ops=0),
        _sample(old, "ost", "fs-OST0000", "101", read_bytes=999 * MIB, write_bytes=0),
        _sample(T, "ost", "fs-OST0000", read_bytes=100 * MIB, write_bytes=50 * MIB,
                read_ops=100, write_ops=50, md_ops=20, service_us=1500.0),
        _sample(T, "ost", "fs-OST0000", "101", read_bytes=80 * MIB, write_bytes=0,
                read_ops=80, write_ops=0, md_ops=2),
        _sample(T, "ost", "fs-OST0000", "102", read_bytes=0, write_bytes=40 * MIB,
                read_ops=0, write_ops=40, md_ops=0),
        *(
            _sample(T, "ost", "fs-OST0000", str(200 + i), read_bytes=(i + 1) * MIB,
                    write_bytes=0, read_ops=i + 1, write_ops=0)
            for i in range(3)
        ),
        # A job in jobstats that did nothing in the interval: not "doing I/O".
        _sample(T, "ost", "fs-OST0000", "300", read_bytes=0, write_bytes=0, read_ops=0,
                write_ops=0),
        _sample(T - timedelta(minutes=10), "ost", "fs-OST0001", read_bytes=7 * MIB,
                write_bytes=0, read_ops=7, write_ops=0),
        _sample(T - timedelta(seconds=2), "mdt", "fs-MDT0000", md_ops=500,
                service_us=40.0),
        _sample(T - timedelta(seconds=2), "mdt", "fs-MDT0000", "101", md_ops=150),
        _sample(T - timedelta(seconds=2), "mdt", "fs-MDT0000", "find.1003", md_ops=300),
        _sample(T - timedelta(seconds=5), "oss", "oss01", wait_us=250.0, queue_len=3.5,
                service_us=2000.0, active_threads=12.0),
        _sample(T - timedelta(seconds=1), "forwarder", "fwd01", read_bytes=30 * MIB,
                write_bytes=10 * MIB, read_ops=30, write_ops=10, md_ops=4, service_us=800.0),
        # Per-client shares are not components of the file system view.
        _sample(T, "fwd_client", "fwd01:c001", read_bytes=30 * MIB),
    ]  # fmt: skip
    return rows


def anomalies() -> list[dict[str, Any]]:
    def ep(kind: str, comp_kind: str, comp: str, start: datetime, end: datetime | None,
           severity: str) -> dict[str, Any]:  # fmt: skip
        return {"kind": kind, "component_kind": comp_kind, "component_id": comp,
                "start": start, "end": end, "severity": severity, "evidence": "{}",
                "detector": "test", "created": T}  # fmt: skip

    return [
        ep("slow_ost", "ost", "fs-OST0000", T - timedelta(hours=1), None, "critical"),
        ep(
            "slow_ost",
            "ost",
            "fs-OST0000",
            T - timedelta(hours=2),
            T - timedelta(minutes=90),
            "critical",
        ),
        ep(
            "metadata_storm",
            "mdt",
            "fs-MDT0000",
            T - timedelta(minutes=30),
            T - timedelta(minutes=5),
            "warning",
        ),
        ep(
            "slow_forwarder",
            "forwarder",
            "fwd01",
            T - timedelta(hours=3),
            T - timedelta(hours=2),
            "warning",
        ),
    ]


def build(path: Path) -> Path:
    """Write the store at `path` and return it."""
    comps = [
        {"component_id": "fs-OST0000", "kind": "ost", "parent": "oss01", "peak_bw": 6e8,
         "peak_ops": 3e4},
        {"component_id": "fs-OST0001", "kind": "ost", "parent": "oss01"},
        {"component_id": "fs-MDT0000", "kind": "mdt", "parent": "mds01", "peak_ops": 4e4},
        {"component_id": "oss01", "kind": "oss"},
        {"component_id": "fwd01", "kind": "forwarder", "peak_bw": 2.5e9},
    ]  # fmt: skip
    jobs = [
        {"job_id": j, "user": u, "app": "ior", "state": "RUNNING", "source": "slurm",
         "start": T - timedelta(hours=1)}
        for j, u in [("101", "alice"), ("102", "bob"), ("200", "carol"), ("201", "carol"),
                     ("202", "dave"), ("300", "erin")]
    ]  # fmt: skip
    with DuckDBStore(path) as store:
        store.append("components", pa.Table.from_pylist(comps, schema=COMPONENTS))
        store.append("jobs", pa.Table.from_pylist(jobs, schema=JOBS))
        store.append("server_samples", pa.Table.from_pylist(samples(), schema=SERVER_SAMPLES))
        store.append("anomalies", pa.Table.from_pylist(anomalies(), schema=ANOMALIES))
    return path
