"""IO500 result directories -> `io500_runs` and `io500_phases` rows (`iolens import io500`).

Two generations of the benchmark's output are read:

* the C application (io500 ISC20 and later): `result_summary.txt` (`[RESULT]` lines and the
  `[SCORE ]` line), `result.txt` (INI: per phase `t_start`, `exe`, `score`, `t_delta`,
  `t_end`, the stonewall rate), `config.ini` / `config-orig.ini`, one `ior-*.txt` /
  `mdtest-*.txt` output per phase and, when IO500 was asked for them, per-rank CSVs;
* the 2018-19 bash script `io500.sh`: `io-500-summary.<date>.txt` (the script's variables
  and `[RESULT] BW phase 1 ior_easy_write ... GB/s` lines), `result_summary.txt`,
  `ior_*.txt` (IOR 3.1) and `mdtest_*.txt` (mdtest 1.9). The script labelled bandwidth
  `GB/s` but computed it in GiB/s (MiB/s / 1024, as its IOR outputs show), so it is stored
  as GiB/s like the later versions.

A result directory is any directory holding `result_summary.txt`, `result.txt` or an
`io-500-summary*.txt`; a path given to the importer may be one, or contain any number of
them at any depth. A summary that merely repeats the one of a run below it (submissions
often carry a copy at the top) is not a run of its own.

`run_id` is the result directory's name. A run is keyed by (system, run_id): importing it
again replaces its rows, so imports are idempotent. That is why runs are written by
`load_runs` (one transaction: delete the runs' rows, append the new ones) rather than by
`load()`, whose batch keys skip a batch seen before instead of replacing it. Per-directory
problems raise `InputError` naming the directory; `import_paths` collects them and carries on.

Times in the files are the site's local times without a zone: they are stored as written
(taken as UTC) unless the caller names the zone (None: this machine's).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.errors import InputError
from iolens.ingest.importers.sacct import to_utc
from iolens.model.schema import IO500_PHASES, IO500_RUNS
from iolens.parse._common import is_digits, shown
from iolens.store.base import Store

SOURCE = "io500"
BW_UNIT = "GiB/s"
MD_UNIT = "kIOPS"
#: Files whose presence makes a directory an IO500 result directory.
SUMMARY = "result_summary.txt"
RESULT_INI = "result.txt"
LEGACY_GLOB = "io-500-summary*.txt"

_NUM = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|-?inf)"  # no `\d+\.?\d*`: quadratic
# `[RESULT]       ior-easy-write      352.803032 GiB/s : time 386.698 seconds [INVALID]`
# `[RESULT-invalid]    mdtest-easy-write   0.011581 kIOPS : time 300.392 seconds` (ISC20)
# `[RESULT] BW   phase 1            ior_easy_write               40.915 GB/s : time 586.58 seconds`
_RESULT = re.compile(
    r"^\[(?P<tag>[A-Z \-]*)\]\s+(?:(?:BW|IOPS|MD)\s+phase\s+\d+\s+)?(?P<phase>\S+)\s+"
    rf"(?P<value>{_NUM})\s+(?P<unit>GiB/s|GB/s|kIOPS|kiops|KIOPS)\s*:\s*time\s+"
    rf"(?P<time>{_NUM})\s+seconds(?P<rest>.*)$",
    re.IGNORECASE,
)
# `[SCORE ] Bandwidth 122.312630 GiB/s : IOPS 192.355126 kiops : TOTAL 153.386640 [INVALID]`
_SCORE = re.compile(
    rf"^\[(?P<tag>SCORE[A-Z \-]*)\]\s+Bandwidth\s+(?P<bw>{_NUM})\s+\S+\s*:\s*"
    rf"IOPS\s+(?P<md>{_NUM})\s+\S+\s*:\s*TOTAL\s+(?P<total>{_NUM})(?P<rest>.*)$",
    re.IGNORECASE,
)
_VERSION = re.compile(r"^IO500 version (?P<version>\S+)(?:\s+\((?P<mode>[^)]*)\))?")
_INI_SECTION = re.compile(r"^\s*\[(?P<name>[^\]]+)\]\s*$")
_INI_KEY = re.compile(r"^\s*(?P<key>[A-Za-z0-9_.\-]+)\s*=\s*(?P<value>.*?)\s*$")
_STAMP = re.compile(r"(\d{4})\.(\d{2})\.(\d{2})-(\d{2})\.(\d{2})\.(\d{2})")
_SH_VAR = re.compile(r"^\s*(?:export\s+)?(?P<key>io500_\w+)=(?P<value>.*?)\s*$")
# IOR: `stonewalling pairs accessed min: 22419 max: 88270 -- ...`
_IOR_PAIRS = re.compile(r"stonewalling pairs accessed min:\s*(\d+)\s+max:\s*(\d+)")
# mdtest: `Continue stonewall hit min: 49252 max: 69315 avg: 58997.7`
_MD_STONEWALL = re.compile(r"stonewall hit min:\s*(\d+)\s+max:\s*(\d+)")
_MD_LAUNCH = re.compile(r"launched with (\d+) total task\(s\) on (\d+) node\(s\)")
# IOR 3.1: `clients            = 1200 (12 per node)`
_IOR_CLIENTS = re.compile(r"^\s*clients\s*=\s*(\d+)\s*\((\d+) per node\)")
_IOR_OPTION = re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z /]*?)\s*[:=]\s*(?P<value>.*?)\s*$")
_API_FLAG = re.compile(r"(?:^|\s)-a\s+(\S+)")


@dataclass
class Phase:
    """One phase of a run, in IO500's units."""

    name: str
    value: float | None = None
    unit: str | None = None
    time_s: float | None = None
    valid: bool = True
    t_start: datetime | None = None
    t_end: datetime | None = None
    value_stonewall: float | None = None
    command: str | None = None
    latency_s: float | None = None
    rank_items_min: int | None = None
    rank_items_max: int | None = None
    rank_time_p50: float | None = None
    rank_time_p90: float | None = None
    rank_time_p99: float | None = None
    rank_time_max: float | None = None


