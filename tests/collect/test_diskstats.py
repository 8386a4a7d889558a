"""The block-device source: a real /proc/diskstats (golden), a real loop device written
with direct I/O (ground truth: the bytes dd wrote), partitions and damage."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from iolens.collect.sources import SOURCES
from iolens.collect.sources.diskstats import DiskstatsSource
from iolens.errors import InputError
from tests.golden import check_golden, reading_rows

CASES = Path(__file__).resolve().parents[1] / "cases" / "collect" / "diskstats"


@pytest.mark.parametrize("case", sorted(CASES.glob("*/")), ids=lambda p: p.name)
def test_golden(case: Path) -> None:
    assert (case / "PROVENANCE.md").exists()
    got = reading_rows(list(DiskstatsSource("oss1").collect(case)))
    assert got and not any(r["component"] == "oss1:zram0" for r in got)  # no I/O: left out
    check_golden(case / "expected.json", got)


def test_partitions_are_left_to_their_disk(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "sys" / "block" / "sda").mkdir(parents=True)
    (tmp_path / "proc" / "diskstats").write_text(
        "   8       0 sda 10 0 80 5 20 0 160 7 1 12 12\n"
        "   8       1 sda1 10 0 80 5 20 0 160 7 0 12 12\n"
    )
    got = {(r.component, r.metric): r for r in DiskstatsSource("h").collect(tmp_path)}
    assert {c for c, _ in got} == {"h:sda"}
    assert got[("h:sda", "write_bytes")].value == 160 * 512
    t = got[("h:sda", "io_time_us")]
    assert t.value == 12_000 and t.per == 30 and not t.counter


def test_damaged_file_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "diskstats").write_text("   8 0 sda 1 2 3\n")
    with pytest.raises(InputError, match="14 fields") as err:
        list(DiskstatsSource("h").collect(tmp_path))
    assert "diskstats" in str(err.value)
    (tmp_path / "proc" / "diskstats").write_text("   8 0 sda 1 0 8 x 1 0 8 1 0 1 1\n")
    with pytest.raises(InputError, match="sda"):
        list(DiskstatsSource("h").collect(tmp_path))


def test_absent_file_gives_nothing_and_it_is_off_by_default(tmp_path: Path) -> None:
    assert list(DiskstatsSource("h").collect(tmp_path)) == []
    assert SOURCES["diskstats"] is DiskstatsSource and not DiskstatsSource.DEFAULT_ENABLED


def test_direct_writes_to_a_real_loop_device_are_counted(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("needs root and losetup (a real loop device)")
    img = tmp_path / "disk.img"
    img.write_bytes(b"\0" * (8 << 20))
    res = subprocess.run(
        ["losetup", "--find", "--show", str(img)], capture_output=True, text=True, check=False
    )
    if res.returncode != 0:
        pytest.skip(f"no loop device: {res.stderr.strip()}")
    dev = res.stdout.strip()
    try:
        name = Path(dev).name

        def writes() -> dict[str, float]:
            return {
                r.metric: r.value
                for r in DiskstatsSource("h").collect(Path("/"))
                if r.component == f"h:{name}"
            }

        before = writes()
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={dev}", "bs=1M", "count=4", "oflag=direct"],
            capture_output=True,
            check=True,
        )
        after = writes()
        assert after["write_bytes"] - before.get("write_bytes", 0.0) == 4 << 20
        assert after["write_ops"] - before.get("write_ops", 0.0) >= 4
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)
