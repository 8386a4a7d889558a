"""The latency signals of the lustre_oss source: job_stats `[usecs]` and brw_stats I/O time.

Values are checked against numbers read from the fixture files here with plain string
splitting, and through two agent rounds (what reaches the store is the interval mean).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from iolens.collect.agent import Agent
from iolens.collect.sources.lustre_oss import IO_TIME_MEAN, LustreOssSource
from iolens.simulate.captures import Delta, advance_histograms, advance_job_stats, advance_stats
from tests.collect.test_lustre_sources import CASES, HOST, by_key, shared

DDN = CASES / "lustre_oss" / "ddn-2.14-ai400x2"
JOBS = CASES / "lustre_oss" / "ddn-2.14-jobstats"
HPE = CASES / "lustre_oss" / "hpe-2.10.1"
DEBUG = "sys/kernel/debug/lustre"


def io_time_rows(path: Path) -> dict[int, tuple[int, int]]:
    """Bucket (ms) -> (read, write) I/Os of the `I/O time (1/1000s)` section, by splitting."""
    section = path.read_text().split("I/O time (1/1000s)")[1].split("\n\n")[0]
    rows = {}
    for line in section.splitlines()[1:]:
        label, counts = line.split(":", 1)
        read, write = (int(half.split()[0]) for half in counts.split("|"))
        rows[int(label[:-1]) * 1024 if label.endswith("K") else int(label)] = (read, write)
    return rows


def middle_us(ms: int) -> float:
    """The middle of bucket `ms`: (ms/2, ms], bucket 1 holding 0 and 1 ms."""
    return 500.0 if ms == 1 else 750.0 * ms


def test_io_time_histogram_and_its_mean_match_the_file() -> None:
    got = by_key(list(LustreOssSource(HOST).collect(DDN)))
    for ost in ("ai400x2-OST0000", "ai400x2-OST0001"):
        rows = io_time_rows(DDN / DEBUG / "osd-ldiskfs" / ost / "brw_stats")
        assert len(rows) >= 8
        for ms, (read, write) in rows.items():
            assert got[("ost", ost, None, f"brw_io_time_ms_{ms}_read")].value == read
            assert got[("ost", ost, None, f"brw_io_time_ms_{ms}_write")].value == write
        mean = got[("ost", ost, None, IO_TIME_MEAN)]
        ios = sum(r + w for r, w in rows.values())
        assert not mean.counter and mean.per == ios
        assert mean.value == pytest.approx(
            sum(middle_us(ms) * (r + w) for ms, (r, w) in rows.items())
        )


def test_zfs_2_10_times_next_to_nothing() -> None:
    """osd-zfs times only reads that miss its cache: the 2.10 capture holds one such I/O."""
    got = by_key(list(LustreOssSource(HOST).collect(HPE)))
    mean = got[("ost", "lustrefs-OST0000", None, IO_TIME_MEAN)]
    assert (mean.value, mean.per) == (500.0, 1.0)
    assert ("ost", "lustrefs-OST0000", None, "service_us") not in got  # no [usecs] in 2.10


def test_tick_rate_title_of_old_lustre(tmp_path: Path) -> None:
    """Lustre 1.8 titled the section with the kernel's tick rate: `I/O time (1/250s)`."""
    shutil.copytree(HPE, tmp_path, dirs_exist_ok=True)
    brw = tmp_path / "proc/fs/lustre/osd-zfs/lustrefs-OST0000/brw_stats"
    text = brw.read_text().replace("I/O time (1/1000s)", "I/O time (1/250s)")
    brw.write_text(
        text.replace(
            "1:\t\t         1 100 100   |    0   0   0", "2:\t\t         3 100 100   |    0   0   0"
        )
    )
    got = by_key(list(LustreOssSource(HOST).collect(tmp_path)))
    assert got[("ost", "lustrefs-OST0000", None, "brw_io_time_ms_8_read")].value == 3  # 2 ticks
    assert got[("ost", "lustrefs-OST0000", None, IO_TIME_MEAN)].value == 3 * 0.75 * 8000


def test_job_service_time_is_the_jobs_usecs_per_rpc() -> None:
    got = by_key(list(LustreOssSource(HOST).collect(JOBS)))
    text = (JOBS / "proc/fs/lustre/obdfilter/es01a-OST0001/job_stats").read_text()
    entries = text.split("- job_id:")[1:]
    assert len(entries) == 16
    for entry in entries:
        job = entry.split()[0].strip('"')
        sums = samples = 0
        for op in ("read", "write"):
            line = next(x for x in entry.splitlines() if x.strip().startswith(f"{op}:"))
            samples += int(re.search(r"samples:\s*(\d+)", line)[1])  # type: ignore[index]
            sums += int(re.search(r"sum:\s*(\d+)", line)[1])  # type: ignore[index]
        svc = got[("ost", "es01a-OST0001", job, "service_us")]
        assert (svc.value, svc.per, svc.counter) == (sums, samples, False)


