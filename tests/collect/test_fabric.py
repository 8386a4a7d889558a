"""The fabric source: real OSC `ibnetdiscover`/`perfquery -x` outputs (tests/cases/collect/
fabric/osc-treydock) replayed through `iolens import fabric`, then the switch view on them.

The capture is one moment, so it is the first sample; later samples add the increases in
`DELTAS` (4-byte words, ticks) to the captured counters, and one counter is cleared. Every
expected figure is computed here from those numbers and the captured values.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from iolens.analyze.system import interconnect, switch_traffic, to_plain
from iolens.collect.agent import Agent
from iolens.collect.sources.fabric import FabricSource
from iolens.collect.sources.node import NodeSource
from iolens.errors import InputError
from iolens.parse.infiniband import fabric_ports, link_rate_gbps, parse_ibnetdiscover
from iolens.store import DuckDBStore
from tests.conftest import run_cli
from tests.golden import check_golden

CAPTURE = Path(__file__).resolve().parents[1] / "cases" / "collect" / "fabric" / "osc-treydock"
T0 = 1_709_294_400
STEP = 60
SW1, SW4 = "0x7cfe9003009ce5b0.out", "0x506b4b03005c2740.out"  # ib-i1l1s01, ib-i4l1s01
O1, O2 = "0x7cfe9003003b4bde.out", "0x7cfe9003003b4b96.out"  # o0001, o0002 HCAs
#: file -> (port, counter) -> increase per STEP.
DELTAS: dict[str, dict[tuple[int, str], int]] = {
    O1: {(1, "PortXmitData"): 1_500_000_000, (1, "PortRcvData"): 3_000_000},
    O2: {(1, "PortXmitData"): 150_000_000, (1, "PortRcvData"): 6_000_000},
    SW1: {
        (1, "PortXmitData"): 600_000_000,
        (1, "PortRcvData"): 300_000_000,
        (1, "PortXmitWait"): 12_000,
        (2, "PortXmitData"): 30_000,
        (2, "PortRcvData"): 60_000,
    },
    SW4: {
        (1, "PortXmitData"): 45_000_000,
        (1, "PortRcvData"): 15_000_000,
        (1, "PortXmitWait"): 600,
    },
}
#: In the third sample ib-i4l1s01 port 1's PortXmitData was cleared and counted this since.
CLEARED = 7_500_000


def captured(name: str) -> dict[tuple[int, str], int]:
    """(port, counter) -> value, read from the capture with a regex (not the parser)."""
    out: dict[tuple[int, str], int] = {}
    port = 0
    for line in (CAPTURE / "perfquery" / name).read_text().splitlines():
        if m := re.match(r"# Port extended counters: Lid \d+ port (\d+)", line):
            port = int(m[1])
        elif m := re.match(r"(\w+):\.+(\d+)$", line):
            out[(port, m[1])] = int(m[2])
    return out


def write(name: str, values: dict[tuple[int, str], int], folder: Path) -> None:
    port = 0
    lines = []
    for line in (CAPTURE / "perfquery" / name).read_text().splitlines():
        if m := re.match(r"# Port extended counters: Lid \d+ port (\d+)", line):
            port = int(m[1])
        elif m := re.match(r"(\w+):(\.+)(\d+)$", line):
            line = f"{m[1]}:{m[2]}{values.get((port, m[1]), int(m[3]))}"
        lines.append(line)
    (folder / name).write_text("\n".join(lines) + ("\n" if lines else ""))


def make_captures(base: Path) -> Path:
    """ibnetdiscover.out and three timed folders of perfquery outputs."""
    base.mkdir()
    shutil.copy(CAPTURE / "ibnetdiscover.out", base / "ibnetdiscover.out")
    for step in range(3):
        folder = base / str(T0 + step * STEP)
        folder.mkdir()
        for path in sorted((CAPTURE / "perfquery").glob("*.out")):
            values = captured(path.name)
            for key, d in DELTAS.get(path.name, {}).items():
                values[key] += step * d
            if step == 2 and path.name == SW4:
                values[(1, "PortXmitData")] = CLEARED
            write(path.name, values, folder)
    return base


@pytest.fixture(scope="module")
def fabric_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("fabric")
    db = tmp / "s.duckdb"
    captures = make_captures(tmp / "captures")
    res = run_cli("import", "fabric", str(captures), "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    again = run_cli("import", "fabric", str(captures), "--db", str(db), "--json")
    return db, {"first": json.loads(res.stdout), "again": json.loads(again.stdout)}


def rates(db: Path, component: str, metric: str) -> list[tuple[datetime, float, float]]:
    with DuckDBStore(db, create=False) as store:
        rows = store.query(
            "SELECT ts, value, interval_s FROM metrics WHERE component_id = ? AND metric = ? "
            "ORDER BY ts",
            [component, metric],
        ).to_pylist()
    return [(r["ts"], r["value"], r["interval_s"]) for r in rows]


def at(seconds: int) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC).replace(tzinfo=None)


def test_import_rates_are_the_counter_deltas(fabric_db: tuple[Path, dict]) -> None:
    db, summary = fabric_db
    assert summary["first"]["batches"] == 3 and summary["first"]["source_failures"] == {}
    assert summary["again"]["batches"] == 0 and summary["again"]["skipped"] == 3
    d = DELTAS[SW1]
    # PortXmitData counts 4-byte words: bytes/s = words x 4 / seconds.
    assert rates(db, "ib-i1l1s01:1", "tx_bytes") == [
        (at(STEP), d[(1, "PortXmitData")] * 4 / STEP, STEP),
        (at(2 * STEP), d[(1, "PortXmitData")] * 4 / STEP, STEP),
    ]
    assert [v for _, v, _ in rates(db, "ib-i1l1s01:1", "port_xmit_wait")] == [
        d[(1, "PortXmitWait")] / STEP
    ] * 2
    # HCA ports read by the fabric: named <host>:<device>:<port> from the node description.
    tx = DELTAS[O1][(1, "PortXmitData")] * 4 / STEP
    assert [v for _, v, _ in rates(db, "o0001:HCA-1:1", "tx_bytes")] == [tx, tx]
    # Cleared counter: the value after the clear is what was counted since, never negative.
    cleared = [v for _, v, _ in rates(db, "ib-i4l1s01:1", "tx_bytes")]
    assert cleared == [DELTAS[SW4][(1, "PortXmitData")] * 4 / STEP, CLEARED * 4 / STEP]
    # The link rate comes from ibnetdiscover's `4x EDR`.
    assert {v for _, v, _ in rates(db, "ib-i1l1s01:10", "rate_gbps")} == {100.0}


def test_cabling_becomes_components(fabric_db: tuple[Path, dict]) -> None:
    db, _ = fabric_db
    with DuckDBStore(db, create=False) as store:
        rows = store.query("SELECT component_id, kind, parent FROM components").to_pylist()
    got = {r["component_id"]: (r["kind"], r["parent"]) for r in rows}
    assert got["ib-i1l1s01"] == ("switch", None) and got["ib-i4l1s01"] == ("switch", None)
    assert got["o0001:HCA-1:1"] == ("ib_port", "ib-i1l1s01")
    assert got["p0001:HCA-1:1"] == ("ib_port", "ib-i4l1s01")
    assert got["ib-i1l1s01:10"] == ("switch_port", "ib-i1l1s01")
    assert got["ib-i1l1s01:2"] == ("switch_port", "ib-i1l1s01")  # counters, no known peer
    assert "ib-i4l1s01:37" not in got  # ibnetdiscover shows it with no cable


def test_switch_view_on_the_captured_fabric(fabric_db: tuple[Path, dict]) -> None:
    db, _ = fabric_db
    with DuckDBStore(db, create=False) as store:
        view = switch_traffic(store)
        ports = {p.component_id: p for p in interconnect(store, tick_ns=4.0)}
    by = {s.component_id: s for s in view.switches}
    # ib-i1l1s01: none of its host-facing ports were queried, so its hosts' HCAs count.
    w = 4 * 2  # bytes per word x two intervals
    sw1 = by["ib-i1l1s01"]
    assert sw1.basis == "hosts" and (sw1.hosts, sw1.hosts_reporting) == (2, 2)
    assert sw1.tx_bytes == (DELTAS[O1][(1, "PortXmitData")] + DELTAS[O2][(1, "PortXmitData")]) * w
    assert sw1.rx_bytes == (DELTAS[O1][(1, "PortRcvData")] + DELTAS[O2][(1, "PortRcvData")]) * w
    assert (
        sw1.uplink_bytes
        == sum(DELTAS[SW1][(p, c)] for p in (1, 2) for c in ("PortXmitData", "PortRcvData")) * w
    )
    # ib-i4l1s01: only its own port 1 (no peer shown) reports; its host p0001 sent nothing.
    sw4 = by["ib-i4l1s01"]
    assert (sw4.basis, sw4.bytes, sw4.hosts, sw4.hosts_reporting) == ("switch", 0, 1, 0)
    assert sw4.uplink_bytes == 4 * (
        DELTAS[SW4][(1, "PortXmitData")] + CLEARED + 2 * DELTAS[SW4][(1, "PortRcvData")]
    )
    assert [b.switches for b in view.histogram] == [1, 0, 0, 0, 1]
    assert view.max_over_mean == pytest.approx(2.0)  # one switch carries all host traffic
    # T_wait: the worst interval's ticks, from PortXmitWait; R_BW against 4x EDR.
    p1 = ports["ib-i1l1s01:1"]
    assert (p1.kind, p1.host) == ("switch_port", "ib-i1l1s01")
    assert p1.xmit_wait_max == pytest.approx(DELTAS[SW1][(1, "PortXmitWait")])
    assert p1.t_wait_max_s == pytest.approx(DELTAS[SW1][(1, "PortXmitWait")] * 4e-9)
    link = 100e9 / 8  # bytes/s of 4x EDR
    assert p1.rate_gbps == 100.0
    assert p1.r_bw == pytest.approx(DELTAS[SW1][(1, "PortXmitData")] * 4 / STEP / link)
    assert ports["o0001:HCA-1:1"].r_bw == pytest.approx(
        DELTAS[O1][(1, "PortXmitData")] * 4 / STEP / link
    )
    check_golden(CAPTURE / "expected-switches.json", json.loads(json.dumps(to_plain(view))))


def test_live_without_the_tools_fails_clearly_and_the_agent_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fabric = FabricSource("mgmt1", ibnetdiscover="/nonexistent/ibnetdiscover")
    with pytest.raises(InputError, match="infiniband-diags"):
        list(fabric.collect(Path("/")))
    agent = Agent("mgmt1", Path("/"), [fabric, NodeSource("mgmt1")])
    with caplog.at_level(logging.ERROR):
        for _ in range(2):
            batch = agent.collect_round()
    assert agent.health["fabric"].failures == 2
    assert agent.health["node"].failures == 0 and batch.rows() > 0  # the rest still runs
    logged = [r for r in caplog.records if "infiniband-diags" in r.getMessage()]
    assert len(logged) == 1  # once, not every round


def fake_tool(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_live_runs_perfquery_on_every_cabled_switch_port(tmp_path: Path) -> None:
    """Stand-ins for the tools (no fabric here) print the captured outputs and log their
    arguments; a switch whose perfquery fails costs only that switch."""
    log = tmp_path / "calls"
    disc = fake_tool(tmp_path / "ibnetdiscover", f'cat "{CAPTURE}/ibnetdiscover.out"\n')
    pq = fake_tool(
        tmp_path / "perfquery",
        f'echo "$@" >> "{log}"\n'
        'if [ "$4" = 0x506b4b03005c2740 ]; then echo "ibwarn: timeout" >&2; exit 1; fi\n'
        f'cat "{CAPTURE}/perfquery/$4.out"\n',
    )
    source = FabricSource("mgmt1", ibnetdiscover=disc, perfquery=pq)
    readings = list(source.collect(Path("/")))
    assert log.read_text().splitlines() == [
        "-l -x -G 0x506b4b03005c2740 35",
        "-l -x -G 0x7cfe9003009ce5b0 1,10,11",
    ]
    got = {(r.component, r.metric): r.value for r in readings}
    words = captured(SW1)
    assert got[("ib-i1l1s01:1", "tx_bytes")] == words[(1, "PortXmitData")] * 4
    assert got[("ib-i1l1s01:1", "port_xmit_wait")] == words[(1, "PortXmitWait")]
    assert not [k for k in got if k[0].startswith("ib-i4l1s01:") and k[1] == "tx_bytes"]


def test_fabric_ports_from_ibnetdiscover() -> None:
    links = parse_ibnetdiscover((CAPTURE / "ibnetdiscover.out").read_text())
    ports = {p.component: p for p in fabric_ports(links)}
    assert set(ports) == {
        "o0001:HCA-1:1",
        "o0002:HCA-1:1",
        "p0001:HCA-1:1",
        "ib-i1l1s01:10",
        "ib-i1l1s01:11",
        "ib-i1l1s01:1",
        "ib-i4l1s01:35",
    }
    assert ports["ib-i1l1s01:10"].peer_host and not ports["ib-i1l1s01:1"].peer_host
    assert (link_rate_gbps("4x", "EDR"), link_rate_gbps("4x", "???")) == (100.0, None)


def test_switches_page_shows_whose_counters(fabric_db: tuple[Path, dict], tmp_path: Path) -> None:
    """`/admin/switches` on the imported fabric: both switches, the counters each is counted
    at, and the uplink bytes only the switch counters give."""
    from fastapi.testclient import TestClient

    from iolens.present.web.accounts import add_user
    from iolens.present.web.app import create_app

    db = tmp_path / "web.duckdb"
    shutil.copyfile(fabric_db[0], db)
    with DuckDBStore(db) as store:
        token = add_user(store, "root", True)
        client = TestClient(create_app(store))
        page = client.get("/admin/switches", headers={"Authorization": f"Bearer {token}"})
    assert page.status_code == 200
    html = page.text
    assert "ib-i1l1s01" in html and "ib-i4l1s01" in html and "<svg" in html
    assert html.count("host ports</td>") == 1 and html.count("switch ports</td>") == 1
    assert "No switch traffic" not in html


def test_network_command(fabric_db: tuple[Path, dict]) -> None:
    """`iolens network --json` is the switch view and the (absent) routers; the table
    names both switches and whose counters each is counted at."""
    db, _ = fabric_db
    res = run_cli("network", "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["switches"] == json.loads((CAPTURE / "expected-switches.json").read_text())
    assert got["routers"]["routers"] == [] and "route_bytes" in got["routers"]["missing"]
    table = run_cli("network", "--db", str(db), env={**os.environ, "COLUMNS": "160"})
    assert table.returncode == 0, table.stderr
    assert "ib-i1l1s01" in table.stdout and "switch ports" in table.stdout
    assert "host ports" in table.stdout


def test_configured_only_where_enabled(tmp_path: Path) -> None:
    """Off by default (one host per fabric asks every switch); its settings reach it, and a
    bad one is an error naming the setting."""
    from iolens.collect.config import AgentConfig
    from iolens.collect.runner import build_agent

    def agent(sources: dict) -> Agent:
        cfg = AgentConfig.model_validate(
            {"agent": {"spool": str(tmp_path / "spool"), "host": "mgmt1"}, "sources": sources}
        )
        return build_agent(cfg)

    assert "fabric" not in {s.name for s in agent({}).sources}
    on = agent({"fabric": {"enabled": True, "perfquery": "/opt/ib/perfquery"}})
    fabric = next(s for s in on.sources if s.name == "fabric")
    assert isinstance(fabric, FabricSource) and fabric.perfquery == "/opt/ib/perfquery"
    with pytest.raises(InputError, match="rediscover_s"):
        agent({"fabric": {"enabled": True, "rediscover_s": 0}})


def test_hca_ports_are_named_on_discovery_rounds_only(tmp_path: Path) -> None:
    """Switch ports report every round; the HCA ports' cabling rows come with each
    `ibnetdiscover`, not every round (thousands of unchanged rows on a real fabric)."""
    disc = fake_tool(tmp_path / "ibnetdiscover", f'cat "{CAPTURE}/ibnetdiscover.out"\n')
    pq = fake_tool(tmp_path / "perfquery", f'cat "{CAPTURE}/perfquery/$4.out"\n')
    source = FabricSource("mgmt1", ibnetdiscover=disc, perfquery=pq, rediscover_s=3600)
    first, second = (list(source.collect(Path("/"))) for _ in range(2))
    hca = {r.component for r in first if r.kind == "ib_port"}
    assert hca == {"o0001:HCA-1:1", "o0002:HCA-1:1", "p0001:HCA-1:1"}
    assert not [r for r in second if r.kind == "ib_port"]
    assert {r.component for r in second if r.metric == "tx_bytes"} == {
        r.component for r in first if r.metric == "tx_bytes"
    }
