"""The InfiniBand and LNet router sources against captured sysfs/procfs trees.

Golden cases live in tests/cases/collect/<source>/<case>/ (a mini root tree and
`expected.json`, the sorted readings as dicts); `IOLENS_UPDATE_GOLDEN=1` rewrites them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from iolens.collect.agent import Agent
from iolens.collect.base import Reading, Source
from iolens.collect.sources import SOURCES
from iolens.collect.sources.infiniband import InfinibandSource
from iolens.collect.sources.lnet_router import LnetRouterSource
from iolens.errors import InputError
from tests.golden import check_golden, reading_rows

CASES = Path(__file__).resolve().parents[1] / "cases" / "collect"
HOST = "testhost"
BUILD: dict[str, type[Source]] = {"infiniband": InfinibandSource, "lnet_router": LnetRouterSource}
IB_CASE = CASES / "infiniband" / "mlx4-mlx5-hfi1"
LNET_CASE = CASES / "lnet_router" / "lustre-2.10-proc"
IB_COUNTERS = IB_CASE / "sys/class/infiniband/mlx5_0/ports/1/counters"


def dump(readings: list[Reading]) -> list[dict[str, object]]:
    assert not any(r.sparse for r in readings)  # every port and router counter is reported
    rows = reading_rows(readings)
    return sorted(rows, key=lambda r: (r["kind"], r["component"], r["metric"], r["job_id"] or ""))


def _cases() -> list[object]:
    return [
        pytest.param(case, id=f"{case.parent.name}/{case.name}")
        for name in BUILD
        for case in sorted((CASES / name).glob("*/"))
    ]


@pytest.mark.parametrize("case", _cases())
def test_golden(case: Path) -> None:
    got = dump(list(BUILD[case.parent.name](HOST).collect(case)))
    assert got, f"{case}: no readings"
    check_golden(case / "expected.json", got)


def test_every_case_folder_is_complete() -> None:
    for name in BUILD:
        for case in sorted((CASES / name).glob("*/")):
            assert (case / "PROVENANCE.md").exists(), f"{case} lacks PROVENANCE.md"


def test_both_sources_are_registered() -> None:
    assert SOURCES["infiniband"] is InfinibandSource
    assert SOURCES["lnet_router"] is LnetRouterSource


@pytest.mark.parametrize("cls", [InfinibandSource, LnetRouterSource])
def test_absent_tree_gives_nothing(cls: type[Source], tmp_path: Path) -> None:
    assert list(cls(HOST).collect(tmp_path)) == []
    (tmp_path / "sys" / "class" / "infiniband").mkdir(parents=True)  # module loaded, no HCA
    assert list(cls(HOST).collect(tmp_path)) == []


def test_ib_data_counters_are_words_and_components_name_host_device_port() -> None:
    got = {(r.component, r.metric): r for r in InfinibandSource(HOST).collect(IB_CASE)}
    words = int((IB_COUNTERS / "port_xmit_data").read_text())
    tx = got[(f"{HOST}:mlx5_0:1", "tx_bytes")]
    assert tx.value == words * 4 and tx.counter and tx.kind == "ib_port"
    assert got[(f"{HOST}:mlx4_0:2", "link_up")].value == 1.0
    assert got[(f"{HOST}:mlx4_0:2", "rate_gbps")].value == 40.0
    assert not got[(f"{HOST}:mlx4_0:2", "rate_gbps")].counter
    assert (f"{HOST}:mlx5_0:1", "hw_out_of_buffer") in got
    assert (f"{HOST}:mlx5_0:1", "hw_lifespan") not in got  # a setting, not a counter
    assert (f"{HOST}:hfi1_0:1", "vl15_dropped") in got


def test_ib_saturated_counters_are_left_out_and_counted() -> None:
    got = {
        r.metric: r for r in InfinibandSource(HOST).collect(CASES / "infiniband/saturated-legacy")
    }
    assert "port_xmit_wait" not in got and "rx_bytes" not in got
    assert got["saturated_counters"].value == 2
    assert got["link_up"].value == 0.0  # INIT: trained but not carrying traffic


def test_role_sets_lnet_kind_but_not_ib_port_kind() -> None:
    assert {r.kind for r in LnetRouterSource(HOST).collect(LNET_CASE)} == {"forwarder"}
    assert {r.kind for r in LnetRouterSource(HOST, "oss").collect(LNET_CASE)} == {"oss"}
    assert {r.kind for r in InfinibandSource(HOST, "compute").collect(IB_CASE)} == {"ib_port"}


def test_malformed_ib_counter_names_the_file(tmp_path: Path) -> None:
    shutil.copytree(IB_CASE, tmp_path, dirs_exist_ok=True)
    bad = tmp_path / "sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error"
    bad.write_text("lots\n")
    with pytest.raises(InputError, match=r"mlx5_0/ports/1/counters/symbol_error:1: "):
        list(InfinibandSource(HOST).collect(tmp_path))


@pytest.mark.parametrize("text", ["0 28 0 101719323\n", "0 28 0 1 2 3 4 5 6 7 x\n", ""])
def test_malformed_lnet_stats_names_the_file(tmp_path: Path, text: str) -> None:
    shutil.copytree(LNET_CASE, tmp_path, dirs_exist_ok=True)
    (tmp_path / "proc/sys/lnet/stats").write_text(text)
    with pytest.raises(InputError, match=r"proc/sys/lnet/stats:1: "):
        list(LnetRouterSource(HOST).collect(tmp_path))


def _bump(path: Path, by: int) -> None:
    path.write_text(f"{int(path.read_text()) + by}\n")


def test_agent_rates_over_two_rounds(tmp_path: Path) -> None:
    shutil.copytree(IB_CASE, tmp_path, dirs_exist_ok=True)
    shutil.copytree(LNET_CASE, tmp_path, dirs_exist_ok=True)
    now = [1_000.0]
    agent = Agent(
        HOST, tmp_path, [InfinibandSource(HOST), LnetRouterSource(HOST)], clock=lambda: now[0]
    )
    first = agent.collect_round().metrics.to_pylist()
    assert not [m for m in first if m["metric"] in ("tx_bytes", "route_bytes")]  # no rate yet
    assert {m["metric"] for m in first} >= {"link_up", "rate_gbps", "queue_len", "msgs_alloc"}

    counters = tmp_path / "sys/class/infiniband/mlx5_0/ports/1/counters"
    _bump(counters / "port_xmit_data", 1_000)  # words: 4,000 bytes
    _bump(counters / "port_rcv_packets", 50)
    _bump(counters / "symbol_error", 3)
    stats = tmp_path / "proc/sys/lnet/stats"
    f = [int(x) for x in stats.read_text().split()]
    f[0] = 7  # msgs_alloc: 7 messages in flight
    f[5] += 200  # route_count
    f[9] += 5_000_000  # route_length
    f[10] += 4_096  # drop_length
    stats.write_text(" ".join(map(str, f)) + "\n")
    # Make the second port's counter saturate: it must give no rate at all.
    (tmp_path / "sys/class/infiniband/mlx4_0/ports/2/counters/port_xmit_wait").write_text(
        f"{2**32 - 1}\n"
    )
    now[0] += 5.0
    batch = agent.collect_round()
    rows = batch.metrics.to_pylist()
    got = {(m["component_id"], m["metric"]): m for m in rows}
    port = f"{HOST}:mlx5_0:1"
    assert got[(port, "tx_bytes")]["value"] == 800.0
    assert got[(port, "tx_bytes")]["interval_s"] == 5.0
    assert got[(port, "rx_packets")]["value"] == 10.0
    assert got[(port, "symbol_error")]["value"] == pytest.approx(0.6)
    assert got[(port, "rx_bytes")]["value"] == 0.0
    assert got[(HOST, "route_bytes")]["value"] == 1_000_000.0
    assert got[(HOST, "route_msgs")]["value"] == 40.0
    assert got[(HOST, "drop_bytes")]["value"] == pytest.approx(819.2)
    assert got[(HOST, "send_bytes")]["value"] == 0.0
    assert got[(HOST, "queue_len")]["value"] == 7.0
    assert got[(HOST, "queue_len")]["interval_s"] is None  # a gauge, as read
    assert got[(HOST, "queue_len")]["kind"] == "forwarder"
    assert (f"{HOST}:mlx4_0:2", "port_xmit_wait") not in got
    assert got[(f"{HOST}:mlx4_0:2", "saturated_counters")]["value"] == 1.0
    assert (f"{HOST}:mlx4_0:1", "port_xmit_wait") in got
    assert agent.health["infiniband"].failures == agent.health["lnet_router"].failures == 0


@pytest.mark.parametrize(("role", "kind"), [("forwarder", "forwarder"), ("node", "node")])
def test_live_agent_gives_lnet_the_configured_role(tmp_path: Path, role: str, kind: str) -> None:
    from iolens.collect.config import AgentConfig
    from iolens.collect.runner import build_agent

    cfg = AgentConfig()
    cfg.agent.role, cfg.agent.spool, cfg.agent.host = role, tmp_path / "spool", HOST
    agent = build_agent(cfg)
    lnet = next(s for s in agent.sources if isinstance(s, LnetRouterSource))
    ib = next(s for s in agent.sources if isinstance(s, InfinibandSource))
    assert {r.kind for r in lnet.collect(LNET_CASE)} == {kind}
    assert {r.kind for r in ib.collect(IB_CASE)} == {"ib_port"}
