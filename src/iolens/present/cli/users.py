"""`iolens user add|list|remove`: the built-in accounts of the web UI and REST API."""

from __future__ import annotations

from typing import Annotated

import typer

from iolens.present.cli.app import DbOption, JsonOption, open_db, out
from iolens.present.cli.render import to_json

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
    as_json: JsonOption = False,
) -> None:
    """Create an account and print its API token (shown once; only a hash is stored)."""
    from iolens.present.web.accounts import add_user

    with open_db(db, create=True) as store:
        token = add_user(store, name, admin=admin, replace=replace)
    if as_json:
        print(to_json({"name": name, "admin": admin, "token": token}))
        return
    out.print(f"{'admin ' if admin else ''}user {name}: token (shown once, keep it secret)")
    print(token)


@user_app.command("list")
def list_(db: DbOption = None, as_json: JsonOption = False) -> None:
    """The accounts: name, admin, token id, created (never the tokens)."""
    from rich.table import Table

    from iolens.present.web.accounts import list_users

    with open_db(db) as store:
        users = [u.to_dict() for u in list_users(store)]
    if as_json:
        print(to_json(users))
        return
    t = Table(title=f"{len(users)} account(s)")
    for col in ("name", "admin", "token id", "created"):
        t.add_column(col)
    for u in users:
        t.add_row(u["name"], "yes" if u["admin"] else "", f"iol_{u['key_id']}_…", str(u["created"]))
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
