"""`iolens serve`: the ingest server (and, later, the API and web UI)."""

from __future__ import annotations

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
) -> None:
    """Run the ingest server: agents ship batches to it; /healthz and /metrics describe it."""
    import uvicorn

    from iolens.ingest.http import create_app

    store = open_db(db, create=True)
    tokens = [t for t in (agent_token or []) if t]
    if not tokens and host not in ("127.0.0.1", "localhost", "::1"):
        err.print("warning: no --agent-token: anyone who can reach this port can send data")
    try:
        uvicorn.run(
            create_app(store, tokens),
            host=host,
            port=port,
            log_level="warning",
            loop="uvloop",
            http="httptools",
        )
    finally:
        store.close()
