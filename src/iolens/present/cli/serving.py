"""`iolens serve`: the ingest server, the query API, the REST API and the web UI."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from iolens.errors import IolensError
from iolens.present.cli.app import DbOption, err, open_db
from iolens.present.cli.scaleout import DatasetOption, SiteOption, serve_dataset


def serve(
    db: DbOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8470,
    agent_token: Annotated[
        list[str] | None,
        typer.Option(
            "--agent-token",
            envvar="IOLENS_AGENT_TOKENS",
            help="Token agents must present (repeatable). None given: no check.",
        ),
    ] = None,
    analyze_every: Annotated[
        float, typer.Option(min=0, help="Seconds between analyses of ended jobs (0: never).")
    ] = 60.0,
    components_every: Annotated[
        float, typer.Option(min=0, help="Seconds between component analyses (0: never).")
    ] = 3600.0,
    live_every: Annotated[
        float,
        typer.Option(
            min=0, help="Re-analyse a running job with new data at most this often, s (0: never)."
        ),
    ] = 30.0,
    alerts_config: Annotated[
        Path | None,
        typer.Option(help="TOML file of mail and webhook alerts (see `iolens alerts check`)."),
    ] = None,
    web_config: Annotated[
        Path | None,
        typer.Option(help="TOML file with a [web] table: trusted proxy header, admins, cookie."),
    ] = None,
    trust_header: Annotated[
        str | None,
        typer.Option(
            help="Trust this header (e.g. X-Remote-User) from a reverse proxy on loopback as "
            "the logged-in user name. Off unless given."
        ),
    ] = None,
    dataset: DatasetOption = None,
    site: SiteOption = None,
    group: Annotated[
        str | None,
        typer.Option(help="With a dataset: ingest this agent group's batches (no queries)."),
    ] = None,
    flush_every: Annotated[
        float | None,
        typer.Option(min=0.001, max=25, help="With --group: seconds per segment commit [2]."),
    ] = None,
) -> None:
    """Run the server for agents, `--server` queries, the web UI and the REST API.

    Agents ship batches to it, people use its web UI and REST API (`iolens user add`);
    /healthz and /metrics describe it. It owns the store: it announces itself beside it
    (`STORE.server`, and `STORE.server-token` for its own account), and every other command
    given that store runs through it (docs/cli.md).
    Ended jobs and components are analysed in the background. With `--dataset` (or
    `--site-config`) the store is a Parquet dataset instead of `--db`: one server per `--group`
    ingests, one without `--group` queries and analyses (docs/scale-out.md)."""

    _check_listen(host, port)
    from iolens.present.alerts import load_alerts_config
    from iolens.present.scheduling import start_for_service
    from iolens.present.web.app import create_app
    from iolens.present.web.auth import WebConfig, load_web_config

    alerts = load_alerts_config(alerts_config) if alerts_config else None
    web = load_web_config(web_config) if web_config else WebConfig()
    if trust_header:
        web = web.model_copy(update={"trust_header": trust_header})
    tokens = [t for t in (agent_token or []) if t]
    if not tokens and host not in ("127.0.0.1", "localhost", "::1"):
        err.print("warning: no --agent-token: anyone who can reach this port can send data")
    if web.trust_header and host not in ("127.0.0.1", "localhost", "::1"):
        err.print(
            f"warning: {web.trust_header} is trusted from {', '.join(web.trusted_proxies)}: "
            "make sure only the proxy can reach this port"
        )
    timetable = {
        "analyze_every": analyze_every,
        "components_every": components_every,
        "live_every": live_every,
    }

    def run(app: object, store_path: Path | None = None, owner: str | None = None) -> None:
        _run(app, host, port, store_path, owner)

    if dataset is not None or site is not None or group is not None:
        serve_dataset(
            dataset,
            site,
            group,
            flush_every,
            tokens,
            lambda store: create_app(store, tokens, web),
            lambda service: start_for_service(service, **timetable, alerts=alerts),
            run,
        )
        return
    from iolens.present import discovery

    store = open_db(db, create=True)  # a store already served: one error line naming it
    path = Path(store.location).resolve()
    owner = discovery.new_token()
    app = create_app(store, tokens, web, owner_token=owner)
    scheduler = start_for_service(app.state.ingest, **timetable, alerts=alerts)
    try:
        run(app, path, owner)
    finally:
        scheduler.stop()
        store.close()
        discovery.withdraw(path)
        err.print(f"iolens serve: stopped; {path} is free again", highlight=False, soft_wrap=True)


def _run(app: object, host: str, port: int, store: Path | None, owner: str | None) -> None:
    """uvicorn until SIGINT/SIGTERM; once it listens, the store's server files are written
    (`iolens.present.discovery`) and one line says where it listens, what it owns and how
    to stop it."""
    import os
    import threading
    import time

    import uvicorn

    from iolens.present import discovery

    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        log_level="warning",
        loop="uvloop",
        http="httptools",
    )
    server = uvicorn.Server(config)
    done = threading.Event()
    url = discovery.connect_url(host, port)

    def announce() -> None:
        while not done.is_set() and not server.started:
            time.sleep(0.05)
        if done.is_set():
            return
        owns = "a dataset"
        if store is not None and owner is not None:
            try:
                discovery.announce(store, url, owner)
                owns = f"{store} (commands find it there: {discovery.server_file(store).name})"
            except OSError as exc:
                owns = f"{store} (not announced: {exc.strerror or exc}; set IOLENS_SERVER={url})"
        err.print(
            f"iolens serve: listening on http://{host}:{port}, owning {owns}; "
            f"stop it with Ctrl-C or `kill {os.getpid()}`",
            highlight=False,
            soft_wrap=True,
        )

    threading.Thread(target=announce, name="iolens-announce", daemon=True).start()
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then raises the signal again with the
    # handlers it found: exiting from Python (not by the default action) lets the caller
    # withdraw the server files and say that the server stopped.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _exit_cleanly)
    try:
        server.run()
    finally:
        done.set()


def _exit_cleanly(signum: int, frame: object) -> None:
    sys.exit(0)


def _check_listen(host: str, port: int) -> None:
    """Fail in one clear line before any store is opened when the address is taken:
    uvicorn would log the error, exit with status 3 and leave the store open."""
    import socket

    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            s.bind(addr)
    except OSError as exc:
        raise IolensError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
