"""The ten root causes (Z01-Z10): each fires on a case that has it and not on one that
does not. Real logs wherever one shows the cause; where none does, a job derived from a
real log with the edit named in the test's docstring."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from iolens.analyze.darshan.rule import RuleContext
from iolens.analyze.darshan.zoomin import RULES, diagnose_zoomin, weather_before, zoom
from iolens.analyze.darshan.zoomin.advice import amdahl
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding
from iolens.model.schema import METRICS
from iolens.store import DuckDBStore
from tests.analyze.darshan.zoomin_logs import example, job, shared

MACSIO = "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"


def codes(j: DarshanJob, ctx: RuleContext | None = None) -> dict[str, Finding]:
    return {f.code: f for f in diagnose_zoomin(j, ctx or RuleContext())}


def check(code: str, j: DarshanJob, ctx: RuleContext | None = None) -> Finding | None:
    rule = next(r for r in RULES if r.code == code)
    return rule().check(j, ctx or RuleContext())


def well_formed(f: Finding) -> None:
    """Every finding: code, target, JSON evidence, a recommendation with a snippet."""
    assert f.subject_kind == "job" and f.target in ("user", "developer", "admin")
    assert f.severity in ("info", "warning", "critical")
    json.dumps(f.evidence)
    assert "`" in f.recommendation, f.recommendation
    if f.gain is not None:
        assert f.gain["factor"] >= 1.0 and f.gain["basis"]


# --- derived jobs ------------------------------------------------------------------------


def bursty(j: DarshanJob, bursts: int = 12, spacing: float = 30.0) -> DarshanJob:
    """dxt.darshan's DXT activity re-timed into `bursts` short bursts `spacing` s apart
    (as if the application wrote between compute steps); the counters are unchanged."""
    d = j.dxt.sort_values("start").reset_index(drop=True)
    k = np.arange(len(d)) * bursts // len(d)
    d["start"] = k * spacing + d.groupby(k).cumcount().to_numpy() * 1e-3
    d["end"] = d["start"] + 5e-4
    j.dxt = d
    return j


def slower(j: DarshanJob, factor: float) -> DarshanJob:
    """Every I/O call `factor` times longer (durations only), as on a slower file system."""
    for mod in j.modules.values():
        f = mod.fcounters
        for c in f.columns:
            if c.endswith(("_READ_TIME", "_WRITE_TIME", "_META_TIME", "_RANK_TIME")):
                f[c] = f[c] * factor
    return j


def one_ost(j: DarshanJob, ost: int = 5) -> DarshanJob:
    """example.darshan's 2 TB shared file on a single OST (the default stripe count 1)."""
    j.lustre["stripe_count"] = 1
    j.lustre["osts"] = [[ost] for _ in range(len(j.lustre))]
    return j


def piled(j: DarshanJob, n: int = 1024, ost: int = 0) -> DarshanJob:
    """sample-badost with the files of the first `n` ranks placed on one OST."""
    lay = j.lustre.copy()
    lay["osts"] = [[ost] if r < n else o for r, o in zip(lay["rank"], lay["osts"], strict=True)]
    j.lustre = lay
    return j


# --- the registry -----------------------------------------------------------------------


def test_rules_are_table_ii_in_order() -> None:
    assert [r.code for r in RULES] == [f"Z{i:02d}" for i in range(1, 11)]
    assert len({r.name for r in RULES}) == 10
    for r in RULES:
        doc = r.__doc__ or ""
        assert "Symptom:" in doc and "Why it hurts:" in doc and "What to do:" in doc, r.code
    assert [r.severity for r in RULES[7:]] == ["info"] * 3  # the positive factors 8-10


def test_analysis_is_shared_between_rules() -> None:
    j = job(example("example.darshan"))
    ctx = RuleContext()
    z = zoom(j, ctx)
    diagnose_zoomin(j, ctx)
    assert zoom(j, ctx) is z
    assert zoom(job(example("example.darshan")), ctx) is not z


