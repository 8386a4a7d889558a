"""IO500 result directories written by the tests: the real formats, made-up numbers.

The sample submissions in ../shared/data carry no licence, so they are read in place (tests
skip without them) and never copied; constructed runs come from here.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from tests.conftest import SHARED_DATA

SAMPLES = SHARED_DATA / "io500-submission-data"

#: A plausible run, in IO500 units (GiB/s, kIOPS).
BASE: dict[str, float] = {
    "ior-easy-write": 20.0,
    "mdtest-easy-write": 60.0,
    "ior-hard-write": 2.0,
    "mdtest-hard-write": 10.0,
    "find": 500.0,
    "ior-easy-read": 30.0,
    "mdtest-easy-stat": 200.0,
    "ior-hard-read": 4.0,
    "mdtest-hard-stat": 80.0,
    "mdtest-easy-delete": 40.0,
    "mdtest-hard-read": 30.0,
    "mdtest-hard-delete": 12.0,
}
ORDER = list(BASE)


def geomean(xs: list[float]) -> float:
    p = 1.0
    for x in xs:
        p *= x
    return p ** (1 / len(xs))


def write_run(
    d: Path,
    values: dict[str, float] | None = None,
    *,
    start: datetime = datetime(2024, 5, 3, 9, 0, 0),
    api: str = "POSIX",
    procs: int = 80,
    nodes: int = 10,
    invalid: tuple[str, ...] = (),
    summary: bool = True,
    result_ini: bool = True,
    rank_csv: bool = False,
) -> Path:
    """A result directory in the io500 (ISC20+) format."""
    values = {**BASE, **(values or {})}
    d.mkdir(parents=True, exist_ok=True)
    times = {p: 300.0 + 10 * i for i, p in enumerate(ORDER)}
    bw = geomean([values[p] for p in ORDER if p.startswith("ior")])
    md = geomean([values[p] for p in ORDER if not p.startswith("ior")])
    total = (bw * md) ** 0.5
    bad = " [INVALID]" if invalid else ""
    if summary:
        lines = ["IO500 version io500-isc23_v1 (standard)"]
        for p in ORDER:
            unit = "GiB/s" if p.startswith("ior") else "kIOPS"
            flag = " [INVALID]" if p in invalid else ""
            lines.append(
                f"[RESULT] {p:>20} {values[p]:15.6f} {unit} : time {times[p]:.3f} seconds{flag}"
            )
            if p == "mdtest-easy-write":
                lines.append(f"[      ] {'timestamp':>20} {0:15.6f} kIOPS : time 0.000 seconds")
        lines.append(
            f"[SCORE ] Bandwidth {bw:.6f} GiB/s : IOPS {md:.6f} kiops : TOTAL {total:.6f}{bad}"
        )
        (d / "result_summary.txt").write_text("\n".join(lines) + "\n")
    if result_ini:
        t = start
        ini = [
            "[run]",
            f"procs           = {procs}",
            "version         = io500-isc23_v1",
            "config-hash     = 00000000",
            f"result-dir      = ./results/{d.name}",
            "mode            = standard",
            f"; START {start:%Y-%m-%d %H:%M:%S}",
            "",
        ]
        for p in ORDER:
            tool = "./ior" if p.startswith("ior") else ("./pfind" if p == "find" else "./mdtest")
            end = t + timedelta(seconds=times[p])
            ini += [
                f"[{p}]",
                f"t_start         = {t:%Y-%m-%d %H:%M:%S}",
                f"exe             = {tool} -a {api} -o /scratch/{p}",
                f"score           = {values[p]:.6f}",
                f"t_delta         = {times[p]:.4f}",
                f"t_end           = {end:%Y-%m-%d %H:%M:%S}",
                "",
            ]
            t = end
        ini += ["[SCORE]", f"MD              = {md:.6f}", f"BW              = {bw:.6f}"]
        ini += [f"SCORE           = {total:.6f}", "hash            = 00000000", ""]
        (d / "result.txt").write_text("\n".join(ini))
    (d / "config.ini").write_text(
        f"[global]\ndatadir = /scratch\napi = {api}\n\n[debug]\nstonewall-time = 300\n"
    )
    (d / "ior-easy-write.txt").write_text(
        "IOR-4.1.0+dev: MPI Coordinated Test of Parallel I/O\n"
        "Options:\n"
        f"api                 : {api}\n"
        "access              : file-per-process\n"
        f"nodes               : {nodes}\n"
        f"tasks               : {procs}\n"
        "\nResults:\n\n"
        "access    bw(MiB/s)  IOPS       Latency(s)  block(KiB) xfer(KiB)  open(s)    wr/rd(s)"
        "   close(s)   total(s)   iter\n"
        "------    ---------  ----       ----------  ---------- ---------  --------   --------"
        "   --------   --------   ----\n"
        "stonewalling pairs accessed min: 1000 max: 1500 -- min data: 1.9 GiB mean data: 2.4 GiB"
        " time: 300.0s\n"
        f"write     {values['ior-easy-write'] * 1024:.0f}     10527      0.000065    10158080000"
        " 2048.00    0.018998   670.79     0.000918   670.81     0\n"
    )
    if rank_csv:
        rows = ["access,rank,runtime-with-openclose,runtime,throughput-withopenclose,throughput"]
        rows += [f"write,{r},{300 + r:.3f},{299 + r:.3f},1e8,1e8" for r in range(procs)]
        (d / "ior-easy-write.csv").write_text("\n".join(rows) + "\n")
    return d


def write_legacy_run(d: Path, values: dict[str, float] | None = None) -> Path:
    """A result directory of the 2018 io500.sh script (GB/s labels that mean GiB/s)."""
    values = {**BASE, **(values or {})}
    d.mkdir(parents=True, exist_ok=True)
    lines = [
        "System:  login1",
        "date=2018.05.12-13.55.14",
        "io500_info_system_name=testsys",
        "io500_ior_easy_params='-t 2048k -b 20g -F -a MPIIO'",
        "Running the IO500 Benchmark now",
    ]
    bw_phase = md_phase = 0
    for p in ORDER:
        name = p.replace("-", "_")
        lines += [f"[Starting] {name}", f"[Exec] srun ./bin/{name.split('_')[0]} -a MPIIO"]
        if p.startswith("ior"):
            bw_phase += 1
            lines.append(
                f"[RESULT] BW   phase {bw_phase} {name:>25} {values[p]:12.3f} GB/s : "
                "time 300.00 seconds"
            )
        else:
            md_phase += 1
            lines.append(
                f"[RESULT] IOPS phase {md_phase} {name:>25} {values[p]:12.3f} kiops : "
                "time 200.00 seconds"
            )
    bw = geomean([values[p] for p in ORDER if p.startswith("ior")])
    md = geomean([values[p] for p in ORDER if not p.startswith("ior")])
    lines.append(
        f"[SCORE] Bandwidth {bw:.4f} GB/s : IOPS {md:.4f} kiops : TOTAL {(bw * md) ** 0.5:.4f}"
    )
    (d / "io-500-summary.2018.05.12-13.55.14.txt").write_text("\n".join(lines) + "\n")
    (d / "mdtest_hard_write.txt").write_text(
        "mdtest-1.9.3 was launched with 1200 total task(s) on 100 node(s)\n"
    )
    return d