@dataclass
class Run:
    """One IO500 result directory."""

    run_id: str
    system: str
    path: str
    format: str
    version: str | None = None
    mode: str | None = None
    api: str | None = None
    nodes: int | None = None
    procs: int | None = None
    timestamp: datetime | None = None
    score: float | None = None
    bw_score: float | None = None
    md_score: float | None = None
    valid: bool = True
    config: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, Phase] = field(default_factory=dict)

    def value(self, phase: str) -> float | None:
        p = self.phases.get(phase)
        return p.value if p is not None else None


@dataclass
class ImportResult:
    runs: list[Run] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)


# -- discovery -----------------------------------------------------------------------------


def is_result_dir(d: Path) -> bool:
    return (d / SUMMARY).is_file() or (d / RESULT_INI).is_file() or any(d.glob(LEGACY_GLOB))


def find_result_dirs(path: Path) -> list[Path]:
    """Result directories at or below `path`, in path order."""
    path = Path(path)
    if not path.exists():
        raise InputError(str(path), "no such file or directory")
    if path.is_file():
        if path.name == SUMMARY or path.name == RESULT_INI or path.match(LEGACY_GLOB):
            path = path.parent
        else:
            raise InputError(str(path), "not an IO500 result directory or result file")
    found = sorted(
        {path, *(p.parent for pat in (SUMMARY, RESULT_INI, LEGACY_GLOB) for p in path.rglob(pat))}
    )
    dirs = [d for d in found if d.is_dir() and is_result_dir(d)]
    return [d for d in dirs if not _summary_copy(d, dirs)]


def _summary_copy(d: Path, dirs: list[Path]) -> bool:
    """True when `d` holds nothing but a summary identical to a run's below it."""
    own = d / SUMMARY
    if not own.is_file() or (d / RESULT_INI).is_file() or any(d.glob(LEGACY_GLOB)):
        return False
    if any(d.glob("ior*.txt")) or any(d.glob("mdtest*.txt")):
        return False
    text = own.read_bytes()
    return any(
        o != d and d in o.parents and (o / SUMMARY).is_file() and (o / SUMMARY).read_bytes() == text
        for o in dirs
    )


def default_system(d: Path) -> str:
    """The folder that holds the run: above `results/` when IO500 wrote one, else the run."""
    d = d.resolve()
    if d.parent.name == "results" and d.parent.parent.name:
        return d.parent.parent.name
    if d.name == "results" and d.parent.name:
        return d.parent.name
    return d.name


# -- parsing -------------------------------------------------------------------------------


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        v = float(text.strip().split()[0])
    except (ValueError, IndexError):
        return None
    return v if math.isfinite(v) else None


def _int(text: str | None) -> int | None:
    v = _float(text)
    return int(v) if v is not None else None


