"""Who is asking, and may they: the one authorisation layer every route goes through.

`authorize` is a FastAPI dependency that `create_app` puts on every route of the server
(ingest, the query API, the REST API, the pages, the docs and the static files), and a
test walks `app.routes` to check it stays that way. It resolves the caller:

1. `Authorization: Bearer TOKEN`: an agent token (`iolens serve --agent-token`), a
   user's API token (`iolens user add`) or the server's owner token (an admin; written
   beside the store for the account running the server, `iolens.present.discovery`);
2. the session cookie the login page or a `?token=` page link set (HMAC-signed with the
   secret of `session_secret.py`, HttpOnly, SameSite=Lax, Secure over https; bound to the
   user's current token and generation and no longer than the token lives, so
   `iolens user remove|revoke`, a new token or the token's expiry ends every session);
3. a trusted reverse-proxy header such as `X-Remote-User` (Open OnDemand, an SSO proxy),
   only when the server was told to trust it and only from the trusted proxy addresses.

A state-changing request (POST, PUT, PATCH, DELETE) without a bearer token must come from
this server's own pages: its `Origin` (or `Referer`) is the server's own origin, else 403
(`same_origin`; cross-site request forgery, login forgery included). Bearer requests
(agents, scripts) cannot be forged by a browser and are not checked.

It then applies the route's policy, decided by its path (secure by default: a route not
listed needs a logged-in user):

- public: `/login`, `/healthz`, `/metrics` (process counters, no job data), `/static/...`
- `/metrics/site` (the monitored state, `iolens.present.metrics`): admins, or a metrics
  token (`[web.metrics] token_file`), which reads that and nothing else
- ingest: `POST /api/v1/batches` needs an agent token (anyone when none is configured,
  as before the UI existed)
- `/api/v1/...` (the `--server` query API): agent tokens (as admins) and users
- `/admin...`, `/api/admin...`: admins
- everything else: any logged-in user (agent tokens are refused: they are spread over
  every node, so they ship data and answer `--server`, nothing more)

What a user may see inside a route (their own jobs; 404 for anyone else's) is decided by
`iolens.present.web.scope`, which every data route calls with the principal.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Literal
from urllib.parse import urlencode, urlsplit

from fastapi import HTTPException, Request, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from iolens.errors import InputError
from iolens.present.metrics import MetricsConfig
from iolens.present.web.accounts import Accounts, User, valid_name
from iolens.ship.transport import INGEST_PATH

COOKIE = "iolens_session"
Policy = Literal["public", "ingest", "query", "metrics", "user", "admin"]

PUBLIC_PATHS = frozenset({"/login", "/healthz", "/metrics", "/static/{path:path}"})
#: Methods that change nothing: never checked for their origin.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Site-wide state for Prometheus: operator data.
SITE_METRICS_PATH = "/metrics/site"


def policy_of(path: str, method: str = "GET") -> Policy:
    """The access rule of a route, from its path template."""
    if path in PUBLIC_PATHS:
        return "public"
    if path == INGEST_PATH:
        return "ingest"
    if path == SITE_METRICS_PATH:
        return "metrics"
    if path.startswith("/api/v1/"):
        return "query"
    if path.startswith(("/admin", "/api/admin")):
        return "admin"
    return "user"


class WebConfig(BaseModel):
    """The `[web]` table of `iolens serve --web-config FILE`."""

    model_config = ConfigDict(extra="forbid")

    trust_header: str | None = Field(
        default=None,
        description="Header a trusted reverse proxy sets to the logged-in user name "
        "(e.g. X-Remote-User); unset: not trusted.",
    )
    trusted_proxies: list[str] = Field(
        default_factory=lambda: ["127.0.0.1", "::1"],
        description="Addresses or networks (CIDR) the header is accepted from.",
    )
    admins: list[str] = Field(
        default_factory=list,
        description="Header-authenticated users who are admins (besides `iolens user add "
        "--admin` accounts).",
    )
    session_hours: float = Field(default=12.0, gt=0, description="Session cookie lifetime.")

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for p in value:
            ipaddress.ip_network(p, strict=False)  # ValueError names the bad entry
        return value

    secure_cookie: bool = Field(
        default=False, description="Send the cookie over HTTPS only (behind a TLS proxy)."
    )
    metrics: MetricsConfig = Field(
        default_factory=MetricsConfig,
        description="`[web.metrics]`: who may scrape /metrics/site, and its bounds.",
    )


class _WebFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    web: WebConfig = Field(default_factory=WebConfig)


def load_web_config(path: Path) -> WebConfig:
    from iolens.tomlconfig import load_toml

    return load_toml(path, _WebFile, "web config file").web


@dataclass(frozen=True)
class Principal:
    """The caller of a request."""

    name: str
    admin: bool
    via: str  # "token" | "session" | "header" | "agent" | "metrics" | "owner"

    @property
    def agent(self) -> bool:
        return self.via == "agent"

    @property
    def scraper(self) -> bool:
        """A metrics token: Prometheus, which reads /metrics/site and nothing else."""
        return self.via == "metrics"


class AuthError(HTTPException):
    """401/403 that knows whether to answer a page (the login form) or JSON."""

    def __init__(self, status: int, detail: str, page: bool) -> None:
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        super().__init__(status, detail, headers=headers)
        self.page = page


class LoginRedirect(Exception):
    """A page URL carried `?token=`: set the session cookie and drop the token from the URL."""

    def __init__(self, location: str, cookie: str, max_age: int) -> None:
        self.location, self.cookie, self.max_age = location, cookie, max_age


@dataclass
class Authenticator:
    """The server's view of who may log in: agent tokens, accounts, session secret, config."""

    accounts: Accounts
    secret: bytes
    agent_tokens: set[str] = field(default_factory=set)
    config: WebConfig = field(default_factory=WebConfig)
    metrics_tokens: set[str] = field(default_factory=set)
    #: `iolens serve`'s own token (`iolens.present.discovery`): its account, as an admin.
    owner_token: str | None = None
    owner_name: str = "owner"

    def __post_init__(self) -> None:
        self._proxies = [ipaddress.ip_network(p, strict=False) for p in self.config.trusted_proxies]

    # -- sessions -------------------------------------------------------------------------
    def session_cookie(self, user: User) -> str:
        """`v2.NAME64.KEYID.GENERATION.EXPIRY.HMAC`: ends after `session_hours`, or with the
        token it was issued for (its expiry, a revoke or a new token)."""
        exp = time.time() + self.config.session_hours * 3600
        if user.expires is not None:
            exp = min(exp, user.expires.replace(tzinfo=UTC).timestamp())
        name = base64.urlsafe_b64encode(user.name.encode()).decode().rstrip("=")
        body = f"v2.{name}.{user.key_id}.{user.generation}.{int(exp)}"
        return f"{body}.{self._sign(body)}"

    def cookie_secure(self, request: Request) -> bool:
        """Send the cookie over https only: when configured, or when served over https."""
        return self.config.secure_cookie or request.url.scheme == "https"

    def _sign(self, body: str) -> str:
        return hmac.new(self.secret, body.encode(), hashlib.sha256).hexdigest()

    def from_cookie(self, value: str | None) -> User | None:
        if not value or not value.isascii():  # a session cookie is ASCII; else forged
            return None
        body, _, sig = value.rpartition(".")
        if not body or not hmac.compare_digest(sig, self._sign(body)):
            return None
        try:
            version, name64, kid, generation, exp = body.split(".")
            name = base64.urlsafe_b64decode(name64 + "=" * (-len(name64) % 4)).decode()
            if version != "v2" or int(exp) < time.time():
                return None
            gen = int(generation)
        except ValueError:
            return None
        user = self.accounts.by_key(kid)
        if user is None or user.name != name or user.generation != gen or not user.active():
            return None  # another account's key, revoked, re-keyed or expired since
        return user

    # -- the caller -----------------------------------------------------------------------
    def bearer(self, request: Request) -> str | None:
        auth = request.headers.get("authorization") or ""
        scheme, _, value = auth.partition(" ")
        value = value.strip()
        # tokens are ASCII; anything else is no token (compare_digest refuses non-ASCII str)
        return value if scheme.lower() == "bearer" and value and value.isascii() else None

    def is_agent_token(self, token: str) -> bool:
        return any(secrets.compare_digest(token, t) for t in self.agent_tokens)

    def _proxy_trusted(self, request: Request) -> bool:
        host = request.client.host if request.client else None
        try:
            addr = ipaddress.ip_address(host or "")
        except ValueError:
            return False
        return any(addr in net for net in self._proxies)

    def resolve(self, request: Request) -> Principal | None:
        """The caller, or None; a bad bearer token is None too (never a fallback)."""
        token = self.bearer(request)
        if token is not None:
            if self.is_agent_token(token):
                return Principal("agent", True, "agent")
            if any(secrets.compare_digest(token, t) for t in self.metrics_tokens):
                return Principal("metrics", False, "metrics")
            if self.owner_token and secrets.compare_digest(token, self.owner_token):
                return Principal(self.owner_name, True, "owner")
            user = self.accounts.verify(token)
            return Principal(user.name, user.admin, "token") if user else None
        header = self.config.trust_header
        if header and request.headers.get(header) and self._proxy_trusted(request):
            name = request.headers[header].strip()
            try:
                valid_name(name)
            except Exception:
                return None
            account = self.accounts.user(name)
            admin = name in self.config.admins or bool(account and account.admin)
            return Principal(name, admin, "header")
        user = self.from_cookie(request.cookies.get(COOKIE))
        return Principal(user.name, user.admin, "session") if user else None


