"""The three Lustre sources (OSS, MDS, client) against captured trees.

Golden cases live in tests/cases/collect/<source>/<case>/ (a mini root tree, PROVENANCE.md and
`expected.json`: the readings sorted, one dict per line); `IOLENS_UPDATE_GOLDEN=1` rewrites
them. The LLNL LMT captures are GPL, so they are read from ../shared/data (skipped when absent)
and checked against numbers read from the files here with plain string splitting.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from iolens.collect.agent import Agent
from iolens.collect.base import Reading, Source
from iolens.collect.sources import SOURCES
from iolens.collect.sources.lustre_client import LustreClientSource
from iolens.collect.sources.lustre_mds import LustreMdsSource
from iolens.collect.sources.lustre_oss import LustreOssSource
from iolens.errors import InputError
from tests.golden import check_golden

CASES = Path(__file__).resolve().parents[1] / "cases" / "collect"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
HOST = "testhost"
BUILD: dict[str, type[Source]] = {
    "lustre_oss": LustreOssSource,
    "lustre_mds": LustreMdsSource,
    "lustre_client": LustreClientSource,
}
L = "proc/fs/lustre"
OSS_CASE = CASES / "lustre_oss" / "hpe-2.10.1"
MDS_CASE = CASES / "lustre_mds" / "hpe-2.10.1"
CLIENT_CASE = CASES / "lustre_client" / "hpe-2.10.1"
OSC = "lustrefs-OST0000-osc-ffff88105db50000"


#: The Reading fields the goldens hold; `bits` is checked apart (Lustre counters are u64).
FIELDS = ("kind", "component", "metric", "value", "counter", "job_id", "per")


def dump(readings: list[Reading]) -> list[dict[str, Any]]:
    assert all(getattr(r, "bits", 64) == 64 for r in readings)
    rows = [{f: getattr(r, f) for f in FIELDS} for r in readings]
    return sorted(rows, key=lambda r: (r["kind"], r["component"], r["metric"], r["job_id"] or ""))


def dumps(rows: list[dict[str, Any]]) -> str:
    """One reading per line: reviewable by eye, diffable by line."""
    return "[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n"


def _cases() -> list[Any]:
    return [
        pytest.param(case, id=f"{name}/{case.name}")
        for name in BUILD
        for case in sorted(p for p in (CASES / name).glob("*") if p.is_dir())
    ]


def shared(rel: str) -> Path:
    path = SHARED / rel
    if not path.exists():
        pytest.skip(f"shared data not available: {path}")
    return path


def counter_lines(path: Path) -> dict[str, list[list[int]]]:
    """`name N samples [unit] a b c d` -> name: [[N, a, b, c, d], ...], read by splitting."""
    out: dict[str, list[list[int]]] = {}
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) >= 3 and f[2] == "samples":
            out.setdefault(f[0], []).append([int(f[1]), *(int(x) for x in f[4:])])
    return out


def by_key(readings: list[Reading]) -> dict[tuple[str, str, str | None, str], Reading]:
    got = {(r.kind, r.component, r.job_id, r.metric): r for r in readings}
    assert len(got) == len(readings), "two readings share one key"
    return got


# -- golden cases ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", _cases())
def test_golden(case: Path) -> None:
    got = dump(list(BUILD[case.parent.name](HOST).collect(case)))
    assert got, f"{case}: no readings"
    check_golden(case / "expected.json", got, dumps)


def test_every_case_folder_is_complete() -> None:
    for name in BUILD:
        cases = [p for p in (CASES / name).glob("*") if p.is_dir()]
        assert len(cases) >= 2, f"{name}: want a 2.10 and a 2.14 case"
        for case in cases:
            assert (case / "PROVENANCE.md").exists(), f"{case} lacks PROVENANCE.md"


def test_sources_are_registered() -> None:
    for name, cls in BUILD.items():
        assert SOURCES[name] is cls and cls.name == name


def test_readings_have_unique_keys_and_the_wide_table_names() -> None:
    for case_param in _cases():
        case = case_param.values[0]
        readings = list(BUILD[case.parent.name](HOST).collect(case))
        by_key(readings)
        for r in readings:
            if r.metric in ("wait_us", "service_us", "queue_len", "active_threads"):
                assert r.per is not None and not r.counter, r
            if r.metric in ("read_bytes", "write_bytes", "read_ops", "write_ops", "md_ops"):
                assert r.counter and r.per is None, r


# -- values read independently from the fixture files -----------------------------------------


def test_oss_case_values_match_the_files() -> None:
    got = by_key(list(LustreOssSource(HOST).collect(OSS_CASE)))
    ost = "lustrefs-OST0000"
    lines = counter_lines(OSS_CASE / L / "obdfilter" / ost / "stats")
    wb = lines["write_bytes"][0]
    assert got[("ost", ost, None, "write_bytes")].value == wb[3]
    assert got[("ost", ost, None, "write_ops")].value == wb[0]
    assert "read_bytes" not in lines  # Lustre omits idle counters: reported as a true zero
    assert got[("ost", ost, None, "read_bytes")].value == 0
    assert len(lines["statfs"]) == 2  # 2.10 prints statfs twice: both count
    md = sum(n[0] for op in ("punch", "create", "statfs") for n in lines[op])
    assert got[("ost", ost, None, "md_ops")].value == md
    kb = int((OSS_CASE / L / "obdfilter" / ost / "kbytestotal").read_text())
    assert got[("ost", ost, None, "space_total_bytes")].value == kb * 1024

    jobs = (OSS_CASE / L / "obdfilter" / ost / "job_stats").read_text().split("- job_id:")[1:]
    assert len([k for k in got if k[2] is not None and k[3] == "write_bytes"]) == len(jobs)
    job_id = jobs[0].split()[0]
    wline = next(x for x in jobs[0].splitlines() if x.strip().startswith("write_bytes:"))
    wsum = int(re.search(r"sum:\s*(\d+)", wline)[1])  # type: ignore[index]
    assert got[("ost", ost, job_id, "write_bytes")].value == wsum

    io = counter_lines(OSS_CASE / L / "ost/OSS/ost_io/stats")
    wait = got[("oss", HOST, None, "wait_us")]
    assert (wait.value, wait.per) == (io["req_waittime"][0][3], io["req_waittime"][0][0])
    service = got[("oss", HOST, None, "service_us")]
    assert service.value == io["ost_write"][0][3] + io["ost_punch"][0][3]
    started = int((OSS_CASE / L / "ost/OSS/ost_io/threads_started").read_text())
    assert got[("oss", HOST, None, "threads_started")].value == started
    assert (
        got[("oss", HOST, None, "ost_create_wait_us")].per
        == (counter_lines(OSS_CASE / L / "ost/OSS/ost_create/stats")["req_waittime"][0][0])
    )

    brw = (OSS_CASE / L / "osd-zfs" / ost / "brw_stats").read_text()
    row = next(x for x in brw.splitlines() if x.startswith("1K:"))  # 1024 pages = 4 MiB RPCs
    read, write = (int(half.split()[0]) for half in row.split(":", 1)[1].split("|"))
    assert got[("ost", ost, None, "brw_rpc_pages_1024_read")].value == read
    assert got[("ost", ost, None, "brw_rpc_pages_1024_write")].value == write


def test_mds_case_values_match_the_files() -> None:
    got = by_key(list(LustreMdsSource(HOST).collect(MDS_CASE)))
    mdt = "lustrefs-MDT0000"
    lines = counter_lines(MDS_CASE / L / "mdt" / mdt / "md_stats")
    assert got[("mdt", mdt, None, "md_ops")].value == sum(v[0][0] for v in lines.values())
    assert got[("mdt", mdt, None, "md_setattr")].value == lines["setattr"][0][0]
    assert "unlink" not in lines and got[("mdt", mdt, None, "md_unlink")].value == 0
    kb = int((MDS_CASE / L / "osd-zfs" / mdt / "kbytesfree").read_text())
    assert got[("mdt", mdt, None, "space_free_bytes")].value == kb * 1024
    mdt_svc = counter_lines(MDS_CASE / L / "mds/MDS/mdt/stats")
    active = got[("mds", HOST, None, "active_threads")]
    assert (active.value, active.per) == (mdt_svc["req_active"][0][3], mdt_svc["req_active"][0][0])
    jobs = [k for k in got if k[2] is not None and k[3] == "md_ops"]
    assert len(jobs) == (MDS_CASE / L / "mdt" / mdt / "job_stats").read_text().count("- job_id:")


def test_ddn_214_cases_read_debugfs_and_sysfs() -> None:
    oss = CASES / "lustre_oss" / "ddn-2.14-ai400x2"
    got = by_key(list(LustreOssSource(HOST).collect(oss)))
    st = counter_lines(oss / L / "obdfilter/ai400x2-OST0000/stats")
    assert got[("ost", "ai400x2-OST0000", None, "read_bytes")].value == st["read_bytes"][0][3]
    service = got[("ost", "ai400x2-OST0000", None, "service_us")]
    assert service.value == st["read"][0][3] + st["write"][0][3]
    assert service.per == st["read"][0][0] + st["write"][0][0]
    io = counter_lines(oss / "sys/kernel/debug/lustre/ost/OSS/ost_io/stats")
    assert got[("oss", HOST, None, "queue_len")].value == io["req_qdepth"][0][3]
    kb = int((oss / "sys/fs/lustre/osd-ldiskfs/ai400x2-OST0001/kbytesavail").read_text())
    assert got[("ost", "ai400x2-OST0001", None, "space_avail_bytes")].value == kb * 1024
    brw = (oss / "sys/kernel/debug/lustre/osd-ldiskfs/ai400x2-OST0000/brw_stats").read_text()
    row = next(x for x in brw.splitlines() if x.startswith("256:"))  # first section: pages
    write = int(row.split("|")[1].split()[0])
    assert got[("ost", "ai400x2-OST0000", None, "brw_rpc_pages_256_write")].value == write

    mds = CASES / "lustre_mds" / "ddn-2.14-ddn145"
    got = by_key(list(LustreMdsSource(HOST).collect(mds)))
    md_stats = mds / L / "mdt/fs-MDT0000/md_stats"
    assert "elapsed_time" in md_stats.read_text()
    lines = counter_lines(md_stats)
    assert got[("mdt", "fs-MDT0000", None, "md_statfs")].value == lines["statfs"][0][0]
    seqs = counter_lines(mds / "sys/kernel/debug/lustre/mds/MDS/mdt_seqs/stats")
    assert got[("mds", HOST, None, "mdt_seqs_service_us")].value == seqs["seq_query"][0][3]
    assert ("mds", HOST, None, "mdt_io_wait_us") in got  # idle service: a zero baseline
    assert got[("mds", HOST, None, "mdt_io_wait_us")].per == 0

    jobs = CASES / "lustre_mds" / "ddn-2.14-jobstats"
    got = by_key(list(LustreMdsSource(HOST).collect(jobs)))
    key = ("mdt", "es01a-MDT0000", "vi:0:es-2-virt3-cosp")
    assert got[(*key, "md_open")].value == 4 and got[(*key, "md_sync")].value == 3
    assert got[(*key, "md_ops")].value == 4 + 4 + 4 + 3 + 7 + 1 + 3  # open..sync in the file
    assert got[(*key, "read_bytes")].value == 0  # Data-on-MDT line present, idle

    client = CASES / "lustre_client" / "ddn-2.14-llite"
    got = by_key(list(LustreClientSource(HOST).collect(client)))
    llite = counter_lines(next((client / "sys/kernel/debug/lustre/llite").glob("*/stats")))
    md = sum(llite[op][0][0] for op in ("open", "close", "readdir", "getattr", "unlink", "mkdir"))
    md += sum(llite[op][0][0] for op in ("rmdir", "mknod", "statfs", "setxattr"))
    assert got[("compute", HOST, None, "md_ops")].value == md  # not inode_permission, ioctl


def test_client_case_values_match_the_files() -> None:
    got = by_key(list(LustreClientSource(HOST).collect(CLIENT_CASE)))
    llite = counter_lines(CLIENT_CASE / L / "llite/lustrefs-ffff88105db50000/stats")
    assert got[("compute", HOST, None, "write_bytes")].value == llite["write_bytes"][0][3]
    assert got[("compute", HOST, None, "read_ops")].value == llite["read_bytes"][0][0]
    osc = counter_lines(CLIENT_CASE / L / "osc" / OSC / "stats")
    wait = got[("osc", f"{HOST}:{OSC}", None, "wait_us")]
    assert (wait.value, wait.per) == (osc["req_waittime"][0][3], osc["req_waittime"][0][0])
    assert got[("osc", f"{HOST}:{OSC}", None, "write_bytes")].value == osc["write_bytes"][0][3]
    rpc = (CLIENT_CASE / L / "osc" / OSC / "rpc_stats").read_text()
    pending = int(re.search(r"pending write pages:\s+(\d+)", rpc)[1])  # type: ignore[index]
    assert got[("osc", f"{HOST}:{OSC}", None, "pending_write_pages")].value == pending
    mdc_dir = next((CLIENT_CASE / L / "mdc").iterdir())
    md = counter_lines(mdc_dir / "md_stats")
    mdc = ("mdc", f"{HOST}:{mdc_dir.name}", None)
    assert got[(*mdc, "md_ops")].value == sum(v[0][0] for v in md.values())


def test_client_kind_is_the_role() -> None:
    assert {r.kind for r in LustreClientSource(HOST, "forwarder").collect(CLIENT_CASE)} == {
        "forwarder",
        "osc",
        "mdc",
    }
    assert LustreClientSource(HOST).kind == LustreClientSource(HOST, "node").kind == "compute"


@pytest.mark.parametrize(("role", "client_kind"), [("forwarder", "forwarder"), ("node", "compute")])
def test_runner_gives_the_client_the_role_and_servers_their_kind(
    tmp_path: Path, role: str, client_kind: str
) -> None:
    from iolens.collect.config import AgentConfig
    from iolens.collect.runner import build_agent

    cfg = AgentConfig()
    cfg.agent.role, cfg.agent.spool, cfg.agent.host = role, tmp_path / "spool", HOST
    sources = {s.name: s for s in build_agent(cfg).sources}
    assert sources["lustre_client"].kind == client_kind  # type: ignore[attr-defined]
    assert sources["lustre_oss"].kind == "oss"  # type: ignore[attr-defined]
    assert sources["lustre_mds"].kind == "mds"  # type: ignore[attr-defined]


# -- the GPL trees in ../shared/data (not copied into the repo) -------------------------------


LLNL = ("lustre-procfs-llnl-lmt/lustre-2.12.9_12", "lustre-procfs-llnl-lmt/lustre-2.15.4_1")


def _gauge(path: Path) -> int:
    return int(path.read_bytes().replace(b"\0", b"").decode())  # 2.15 capture: NUL-padded


@pytest.mark.parametrize("tree", LLNL)
def test_oss_on_llnl_captures(tree: str) -> None:
    root = shared(tree)
    got = by_key(list(LustreOssSource(HOST).collect(root)))
    osts = sorted(p.name for p in (root / L / "obdfilter").iterdir())
    assert osts and {k[1] for k in got if k[0] == "ost"} == set(osts)
    for ost in osts:
        lines = counter_lines(root / L / "obdfilter" / ost / "stats")
        for op in ("read", "write"):
            line = lines.get(f"{op}_bytes", [[0, 0, 0, 0]])[0]
            assert got[("ost", ost, None, f"{op}_bytes")].value == line[3]
            assert got[("ost", ost, None, f"{op}_ops")].value == line[0]
        # These captures hold no connection counters: everything but data is an object op.
        data = {"read_bytes", "write_bytes", "read", "write"}
        md = sum(v[0] for name, vs in lines.items() if name not in data for v in vs)
        assert got[("ost", ost, None, "md_ops")].value == md
        total = _gauge(root / "sys/fs/lustre/obdfilter" / ost / "kbytestotal")
        assert got[("ost", ost, None, "space_total_bytes")].value == total * 1024
        brw = next(root.glob(f"**/osd-zfs/{ost}/brw_stats")).read_text()
        section = brw.split("pages per bulk r/w")[1].split("\n\n")[0].splitlines()[1:]
        for row in section:
            label, counts = row.split(":", 1)
            pages = int(label[:-1]) * 1024 if label.endswith("K") else int(label)
            read, write = (int(half.split()[0]) for half in counts.split("|"))
            assert got[("ost", ost, None, f"brw_rpc_pages_{pages}_read")].value == read
            assert got[("ost", ost, None, f"brw_rpc_pages_{pages}_write")].value == write
    assert not [k for k in got if k[0] == "oss"]  # no service stats in these captures


@pytest.mark.parametrize("tree", LLNL)
def test_mds_on_llnl_captures(tree: str) -> None:
    root = shared(tree)
    got = by_key(list(LustreMdsSource(HOST).collect(root)))
    mdts = sorted(p.name for p in (root / L / "mdt").iterdir())
    assert len(mdts) >= 4
    for mdt in mdts:
        lines = counter_lines(root / L / "mdt" / mdt / "md_stats")
        assert got[("mdt", mdt, None, "md_ops")].value == sum(v[0][0] for v in lines.values())
        for op, v in lines.items():
            assert got[("mdt", mdt, None, f"md_{op}")].value == v[0][0]
        timed = [v[0] for v in lines.values() if len(v[0]) == 5]
        if "2.15" in tree:
            service = got[("mdt", mdt, None, "service_us")]
            assert (service.value, service.per) == (
                sum(v[3] for v in timed),
                sum(v[0] for v in timed),
            )
        else:
            assert ("mdt", mdt, None, "service_us") not in got  # [reqs]: no latency
        files = next(root.glob(f"*/fs/lustre/osd-zfs/{mdt}/filesfree"))
        assert got[("mdt", mdt, None, "files_free")].value == _gauge(files)


@pytest.mark.parametrize("tree", LLNL)
def test_client_on_llnl_server_captures_gives_nothing(tree: str) -> None:
    assert list(LustreClientSource(HOST).collect(shared(tree))) == []


def test_all_sources_on_the_whole_hpe_tree() -> None:
    """The complete 2.10.1 capture (server and client in one tree), not just the copied
    subset: every OST is found, and obdfilter's `brw_stats` (upstream a symlink, stored here
    as a file holding the link text) is not read in place of the OSD's."""
    root = shared("lustre-procfs-hpe-lustre_exporter")
    oss = by_key(list(LustreOssSource(HOST).collect(root)))
    osts = sorted(p.name for p in (root / L / "obdfilter").iterdir() if p.is_dir())
    assert len(osts) == 4
    for ost in osts:
        lines = counter_lines(root / L / "obdfilter" / ost / "stats")
        wb = lines.get("write_bytes", [[0, 0, 0, 0]])[0]  # an OST never written has no line
        assert oss[("ost", ost, None, "write_bytes")].value == wb[3]
        assert ("ost", ost, None, "brw_rpc_pages_1_write") in oss
    mds = by_key(list(LustreMdsSource(HOST).collect(root)))
    assert {k[1] for k in mds if k[0] == "mdt"} == {"lustrefs-MDT0000"}
    client = by_key(list(LustreClientSource(HOST).collect(root)))
    oscs = [p.name for p in (root / L / "osc").iterdir() if p.is_dir()]
    assert {k[1] for k in client if k[0] == "osc"} == {f"{HOST}:{o}" for o in oscs}


