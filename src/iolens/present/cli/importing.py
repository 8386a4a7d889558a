"""`iolens import lustre`: load /proc and /sys captures a site already takes from cron."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from iolens.present.cli.app import DbOption, JsonOption, err, open_db, out, progress
from iolens.present.cli.render import to_json

if TYPE_CHECKING:
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
    from iolens.ingest.load import load_many

    replay = Replay(directory, host=host, role=role)  # bad folder names fail before the DB opens
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
