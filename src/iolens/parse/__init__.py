"""Pure parsers: text (or a read-only SQLite file) -> typed, frozen records.

Nothing here touches the live system; sources in `iolens.collect` read files under `--root`
and hand the text to these functions. Every parser takes `source` (the name errors use) and
raises :class:`iolens.errors.InputError` naming the source and line on malformed input.

Modules (one per format family; see `../shared/data/FORMATS.md`):

- :mod:`.lustre_stats`    `*.stats`, `md_stats`, `ost.OSS.*` / `mds.MDS.*` service stats,
                          osc/mdc/llite/exports stats -> :class:`LustreStats`
- :mod:`.lustre_jobstats` `obdfilter.*.job_stats`, `mdt.*.job_stats` (old and 2.14+)
                          -> list of :class:`JobStats`
- :mod:`.lustre_hist`     `brw_stats`, `osc/mdc.*.rpc_stats` histograms -> :class:`HistogramFile`
- :mod:`.lctl`            multi-target `lctl get_param` output -> :class:`ParamEntry` per parameter,
                          and dispatch of each entry to the parsers above
- :mod:`.iofwd`           forwarder-daemon statistics (`docs/forwarder-format.md`)
                          -> :class:`ForwarderStats`, and `render` back to text
- :mod:`.infiniband`      sysfs port counters, `perfquery -x` / `-E`, `ibnetdiscover --ports`
- :mod:`.slurm`           `sacct --parsable2`/`--parsable` rows, hostlist expansion, durations
- :mod:`.lmt`             LMT SQLite databases (OST/OSS/MDS data, MDS ops) and OST bandwidth
- :mod:`.rates`           counter sets -> per-second rates across resets and 64-bit wrap
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = [
    "infiniband",
    "iofwd",
    "lctl",
    "lmt",
    "lustre_hist",
    "lustre_jobstats",
    "lustre_stats",
    "rates",
    "slurm",
]


def __getattr__(name: str) -> ModuleType:
    """Each parser is imported when first used: a command needs one or two of them."""
    if name in __all__:
        return importlib.import_module(f"iolens.parse.{name}")
    raise AttributeError(f"module 'iolens.parse' has no attribute {name!r}")