def _phase_name(name: str) -> str:
    return name.strip().replace("_", "-")


def _unit_of(phase: str) -> str:
    return BW_UNIT if phase.startswith("ior") else MD_UNIT


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        raise InputError(str(path), f"cannot read ({exc.strerror or exc})") from None


def _lines(path: Path) -> Iterable[str]:
    """Lines of `path`, skipping mdtest's one-character-per-rank `Nodemap:` line."""
    for line in _read(path).splitlines():
        if not line.startswith("Nodemap:"):
            yield line


def parse_summary(text: str, run: Run) -> None:
    """`[RESULT]` and `[SCORE]` lines of either generation, into `run`."""
    for line in text.splitlines():
        m = _VERSION.match(line)
        if m:
            run.version = m["version"]
            run.mode = m["mode"] or run.mode
            continue
        m = _RESULT.match(line.strip())
        if m:
            if not m["tag"].strip():  # `[      ] timestamp`: a marker, not a result
                continue
            name = _phase_name(m["phase"])
            p = run.phases.setdefault(name, Phase(name))
            p.value = _float(m["value"])
            p.unit = BW_UNIT if "/s" in m["unit"] else MD_UNIT
            p.time_s = _float(m["time"])
            p.valid = "INVALID" not in (m["tag"] + m["rest"]).upper()
            continue
        m = _SCORE.match(line.strip())
        if m:
            run.bw_score, run.md_score = _float(m["bw"]), _float(m["md"])
            run.score = _float(m["total"])
            run.valid = "INVALID" not in (m["tag"] + m["rest"]).upper()


def parse_ini(text: str) -> dict[str, dict[str, str]]:
    """A forgiving INI reader: IO500 writes `key = value` lines and `;` comments; anything
    else (stray output) is skipped, and a repeated section keeps its first values."""
    out: dict[str, dict[str, str]] = {}
    section: dict[str, str] | None = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith((";", "#")):
            continue
        m = _INI_SECTION.match(line)
        if m:
            section = out.setdefault(m["name"].strip(), {})
            continue
        m = _INI_KEY.match(line)
        if m and section is not None:
            value = re.sub(r"\s+[;#].*$", "", m["value"]).strip()
            section.setdefault(m["key"], value)
    return out


def _time(text: str | None, tz: tzinfo | None) -> datetime | None:
    """A site-local time as naive UTC; `tz` None means this machine's zone."""
    if not text:
        return None
    text = text.strip()
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y.%m.%d-%H.%M.%S"):
        try:
            t = datetime.strptime(text, fmt)
        except ValueError:
            continue
        try:
            return to_utc(t, tz)
        except (OverflowError, ValueError):  # year 1 or 9999 moved out of range by the zone
            return None
    return None


def parse_result_ini(text: str, run: Run, tz: tzinfo | None) -> None:
    """`result.txt`: run facts, phase times and commands, and the final scores."""
    ini = parse_ini(text)
    head = ini.get("run", {})
    run.version = head.get("version") or run.version
    run.mode = head.get("mode") or run.mode
    run.procs = _int(head.get("procs")) or run.procs
    m = re.search(r"^; START (.+)$", text, re.M)
    if m:
        run.timestamp = _time(m.group(1), tz) or run.timestamp
    for name, sec in ini.items():
        if name in ("run", "SCORE") or name == "timestamp":
            continue
        if "score" not in sec and "t_delta" not in sec:
            continue
        pname = _phase_name(name)
        p = run.phases.setdefault(pname, Phase(pname))
        if p.value is None:  # result_summary.txt (read first) is authoritative
            p.value = _float(sec.get("score"))
            p.unit = p.unit or _unit_of(pname)
            p.time_s = _float(sec.get("t_delta"))
        p.t_start = _time(sec.get("t_start"), tz)
        p.t_end = _time(sec.get("t_end"), tz)
        p.command = sec.get("exe") or p.command
        stonewall = sec.get("throughput-stonewall") or sec.get("rate-stonewall")
        p.value_stonewall = _float(stonewall)
        if "INVALID" in " ".join(sec.values()).upper():
            p.valid = False
    score = ini.get("SCORE", {})
    if run.score is None:
        run.bw_score = _float(score.get("BW"))
        run.md_score = _float(score.get("MD"))
        run.score = _float(score.get("SCORE"))
        if "INVALID" in " ".join(score.values()).upper():
            run.valid = False
    if run.timestamp is None:
        starts = [p.t_start for p in run.phases.values() if p.t_start is not None]
        run.timestamp = min(starts) if starts else None


