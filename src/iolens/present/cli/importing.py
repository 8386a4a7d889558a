"""`iolens import lustre` and `iolens import lmt`: Lustre server data a site already keeps
(/proc and /sys captures taken from cron; LMT databases)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from iolens.present.cli.app import DbOption, JsonOption, err, open_db, out, progress
from iolens.present.cli.render import to_json

if TYPE_CHECKING:
    from iolens.collect.replay import Replay
    from iolens.model.batch import Batch

#: Batches per store transaction: one commit per folder is what makes long imports slow.
GROUP = 64


def import_lustre(
    directory: Annotated[
        Path,
        typer.Argument(help="One sub-folder per sample time, each a captured / tree."),
    ],
    db: DbOption = None,
    host: Annotated[
        str | None,
        typer.Option(
            help="The captured node's name (default: its proc/sys/kernel/hostname, "
            "else the directory's name)."
        ),
    ] = None,
    role: Annotated[
        str | None,
        typer.Option(
            help="The node's role, used as component kind: forwarder, oss, mds, compute... "
            "(default: each source's own)."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Replay captured /proc and /sys snapshots in time order, as if the agent ran then.

    Folders already imported are skipped: re-run it as new captures arrive.
    """
    from iolens.collect.replay import Replay

    replay = Replay(directory, host=host, role=role)  # bad folder names fail before the DB opens
    _load_replay(replay, directory, db, as_json)


def import_fabric(
    directory: Annotated[
        Path,
        typer.Argument(
            help="ibnetdiscover.out (`ibnetdiscover --ports`) and one sub-folder per sample "
            "time, each holding `perfquery -x` outputs (*.out)."
        ),
    ],
    db: DbOption = None,
    host: Annotated[
        str | None,
        typer.Option(help="The host that ran the tools (default: the directory's name)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Replay captured InfiniBand switch counters in time order, as the agent's `fabric`
    source would have read them (re-run as new captures arrive: loaded folders are skipped).
    """
    from iolens.collect.replay import Replay
    from iolens.collect.sources.fabric import TOPOLOGY_FILE, FabricSource
    from iolens.errors import InputError

    topology = directory / TOPOLOGY_FILE
    if directory.is_dir() and not topology.is_file():
        raise InputError(str(topology), "missing: save `ibnetdiscover --ports` output there")

    def fabric(name: str) -> FabricSource:
        return FabricSource(name, topology=topology, counters=".")

    replay = Replay(directory, host=host or directory.resolve().name, sources={"fabric": fabric})  # type: ignore[dict-item]
    _load_replay(replay, directory, db, as_json)


def _load_replay(replay: Replay, directory: Path, db: Path | None, as_json: bool) -> None:
    """Every folder's batch into the store, `GROUP` to a transaction, and a summary."""
    from iolens.ingest.load import load_many

    totals = {"folders": len(replay.samples), "batches": 0, "skipped": 0}
    rows = {"metrics": 0, "server_samples": 0}
    with open_db(db, create=True) as store, progress() as bar:
        task = bar.add_task(f"importing {directory.name}", total=len(replay.samples))
        pending: list[Batch] = []

        def flush() -> None:
            for counts in load_many(store, pending):
                totals["batches" if counts else "skipped"] += 1
                for table in rows:
                    rows[table] += counts.get(table, 0)
            bar.advance(task, len(pending))
            pending.clear()

        for _sample, batch in replay.batches():
            pending.append(batch)
            if len(pending) >= GROUP:
                flush()
        flush()
    failures = replay.failures()
    summary = {"host": replay.host, **totals, **rows, "source_failures": failures}
    if as_json:
        print(to_json(summary))
        return
    out.print(
        f"Imported {totals['batches']} of {totals['folders']} sample folder(s) as host "
        f"{replay.host} ({rows['metrics']:,} metric rows, {rows['server_samples']:,} server "
        f"samples); {totals['skipped']} already loaded."
    )
    if failures:
        err.print(
            "some sources failed (messages above): "
            + ", ".join(f"{name} in {n} folder(s)" for name, n in sorted(failures.items()))
        )


def import_lmt(
    paths: Annotated[list[Path], typer.Argument(help="LMT databases (SQLite copies).")],
    db: DbOption = None,
    tz: Annotated[
        str | None,
        typer.Option(
            "--tz", help="Zone LMT wrote its times in: IANA name or UTC [default: this machine's]."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Load LMT databases as OST, MDT, OSS and MDS samples (a database loaded before adds
    nothing); the zoom-in weather factors of Darshan jobs then come from them."""
    from iolens.analyze.darshan.rediagnose import rediagnose, stale_weather
    from iolens.ingest.importers.lmt import lmt_batch
    from iolens.ingest.importers.sacct import timezone
    from iolens.ingest.load import load_many

    zone = timezone(tz)
    batches = [lmt_batch(p, zone) for p in paths]  # a bad database fails before the DB opens
    rows = {"components": 0, "server_samples": 0, "metrics": 0}
    with open_db(db, create=True) as store:
        counts = load_many(store, batches)
        span = _span([b for b, c in zip(batches, counts, strict=True) if c])
        redone = rediagnose(store, stale_weather(store, *span)) if span else 0
    for c in counts:
        for table in rows:
            rows[table] += c.get(table, 0)
    summary = {
        "databases": len(paths),
        "skipped": sum(1 for c in counts if not c),
        **rows,
        "darshan_jobs_rediagnosed": redone,
    }
    if as_json:
        print(to_json(summary))
        return
    out.print(
        f"Imported {len(paths) - summary['skipped']} of {len(paths)} LMT database(s) "
        f"({rows['server_samples']:,} server samples, {rows['metrics']:,} metric rows, "
        f"{rows['components']} components); {summary['skipped']} already loaded."
        + (f" Diagnosed {redone} Darshan job(s) again with this weather." if redone else "")
    )


def _span(batches: list[Batch]) -> tuple[datetime, datetime] | None:
    """First and last time stamp of the batches' server samples and metrics."""
    import pyarrow.compute as pc

    stamps = [
        pc.min_max(t.column("ts"))
        for b in batches
        for name, t in b.tables().items()
        if name in ("server_samples", "metrics") and t.num_rows
    ]
    if not stamps:
        return None
    return min(s["min"].as_py() for s in stamps), max(s["max"].as_py() for s in stamps)
