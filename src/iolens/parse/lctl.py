"""`lctl get_param` output with several parameters and targets, cut into per-parameter text.

`lctl get_param a.*.b c.d` prints `<path>=<value>` for one-line values and `<path>=` on its own
line followed by the multi-line value (FORMATS.md 1.0). Quirk: an empty stats block is printed
on the name line (`ost.OSS.ost_seq.stats=snapshot_time ... secs.nsecs`). Each entry keeps the
line number where its value starts, so the per-format parsers report positions in the original
output. :func:`parse_value` hands an entry to the right parser by its last path component.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from iolens.errors import InputError
from iolens.parse import lustre_hist, lustre_jobstats, lustre_stats
from iolens.parse._common import DEFAULT_SOURCE, read_text

__all__ = [
    "PARSERS",
    "ParamEntry",
    "ParamPath",
    "parse_file",
    "parse_get_param",
    "parse_value",
    "split_param_path",
]

# A parameter line: a dotted name without spaces (NIDs bring '@' and ':'), then '='.
_PARAM = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_.@:\-]*)=(?P<value>.*)$")


@dataclass(frozen=True, slots=True)
class ParamPath:
    """`obdfilter.fs-OST0000.stats` -> kind `obdfilter`, target `fs-OST0000`, name `stats`.
    The target is everything between the first and last components (`OSS.ost_io` for
    `ost.OSS.ost_io.stats`, `fs-MDT0000.exports.10.0.0.1@o2ib` for export stats)."""

    kind: str
    target: str
    name: str


@dataclass(frozen=True, slots=True)
class ParamEntry:
    """One parameter: its full path, its value text, and the line the value starts on."""

    param: str
    value: str
    line: int

    @property
    def path(self) -> ParamPath:
        return split_param_path(self.param)


def split_param_path(param: str) -> ParamPath:
    """Split a parameter path into kind, target and name (see :class:`ParamPath`)."""
    parts = param.split(".")
    if len(parts) == 1:
        return ParamPath("", "", param)
    if len(parts) == 2:
        return ParamPath(parts[0], "", parts[1])
    return ParamPath(parts[0], ".".join(parts[1:-1]), parts[-1])


def parse_get_param(text: str, source: str = DEFAULT_SOURCE) -> list[ParamEntry]:
    """Cut `lctl get_param` output into entries, in order. Text before the first `name=`
    line is an error: it belongs to no parameter."""
    entries: list[ParamEntry] = []
    name: str | None = None
    start = 0
    buf: list[str] = []

    def close() -> None:
        if name is not None:
            entries.append(ParamEntry(name, "\n".join(buf), start))

    for lineno, raw in enumerate(text.splitlines(), start=1):
        m = _PARAM.match(raw)
        if m:
            close()
            name = m["name"]
            if m["value"]:
                buf, start = [m["value"]], lineno
            else:
                buf, start = [], lineno + 1
            continue
        if name is None:
            if not raw.strip():
                continue
            raise InputError(source, f"value before any 'param=' line: {raw[:80]!r}", lineno)
        buf.append(raw)
    close()
    return entries


def parse_file(path: str | Path) -> list[ParamEntry]:
    """Read and split a saved `lctl get_param` output; errors name `path`."""
    return parse_get_param(read_text(path), str(path))


Parsed = lustre_stats.LustreStats | list[lustre_jobstats.JobStats] | lustre_hist.HistogramFile

#: Parameter name -> parser for the formats this package understands.
PARSERS = {
    "stats": lustre_stats.parse_stats,
    "md_stats": lustre_stats.parse_stats,
    "job_stats": lustre_jobstats.parse_job_stats,
    "brw_stats": lustre_hist.parse_histograms,
    "rpc_stats": lustre_hist.parse_histograms,
}


def parse_value(entry: ParamEntry, source: str = DEFAULT_SOURCE) -> Parsed | None:
    """Parse an entry whose name is in :data:`PARSERS`; None for other parameters."""
    parser = PARSERS.get(entry.path.name)
    if parser is None:
        return None
    return parser(entry.value, source, first_line=entry.line)  # type: ignore[operator]