def is_page(path: str) -> bool:
    """Pages answer HTML (the login form on 401); the rest answer JSON."""
    return not path.startswith(("/api/", "/openapi.json", "/healthz", "/metrics", "/static/"))


def authorize(request: Request) -> Principal | None:
    """The single gate of every route: resolve the caller and apply the route's policy.

    Stores the principal in `request.state.principal` for the route (None only on public
    routes and on the ingest route of a server without agent tokens).
    """
    auth: Authenticator = request.app.state.auth
    route = request.scope.get("route")
    template = getattr(route, "path", request.url.path)
    policy = policy_of(template, request.method)
    page = is_page(template)
    same_origin(auth, request, template, page)
    if page and request.method == "GET" and "token" in request.query_params:
        _token_login(auth, request)  # raises: a redirect, or 401
    principal = auth.resolve(request)
    request.state.principal = principal
    if policy == "public":
        return principal
    if policy == "ingest":
        if not auth.agent_tokens or (principal is not None and principal.agent):
            return principal
        raise AuthError(401, "missing or unknown agent token", page=False)
    if principal is None:
        raise AuthError(401, "log in: a bearer token, a session or ?token=", page=page)
    if policy == "metrics":
        if principal.scraper or (principal.admin and not principal.agent):
            return principal
        raise AuthError(403, "site metrics: an admin or a metrics token", page=page)
    if principal.scraper:
        raise AuthError(403, "metrics tokens only read /metrics/site", page=page)
    if principal.agent and policy != "query":
        raise AuthError(403, "agent tokens only ship data and answer --server", page=page)
    if policy == "admin" and not principal.admin:
        raise AuthError(403, "administrators only", page=page)
    return principal


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a URL or an Origin header; None for `null` or garbage."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


