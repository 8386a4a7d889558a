"""`iolens import sacct` and `iolens hook slurm`: what the scheduler knows about jobs.

sacct output is the scheduler's full record, imported after the fact; the prolog/epilog
hook reports a job live as it starts and ends. Both give the jobs table the user, nodes and
times that tie client and server I/O to a job.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import uuid
from pathlib import Path
from typing import Annotated

import typer

from iolens.present.cli.app import DbOption, JsonOption, open_db, out
from iolens.present.cli.render import to_json

hook_app = typer.Typer(
    help="Hooks schedulers run as jobs start and end (they never fail the job).",
    no_args_is_help=True,
)

HOOK_TIMEOUT_S = 2.0


def import_sacct(
    file: Annotated[Path, typer.Argument(help="Saved `sacct --parsable2` (or --parsable) output.")],
    db: DbOption = None,
    tz: Annotated[
        str | None,
        typer.Option(
            "--tz", help="Zone sacct printed times in: IANA name or UTC [default: this machine's]."
        ),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="For `sacct --noheader` output: the --format fields sacct was given, in order.",
        ),
    ] = None,
    delimiter: Annotated[str, typer.Option(help="Field delimiter (sacct --delimiter).")] = "|",
    server: Annotated[
        str | None,
        typer.Option(help="Send to this iolens server (while `iolens serve` owns the store)."),
    ] = None,
    token: Annotated[
        str | None, typer.Option(envvar="IOLENS_TOKEN", help="Agent token for --server.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Load Slurm accounting into the jobs table (a file already loaded adds nothing)."""
    from iolens.ingest.importers import sacct
    from iolens.ingest.load import load

    # sacct's --format allows widths (`JobName%30`); they do not change --parsable output.
    fields = (
        [re.sub(r"%-?\d+$", "", f.strip()) for f in fmt.split(",") if f.strip()] if fmt else None
    )
    batch, rows = sacct.batch_of_file(file, tz=tz, fields=fields, delimiter=delimiter)
    jobs = batch.jobs.num_rows if batch.jobs is not None else 0
    if server:
        from iolens.ship import wire
        from iolens.ship.transport import HttpTransport

        transport = HttpTransport(server, token)
        try:
            answer = transport.send(wire.encode(batch))
        finally:
            transport.close()
        rows_in = answer.get("rows")
        counts = (
            {str(k): int(v) for k, v in rows_in.items()}
            if isinstance(rows_in, dict) and not answer.get("duplicate")
            else {}
        )
    else:
        with open_db(db, create=True) as store:
            counts = load(store, batch)
    summary = {
        "file": str(file),
        "rows": rows,
        "jobs": jobs,
        "loaded": counts.get("jobs", 0),
        "duplicate": not counts,
    }
    if as_json:
        print(to_json(summary))
    elif not counts:
        out.print(f"{file} was imported before (same content and --tz): nothing added.")
    else:
        out.print(f"Imported {jobs} job(s) from {file} ({rows} sacct rows).")


def _say(message: str) -> None:
    print(f"iolens hook: {message}", file=sys.stderr, flush=True)