# -- absent and malformed -----------------------------------------------------------------


@pytest.mark.parametrize("cls", list(BUILD.values()))
def test_absent_tree_gives_nothing(cls: type[Source], tmp_path: Path) -> None:
    assert list(cls(HOST).collect(tmp_path)) == []
    for d in ("obdfilter/fs-OST0000", "mdt/fs-MDT0000", "osc/fs-OST0000-osc-ffff", "llite/x"):
        (tmp_path / L / d).mkdir(parents=True)  # modules loaded, targets without files
    for d in ("ost/OSS", "mds/MDS", "osd-zfs/fs-OST0000"):
        (tmp_path / "sys/kernel/debug/lustre" / d).mkdir(parents=True)
    (tmp_path / L / "osc" / "num_refs").write_text("3\n")  # a file, not a target
    assert list(cls(HOST).collect(tmp_path)) == []


MALFORMED = [
    (LustreOssSource, OSS_CASE, f"{L}/obdfilter/lustrefs-OST0000/stats", 3),
    (LustreOssSource, OSS_CASE, f"{L}/obdfilter/lustrefs-OST0000/job_stats", 4),
    (LustreOssSource, OSS_CASE, f"{L}/osd-zfs/lustrefs-OST0002/brw_stats", 6),
    (LustreOssSource, OSS_CASE, f"{L}/obdfilter/lustrefs-OST0002/kbytesfree", 1),
    (LustreOssSource, OSS_CASE, f"{L}/ost/OSS/ost_io/stats", 2),
    (LustreMdsSource, MDS_CASE, f"{L}/mdt/lustrefs-MDT0000/md_stats", 5),
    (LustreMdsSource, MDS_CASE, f"{L}/mds/MDS/mdt_readpage/threads_started", 1),
    (LustreClientSource, CLIENT_CASE, f"{L}/llite/lustrefs-ffff88105db50000/stats", 2),
    (LustreClientSource, CLIENT_CASE, f"{L}/osc/{OSC}/rpc_stats", 9),
]