def own_origins(auth: Authenticator, request: Request) -> set[tuple[str, str, int]]:
    """The server's origin as the browser sees it: the Host header with the request's
    scheme (https too with `secure_cookie`, behind a TLS proxy), and the
    `X-Forwarded-Host`/`-Proto` a trusted proxy (`trusted_proxies`) sets when it rewrites
    the Host header."""
    hosts = {request.headers.get("host") or ""}
    schemes = {request.url.scheme} | ({"https"} if auth.config.secure_cookie else set())
    if auth._proxy_trusted(request):
        if forwarded := request.headers.get("x-forwarded-host"):
            hosts.add(forwarded.split(",")[0].strip())
        if proto := request.headers.get("x-forwarded-proto"):
            schemes.add(proto.split(",")[0].strip().lower())
    found = (_origin(f"{s}://{h}") for s in schemes for h in hosts)
    return {o for o in found if o is not None}


def same_origin(auth: Authenticator, request: Request, template: str, page: bool) -> None:
    """403 for a state-changing request a page of another origin may have sent (CSRF).

    Bearer requests are exempt (a browser cannot add the header cross-origin). Without
    `Origin` (every current browser sends it on POST) the `Referer` is checked; with
    neither, only a request without browser credentials passes (a script, a tokenless
    agent): not one carrying the session cookie or the trusted proxy header, nor a login."""
    if request.method in SAFE_METHODS or auth.bearer(request) is not None:
        return
    claimed = request.headers.get("origin")
    what = "Origin"
    if claimed is None:
        claimed, what = request.headers.get("referer"), "Referer"
    if claimed is None:
        header = auth.config.trust_header
        ambient = COOKIE in request.cookies or bool(header and request.headers.get(header))
        if ambient or template == "/login":
            raise AuthError(403, "refused: a browser request without Origin or Referer", page)
        return
    if _origin(claimed) not in own_origins(auth, request):
        shown = claimed if len(claimed) <= 100 else claimed[:100] + "..."
        raise AuthError(
            403, f"cross-origin request refused: {what} {shown!r} is not this server", page
        )


def load_token_file(path: Path | None) -> set[str]:
    """Tokens of a token file, one per line (`#` comments); InputError if it has none."""
    if path is None:
        return set()
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise InputError(str(path), f"metrics token file: {exc.strerror}") from None
    tokens = {t.strip() for t in lines if t.strip() and not t.lstrip().startswith("#")}
    if not tokens:
        raise InputError(str(path), "no token in the metrics token file")
    return tokens


def _token_login(auth: Authenticator, request: Request) -> None:
    token = request.query_params["token"]
    user = auth.accounts.verify(token)
    if user is None:
        raise AuthError(401, "unknown or expired token", page=True)
    rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
    location = safe_next(request.url.path + (f"?{urlencode(rest)}" if rest else ""))
    max_age = int(auth.config.session_hours * 3600)
    raise LoginRedirect(location, auth.session_cookie(user), max_age)


def safe_next(target: str | None) -> str:
    """A post-login redirect target on this server only (no `//host` or scheme)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def set_session(resp: Response, cookie: str, max_age: int, secure: bool) -> None:
    """Send the session cookie (`Authenticator.session_cookie`) with `resp`.

    SameSite=Lax, not Strict: Strict would drop the cookie on the redirect of a `?token=`
    link followed from mail or chat (a cross-site navigation), and neither stops a page on
    another port of the same host (the same site): the Origin check (`same_origin`) does.
    Lax still keeps it off cross-site POSTs, frames and subresources."""
    resp.set_cookie(
        COOKIE, cookie, max_age=max_age, httponly=True, samesite="lax", secure=secure, path="/"
    )
