"""`/api/subscriptions`: owner alerts, for yourself (admins: for anyone, with `user=`).

Reads go through a reader cursor; a change takes the ingest writer's lock for the one
statement, as every write of the server does (`scheduling.py`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from iolens.errors import IolensError
from iolens.present import owner_alerts
from iolens.present.cli.render import to_json
from iolens.present.web.auth import Principal


class Subscription(BaseModel):
    channel: str = Field(description="email or webhook")
    target: str = Field(description="The address, or the URL to POST each alert to")
    user: str | None = Field(None, description="Admins only: subscribe this user")


def _json(obj: object, status: int = 200) -> Response:
    return Response(to_json(obj), media_type="application/json", status_code=status)


def _for_whom(who: Principal, user: str | None) -> str | None:
    """The user the caller acts for; None when a non-admin names someone else."""
    if user in (None, who.name):
        return who.name
    return user if who.admin else None


def router(web: Any) -> APIRouter:
    r = APIRouter(prefix="/api", tags=["api"])

    def me(request: Request) -> Principal:
        who = request.state.principal
        assert who is not None  # authorize() refused anonymous callers
        return who

    @r.get("/subscriptions")
    def list_subscriptions(request: Request, user: str | None = None) -> Response:
        """Your alert subscriptions (admins: everyone's, or `user`'s)."""
        who = me(request)
        if who.admin and user is None:
            name = None
        elif (name := _for_whom(who, user)) is None:
            return _json({"detail": "only administrators see other users' subscriptions"}, 403)
        with web.readers.reader() as store:
            return _json(owner_alerts.subscriptions(store, name))

    @r.post("/subscriptions")
    def add_subscription(request: Request, body: Subscription) -> Response:
        """Alert me (or, for admins, `user`) on `channel` when my jobs get a finding."""
        name = _for_whom(me(request), body.user)
        if name is None:
            return _json({"detail": "only administrators subscribe other users"}, 403)
        try:
            owner_alerts.validate(body.channel, body.target)
        except IolensError as exc:
            return _json({"detail": str(exc)}, 422)
        with web.service.lock:
            row = owner_alerts.subscribe(web.service.store, name, body.channel, body.target)
        return _json(row, 201)

    @r.delete("/subscriptions")
    def remove_subscription(
        request: Request, channel: str | None = None, user: str | None = None
    ) -> Response:
        """Stop alerts on `channel` (all channels without it)."""
        name = _for_whom(me(request), user)
        if name is None:
            return _json({"detail": "only administrators unsubscribe other users"}, 403)
        with web.service.lock:
            n = owner_alerts.unsubscribe(web.service.store, name, channel)
        return _json({"user": name, "channel": channel, "removed": n})

    return r