def _corrupt(case: Path, rel: str, line: int, dst: Path) -> Path:
    shutil.copytree(case, dst, dirs_exist_ok=True)
    path = dst / rel
    lines = path.read_text().splitlines()
    lines[line - 1] = "frobnicate 12 lots of [things]"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(("cls", "case", "rel", "line"), MALFORMED)
def test_malformed_file_costs_only_itself(
    cls: type[Source], case: Path, rel: str, line: int, tmp_path: Path, caplog
) -> None:
    """A server's malformed file is skipped and logged naming its file and line; every
    other file of the server still reports (issue 19: one bad OST line dropped all four
    OSTs). A client's files are one mount's view: there the error stops the source."""
    path = _corrupt(case, rel, line, tmp_path / "bad")
    if cls is LustreClientSource:
        with pytest.raises(InputError, match=rf"^{re.escape(str(path))}:{line}: "):
            list(cls(HOST).collect(tmp_path / "bad"))
        return
    shutil.copytree(case, tmp_path / "clean")
    with caplog.at_level("ERROR", logger="iolens.collect"):
        bad = list(cls(HOST).collect(tmp_path / "bad"))
    assert f"{path}:{line}: " in caplog.text
    clean = list(cls(HOST).collect(tmp_path / "clean"))

    def keys(rs: list) -> set:
        return {(r.kind, r.component, r.metric, r.job_id) for r in rs}

    missing = keys(clean) - keys(bad)
    assert missing and keys(bad) <= keys(clean)
    assert len({k[1] for k in missing}) == 1, "only the bad file's target lost readings"


