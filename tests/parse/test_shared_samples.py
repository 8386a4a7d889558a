"""Done-criterion of issue 4: every sample under ../shared/data for these formats parses.

Skips cleanly when the shared data folder is absent. Files named here but deliberately not
parsed: `obdfilter/*/brw_stats` in the HPE tree are symlink targets stored as text
(`../../osd-zfs/...`), and `lnet/stats`, `lnetctl_*` are other formats (not in scope).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iolens.parse import infiniband, lctl, lmt, lustre_hist, lustre_jobstats, lustre_stats, slurm
from tests.parse.helpers import SHARED_DATA

pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data not available")

PROCFS = ("lustre-procfs-hpe-lustre_exporter", "lustre-procfs-llnl-lmt")
SACCT_SLYME = [
    "User",
    "JobID",
    "JobName",
    "State",
    "Partition",
    "NCPUS",
    "NNodes",
    "CPUTime",
    "TotalCPU",
    "UserCPU",
    "SystemCPU",
    "ReqMem",
    "MaxRSS",
    "Submit",
    "Start",
    "End",
    "NodeList",
]
SACCT_HABROK = [
    "JobID",
    "JobName",
    "User",
    "Partition",
    "NodeList",
    "NNodes",
    "NCPUs",
    "NTasks",
    "State",
    "Submit",
    "Start",
    "End",
    "Timelimit",
    "Elapsed",
    "TotalCPU",
    "CPUTime",
    "UserCPU",
    "SystemCPU",
    "ReqMem",
    "MaxRSS",
    "MaxVMSize",
    "ReqTRES",
    "AllocTRES",
    "TRESUsageInMax",
    "TRESUsageInTot",
    "TRESUsageOutTot",
    "MaxDiskRead",
    "MaxDiskWrite",
    "MaxRSSNode",
    "MaxRSSTask",
    "MaxVMSizeNode",
    "MaxVMSizeTask",
    "MaxDiskReadNode",
    "MaxDiskReadTask",
    "MaxDiskWriteNode",
    "MaxDiskWriteTask",
    "Comment",
]


def _symlink_text(path: Path) -> bool:
    text = path.read_text(errors="replace").strip()
    return text.startswith("../") and "\n" not in text


def _procfs(name: str) -> list[Path]:
    out: list[Path] = []
    for folder in PROCFS:
        out += [p for p in (SHARED_DATA / folder).rglob(name) if p.is_file()]
    return sorted(p for p in out if "lnet" not in p.parts and not _symlink_text(p))


def test_all_procfs_stats_files_parse() -> None:
    files = _procfs("stats") + _procfs("md_stats")
    assert len(files) >= 120
    for f in files:
        stats = lustre_stats.parse_file(f)
        assert stats.snapshot_time is not None, f


def test_all_job_stats_files_parse() -> None:
    files = _procfs("job_stats")
    assert files
    jobs = [j for f in files for j in lustre_jobstats.parse_file(f)]
    assert len(jobs) > 10


def test_all_histogram_files_parse() -> None:
    files = _procfs("brw_stats") + _procfs("rpc_stats")
    files += sorted((SHARED_DATA / "lustre-lctl-whamcloud-lustrefs-exporter").rglob("brw_stats*"))
    assert len(files) >= 25
    for f in files:
        assert lustre_hist.parse_file(f).histograms, f


def test_all_lctl_get_param_outputs_parse() -> None:
    folder = SHARED_DATA / "lustre-lctl-whamcloud-lustrefs-exporter"
    files = [
        p for p in sorted(folder.rglob("*.txt")) if not p.name.startswith(("lnetctl", "brw_stats"))
    ]
    files.append(SHARED_DATA / "lustre-datadog-integrations-core" / "oss_jobstats.txt")
    parsed = 0
    for f in files:
        for entry in lctl.parse_file(f):
            if lctl.parse_value(entry, str(f)) is not None:
                parsed += 1
    assert parsed > 150


def test_all_infiniband_samples_parse() -> None:
    ib = SHARED_DATA / "infiniband-treydock-infiniband_exporter"
    for f in sorted((ib / "perfquery").glob("*.out")) + sorted(
        (ib / "perfquery-rcv-error").glob("*.out")
    ):
        infiniband.parse_perfquery_file(f)
    for f in sorted((ib / "ibnetdiscover").glob("*.out")):
        assert infiniband.parse_ibnetdiscover(f.read_text(), str(f)), f
    ports = infiniband.read_sysfs_tree(SHARED_DATA / "infiniband-sysfs-prometheus-procfs")
    assert len(ports) == 4


def test_all_sacct_samples_parse() -> None:
    d = SHARED_DATA / "slurm-sacct"
    for f in sorted((d / "fasrc-slyme").glob("sacct_*")):
        assert slurm.parse_file(f, fields=SACCT_SLYME), f
    rows = slurm.parse_file(d / "rug-hb-jobinfo" / "sacct.txt", fields=SACCT_HABROK, delimiter="☃")
    assert len(rows) == 242


def test_all_lmt_databases_read() -> None:
    for f in sorted((SHARED_DATA / "pytokio-lmt-and-lustre-cli").glob("*.sqlite3")):
        data = lmt.read_lmt(f)
        assert data.ost and data.mds_ops, f
        assert all(
            r.read_bytes_per_s >= 0 and r.write_bytes_per_s >= 0 for r in lmt.ost_rates(data.ost)
        )
