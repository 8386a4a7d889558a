"""`iolens user add|token|revoke|list|remove`: the built-in accounts of the web UI and REST
API. Tokens expire (`--days`, 90 by default); `revoke` ends a token and its sessions."""

from __future__ import annotations

from typing import Annotated

import typer

from iolens.present.cli.app import DbOption, JsonOption, open_db, out
from iolens.present.cli.render import to_json
from iolens.present.web.accounts import DEFAULT_TOKEN_DAYS, MAX_TOKEN_DAYS

DaysOption = Annotated[
    int,
    typer.Option(
        "--days",
        min=1,
        max=MAX_TOKEN_DAYS,
        help="Days the token works; then it is refused (401) until a new one is issued.",
    ),
]

user_app = typer.Typer(
    help="Accounts of the web UI and REST API (a user sees only their own jobs).",
    no_args_is_help=True,
)


@user_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The user's scheduler user name (jobs.user).")],
    db: DbOption = None,
    admin: Annotated[bool, typer.Option("--admin", help="May see every job and server.")] = False,
    replace: Annotated[
        bool, typer.Option("--replace", help="Issue a new token for an existing user.")
    ] = False,
    days: DaysOption = DEFAULT_TOKEN_DAYS,
    as_json: JsonOption = False,
) -> None:
    """Create an account and print its API token (shown once; only a hash is stored)."""
    from iolens.present.web.accounts import add_user

    with open_db(db, create=True) as store:
        token = add_user(store, name, admin=admin, replace=replace, days=days)
    _show_token(name, admin, token, days, as_json)


@user_app.command("token")
def token_(
    name: Annotated[str, typer.Argument(help="An existing account.")],
    db: DbOption = None,
    days: DaysOption = DEFAULT_TOKEN_DAYS,
    as_json: JsonOption = False,
) -> None:
    """Issue a new token for an account (after expiry or a revoke); the old token and every
    session end. Printed once."""
    from iolens.present.web.accounts import issue_token, list_users

    with open_db(db) as store:
        token = issue_token(store, name, days=days)
        admin = next(u.admin for u in list_users(store) if u.name == name)
    _show_token(name, admin, token, days, as_json)


def _show_token(name: str, admin: bool, token: str, days: int, as_json: bool) -> None:
    if as_json:
        print(to_json({"name": name, "admin": admin, "token": token, "days": days}))
        return
    out.print(
        f"{'admin ' if admin else ''}user {name}: token for {days} days "
        "(shown once, keep it secret)"
    )
    print(token)


@user_app.command("revoke")
def revoke(
    name: Annotated[str, typer.Argument(help="The account whose token and sessions end.")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """End an account's token and every session it opened, at once; the account stays
    (`iolens user token NAME` gives it a new token)."""
    from iolens.present.web.accounts import revoke_user

    with open_db(db) as store:
        user = revoke_user(store, name)
    if as_json:
        print(to_json(user.to_dict()))
        return
    out.print(f"revoked user {name}: its token and sessions no longer work")


@user_app.command("list")
def list_(db: DbOption = None, as_json: JsonOption = False) -> None:
    """The accounts: name, admin, token id, created, expires, revoked (never the tokens)."""
    from rich.table import Table

    from iolens.present.web.accounts import list_users

    with open_db(db) as store:
        users = [u.to_dict() for u in list_users(store)]
    if as_json:
        print(to_json(users))
        return
    t = Table(title=f"{len(users)} account(s)")
    for col in ("name", "admin", "token id", "created", "expires", "revoked"):
        t.add_column(col)
    for u in users:
        t.add_row(
            u["name"],
            "yes" if u["admin"] else "",
            f"iol_{u['key_id']}_…",
            str(u["created"]),
            str(u["expires"]),
            str(u["revoked"] or ""),
        )
    out.print(t)


@user_app.command("remove")
def remove(
    name: Annotated[str, typer.Argument(help="The account to remove.")],
    db: DbOption = None,
) -> None:
    """Remove an account: its token and its sessions stop working."""
    from iolens.present.web.accounts import remove_user

    with open_db(db) as store:
        remove_user(store, name)
    out.print(f"removed user {name}")
