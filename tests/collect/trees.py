"""Node trees made of the sources' fixture cases, with counters that grow on demand.

Used by the end-to-end collection test and by bench/agent_footprint.py, so both run the
agent over every source that has a captured fixture.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

CASES = Path(__file__).resolve().parents[1] / "cases" / "collect"

STATS_LINE = re.compile(r"^(\S+\s+)(\d+)( samples \[[^\]]+\](?:\s+\d+\s+\d+\s+)?)(\d+)?(.*)$")
YAML_SAMPLES = re.compile(r"(samples:\s*)(\d+)")
YAML_SUM = re.compile(r"(sum:\s*)(\d+)")


def build_root(root: Path, sources: list[str]) -> list[str]:
    """Merge the first fixture case of each source into `root`; the sources that had one."""
    used = []
    for name in sources:
        cases = sorted(p for p in (CASES / name).glob("*") if p.is_dir())
        if not cases:
            continue
        shutil.copytree(cases[0], root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.json"))
        used.append(name)
    return used


def grow(root: Path, k: int) -> None:
    """Counters only grow: add k events (and k pages of bytes) to every Lustre stats line,
    job_stats entry and InfiniBand counter under `root`."""
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        if path.parent.name == "counters":  # InfiniBand: one integer per file
            text = path.read_text().strip()
            if text.isdigit():
                path.write_text(f"{int(text) + 1000 * k}\n")
            continue
        if path.name not in ("stats", "md_stats", "job_stats"):
            continue
        lines = []
        for line in path.read_text().splitlines():
            m = STATS_LINE.match(line)
            if m:
                total = "" if m[4] is None else str(int(m[4]) + 4096 * k)
                line = f"{m[1]}{int(m[2]) + k}{m[3]}{total}{m[5]}"
            else:
                line = YAML_SAMPLES.sub(lambda s: f"{s[1]}{int(s[2]) + k}", line)
                line = YAML_SUM.sub(lambda s: f"{s[1]}{int(s[2]) + 4096 * k}", line)
            lines.append(line)
        path.write_text("\n".join(lines) + "\n")