def test_nul_padded_sysfs_gauge_is_read(tmp_path: Path) -> None:
    shutil.copytree(OSS_CASE, tmp_path, dirs_exist_ok=True)
    gauge = tmp_path / L / "obdfilter/lustrefs-OST0002/filesfree"
    gauge.write_bytes(b"1234\n" + b"\0" * 4091)
    got = by_key(list(LustreOssSource(HOST).collect(tmp_path)))
    assert got[("ost", "lustrefs-OST0002", None, "files_free")].value == 1234


# -- two agent rounds: the rates are delta / interval ---------------------------------------


def bump(path: Path, name: str, samples: int, total: int = 0, occurrence: int = 0) -> None:
    """Add to the sample count and the sum of a stats line; append the line when Lustre had
    not printed it yet (no samples before)."""
    lines = path.read_text().splitlines()
    seen = 0
    for i, line in enumerate(lines):
        f = line.split()
        if f and f[0] == name:
            if seen == occurrence:
                f[1] = str(int(f[1]) + samples)
                if len(f) >= 7:
                    f[6] = str(int(f[6]) + total)
                lines[i] = " ".join(f)
                break
            seen += 1
    else:
        unit = "bytes" if name.endswith("_bytes") else "reqs"
        lines.append(f"{name} {samples} samples [{unit}] 1 1 {total}")
    path.write_text("\n".join(lines) + "\n")