def parse_legacy_summary(text: str, run: Run, tz: tzinfo | None) -> None:
    """`io-500-summary.<date>.txt` of io500.sh: its variables, results and commands."""
    variables: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        m = re.match(r"^(?P<key>[A-Za-z_][\w]*)=(?P<value>.*)$", line)
        if m and not line.startswith("["):
            variables[m["key"]] = m["value"].strip().strip("'\"")
            continue
        m = re.match(r"^\[Starting\]\s+(\S+)", line)
        if m:
            current = _phase_name(m.group(1))
            continue
        m = re.match(r"^\[Exec\]\s+(.*)$", line)
        if m and current:
            run.phases.setdefault(current, Phase(current)).command = m.group(1).strip()
    parse_summary(text, run)
    run.config.setdefault("io500.sh", {}).update(
        {k: v for k, v in variables.items() if k.startswith("io500_") and v}
    )
    run.timestamp = run.timestamp or _time(variables.get("date"), tz)
    run.version = run.version or "io500.sh"


def parse_ior(text: str) -> dict[str, Any]:
    """What an IOR output says beyond the result: API, scale, latency, stonewall spread."""
    out: dict[str, Any] = {}
    header: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        m = _IOR_PAIRS.search(line)
        if m:
            out["rank_items_min"], out["rank_items_max"] = int(m.group(1)), int(m.group(2))
            continue
        m = _IOR_CLIENTS.match(line)
        if m:
            tasks, per_node = int(m.group(1)), int(m.group(2))
            out.setdefault("tasks", tasks)
            if per_node:
                out.setdefault("nodes", tasks // per_node)
            continue
        if stripped.startswith("access") and "bw(MiB/s)" in stripped:
            header = stripped.split()
            continue
        if header and stripped.split()[:1] in (["write"], ["read"]):
            row = dict(zip(header, stripped.split(), strict=False))
            if "Latency(s)" in row:
                out["latency_s"] = _float(row["Latency(s)"])
            header = None
            continue
        m = _IOR_OPTION.match(line)
        if m and "api" not in out and m["key"].strip() == "api":
            out["api"] = m["value"].split()[0] if m["value"].split() else None
        elif m and m["key"].strip() in ("nodes", "tasks"):
            out.setdefault(m["key"].strip(), _int(m["value"]))
    return out


def parse_mdtest(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    m = _MD_LAUNCH.search(text)
    if m:
        out["tasks"], out["nodes"] = int(m.group(1)), int(m.group(2))
    m = _MD_STONEWALL.search(text)
    if m:
        out["rank_items_min"], out["rank_items_max"] = int(m.group(1)), int(m.group(2))
    return out


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    xs = np.array([v for v in values if math.isfinite(v)], dtype=float)
    if not xs.size:
        return {}
    p50, p90, p99 = np.quantile(xs, (0.5, 0.9, 0.99))  # linear interpolation
    return {
        "rank_time_p50": float(p50),
        "rank_time_p90": float(p90),
        "rank_time_p99": float(p99),
        "rank_time_max": float(xs.max()),
    }


def parse_rank_csv(path: Path) -> dict[str, float]:
    """Per-rank runtimes of a phase (IOR's saveRankPerformanceDetailsCSV, mdtest's
    --saveRankPerformanceDetails) as percentiles over ranks."""
    times: list[float] = []
    with path.open(newline="", errors="replace") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if not header:
            return {}
        cols = [c.strip() for c in header]
        if "runtime-with-openclose" in cols:  # IOR
            i = cols.index("runtime-with-openclose")
            for row in reader:
                if len(row) > i and row[0].strip() != "all":
                    v = _float(row[i])
                    if v is not None:
                        times.append(v)
        elif cols and cols[0] == "rank":  # mdtest: the phase's `time-File ...` column
            time_cols = [i for i, c in enumerate(cols) if c.startswith("time-")]
            rows = [r for r in reader if r and is_digits(r[0].strip())]
            for i in time_cols:
                vals = [_float(r[i]) for r in rows if len(r) > i]
                got = [v for v in vals if v is not None and v > 0]
                if got:
                    times = got
                    break
    return _percentiles(times)


def _phase_file(d: Path, phase: str, ext: str) -> Path | None:
    for name in (phase, phase.replace("-", "_")):
        p = d / f"{name}.{ext}"
        if p.is_file():
            return p
    return None


def _config(d: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, key in (("config.ini", "config"), ("config-orig.ini", "orig")):
        p = d / name
        if p.is_file():
            ini = parse_ini(_read(p))
            out[key] = {s: {k: v for k, v in kv.items() if v} for s, kv in ini.items()}
            out[key] = {s: kv for s, kv in out[key].items() if kv}
    sh = d / "io500.sh"
    if sh.is_file():
        out["io500.sh"] = {
            m["key"]: m["value"].strip("'\"")
            for m in (_SH_VAR.match(line) for line in _lines(sh))
            if m and m["value"].strip("'\"")
        }
    return out


def _api(run: Run, ior: dict[str, dict[str, Any]]) -> str:
    """IOR's API for the run: its output, else config.ini, else the command line."""
    for phase in ("ior-easy-write", "ior-easy-read", "ior-hard-write", "ior-hard-read"):
        api = ior.get(phase, {}).get("api")
        if api:
            return str(api).upper() if str(api).upper() in ("POSIX", "MPIIO") else str(api)
    g = run.config.get("config", {}).get("global", {})
    if g.get("api"):
        return g["api"].split()[0]
    for text in [p.command or "" for p in run.phases.values() if p.name.startswith("ior")] + [
        run.config.get("io500.sh", {}).get("io500_ior_easy_params", "")
    ]:
        m = _API_FLAG.search(text)
        if m:
            return m.group(1)
    return "POSIX"  # IOR's default


def read_run(d: Path, system: str | None = None, tz: tzinfo | None = UTC) -> Run:
    """Parse one result directory; `InputError` naming it when it holds no results."""
    d = Path(d)
    if not d.is_dir():
        raise InputError(str(d), "not a directory")
    legacy = sorted(d.glob(LEGACY_GLOB))
    run = Run(
        run_id=d.resolve().name,
        system=system or default_system(d),
        path=str(d.resolve()),
        format="io500.sh" if legacy else "io500",
    )
    run.config = _config(d)
    if (d / SUMMARY).is_file():
        parse_summary(_read(d / SUMMARY), run)
    for p in legacy:
        parse_legacy_summary(_read(p), run, tz)
    if (d / RESULT_INI).is_file():
        parse_result_ini(_read(d / RESULT_INI), run, tz)
    if not any(p.value is not None for p in run.phases.values()):
        raise InputError(str(d), "no IO500 results in it (no [RESULT] lines or phase scores)")
    ior: dict[str, dict[str, Any]] = {}
    for name, phase in run.phases.items():
        out = _phase_file(d, name, "txt")
        if out is not None:
            if name.startswith("ior"):
                facts = ior[name] = parse_ior("\n".join(_lines(out)))
            elif name.startswith("mdtest"):
                facts = parse_mdtest("\n".join(_lines(out)))
            else:
                facts = {}
            phase.latency_s = facts.get("latency_s")
            phase.rank_items_min = facts.get("rank_items_min")
            phase.rank_items_max = facts.get("rank_items_max")
            run.nodes = run.nodes or facts.get("nodes")
            run.procs = run.procs or facts.get("tasks")
        rank_csv = _phase_file(d, name, "csv")
        if rank_csv is not None:
            for k, v in parse_rank_csv(rank_csv).items():
                setattr(phase, k, v)
    run.api = _api(run, ior)
    if run.timestamp is None:
        m = _STAMP.search(run.run_id) or next(
            (s for s in (_STAMP.search(p.name) for p in legacy) if s), None
        )
        if m:
            run.timestamp = _time(m.group(0), tz)
    if run.score is None:
        run.valid = all(p.valid for p in run.phases.values())
    _check_counts(run, d)
    return run


#: Integer columns and the most each may hold (`io500_runs` int32, `io500_phases` int64).
_RUN_COUNTS = {"nodes": 2**31 - 1, "procs": 2**31 - 1}
_PHASE_COUNTS = {"rank_items_min": 2**63 - 1, "rank_items_max": 2**63 - 1}


def _check_counts(run: Run, d: Path) -> None:
    """A count no machine has (`procs = 1e30`, a negative one) is damage: refused with the
    directory's name, where it made the store's append raise OverflowError (issue 19,
    found by the fuzz suite)."""
    where = [(run, n, hi) for n, hi in _RUN_COUNTS.items()]
    where += [(p, n, hi) for p in run.phases.values() for n, hi in _PHASE_COUNTS.items()]
    for obj, name, hi in where:
        value = getattr(obj, name)
        if value is not None and not 0 <= value <= hi:
            what = name if obj is run else f"{obj.name} {name}"
            raise InputError(str(d), f"{what}: {shown(str(value))} is not a plausible count")


# -- loading -------------------------------------------------------------------------------


def runs_table(runs: Sequence[Run], imported: datetime | None = None) -> pa.Table:
    now = imported or datetime.now(UTC).replace(tzinfo=None)
    rows = [
        {
            "run_id": r.run_id,
            "system": r.system,
            "api": r.api,
            "path": r.path,
            "format": r.format,
            "version": r.version,
            "mode": r.mode,
            "nodes": r.nodes,
            "procs": r.procs,
            "timestamp": r.timestamp,
            "score": r.score,
            "bw_score": r.bw_score,
            "md_score": r.md_score,
            "valid": r.valid,
            "config": json.dumps(r.config, sort_keys=True),
            "imported": now,
        }
        for r in runs
    ]
    return pa.Table.from_pylist(rows, schema=IO500_RUNS)


def phases_table(runs: Sequence[Run]) -> pa.Table:
    rows = [
        {"system": r.system, "run_id": r.run_id, "phase": p.name}
        | {k: getattr(p, k) for k in IO500_PHASES.names if k not in ("system", "run_id", "phase")}
        for r in runs
        for p in r.phases.values()
    ]
    return pa.Table.from_pylist(rows, schema=IO500_PHASES)


def load_runs(store: Store, runs: Sequence[Run]) -> dict[str, int]:
    """Replace the stored rows of `runs` (by system and run id, or by path) in one
    transaction."""
    if not runs:
        return {"io500_runs": 0, "io500_phases": 0}
    keys = pa.table(
        {
            "system": [r.system for r in runs],
            "run_id": [r.run_id for r in runs],
            "path": [r.path for r in runs],
        }
    )
    runs_t, phases_t = runs_table(runs), phases_table(runs)
    with store.transaction():
        store.register("_iolens_io500_keys", keys)
        try:
            # A directory imported before under another system name is relabelled.
            store.execute(
                "DELETE FROM io500_phases p WHERE EXISTS (SELECT 1 FROM io500_runs r "
                "JOIN _iolens_io500_keys k ON r.path = k.path "
                "WHERE r.system = p.system AND r.run_id = p.run_id)"
            )
            store.execute(
                "DELETE FROM io500_runs WHERE path IN (SELECT path FROM _iolens_io500_keys)"
            )
            for table in ("io500_phases", "io500_runs"):
                store.execute(
                    f"DELETE FROM {table} t WHERE EXISTS (SELECT 1 FROM _iolens_io500_keys k "
                    "WHERE k.system = t.system AND k.run_id = t.run_id)"
                )
        finally:
            store.unregister("_iolens_io500_keys")
        store.append("io500_runs", runs_t)
        store.append("io500_phases", phases_t)
    return {"io500_runs": runs_t.num_rows, "io500_phases": phases_t.num_rows}


def read_paths(
    paths: Sequence[Path], system: str | None = None, tz: tzinfo | None = UTC
) -> ImportResult:
    """Every run under `paths`; a directory that cannot be read is an error, not a stop."""
    result = ImportResult()
    seen: set[Path] = set()
    for path in paths:
        try:
            dirs = find_result_dirs(Path(path))
        except InputError as exc:
            result.errors.append(exc)
            continue
        if not dirs:
            result.errors.append(
                InputError(
                    str(path),
                    "no IO500 result directory (result_summary.txt, "
                    "result.txt or io-500-summary*.txt) in it",
                )
            )
        for d in dirs:
            if d.resolve() in seen:
                continue
            seen.add(d.resolve())
            try:
                result.runs.append(read_run(d, system, tz))
            except InputError as exc:
                result.errors.append(exc)
            except (OSError, UnicodeError, ValueError) as exc:
                result.errors.append(InputError(str(d), f"unreadable ({exc})"))
    return result


def import_paths(
    store: Store, paths: Sequence[Path], system: str | None = None, tz: tzinfo | None = UTC
) -> ImportResult:
    """Read and load every run under `paths`; errors are collected per directory."""
    result = read_paths(paths, system, tz)
    load_runs(store, result.runs)
    return result
