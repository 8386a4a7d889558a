"""The MooseFS source: real `mfscli` output (tests/cases/collect/moosefs) to readings, the
agent shipping each chart minute once in its own minute, and malformed text refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from iolens.collect.agent import Agent
from iolens.collect.base import Reading
from iolens.collect.config import AgentConfig
from iolens.collect.runner import build_agent
from iolens.collect.sources import SOURCES
from iolens.collect.sources.moosefs import CAPTURE_DIR, CS_CHARTS, MoosefsSource
from iolens.errors import InputError
from iolens.parse import moosefs as mfs
from tests.golden import check_golden, reading_rows

CASES = Path(__file__).resolve().parents[1] / "cases" / "collect" / "moosefs"
IDLE = CASES / "lab-4cs-idle"
MASTER = "192.0.2.2:19421"


def source() -> MoosefsSource:
    return MoosefsSource("agenthost", master=MASTER)


@pytest.mark.parametrize("case", sorted(CASES.glob("*/")), ids=lambda p: p.name)
def test_golden(case: Path) -> None:
    assert (case / "PROVENANCE.md").exists()
    got = reading_rows(list(source().collect(case)))
    got.sort(key=lambda r: (r["kind"], r["component"], r["metric"], r.get("window") or [0]))
    assert got
    check_golden(case / "expected.json", got)


def test_chart_minute_maps_onto_ost_metrics() -> None:
    """One chunkserver-minute read by hand from charts.txt against what the source makes."""
    text = (IDLE / CAPTURE_DIR / "charts.txt").read_text()
    css = mfs.parse_chunkservers((IDLE / CAPTURE_DIR / "servers.txt").read_text())
    rows = mfs.parse_chart(text, "Chunkserver chart data", len(CS_CHARTS) * len(css))
    busy = next(r for r in rows if r.values[0])  # the first minute cs1 read anything
    v = dict(zip(CS_CHARTS, busy.values[: len(CS_CHARTS)], strict=True))
    got = {
        r.metric: r
        for r in source().collect(IDLE)
        if r.component == css[0].address and r.window == (busy.start, busy.start + 60)
    }
    assert got["read_ops"].value == v["datallopr"] and got["write_bytes"].value == v["databytesw"]
    svc = got["service_us"]
    assert svc.per == v["datallopr"] + v["datallopw"]
    assert svc.value == pytest.approx((v["rtime"] + v["wtime"]) / 1000)
    # 64 KiB blocks: bytes per low-level op, as MooseFS moves them
    assert v["databytesr"] / v["datallopr"] == 65536
    assert got["read_ops"].parent == f"mfscs@{css[0].address}"


def _ost_rows(batch: object) -> list[dict[str, object]]:
    return [r for r in batch.metrics.to_pylist() if r["kind"] == "ost"]  # type: ignore[attr-defined]


def test_agent_ships_each_minute_once_in_its_own_minute(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    agent = Agent("agenthost", IDLE, [source()], state, clock=lambda: 1795736100.0)
    first = _ost_rows(agent.collect_round())
    read_ops = [r for r in first if r["metric"] == "read_ops"]
    stamps = sorted({r["ts"] for r in read_ops})
    assert len(stamps) > 1  # one stamp per chart minute, not the round's
    assert all(r["interval_s"] == 60 and r["ts"].second == 0 for r in read_ops)
    busy = [r for r in read_ops if r["value"] > 0]
    assert busy and all(r["value"] * 60 == round(r["value"] * 60) for r in busy)  # counts / 60 s
    samples = agent.collect_round()  # the same capture again: every minute went already
    assert not [r for r in _ost_rows(samples) if r["metric"] == "read_ops"]
    # a restarted agent knows the windows it shipped (kept with its counter state)
    restarted = Agent("agenthost", IDLE, [source()], state, clock=lambda: 1795736130.0)
    assert not [r for r in _ost_rows(restarted.collect_round()) if r["metric"] == "read_ops"]
    # ... and a fresh one ships them all again
    fresh = Agent("agenthost", IDLE, [source()], tmp_path / "other.json", clock=lambda: 1.0)
    assert len([r for r in _ost_rows(fresh.collect_round()) if r["metric"] == "read_ops"]) == len(
        read_ops
    )


def test_components_name_each_chunkserver_as_its_targets_parent() -> None:
    agent = Agent("agenthost", IDLE, [source()], clock=lambda: 1795736100.0)
    rows = agent.collect_round().components
    assert rows is not None
    got = {(r["component_id"], r["kind"], r["parent"]) for r in rows.to_pylist()}
    assert ("192.0.2.2:19425", "ost", "mfscs@192.0.2.2:19425") in got
    assert ("mfscs@192.0.2.2:19425", "oss", None) in got
    assert (f"mfsmeta@{MASTER}", "mdt", f"mfsmaster@{MASTER}") in got
    assert (f"mfsmaster@{MASTER}", "mds", None) in got
    assert len({c for c, _, _ in got}) == len(got)  # one kind per id: the table's key
    assert not any(c == "agenthost" for c, _, _ in got)


def test_config_enables_it_with_a_master_and_refuses_unknown_settings() -> None:
    cfg = AgentConfig.model_validate({"sources": {"moosefs": {"master": "10.0.0.1:9421"}}})
    agent = build_agent(
        cfg.model_copy(
            update={
                "agent": cfg.agent.model_copy(update={"spool": Path("/tmp/iolens-test-spool-mfs")})
            }
        )
    )
    mine = [s for s in agent.sources if s.name == "moosefs"]
    assert len(mine) == 1 and mine[0].master_host == "10.0.0.1"  # type: ignore[attr-defined]
    assert "moosefs" not in [
        s.name
        for s in build_agent(
            AgentConfig(
                agent=cfg.agent.model_copy(update={"spool": Path("/tmp/iolens-test-spool-mfs")})
            )
        ).sources
    ]
    bad = AgentConfig.model_validate({"sources": {"moosefs": {"mastr": "x:1"}}})
    with pytest.raises(InputError, match="mastr"):
        build_agent(bad)
    with pytest.raises(InputError, match="HOST:PORT"):
        MoosefsSource("h", master="nohost")
    assert SOURCES["moosefs"] is MoosefsSource


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("chunk servers:|192.0.2.2|19423|1|-|3.0.117|0|maintenance_off|2|84979712\n", "14 cells"),
        ("chunk servers:|192.0.2.x|19423|1|-|3.0.117|0|m|2|1|2|-|0|0|0\n", "IPv4"),
        ("chunk servers:|192.0.2.2|19423|1|-|3.0.117|-5|m|2|1|2|-|0|0|0\n", "load"),
    ],
)
def test_malformed_server_text_names_the_line(text: str, needle: str) -> None:
    with pytest.raises(InputError, match=needle) as err:
        mfs.parse_chunkservers("noise\n" + text, "cap/servers.txt")
    assert "cap/servers.txt" in str(err.value) and ":2" in str(err.value)


def test_malformed_chart_cells_and_labels_are_refused() -> None:
    with pytest.raises(InputError, match="minute label"):
        mfs.parse_chart("Master chart data:|2026-13-40 25:99|1\n", "Master chart data", 1)
    with pytest.raises(InputError, match="number"):
        mfs.parse_chart("Master chart data:|2026-11-26 23:30|1e9\n", "Master chart data", 1)
    rows = mfs.parse_chart(
        "Chunkserver chart data:|2026-11-26 23:31|18446744073709551615|3 threads\n"
        "Chunkserver chart data:|2026-11-26 23:30|-|0.5%\n",
        "Chunkserver chart data",
        2,
    )
    assert [r.values for r in rows] == [(None, 0.5), (None, 3.0)]  # oldest first


def test_fileinfo_lists_every_chunks_copies() -> None:
    text = (
        "/mnt/h:\n\tchunk 0: 0000000000000004_00000001 / (id:4 ver:1)\n"
        "\t\tcopy 1: 192.0.2.2:19424 (status:VALID)\n\t\tcopy 2: 192.0.2.2:19425 (status:VALID)\n"
        "\tchunk 1: 0000000000000005_00000001 / (id:5 ver:1)\n"
        "\t\tcopy 1: 192.0.2.2:19423 (status:VALID)\n"
        "/mnt/empty:\n"
    )
    got = mfs.parse_fileinfo(text)
    assert [f.path for f in got] == ["/mnt/h", "/mnt/empty"]
    assert got[0].chunkservers() == ["192.0.2.2:19424", "192.0.2.2:19425", "192.0.2.2:19423"]
    assert got[1].chunks == []


def test_a_master_that_cannot_be_asked_is_an_error_naming_it(tmp_path: Path) -> None:
    src = MoosefsSource("h", master="127.0.0.1:1", mfscli=str(tmp_path / "no-mfscli"))
    with pytest.raises(InputError, match="cannot run"):
        list(src.collect(Path("/")))  # live: the configured tool must answer
    assert list(src.collect(tmp_path)) == []  # a captured tree without this source's capture


def test_reading_defaults_leave_old_sources_unchanged() -> None:
    r = Reading("ost", "x", "read_bytes", 1.0)
    assert r.window is None and r.parent is None


def test_slowed_chunkserver_stands_out_in_every_fault_minute() -> None:
    """Ground truth of the slow case (PROVENANCE.md): 192.0.2.2:19725 was stopped 77 % of
    the time from 00:08:58 to 00:20:58; its mean time per disk operation must exceed
    every peer's in each complete minute of that window that the charts list."""
    case = CASES / "lab-4cs-slow-cs3"
    fault = (1795738138.465, 1795738858.883)
    svc: dict[float, dict[str, float]] = {}
    for r in source().collect(case):
        if r.metric == "service_us" and r.window and fault[0] <= r.window[0] <= fault[1] - 60:
            svc.setdefault(r.window[0], {})[r.component] = r.value / (r.per or 1)
    assert len(svc) >= 3
    for minute, by in svc.items():
        slow = by.pop("192.0.2.2:19725")
        assert slow > 1.5 * max(by.values()), (minute, slow, by)


def test_fileinfo_skips_the_paths_it_could_not_describe() -> None:
    """Real output (tests/cases/collect/moosefs-fileinfo): a removed file first, a
    directory last. The lab's interference runs lost every layout of a batch whose first
    path had been removed before the agent asked."""
    text = (CASES.parent / "moosefs-fileinfo" / "errors-between-files.txt").read_text()
    got = mfs.parse_fileinfo(text)
    assert [f.path for f in got] == ["/lab/nodes/c1/interference/victim0/w/f"]
    assert got[0].chunkservers() == [f"192.0.2.2:{p}" for p in (19425, 19426, 19423, 19424)]
    with pytest.raises(InputError, match="expected 'PATH:' first"):
        mfs.parse_fileinfo("garbage before any path\n")