def bump_job(path: Path, job_id: str, op: str, samples: int, total: int = 0) -> None:
    text = path.read_text()
    start = re.search(rf"^- job_id:\s+{re.escape(job_id)}$", text, re.M).start()  # type: ignore[union-attr]
    end = text.find("- job_id:", start + 1)
    end = len(text) if end < 0 else end
    block = text[start:end]
    line = next(x for x in block.splitlines() if x.strip().startswith(f"{op}:"))
    new = re.sub(r"(samples:\s*)(\d+)", lambda m: f"{m[1]}{int(m[2]) + samples}", line)
    new = re.sub(r"(sum:\s*)(\d+)", lambda m: f"{m[1]}{int(m[2]) + total}", new)
    path.write_text(text[:start] + block.replace(line, new) + text[end:])


def two_rounds(
    source: Source, root: Path, edit: Any
) -> tuple[dict[tuple[Any, ...], dict[str, Any]], dict[tuple[Any, ...], dict[str, Any]]]:
    now = [1_000.0]
    agent = Agent(HOST, root, [source], clock=lambda: now[0])
    first = agent.collect_round()
    assert first.server_samples.num_rows == 0  # nothing to rate yet
    edit(root)
    now[0] += 10.0
    batch = agent.collect_round()
    assert agent.health[source.name].failures == 0
    metrics = {
        (m["kind"], m["component_id"], m["job_id"], m["metric"]): m
        for m in batch.metrics.to_pylist()
    }
    wide = {
        (s["kind"], s["component_id"], s["job_id"]): s for s in batch.server_samples.to_pylist()
    }
    return metrics, wide