def test_job_without_usecs_has_no_service_time() -> None:
    """2.10 job_stats count RPCs without timing them: no made-up latency per job."""
    got = list(LustreOssSource(HOST).collect(HPE))
    assert [r for r in got if r.job_id is not None]
    assert not [r for r in got if r.job_id is not None and r.metric == "service_us"]


def test_two_rounds_give_interval_means(tmp_path: Path) -> None:
    """What the store gets: per-interval means of the OST, of each job and of the histogram."""
    shutil.copytree(DDN, tmp_path, dirs_exist_ok=True)
    jobs = tmp_path / "proc/fs/lustre/obdfilter/ai400x2-OST0000/job_stats"
    shutil.copy(JOBS / "proc/fs/lustre/obdfilter/es01a-OST0001/job_stats", jobs)
    stats = tmp_path / "proc/fs/lustre/obdfilter/ai400x2-OST0000/stats"
    brw = tmp_path / DEBUG / "osd-ldiskfs/ai400x2-OST0000/brw_stats"
    now = [1_723_200_000.0]  # after every snapshot in the copied files
    agent = Agent(HOST, tmp_path, [LustreOssSource(HOST)], clock=lambda: now[0])
    agent.collect_round()
    now[0] += 60.0
    job = "SLURM_JOB10:0:es18kxe-co-client"
    stats.write_text(
        advance_stats(
            stats.read_text(),
            {
                "read_bytes": Delta(600, 600 * 2**20, 2**20, 2**20, unit="bytes"),
                "read": Delta(600, 600 * 4000, 3000, 5000, unit="usecs"),
                "write_bytes": Delta(400, 400 * 2**20, 2**20, 2**20, unit="bytes"),
                "write": Delta(400, 400 * 1500, 1000, 2000, unit="usecs"),
            },
            now[0],
        )
    )
    jobs.write_text(
        advance_job_stats(
            jobs.read_text(),
            {
                job: {
                    "write_bytes": Delta(100, 100 * 2**20, unit="bytes"),
                    "write": Delta(100, 100 * 2500, unit="usecs"),
                }
            },
            now[0],
        )
    )
    brw.write_text(
        advance_histograms(
            brw.read_text(), {"I/O time (1/1000s)": {4: (30, 10), 8: (0, 20)}}, now[0]
        )
    )
    batch = agent.collect_round()
    metrics = {
        (m["component_id"], m["job_id"], m["metric"]): m["value"] for m in batch.metrics.to_pylist()
    }
    wide = {(s["component_id"], s["job_id"]): s for s in batch.server_samples.to_pylist()}
    ost = "ai400x2-OST0000"
    assert wide[(ost, None)]["service_us"] == pytest.approx((600 * 4000 + 400 * 1500) / 1000)
    assert wide[(ost, job)]["service_us"] == pytest.approx(2500)
    assert wide[(ost, job)]["write_ops"] == 100
    assert metrics[(ost, None, IO_TIME_MEAN)] == pytest.approx((40 * 3000 + 20 * 6000) / 60)
    assert metrics[(ost, None, "brw_io_time_ms_4_read")] == pytest.approx(30 / 60)
    assert metrics[(ost, None, "brw_io_time_ms_8_write")] == pytest.approx(20 / 60)
    assert metrics[(ost, None, "brw_io_time_ms_1_read")] == 0.0


def test_llnl_2_15_zfs_histograms() -> None:
    """The GPL LLNL capture (read from ../shared/data): osd-zfs brw_stats in debugfs."""
    root = shared("lustre-procfs-llnl-lmt/lustre-2.15.4_1")
    got = by_key(list(LustreOssSource(HOST).collect(root)))
    for ost in ("lflood-OST0000", "lflood-OST0001", "lflood-OST0002", "lflood-OST0003"):
        rows = io_time_rows(root / DEBUG / "osd-zfs" / ost / "brw_stats")
        mean = got[("ost", ost, None, IO_TIME_MEAN)]
        assert mean.per == sum(r + w for r, w in rows.values())
        assert all(w == 0 for _, w in rows.values())  # zfs does not time writes
    svc = got[("ost", "lflood-OST0001", None, "service_us")]
    assert svc.per == 1705491 + 1704066 and svc.value == 3265635927 + 6335271385
