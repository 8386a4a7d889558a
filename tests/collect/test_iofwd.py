"""The forwarder-daemon source (`iofwd`) against hand-written trees of its format.

Golden cases live in tests/cases/collect/iofwd/<case>/ (a mini root tree, PROVENANCE.md and
`expected.json`, the sorted readings); `IOLENS_UPDATE_GOLDEN=1` rewrites them. The values
are also checked against numbers read from the files here by plain splitting, and the
agent's rates and means over two snapshots against hand arithmetic.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from iolens.collect.agent import Agent
from iolens.collect.base import Reading
from iolens.collect.sources import SOURCES
from iolens.collect.sources.iofwd import IofwdSource
from iolens.errors import InputError
from iolens.parse.iofwd import ForwarderStats, Tally, render
from tests.golden import check_golden, reading_rows

CASES = Path(__file__).resolve().parents[1] / "cases" / "collect" / "iofwd"
FULL = CASES / "lwfs-full"
BYTES_ONLY = CASES / "two-services-bytes-only"
SVC = "run/iofwd/lwfs"
HOST = "testhost"


def dump(readings: list[Reading]) -> list[dict[str, Any]]:
    rows = reading_rows(readings)
    return sorted(rows, key=lambda r: (r["kind"], r["component"], r["metric"]))


def dumps(rows: list[dict[str, Any]]) -> str:
    return "[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n"


def by_key(readings: list[Reading]) -> dict[tuple[str, str, str], Reading]:
    got = {(r.kind, r.component, r.metric): r for r in readings}
    assert len(got) == len(readings), "two readings share one key"
    return got


def lines(path: Path) -> dict[str, list[int]]:
    """`name N samples [unit] min max sum` -> name: [N, min, max, sum], by splitting."""
    out = {}
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) >= 3 and f[2] == "samples":
            out[f[0]] = [int(f[1]), *(int(x) for x in f[4:])]
    return out


@pytest.mark.parametrize("case", sorted(p for p in CASES.iterdir() if p.is_dir()), ids=str)
def test_golden(case: Path) -> None:
    got = dump(list(IofwdSource(HOST).collect(case)))
    assert got, f"{case}: no readings"
    assert (case / "PROVENANCE.md").exists()
    check_golden(case / "expected.json", got, dumps)


def test_registered_and_quiet_when_absent(tmp_path: Path) -> None:
    assert SOURCES["iofwd"] is IofwdSource and IofwdSource.name == "iofwd"
    assert list(IofwdSource(HOST).collect(tmp_path)) == []
    (tmp_path / "run" / "iofwd" / "dvs").mkdir(parents=True)  # daemon installed, not running
    assert list(IofwdSource(HOST).collect(tmp_path)) == []


def test_full_case_values_match_the_file() -> None:
    got = by_key(list(IofwdSource(HOST).collect(FULL)))
    st = lines(FULL / SVC / "stats")
    f = ("forwarder", HOST)
    assert got[(*f, "read_bytes")].value == st["read_bytes"][3]
    assert got[(*f, "read_ops")].value == st["read_bytes"][0]
    assert got[(*f, "write_ops")].value == st["write_bytes"][0]
    assert got[(*f, "md_ops")].value == sum(st[op][0] for op in ("open", "close", "getattr"))
    service = got[(*f, "service_us")]
    assert not service.counter
    assert service.value == st["read"][3] + st["write"][3]
    assert service.per == st["read"][0] + st["write"][0]
    md = got[(*f, "md_service_us")]
    assert md.value == sum(st[op][3] for op in ("open", "close", "getattr"))
    for field, metric in (
        ("req_waittime", "wait_us"),
        ("req_qdepth", "queue_len"),
        ("req_active", "active_threads"),
    ):
        r = got[(*f, metric)]
        assert (r.value, r.per) == (st[field][3], st[field][0])
    assert got[(*f, "backend_read_bytes")].value == st["backend_read_bytes"][3]
    assert got[(*f, "backend_write_ops")].value == st["backend_write_bytes"][0]
    assert got[(*f, "backend_service_us")].per == (st["backend_read"][0] + st["backend_write"][0])
    assert got[(*f, "threads_max")].value == 16 and not got[(*f, "threads_max")].counter
    # lines the source does not read leave no trace
    assert not [k for k in got if "timeout" in k[2] or "cache" in k[2]]

    cn1 = lines(FULL / SVC / "clients/cn0001/stats")
    c = ("fwd_client", f"{HOST}:cn0001")
    assert got[(*c, "read_bytes")].value == cn1["read_bytes"][3]
    assert got[(*c, "service_us")].per == cn1["read"][0] + cn1["write"][0]
    assert (*c, "wait_us") not in got and (*c, "backend_read_bytes") not in got
    clients = [k for k in got if k[0] == "fwd_client" and k[2] == "read_bytes"]
    assert sum(got[k].value for k in clients) == st["read_bytes"][3]


def test_services_add_up_and_unmeasured_counters_are_absent() -> None:
    got = by_key(list(IofwdSource(HOST).collect(BYTES_ONLY)))
    run = BYTES_ONLY / "run/iofwd"
    dvs, gk = lines(run / "dvs/stats"), lines(run / "gkfwd/stats")
    assert (
        got[("forwarder", HOST, "read_bytes")].value == dvs["read_bytes"][3] + gk["read_bytes"][3]
    )
    assert (
        got[("forwarder", HOST, "write_ops")].value == dvs["write_bytes"][0] + gk["write_bytes"][0]
    )
    metrics = {k[2] for k in got if k[0] == "forwarder"}
    assert metrics == {"read_bytes", "write_bytes", "read_ops", "write_ops"}
    both = lines(run / "dvs/clients/cn0003/stats")["read_bytes"][3]
    both += lines(run / "gkfwd/clients/cn0003/stats")["read_bytes"][3]
    assert got[("fwd_client", f"{HOST}:cn0003", "read_bytes")].value == both
    assert ("fwd_client", f"{HOST}:cn0004", "read_ops") in got


@pytest.mark.parametrize(
    ("file", "text", "line", "words"),
    [
        (
            "stats",
            "snapshot_time 1.0 secs.nsecs\nread_bytes 1 samples [bytes] 1 1 1\n",
            2,
            "write_bytes",
        ),
        (
            "stats",
            "snapshot_time 1.0 secs.nsecs\nread_bytes 1 samples [bytes] 1 1 1\n"
            "write_bytes 1 samples [bytes] 1 1 1\nread 1 samples [usecs] 5\n",
            4,
            "0, 3 or 4",
        ),
        (
            "clients/cn0001/stats",
            "snapshot_time 1.0 secs.nsecs\nread_bytes 1 samples [bytes] 1 1 1\n"
            "write_bytes 1 samples [bytes] 1 1 1\nreq_qdepth 1 samples [reqs] 1 1 1\n",
            4,
            "per-service",
        ),
    ],
    ids=["missing-write_bytes", "short-timed-line", "queue-in-client-file"],
)
def test_malformed_file_fails_naming_file_and_line(
    tmp_path: Path, file: str, text: str, line: int, words: str
) -> None:
    root = tmp_path / "root"
    shutil.copytree(FULL, root)
    path = root / SVC / file
    path.write_text(text)
    with pytest.raises(InputError) as err:
        list(IofwdSource(HOST).collect(root))
    assert err.value.source == str(path) and err.value.line == line
    assert words in err.value.message


def write_snapshot(root: Path, t: float, read: Tally, svc_us: Tally, queued: Tally) -> None:
    """One node's files at time `t`: one service, one client taking all the traffic."""
    totals = ForwarderStats(
        snapshot_time=t,
        start_time=1000.0,
        read_bytes=read,
        write_bytes=Tally(),
        ops={"read": svc_us, "write": Tally()},
        backend_read_bytes=Tally(read.count // 4, read.total * 3),
        req_qdepth=queued,
    )
    client = dataclasses.replace(totals, backend_read_bytes=None, req_qdepth=None)
    base = root / SVC
    (base / "clients" / "cn0001").mkdir(parents=True, exist_ok=True)
    (base / "stats").write_text(render(totals))
    (base / "clients" / "cn0001" / "stats").write_text(render(client))


def test_agent_rates_and_means_over_two_snapshots(tmp_path: Path) -> None:
    """What reaches `server_samples` and `metrics`: per-second rates and per-request means
    over the interval, by hand: 600 reads of 1 MiB in 60 s, 2.5 ms each, 2 queued."""
    now = [2000.0]
    agent = Agent("fwd1", tmp_path, [IofwdSource("fwd1")], clock=lambda: now[0])
    mib = 2**20
    write_snapshot(tmp_path, 2000.0, Tally(100, 100 * mib), Tally(100, 100_000), Tally(100, 50))
    agent.collect_round()
    now[0] = 2060.0
    write_snapshot(tmp_path, 2060.0, Tally(700, 700 * mib), Tally(700, 1_600_000), Tally(700, 1250))
    batch = agent.collect_round()
    assert batch.server_samples is not None and batch.metrics is not None
    rows = {(r["kind"], r["component_id"]): r for r in batch.server_samples.to_pylist()}
    fwd = rows[("forwarder", "fwd1")]
    assert fwd["interval_s"] == 60.0
    assert fwd["read_bytes"] == 600 * mib and fwd["read_ops"] == 600
    assert fwd["service_us"] == pytest.approx(2500.0)
    assert fwd["queue_len"] == pytest.approx(2.0)
    assert fwd["md_ops"] is None and fwd["active_threads"] is None  # not measured
    client = rows[("fwd_client", "fwd1:cn0001")]
    assert client["read_bytes"] == 600 * mib and client["service_us"] == pytest.approx(2500.0)
    metrics = {(r["component_id"], r["metric"]): r["value"] for r in batch.metrics.to_pylist()}
    assert metrics[("fwd1", "backend_read_bytes")] == pytest.approx(600 * mib * 3 / 60)