def test_findings_are_well_formed_on_every_example() -> None:
    for name in ("example.darshan", "sample-badost.darshan", "dxt.darshan", MACSIO):
        for f in diagnose_zoomin(job(example(name))):
            well_formed(f)


# --- Z01 too many I/O phases ---------------------------------------------------------------


def test_z01_many_phases() -> None:
    f = check("Z01", bursty(job(example("dxt.darshan"))))
    assert f is not None
    well_formed(f)
    assert f.evidence["phases"] == 12 and f.evidence["source"] == "dxt"
    assert "step %" in f.recommendation


def test_z01_not_for_four_phases() -> None:
    """The real dxt.darshan has 4 bursts in 1469 s: not many."""
    assert check("Z01", job(example("dxt.darshan"))) is None


# --- Z02 bandwidth limited by a single OST --------------------------------------------------


def test_z02_straggler_ost_of_sample_badost() -> None:
    """Real log: 2048 files on 24 OSTs; OST 14's files take ~50x longer than the rest."""
    f = check("Z02", job(example("sample-badost.darshan")))
    assert f is not None
    well_formed(f)
    e = f.evidence
    assert e["ost"] == 14 and e["straggler"] and e["cover_share"] > 0.95
    assert e["other_osts"] == 23
    assert e["ost_bandwidth"] < 0.05 * e["other_osts_median_bandwidth"]
    assert f.target == "admin" and f.severity == "critical"
    slow = e["other_osts_median_bandwidth"] / e["ost_bandwidth"]
    want = amdahl(e["io_wall_s"], e["cover_s"], slow)
    assert f.gain is not None and f.gain["factor"] == pytest.approx(want, abs=0.01)
    assert f.gain["factor"] > 10
    assert "max_create_count=0" in f.recommendation


def test_z02_shared_file_on_one_ost() -> None:
    """example.darshan with its 2 TB file edited onto one OST: stripe it; the gain is bounded
    by the OST count and, knowing one OST's peak, by what K OSTs can deliver."""
    ctx = RuleContext(ost_bw=3e9, ost_total=248)
    f = check("Z02", one_ost(job(example("example.darshan"))), ctx)
    assert f is not None
    well_formed(f)
    assert f.evidence["shared"] and f.evidence["ranks_sharing"] == 2048
    assert "lfs setstripe -c 72 -S 4M /scratch2/scratchdirs/glock/tokioabc-s.4478544/vpicio" in (
        f.recommendation
    )
    bw = f.evidence["ost_bandwidth"]
    assert f.gain is not None
    assert f.gain["factor"] == pytest.approx(min(72, 72 * 3e9 / bw), abs=0.01)
    # a smaller file system caps the stripe count
    f = check("Z02", one_ost(job(example("example.darshan"))), RuleContext(ost_total=48))
    assert f is not None and "-c 48 " in f.recommendation
    assert f.gain is not None and f.gain["factor"] == pytest.approx(48.0)


def test_z02_not_for_a_widely_striped_file() -> None:
    assert check("Z02", job(example("example.darshan"))) is None


# --- Z03 small data size --------------------------------------------------------------------


def test_z03_small_data() -> None:
    """Real log: dxt.darshan moves 35 MB at a few kB/s (metadata-bound Java start-up)."""
    f = check("Z03", job(example("dxt.darshan")))
    assert f is not None
    well_formed(f)
    assert f.evidence["datasize"] < 2e9 and f.evidence["bandwidth"] < 1e9


def test_z03_small_data_generated_log() -> None:
    f = check("Z03", job(shared("darshan-logs-generated", "micro-posix.darshan")))
    assert f is not None and f.evidence["datasize"] == 2_000_000


def test_z03_not_for_terabytes() -> None:
    assert check("Z03", job(example("example.darshan"))) is None


# --- Z04 unbalanced workload among ranks -----------------------------------------------------


