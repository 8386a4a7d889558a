"""`iolens alerts subscribe | unsubscribe | subscriptions`: owner alerts on your jobs.

Against a server (`--server`, or the one announced beside the store) the server decides
who you are from the token, and only admins may name another `--user`. On a store opened
directly, whoever can write the store file is its administrator: `--user` defaults to
the login name.
"""

from __future__ import annotations

import getpass
from typing import Annotated, Any

import typer

from iolens.present.cli import remote, render
from iolens.present.cli.app import DbOption, JsonOption, open_db, out
from iolens.present.cli.remote import ServerOption, TokenOption

UserOption = Annotated[
    str | None,
    typer.Option(help="Whose alerts (admins only; default: you)."),
]


def _call(server: str, token: str | None, method: str, body: Any = None, **params: Any) -> Any:
    """One request to `/api/subscriptions`; IolensError with the server's reason."""
    return remote.request(server, token, method, "/api/subscriptions", params, body)


def _channel(email: str | None, webhook: str | None) -> tuple[str, str]:
    if bool(email) == bool(webhook):
        raise typer.BadParameter("give --email or --webhook (one per call)")
    return ("email", email) if email else ("webhook", webhook)  # type: ignore[return-value]


def subscribe(
    ctx: typer.Context,
    email: Annotated[str | None, typer.Option(help="Mail alerts to this address.")] = None,
    webhook: Annotated[str | None, typer.Option(help="POST alerts (JSON) to this URL.")] = None,
    user: UserOption = None,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Get an alert when one of your jobs, running or finished, gets a finding (once per
    job, finding and channel; replaces your earlier target on that channel)."""
    from iolens.present import owner_alerts

    channel, target = _channel(email, webhook)
    server, token = remote.target(ctx, db, server, token)
    if server:
        row = _call(server, token, "POST", {"channel": channel, "target": target, "user": user})
    else:
        with open_db(db) as store:
            row = owner_alerts.subscribe(store, user or getpass.getuser(), channel, target)
    if as_json:
        print(render.to_json(row))
    else:
        out.print(f"{row['user']}: {row['channel']} alerts to {row['target']}", highlight=False)


def unsubscribe(
    ctx: typer.Context,
    channel: Annotated[str | None, typer.Option(help="email or webhook (default: both).")] = None,
    user: UserOption = None,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Stop owner alerts (on one channel, or all)."""
    from iolens.present import owner_alerts

    server, token = remote.target(ctx, db, server, token)
    if server:
        n = _call(server, token, "DELETE", channel=channel, user=user)["removed"]
    else:
        with open_db(db) as store:
            n = owner_alerts.unsubscribe(store, user or getpass.getuser(), channel)
    out.print(f"{n} subscription{'s' if n != 1 else ''} removed")


def subscriptions(
    ctx: typer.Context,
    user: UserOption = None,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List owner alert subscriptions (yours; admins: everyone's)."""
    from iolens.present import owner_alerts

    server, token = remote.target(ctx, db, server, token)
    if server:
        rows = _call(server, token, "GET", user=user)
    else:
        with open_db(db) as store:
            rows = owner_alerts.subscriptions(store, user)
    if as_json:
        print(render.to_json(rows))
        return
    for r in rows:
        out.print(f"{r['user']}\t{r['channel']}\t{r['target']}", highlight=False)


def register(alerts_app: typer.Typer) -> None:
    alerts_app.command("subscribe")(subscribe)
    alerts_app.command("unsubscribe")(unsubscribe)
    alerts_app.command("subscriptions")(subscriptions)
