"""`iolens serve`: the ingest server and the query API (and, later, the web UI)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from iolens.present.cli.app import DbOption, err, open_db


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
    alerts_config: Annotated[
        Path | None,
        typer.Option(help="TOML file of mail and webhook alerts (see `iolens alerts check`)."),
    ] = None,
) -> None:
    """Run the server: agents ship batches to it, `--server` queries read from it; /healthz
    and /metrics describe it. Ended jobs and components are analysed in the background."""
    import uvicorn

    from iolens.present.alerts import load_alerts_config
    from iolens.present.api import create_app
    from iolens.present.scheduling import start_for_service

    alerts = load_alerts_config(alerts_config) if alerts_config else None
    store = open_db(db, create=True)
    tokens = [t for t in (agent_token or []) if t]
    if not tokens and host not in ("127.0.0.1", "localhost", "::1"):
        err.print("warning: no --agent-token: anyone who can reach this port can send data")
    app = create_app(store, tokens)
    timetable = {"analyze_every": analyze_every, "components_every": components_every}
    scheduler = start_for_service(app.state.ingest, **timetable, alerts=alerts)
    try:
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level="warning",
            loop="uvloop",
            http="httptools",
        )
    finally:
        scheduler.stop()
        store.close()
