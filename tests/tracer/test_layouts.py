"""Lustre layouts: the C decoder on real-layout byte blobs, and a traced run whose files
sit on a stand-in Lustre (an interposer answering `lustre.lov` like a client), through
the decoder into the store's `files` table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from iolens.tracefile import decode_dir
from iolens.tracefile import format as fmt
from tests.tracer import lustre_layouts as lov
from tests.tracer.conftest import CC, HERE, ROOT, compile_c, needs_cc

CORE = ROOT / "tracer" / "src" / "core"


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which(CC) is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("lov")
    return compile_c(
        HERE / "workloads" / "lov_decode.c", out / "lov_decode", str(CORE / "lov.c"), f"-I{CORE}"
    )


def decoded(harness: Path, tmp: Path, blob: bytes, max_osts: int | None = None) -> dict:
    p = tmp / "blob.lov"
    p.write_bytes(blob)
    args = [str(harness), str(p)] + ([str(max_osts)] if max_osts is not None else [])
    return json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)


@needs_cc
def test_plain_v1_and_v3(harness: Path, tmp_path: Path):
    d = decoded(harness, tmp_path, lov.v1([4, 5, 6, 7], stripe_size=1 << 20))
    assert d == {
        "rc": 0, "magic": lov.LOV_MAGIC_V1, "flags": 0, "stripe_size": 1 << 20,
        "stripe_count": 4, "components": 1, "osts": [4, 5, 6, 7],
    }  # fmt: skip
    d = decoded(harness, tmp_path, lov.v3([10, 2], stripe_size=4 << 20, pool="flash"))
    assert (d["rc"], d["magic"], d["stripe_size"], d["stripe_count"], d["osts"]) == (
        0, lov.LOV_MAGIC_V3, 4 << 20, 2, [10, 2]
    )  # fmt: skip


@needs_cc
def test_pfl_lists_instantiated_components_and_says_it_may_grow(harness: Path, tmp_path: Path):
    young = decoded(harness, tmp_path, lov.pfl(grown=False))
    assert young["rc"] == 0 and young["components"] == 3
    assert young["osts"] == [7]  # only the first component has objects
    assert young["flags"] & fmt.LOV_INCOMPLETE
    assert (young["stripe_size"], young["stripe_count"]) == (1 << 20, 1)
    grown = decoded(harness, tmp_path, lov.pfl(grown=True))
    assert grown["osts"] == [7, 0, 1, 2, 3, *range(8, 16)]
    assert grown["flags"] == 0


@needs_cc
def test_data_on_mdt_and_released(harness: Path, tmp_path: Path):
    d = decoded(harness, tmp_path, lov.dom())
    assert d["flags"] & fmt.LOV_DOM and d["osts"] == [5, 6]
    assert (d["stripe_size"], d["stripe_count"]) == (2 << 20, 2)  # the first component on OSTs
    r = decoded(
        harness,
        tmp_path,
        lov.v1([1, 2], pattern=lov.LOV_PATTERN_RAID0 | lov.LOV_PATTERN_F_RELEASED),
    )
    assert r["flags"] & fmt.LOV_RELEASED and r["osts"] == []


@needs_cc
def test_bounds_are_checked(harness: Path, tmp_path: Path):
    full = lov.v1([1, 2, 3])
    # objects cut short: what is there is kept, and the layout says it is incomplete
    d = decoded(harness, tmp_path, full[: 32 + 24 * 2 + 5])
    assert d["rc"] == 0 and d["osts"] == [1, 2] and d["flags"] & fmt.LOV_INCOMPLETE
    assert decoded(harness, tmp_path, full[:20])["rc"] == -1  # not even a header
    assert decoded(harness, tmp_path, b"\x00" * 64)["rc"] == -1  # unknown magic
    comp = bytearray(lov.pfl(grown=True))
    comp[32 + 24 : 32 + 28] = (10**6).to_bytes(4, "little")  # component blob beyond the end
    assert decoded(harness, tmp_path, bytes(comp))["rc"] == -1
    d = decoded(harness, tmp_path, lov.v1(list(range(10))), max_osts=4)
    assert d["osts"] == [0, 1, 2, 3] and d["flags"] & fmt.LOV_TRUNCATED


@needs_cc
def test_mountinfo_lines(harness: Path):
    lines = [
        "36 35 98:0 / /lustre/scratch rw,noatime shared:7 - lustre "
        "10.1.0.1@o2ib:10.1.0.2@o2ib:/scratch rw,flock",
        "37 35 0:52 / /mnt/my\\040project rw - lustre mgs@tcp:/proj/sub/dir rw",
        "38 35 8:1 / /home rw,relatime - ext4 /dev/sda1 rw",
        "39 35 0:53 / /p rw master:1 shared:2 - lustre mgs@tcp:/ rw",
    ]
    res = subprocess.run(
        [str(harness), "-m"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    out = [json.loads(x) for x in res.stdout.splitlines()]
    assert out[0] == {"point": "/lustre/scratch", "len": 15, "fsname": "scratch"}
    assert out[1] == {"point": "/mnt/my project", "len": 15, "fsname": "proj"}
    assert out[2] is None  # not Lustre
    assert out[3] is None  # no fs name


# -- a traced run on a stand-in Lustre -------------------------------------------------------


def traced_run(
    lib: Path, fake: Path, prog: Path, tmp: Path, n_other: int = 20, extra_env: dict | None = None
):
    lustre, other, blobs, spool = (tmp / d for d in ("lustre", "other", "blobs", "spool"))
    for d in (lustre, other, blobs):
        d.mkdir()
    (blobs / "plain.dat.lov").write_bytes(lov.v1([3, 1, 2], stripe_size=2 << 20))
    (blobs / "pfl.dat.lov").write_bytes(lov.pfl(grown=False))
    (blobs / "pfl.dat.lov.2").write_bytes(lov.pfl(grown=True))
    point = str(lustre.resolve()).replace(" ", "\\040")
    mountinfo = tmp / "mountinfo"
    mountinfo.write_text(
        Path("/proc/self/mountinfo").read_text()
        + f"9999 1 0:999 / {point} rw,relatime - lustre 10.0.0.1@o2ib:/fakefs rw,flock\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env |= {
        "LD_PRELOAD": f"{lib} {fake}",
        "IOLENS_SPOOL": str(spool),
        "IOLENS_JOB_ID": "layout-job",
        "FAKE_LUSTRE_DIR": str(lustre.resolve()),
        "FAKE_LUSTRE_BLOBS": str(blobs),
        "FAKE_LUSTRE_MOUNTINFO": str(mountinfo),
        "FAKE_LUSTRE_COUNT": str(tmp / "xattr-calls"),
        **(extra_env or {}),
    }
    subprocess.run(
        [str(prog), str(lustre), str(other), str(n_other)], env=env, check=True, timeout=60
    )
    return list(decode_dir(spool)), int((tmp / "xattr-calls").read_text()), lustre


@needs_cc
def test_traced_run_records_layouts(tracer_lib, fake_lustre, layouts_prog, tmp_path: Path):
    (trace,), calls, lustre = traced_run(tracer_lib, fake_lustre, layouts_prog, tmp_path)
    assert trace.version == fmt.FORMAT_VERSION == 6 and trace.layouts_lost == 0
    plain = trace.layouts[f"{lustre}/plain.dat"]
    assert (plain.stripe_size, plain.stripe_count, plain.osts, plain.fsname) == (
        2 << 20,
        3,
        (3, 1, 2),
        "fakefs",
    )
    pfl = trace.layouts[f"{lustre}/pfl.dat"]
    # read at open (first component only), read again at close after the writes
    assert pfl.osts == (7, 0, 1, 2, 3, *range(8, 16)) and not pfl.incomplete
    assert set(trace.layouts) == {f"{lustre}/plain.dat", f"{lustre}/pfl.dat"}  # not the dir
    rows = {r["path"]: r for r in trace.files.to_pylist()}
    assert rows[f"{lustre}/plain.dat"]["stripe_size"] == 2 << 20
    assert rows[f"{lustre}/plain.dat"]["osts"] == [
        "fakefs-OST0003",
        "fakefs-OST0001",
        "fakefs-OST0002",
    ]
    assert rows[f"{lustre}/pfl.dat"]["osts"][:2] == ["fakefs-OST0007", "fakefs-OST0000"]
    assert rows[f"{lustre}/pfl.dat"]["osts"][-1] == "fakefs-OST000f"
    off = [r for p, r in rows.items() if "/other/" in p]
    assert len(off) == 20 and all(r["stripe_size"] is None and r["osts"] is None for r in off)
    # the xattr is asked once per file on Lustre (plain.dat at open; its stdio reopen
    # finds the layout complete), again at close for the PFL file that was written, and
    # once for the whole other directory: 20 files there cost one call, not 20
    assert calls == 1 + 2 + 1


@needs_cc
def test_layouts_can_be_turned_off(tracer_lib, fake_lustre, layouts_prog, tmp_path: Path):
    (trace,), calls, _ = traced_run(
        tracer_lib, fake_lustre, layouts_prog, tmp_path, extra_env={"IOLENS_LAYOUT": "0"}
    )
    assert trace.layouts == {} and calls == 0


@needs_cc
def test_import_puts_layouts_in_the_files_table(
    tracer_lib, fake_lustre, layouts_prog, tmp_path: Path
):
    from iolens.ingest.load import load
    from iolens.store import open_store
    from iolens.tracefile import batch_of

    (trace,), _, lustre = traced_run(tracer_lib, fake_lustre, layouts_prog, tmp_path)
    with open_store(str(tmp_path / "s.duckdb"), create=True) as store:
        load(store, batch_of(trace))
        got = store.query(
            "SELECT stripe_size, osts FROM files WHERE path = ?", [f"{lustre}/plain.dat"]
        ).to_pylist()
    assert got == [
        {"stripe_size": 2 << 20, "osts": ["fakefs-OST0003", "fakefs-OST0001", "fakefs-OST0002"]}
    ]


@needs_cc
def test_decoders_survive_mutated_input_under_asan(tmp_path: Path):
    """Truncated and byte-flipped layouts and mountinfo lines, each in an allocation of
    exactly its length: the decoders must bound every read themselves."""
    out = tmp_path / "lov_fuzz"
    build = subprocess.run(
        [CC, "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", f"-I{CORE}",
         "-o", str(out), str(HERE / "workloads" / "lov_fuzz.c"), str(CORE / "lov.c")],
        capture_output=True, text=True,
    )  # fmt: skip
    if build.returncode != 0:
        pytest.skip(f"no sanitizers with {CC}: {build.stderr.strip()[:200]}")
    for name, blob in {
        "pfl": lov.pfl(grown=True),
        "dom": lov.dom(),
        "v3": lov.v3([1, 2, 3]),
    }.items():
        p = tmp_path / f"{name}.lov"
        p.write_bytes(blob)
        res = subprocess.run([str(out), str(p), "17", "50000"], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr[-2000:]
        assert int(res.stdout) > 0  # some copies still decode: the loop exercised both paths
    res = subprocess.run([str(out), "-m", "17", "50000"], capture_output=True, text=True)
    assert res.returncode == 0 and int(res.stdout) > 0, res.stderr[-2000:]