def test_z04_rank_zero_does_the_io() -> None:
    """MACSio (real pattern: rank 0 moves 98 % of the bytes through HDF5) with every I/O
    call 50x longer, so that its I/O time (0.06 s in the log) is long enough to matter."""
    f = check("Z04", slower(job(example(MACSIO)), 50))
    assert f is not None
    well_formed(f)
    e = f.evidence
    assert e["rank"] == 0 and e["by"] == "bytes" and e["share"] > 0.98
    assert e["files"][0]["path"] == "/tmp/test/macsio_hdf5_000.h5"
    assert f.gain is not None and 1.0 < f.gain["factor"] <= 16
    assert "MPI_File_write_at_all" in f.recommendation


def test_z04_not_when_io_is_too_short_to_matter() -> None:
    """The same MACSio log as recorded: 0.06 s of I/O in a 4 s run."""
    assert check("Z04", job(example(MACSIO))) is None


def test_z04_not_for_balanced_ranks() -> None:
    assert check("Z04", job(example("example.darshan"))) is None
    assert check("Z04", job(example("sample-badost.darshan"))) is None


# --- Z05 too many small requests ------------------------------------------------------------


def test_z05_small_requests_generated_log() -> None:
    """Real log: 2 million 1-byte writes."""
    f = check("Z05", job(shared("darshan-logs-generated", "micro-posix.darshan")))
    assert f is not None
    well_formed(f)
    assert f.evidence["small_pct"] == 100.0 and f.evidence["small_requests"] == 2_000_000
    assert "setvbuf" in f.recommendation


def test_z05_small_requests_macsio() -> None:
    """MACSio's 7,700 sub-KiB HDF5 writes, with I/O calls 50x longer (see Z04)."""
    f = check("Z05", slower(job(example(MACSIO)), 50))
    assert f is not None and f.evidence["small_pct"] > 99
    assert f.evidence["files"][0]["path"] == "/tmp/test/macsio_hdf5_000.h5"


def test_z05_not_for_large_requests() -> None:
    assert check("Z05", job(example("example.darshan"))) is None
    assert check("Z05", job(example("sample-badost.darshan"))) is None


# --- Z06 unbalanced OST workload ------------------------------------------------------------


def test_z06_files_piled_on_one_ost() -> None:
    """sample-badost with half its files (ranks 0-1023) placed on OST 0."""
    f = check("Z06", piled(job(example("sample-badost.darshan"))))
    assert f is not None
    well_formed(f)
    e = f.evidence
    assert e["ost"] == 0 and e["osts"] == 24
    files_on_0 = 1024 + sum(
        1
        for r, o in zip(
            *[job(example("sample-badost.darshan")).lustre[k] for k in ("rank", "osts")],
            strict=True,
        )
        if r >= 1024 and o == [0]
    )
    assert e["ratio_to_mean"] == pytest.approx(files_on_0 / (2048 / 24), rel=0.01)
    assert f.gain is not None and f.gain["factor"] == pytest.approx(e["ratio_to_mean"], abs=0.01)


def test_z06_not_for_balanced_osts() -> None:
    assert check("Z06", job(example("sample-badost.darshan"))) is None
    assert check("Z06", job(example("example.darshan"))) is None


# --- Z07 bad file-system weather ------------------------------------------------------------


def _weather_store(path: Path, j: DarshanJob, mds_busy: float) -> DuckDBStore:
    s = DuckDBStore(path)
    rows = []
    for k in range(-3, 1):
        ts = j.start + timedelta(seconds=5 * k)
        for field, v in (("user", mds_busy), ("idle", 100.0 - mds_busy)):
            rows.append(
                {
                    "ts": ts,
                    "interval_s": 5.0,
                    "kind": "mds",
                    "component_id": "mds0",
                    "job_id": None,
                    "metric": f"cpu_{field}_jiffies",
                    "value": v,
                }
            )
    s.append("metrics", pa.Table.from_pylist(rows, schema=METRICS))
    return s


def test_z07_busy_mds_before_the_start(tmp_path: Path) -> None:
    """example.darshan with the MDS at 59 % CPU in the 5 s before it started (Quantum1's
    figure), read from the store by `weather_before`."""
    j = job(example("example.darshan"))
    with _weather_store(tmp_path / "w.duckdb", j, 59.0) as store:
        w = weather_before(store, j.start)
    assert w is not None and w["mds_cpu_pct"] == pytest.approx(59.0)
    f = check("Z07", j, RuleContext(weather=w))
    assert f is not None
    well_formed(f)
    assert f.target == "admin" and f.evidence["mds_cpu_pct"] == pytest.approx(59.0)