def test_agent_rates_oss(tmp_path: Path) -> None:
    shutil.copytree(OSS_CASE, tmp_path, dirs_exist_ok=True)
    ost = "lustrefs-OST0000"

    def edit(root: Path) -> None:
        stats = root / L / "obdfilter" / ost / "stats"
        bump(stats, "write_bytes", 3, 3 * 4_194_304)
        bump(stats, "read_bytes", 5, 2_101_248)  # first read ever: the line appears
        bump(stats, "statfs", 7, occurrence=1)
        bump_job(root / L / "obdfilter" / ost / "job_stats", "24", "write_bytes", 2, 8_388_608)
        io = root / L / "ost/OSS/ost_io/stats"
        bump(io, "req_waittime", 100, 25_000)
        bump(io, "req_qdepth", 100, 300)
        bump(io, "req_active", 100, 800)
        bump(io, "ost_write", 100, 500_000)
        brw = root / L / "osd-zfs" / ost / "brw_stats"
        brw.write_text(brw.read_text().replace("| 4059303  94 100", "| 4059306  94 100"))

    metrics, wide = two_rounds(LustreOssSource(HOST), tmp_path, edit)
    target = ("ost", ost, None)
    assert metrics[(*target, "write_bytes")]["value"] == 3 * 4_194_304 / 10.0
    assert metrics[(*target, "write_bytes")]["interval_s"] == 10.0
    assert metrics[(*target, "read_bytes")]["value"] == 2_101_248 / 10.0
    assert metrics[(*target, "read_ops")]["value"] == 5 / 10.0
    assert metrics[(*target, "md_ops")]["value"] == 7 / 10.0
    assert metrics[(*target, "brw_rpc_pages_1024_write")]["value"] == 3 / 10.0
    assert metrics[(*target, "brw_rpc_pages_1_write")]["value"] == 0.0
    assert metrics[("ost", ost, "24", "write_bytes")]["value"] == 8_388_608 / 10.0
    assert metrics[("oss", HOST, None, "wait_us")]["value"] == 250.0
    assert metrics[("oss", HOST, None, "requests")]["value"] == 100 / 10.0
    assert metrics[("oss", HOST, None, "threads_started")]["interval_s"] is None  # gauge
    assert ("oss", HOST, None, "ost_wait_us") not in metrics  # no new requests: no mean
    assert wide[target] | {"ts": None} == {
        "ts": None,
        "interval_s": 10.0,
        "kind": "ost",
        "component_id": ost,
        "job_id": None,
        "read_bytes": 2_101_248,
        "write_bytes": 3 * 4_194_304,
        "read_ops": 5,
        "write_ops": 3,
        "md_ops": 7,
        "wait_us": None,
        "service_us": None,
        "queue_len": None,
        "active_threads": None,
        "source": None,  # the server's own counters
    }
    assert wide[("ost", ost, "24")]["write_bytes"] == 8_388_608
    assert wide[("ost", ost, "24")]["write_ops"] == 2
    assert wide[("ost", ost, "26")]["write_bytes"] == 0
    assert wide[("ost", "lustrefs-OST0002", None)]["write_bytes"] == 0
    oss = wide[("oss", HOST, None)]
    assert (oss["wait_us"], oss["queue_len"], oss["active_threads"]) == (250.0, 3.0, 8.0)
    assert oss["service_us"] == 5_000.0


