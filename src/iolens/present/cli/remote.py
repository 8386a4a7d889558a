"""`--server URL`: ask a running `iolens serve` instead of opening the store.

DuckDB lets one process write a database file; while `iolens serve` owns it, other
processes cannot even open it. `jobs`, `job` and `series` then fetch the very JSON their
`--json` prints from the server's query API (`iolens.present.api`): the server of
`--server`, or the one announced beside the store. Every other command goes through
`forward.py` instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from iolens.errors import IolensError

ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar="IOLENS_SERVER",
        show_envvar=True,
        help="Ask this iolens server (e.g. http://iolens:8470) instead of opening --db.",
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="IOLENS_TOKEN",
        show_envvar=True,
        help="Bearer token for --server.",
    ),
]

TIMEOUT_S = 120.0  # a first listing may analyse new jobs on the server


def target(
    ctx: typer.Context, db: Path | None, server: str | None, token: str | None
) -> tuple[str | None, str | None]:
    """(server URL, token) to ask, or (None, token) to open the store.

    `--server` (typed, or `$IOLENS_SERVER` while `--db` is not typed), else the server
    announced beside the store (`iolens.present.discovery`): its query API reads on a
    cursor of its own, so these listings never wait for a long import running there.
    Without a token, the server's owner token when this account can read it."""
    from iolens.present import discovery
    from iolens.store import default_db_path

    store = Path(db) if db else default_db_path()
    if server and use_server(ctx, db, server):
        return server, token or discovery.owner_token(store)
    found = discovery.find(store)
    if found is None:
        return None, token
    return found.url, token or found.token


def use_server(ctx: typer.Context, db: Path | None, server: str | None) -> bool:
    """True when the command should ask the server.

    An option typed on the command line beats one from the environment, so `--db X` still
    works in a shell where IOLENS_SERVER is set; both typed is a mistake.
    """
    if not server:
        return False
    if db is None:
        return True
    db_typed, server_typed = (_typed(ctx, name) for name in ("db", "server"))
    if db_typed and server_typed:
        raise IolensError("give --db or --server, not both")
    return not db_typed


def _typed(ctx: typer.Context, name: str) -> bool:
    # By name: typer vendors click, so click's ParameterSource enum is not the one in use.
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "PROMPT")


def get(server: str, token: str | None, path: str, params: dict[str, Any] | None = None) -> Any:
    """GET a query endpoint and return its JSON; IolensError with the server's reason."""
    return request(server, token, "GET", path, params)


def request(
    server: str,
    token: str | None,
    method: str,
    path: str,
    params: dict[str, Any] | None = None,
    body: Any = None,
) -> Any:
    """One call to the server's API (None params are left out); its JSON answer, or
    IolensError with the server's reason."""
    import httpx

    base = server.rstrip("/")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    query = {k: v for k, v in (params or {}).items() if v is not None}
    try:
        res = httpx.request(
            method, base + path, params=query, json=body, headers=headers, timeout=TIMEOUT_S
        )
    except httpx.HTTPError as exc:
        raise IolensError(f"cannot reach iolens server at {base}: {exc}") from None
    if res.status_code < 400:
        try:
            return res.json()
        except ValueError:
            raise IolensError(f"{base} did not answer with JSON: is it an iolens server?") from None
    try:
        body = res.json()
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    detail = body.get("detail", res.text.strip()[:200])
    if not isinstance(detail, str):
        detail = json.dumps(detail)
    if res.status_code == 401:
        raise IolensError(
            f"iolens server at {base} refused the token ({detail}): set IOLENS_TOKEN to your "
            "`iolens user add` token, or run as the account that runs the server"
        )
    if res.status_code == 404 and "job_id" in body:  # an unknown job: same words as --db
        raise IolensError(detail)
    raise IolensError(f"iolens server at {base} answered HTTP {res.status_code}: {detail}")
