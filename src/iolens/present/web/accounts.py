"""Built-in accounts of the web UI and REST API: users and their API tokens.

A token is `iol_KEYID_SECRET`: the key id (8 hex digits) finds the user's row, the secret
(32 random bytes, url-safe base64) proves it. The store keeps only a salted scrypt hash of
the whole token (`scrypt$KEYID$N$R$P$SALT$DIGEST`), so a copied database file does not
give anyone a login. scrypt is deliberately slow (tens of ms), so the server remembers
tokens it has verified (by their SHA-256, in memory) instead of hashing on every request.

A token expires (`expires`, 90 days by default; a token from before expiry existed ends
90 days after it was created) and can be revoked (`revoked`): either ends the account's
login until a new token is issued. Sessions carry the account's `generation`, which a
revoke or a new token bumps, so every session issued before ends with it (issue 19).
The secret that signs session cookies lives outside the store (`session_secret.py`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from iolens.errors import InputError, NotFound
from iolens.model.owner import USER_NAME
from iolens.model.schema import USERS
from iolens.store.base import Store

TOKEN_PREFIX = "iol_"
#: scrypt cost: 2^14 x 8 x 128 B = 16 MiB and ~40 ms per hash, OWASP's minimum for scrypt.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
#: How long a new token lives unless told otherwise, and the longest one may live.
DEFAULT_TOKEN_DAYS = 90
MAX_TOKEN_DAYS = 3650
_TOKEN = re.compile(r"^iol_([0-9a-f]{8})_([A-Za-z0-9_-]{20,})$")


def utcnow() -> datetime:
    """Now, as the store keeps times: naive UTC."""
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class User:
    name: str
    admin: bool
    key_id: str
    created: datetime | None
    expires: datetime | None = None  # None: already expired (no creation time either)
    revoked: datetime | None = None
    generation: int = 0

    def active(self, now: datetime | None = None) -> bool:
        """May this account's token (and its sessions) log in now?"""
        now = now or utcnow()
        return self.revoked is None and self.expires is not None and now < self.expires

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "admin": self.admin,
            "key_id": self.key_id,
            "created": self.created,
            "expires": self.expires,
            "revoked": self.revoked,
            "active": self.active(),
        }


def _user(row: dict[str, Any]) -> User:
    """A `users` row as a User; a token from before expiry existed ends 90 days after its
    creation (never: a token without a creation time has expired)."""
    created, expires = row["created"], row.get("expires")
    if expires is None and created is not None:
        expires = created + timedelta(days=DEFAULT_TOKEN_DAYS)
    return User(
        row["name"],
        bool(row["admin"]),
        _kid_of_hash(row["token_hash"]),
        created,
        expires,
        row.get("revoked"),
        int(row.get("generation") or 0),
    )


def valid_days(days: int) -> int:
    """A token lifetime in days, or InputError."""
    if not 1 <= days <= MAX_TOKEN_DAYS:
        raise InputError("days", f"a token lives 1 to {MAX_TOKEN_DAYS} days, not {days}")
    return days


def valid_name(name: str) -> str:
    """The user name, or InputError: scheduler user names, no spaces or slashes."""
    if not USER_NAME.match(name or ""):
        raise InputError("user", f"{name!r} is not a valid user name (letters, digits, ._@+-)")
    return name


def hash_token(token: str, key_id: str, salt: bytes | None = None) -> str:
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.scrypt(
        token.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, maxmem=64 * 2**20
    )
    return f"scrypt${key_id}${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${salt.hex()}${digest.hex()}"