def test_agent_rates_mds(tmp_path: Path) -> None:
    shutil.copytree(MDS_CASE, tmp_path, dirs_exist_ok=True)
    mdt = "lustrefs-MDT0000"

    def edit(root: Path) -> None:
        md = root / L / "mdt" / mdt / "md_stats"
        bump(md, "open", 4)
        bump(md, "mkdir", 2)  # first mkdir: the line appears
        bump_job(root / L / "mdt" / mdt / "job_stats", "43", "setattr", 3)
        svc = root / L / "mds/MDS/mdt/stats"
        bump(svc, "req_waittime", 50, 5_000)
        bump(svc, "req_qdepth", 50, 25)
        bump(svc, "mds_getattr", 10, 1_230)
        bump(svc, "obd_ping", 40, 99_999)  # keep-alives: not service time

    metrics, wide = two_rounds(LustreMdsSource(HOST), tmp_path, edit)
    assert metrics[("mdt", mdt, None, "md_ops")]["value"] == 6 / 10.0
    assert metrics[("mdt", mdt, None, "md_open")]["value"] == 4 / 10.0
    assert metrics[("mdt", mdt, None, "md_mkdir")]["value"] == 2 / 10.0
    assert metrics[("mdt", mdt, None, "md_close")]["value"] == 0.0
    assert metrics[("mdt", mdt, "43", "md_setattr")]["value"] == 3 / 10.0
    assert wide[("mdt", mdt, None)]["md_ops"] == 6
    assert wide[("mdt", mdt, "43")]["md_ops"] == 3
    assert wide[("mdt", mdt, "44")]["md_ops"] == 0
    mds = wide[("mds", HOST, None)]
    assert (mds["wait_us"], mds["queue_len"], mds["service_us"]) == (100.0, 0.5, 123.0)
    assert mds["md_ops"] is None and mds["interval_s"] == 10.0