def test_z07_busy_osts_need_the_ost_peak() -> None:
    j = job(example("example.darshan"))
    w = {"oss_cpu_pct": 3.0, "mds_cpu_pct": 20.0, "ost_io_mb": 12_000.0}
    assert check("Z07", j, RuleContext(weather=w)) is None
    f = check("Z07", j, RuleContext(weather=w, ost_bw=3e9))
    assert f is not None and "80%" in f.recommendation


def test_z07_not_in_fair_weather(tmp_path: Path) -> None:
    j = job(example("example.darshan"))
    with _weather_store(tmp_path / "w.duckdb", j, 20.0) as store:
        w = weather_before(store, j.start)
    assert check("Z07", j, RuleContext(weather=w)) is None
    assert check("Z07", j, RuleContext()) is None


# --- Z08 file per process -------------------------------------------------------------------


def test_z08_file_per_process() -> None:
    f = check("Z08", job(example("sample-badost.darshan")))
    assert f is not None
    well_formed(f)
    assert f.evidence["files"] == 2048 and f.evidence["ranks_with_own_file"] == 2048
    assert f.severity == "info"


def test_z08_not_for_a_shared_file() -> None:
    assert check("Z08", job(example("example.darshan"))) is None


# --- Z09 read caching -----------------------------------------------------------------------


def test_z09_read_after_write() -> None:
    """Real log: IOR writes its file, then reads it back."""
    f = check("Z09", job(example("ior_hdf5_example.darshan")))
    assert f is not None
    well_formed(f)
    assert f.evidence["read_after_write_share"] == 1.0


def test_z09_reads_faster_than_the_osts() -> None:
    """IOR's 1.6 GB read-back from /dev/shm, on a hypothetical one-OST file system of
    100 MB/s: only a cache delivers that."""
    j = job(shared("darshan-logs-generated", "ior-dxt-1m.darshan"))
    j.lustre = pd.DataFrame(
        {
            "id": [np.uint64(i) for i in j.counters("POSIX")["id"]],
            "rank": -1,
            "stripe_size": 2**20,
            "stripe_count": 1,
            "osts": [[0]],
        }
    )
    f = check("Z09", j, RuleContext(ost_bw=1e8))
    assert f is not None and f.evidence["faster_than_osts"]


def test_z09_not_for_write_only() -> None:
    assert check("Z09", job(example("example.darshan"))) is None
    assert check("Z09", job(example("sample-badost.darshan"))) is None


# --- Z10 balanced wide striping -------------------------------------------------------------


def test_z10_wide_balanced_striping() -> None:
    f = check("Z10", job(example("example.darshan")))
    assert f is not None
    well_formed(f)
    assert f.evidence["mean_stripe_count"] == 24 and f.evidence["ost_ratio_to_mean"] < 1.01


def test_z10_not_for_single_stripe_files_or_one_ost() -> None:
    assert check("Z10", job(example("sample-badost.darshan"))) is None
    assert check("Z10", one_ost(job(example("example.darshan")))) is None


# --- whole diagnoses of real logs ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("example.darshan", {"Z10"}),
        ("sample-badost.darshan", {"Z02", "Z08"}),
        ("dxt.darshan", {"Z03"}),
        ("ior_hdf5_example.darshan", {"Z09"}),
        (MACSIO, set()),
        ("noposix.darshan", set()),
    ],
)
def test_diagnoses_of_the_package_examples(name: str, want: set[str]) -> None:
    assert set(codes(job(example(name)))) == want


def test_thresholds_can_be_overridden_per_site() -> None:
    ctx = RuleContext(extra={"thresholds": {"MANY_PHASES": 4}})
    assert check("Z01", job(example("dxt.darshan")), ctx) is not None