def check_hash(token: str, stored: str) -> bool:
    try:
        scheme, _kid, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        got = hashlib.scrypt(
            token.encode(),
            salt=bytes.fromhex(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            maxmem=64 * 2**20,
        )
    except ValueError:
        return False
    return hmac.compare_digest(got.hex(), digest)


def key_id_of(token: str) -> str | None:
    m = _TOKEN.match(token or "")
    return m.group(1) if m else None


def new_token() -> tuple[str, str]:
    """(key id, token)."""
    kid = secrets.token_hex(4)
    return kid, f"{TOKEN_PREFIX}{kid}_{secrets.token_urlsafe(32)}"


def _kid_of_hash(stored: str) -> str:
    parts = stored.split("$")
    return parts[1] if len(parts) == 7 else ""


_COLUMNS = "name, admin, token_hash, created, expires, revoked, generation"


def list_users(store: Store) -> list[User]:
    rows = store.query(f"SELECT {_COLUMNS} FROM users ORDER BY name").to_pylist()
    return [_user(r) for r in rows]


def _existing(store: Store, name: str) -> User | None:
    rows = store.query(f"SELECT {_COLUMNS} FROM users WHERE name = ?", [name]).to_pylist()
    return _user(rows[0]) if rows else None


def _write_token(store: Store, name: str, admin: bool, days: int, old: User | None) -> str:
    """A new token for `name` (replacing its row): its sessions and old token end."""
    kid, token = new_token()
    now = utcnow()
    row = {
        "name": name,
        "admin": admin,
        "token_hash": hash_token(token, kid),
        "created": now,
        "expires": now + timedelta(days=valid_days(days)),
        "revoked": None,
        "generation": (old.generation + 1) if old else 0,
    }
    with store.transaction():
        store.execute("DELETE FROM users WHERE name = ?", [name])
        store.append("users", pa.Table.from_pylist([row], schema=USERS))
    return token


def add_user(
    store: Store,
    name: str,
    admin: bool = False,
    replace: bool = False,
    days: int = DEFAULT_TOKEN_DAYS,
) -> str:
    """Create (or with `replace`, re-key) an account; returns its new API token, shown once."""
    valid_name(name)
    valid_days(days)
    old = _existing(store, name)
    if old is not None and not replace:
        raise InputError("user", f"user {name} exists (--replace issues a new token)")
    return _write_token(store, name, admin, days, old)


def issue_token(store: Store, name: str, days: int = DEFAULT_TOKEN_DAYS) -> str:
    """A new token for an existing account (admin flag kept); NotFound for an unknown one."""
    valid_days(days)
    old = _existing(store, name)
    if old is None:
        raise NotFound(f"no user {name} in {store.location}")
    return _write_token(store, name, old.admin, days, old)


def revoke_user(store: Store, name: str) -> User:
    """End the account's token and every session issued to it; NotFound if unknown.

    The account stays (`issue_token` gives it a new token)."""
    old = _existing(store, name)
    if old is None:
        raise NotFound(f"no user {name} in {store.location}")
    store.execute(
        "UPDATE users SET revoked = ?, generation = coalesce(generation, 0) + 1 WHERE name = ?",
        [utcnow(), name],
    )
    user = _existing(store, name)
    assert user is not None
    return user


def remove_user(store: Store, name: str) -> None:
    n = store.query("SELECT count(*) AS n FROM users WHERE name = ?", [name]).to_pylist()[0]["n"]
    if not n:
        raise NotFound(f"no user {name} in {store.location}")
    store.execute("DELETE FROM users WHERE name = ?", [name])


class Accounts:
    """The users of one store, in memory: tokens are checked without a query or a re-hash.

    Reloaded from the store whenever the server changes an account, and otherwise every
    `RELOAD_S` seconds (an offline `iolens user add` before a restart is seen at start).
    """

    RELOAD_S = 30.0

    def __init__(
        self,
        store: Store,
        lock: threading.Lock | None = None,
        reader: Callable[[], AbstractContextManager[Store]] | None = None,
    ) -> None:
        self.store = store
        self._lock = lock or threading.Lock()
        self._reader = reader
        self._mine = threading.Lock()
        self._by_kid: dict[str, tuple[User, str]] = {}
        self._by_name: dict[str, User] = {}
        self._verified: dict[str, str] = {}  # sha256(token) -> key id
        self._loaded = 0.0
        self.reload()

    def reload(self) -> None:
        import time

        sql = f"SELECT {_COLUMNS} FROM users"
        if self._reader is not None:  # a read cursor: never waits for the writer
            with self._reader() as store:
                rows = store.query(sql).to_pylist()
        else:
            with self._lock:
                rows = self.store.query(sql).to_pylist()
        by_kid, by_name = {}, {}
        for r in rows:
            u = _user(r)
            by_kid[u.key_id] = (u, r["token_hash"])
            by_name[u.name] = u
        with self._mine:
            self._by_kid, self._by_name = by_kid, by_name
            self._verified = {h: k for h, k in self._verified.items() if k in by_kid}
            self._loaded = time.monotonic()

    def _fresh(self) -> None:
        import time

        if time.monotonic() - self._loaded > self.RELOAD_S:
            self.reload()

    def user(self, name: str) -> User | None:
        self._fresh()
        return self._by_name.get(name)

    def by_key(self, key_id: str) -> User | None:
        self._fresh()
        entry = self._by_kid.get(key_id)
        return entry[0] if entry else None

    def verify(self, token: str) -> User | None:
        """The user a token belongs to, or None (unknown, wrong, expired or revoked)."""
        kid = key_id_of(token)
        if kid is None:
            return None
        self._fresh()
        entry = self._by_kid.get(kid)
        if entry is None or not entry[0].active():
            return None
        fingerprint = hashlib.sha256(token.encode()).hexdigest()
        if self._verified.get(fingerprint) == kid:
            return entry[0]
        if not check_hash(token, entry[1]):
            return None
        with self._mine:
            if len(self._verified) > 10_000:
                self._verified.clear()
            self._verified[fingerprint] = kid
        return entry[0]

    # Changes made through the server (the admin API) reload at once.
    def add(
        self, name: str, admin: bool = False, replace: bool = False, days: int = DEFAULT_TOKEN_DAYS
    ) -> str:
        with self._lock:
            token = add_user(self.store, name, admin, replace, days)
        self.reload()
        return token

    def issue(self, name: str, days: int = DEFAULT_TOKEN_DAYS) -> str:
        with self._lock:
            token = issue_token(self.store, name, days)
        self.reload()
        return token

    def revoke(self, name: str) -> User:
        with self._lock:
            user = revoke_user(self.store, name)
        self.reload()
        return user

    def remove(self, name: str) -> None:
        with self._lock:
            remove_user(self.store, name)
        self.reload()

    def all(self) -> list[User]:
        self._fresh()
        return sorted(self._by_name.values(), key=lambda u: u.name)