def test_agent_rates_client(tmp_path: Path) -> None:
    shutil.copytree(CLIENT_CASE, tmp_path, dirs_exist_ok=True)

    def edit(root: Path) -> None:
        llite = root / L / "llite/lustrefs-ffff88105db50000/stats"
        bump(llite, "read_bytes", 2, 8_192)
        bump(llite, "open", 10)
        bump(llite, "mkdir", 1)  # first mkdir: the line appears
        bump(llite, "inode_permission", 1_000)  # local permission checks: not md_ops
        osc = root / L / "osc" / OSC / "stats"
        bump(osc, "req_waittime", 20, 20_000)
        bump(osc, "write_bytes", 4, 4_194_304)

    metrics, wide = two_rounds(LustreClientSource(HOST, "forwarder"), tmp_path, edit)
    assert metrics[("forwarder", HOST, None, "read_bytes")]["value"] == 8_192 / 10.0
    assert metrics[("forwarder", HOST, None, "md_ops")]["value"] == 11 / 10.0
    node = wide[("forwarder", HOST, None)]
    assert (node["read_bytes"], node["read_ops"], node["md_ops"], node["write_ops"]) == (
        8_192,
        2,
        11,
        0,
    )
    comp = f"{HOST}:{OSC}"
    assert metrics[("osc", comp, None, "rpcs")]["value"] == 20 / 10.0
    assert metrics[("osc", comp, None, "wait_us")]["value"] == 1_000.0
    assert wide[("osc", comp, None)]["wait_us"] == 1_000.0
    assert wide[("osc", comp, None)]["write_bytes"] == 4_194_304
    other = f"{HOST}:lustrefs-OST0001-osc-ffff88105db50000"
    assert wide[("osc", other, None)]["write_bytes"] == 0
    assert wide[("osc", other, None)]["wait_us"] is None  # no RPCs: no mean