class _StoreTransport:
    """Delivery straight into a store file (`--db`): the spool's payloads loaded in-process."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.store = None

    def send(self, payload: bytes) -> dict[str, object]:
        from iolens.errors import InputError
        from iolens.ingest.load import load
        from iolens.ship import wire
        from iolens.ship.transport import Rejected, TransportError

        try:
            batch = wire.decode(payload, "spool")
        except InputError as exc:
            raise Rejected(str(exc)) from None
        try:
            if self.store is None:
                self.store = open_db(self.db, create=True)
            counts = load(self.store, batch)
        except InputError as exc:
            raise Rejected(str(exc)) from None
        except Exception as exc:  # locked by a server, disk full...: keep it for later
            raise TransportError(f"{self.db}: {exc}") from None
        return {"key": batch.key, "rows": counts, "duplicate": not counts}

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


class _Noting:
    """A transport that remembers why the last send failed, for the hook's one-line report."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.error: str | None = None

    def send(self, payload: bytes) -> dict[str, object]:
        from iolens.errors import IolensError

        try:
            return self.inner.send(payload)  # type: ignore[attr-defined, no-any-return]
        except IolensError as exc:
            self.error = str(exc)
            raise

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def _deliver_hook(
    phase: str | None,
    server: str | None,
    token: str | None,
    db: Path | None,
    spool: Path | None,
    timeout: float,
) -> None:
    from iolens.collect.slurm_hook import PHASES, hook_batch
    from iolens.errors import IolensError
    from iolens.ship.shipper import Backoff, Shipper
    from iolens.ship.spool import DiskSpool, MemorySpool, Spool
    from iolens.ship.transport import HttpTransport, Transport, TransportError

    if phase is None or phase.lower() not in PHASES:
        _say(f"give the phase: iolens hook slurm {'|'.join(PHASES)} (got {phase!r}); ignored")
        return
    try:
        batch = hook_batch(phase.lower(), os.environ)
    except IolensError as exc:
        _say(f"{exc}; nothing reported")
        return
    what = f"job {os.environ.get('SLURM_JOB_ID', '').strip()} {phase.lower()}"
    if not server and not db and not spool:
        _say(f"{what}: no --server, --db or --spool given; nothing reported")
        return
    box: Spool = MemorySpool()
    if spool is not None:
        try:
            box = DiskSpool(spool)
        except OSError as exc:
            _say(f"cannot use spool {spool} ({exc}); delivering without one")
    transport: Transport
    if server:
        transport = HttpTransport(server, token, timeout=timeout)
        dest = server
    elif db:
        transport = _StoreTransport(db)
        dest = str(db)
    else:

        class _Offline:
            def send(self, payload: bytes) -> dict[str, object]:
                raise TransportError("no --server or --db")

        transport, dest = _Offline(), "nowhere"
    # The shipper logs each failure; the hook says it once, in its own words, below.
    logging.getLogger("iolens.ship.shipper").setLevel(logging.CRITICAL)
    noting = _Noting(transport)
    shipper = Shipper(box, noting, Backoff(base=0.0, cap=0.0))
    try:
        shipper.submit(batch)  # spooled first (when --spool): nothing lost if we die now
        shipper.deliver(now=0.0)  # oldest first: earlier hooks' leftovers go too
    finally:
        noting.close()
    failed = f"could not deliver ({noting.error})" if noting.error else f"could not reach {dest}"
    assert batch.key is not None
    mine = uuid.uuid5(uuid.NAMESPACE_URL, batch.key).hex  # how Shipper.submit names it
    pending = box.pending() + shipper.overflow.pending()  # overflow: a full disk spool
    if mine in pending:
        if dest == "nowhere":
            _say(f"{what}: no --server or --db; kept in {spool}")
        elif spool is not None and isinstance(box, DiskSpool):
            _say(f"{what}: {failed}; kept in {spool} for the next run")
        else:
            _say(f"{what}: {failed}; lost (pass --spool DIR to keep it)")
    elif shipper.stats.rejected:
        kept = f"set it aside in {box.rejected_dir}" if isinstance(box, DiskSpool) else "dropped it"
        _say(f"{what}: {dest} refused a report ({noting.error}); {kept}")
    else:
        _say(f"{what}: reported to {dest}")
    if len(pending) > (mine in pending):
        _say(f"{len(pending) - (mine in pending)} earlier batch(es) still wait in {spool}")


@hook_app.command("slurm")
def hook_slurm(
    phase: Annotated[
        str | None, typer.Argument(help="prolog or epilog (Prolog/Epilog or the Slurmctld ones).")
    ] = None,
    server: Annotated[
        str | None,
        typer.Option(envvar="IOLENS_SERVER", show_envvar=True, help="iolens server URL."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(envvar="IOLENS_TOKEN", show_envvar=True, help="Agent token for --server."),
    ] = None,
    db: DbOption = None,
    spool: Annotated[
        Path | None,
        typer.Option(
            envvar="IOLENS_HOOK_SPOOL",
            show_envvar=True,
            help="Keep undelivered reports here; the next hook run delivers them.",
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds to wait for the server.")
    ] = HOOK_TIMEOUT_S,
) -> None:
    """Report the job in Slurm's SLURM_* variables as started (prolog) or ended (epilog).

    Always exits 0, since a failing prolog or epilog drains the node: problems are told on
    stderr and, with --spool, the report waits there for the next run.
    """
    try:
        _deliver_hook(phase, server, token, db, spool, timeout)
    except BaseException as exc:  # whatever happens, the job must go on
        _say(f"unexpected {type(exc).__name__}: {exc}; nothing reported")
    raise typer.Exit(0)
