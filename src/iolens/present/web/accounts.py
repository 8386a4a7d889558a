"""Built-in accounts of the web UI and REST API: users, their API tokens, the session secret.

A token is `iol_KEYID_SECRET`: the key id (8 hex digits) finds the user's row, the secret
(32 random bytes, url-safe base64) proves it. The store keeps only a salted scrypt hash of
the whole token (`scrypt$KEYID$N$R$P$SALT$DIGEST`), so a copied database file does not
give anyone a login. scrypt is deliberately slow (tens of ms), so the server remembers
tokens it has verified (by their SHA-256, in memory) instead of hashing on every request.

The secret that signs session cookies is generated once per store and kept in its `meta`
table, so cookies survive a server restart and a new database invalidates them all.
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
from datetime import UTC, datetime

import pyarrow as pa

from iolens.errors import InputError, NotFound
from iolens.model.schema import USERS
from iolens.store.base import Store

TOKEN_PREFIX = "iol_"
#: scrypt cost: 2^14 x 8 x 128 B = 16 MiB and ~40 ms per hash, OWASP's minimum for scrypt.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
SECRET_KEY = "web_session_secret"
_NAME = re.compile(r"^[A-Za-z0-9._@+-]{1,64}$")
_TOKEN = re.compile(r"^iol_([0-9a-f]{8})_([A-Za-z0-9_-]{20,})$")


@dataclass(frozen=True)
class User:
    name: str
    admin: bool
    key_id: str
    created: datetime | None

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "admin": self.admin,
            "key_id": self.key_id,
            "created": self.created,
        }


def valid_name(name: str) -> str:
    """The user name, or InputError: scheduler user names, no spaces or slashes."""
    if not _NAME.match(name or ""):
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


def list_users(store: Store) -> list[User]:
    rows = store.query(
        "SELECT name, admin, token_hash, created FROM users ORDER BY name"
    ).to_pylist()
    return [
        User(r["name"], bool(r["admin"]), _kid_of_hash(r["token_hash"]), r["created"]) for r in rows
    ]


def add_user(store: Store, name: str, admin: bool = False, replace: bool = False) -> str:
    """Create (or with `replace`, re-key) an account; returns its new API token, shown once."""
    valid_name(name)
    exists = store.query("SELECT count(*) AS n FROM users WHERE name = ?", [name]).to_pylist()
    if exists[0]["n"] and not replace:
        raise InputError("user", f"user {name} exists (--replace issues a new token)")
    kid, token = new_token()
    row = {
        "name": name,
        "admin": admin,
        "token_hash": hash_token(token, kid),
        "created": datetime.now(UTC).replace(tzinfo=None),
    }
    with store.transaction():
        store.execute("DELETE FROM users WHERE name = ?", [name])
        store.append("users", pa.Table.from_pylist([row], schema=USERS))
    return token


def remove_user(store: Store, name: str) -> None:
    n = store.query("SELECT count(*) AS n FROM users WHERE name = ?", [name]).to_pylist()[0]["n"]
    if not n:
        raise NotFound(f"no user {name} in {store.location}")
    store.execute("DELETE FROM users WHERE name = ?", [name])


def session_secret(store: Store) -> bytes:
    """The store's cookie-signing secret, created on first use."""
    rows = store.query("SELECT value FROM meta WHERE key = ?", [SECRET_KEY]).to_pylist()
    if rows:
        return bytes.fromhex(rows[0]["value"])
    secret = secrets.token_bytes(32)
    store.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", [SECRET_KEY, secret.hex()])
    rows = store.query("SELECT value FROM meta WHERE key = ?", [SECRET_KEY]).to_pylist()
    return bytes.fromhex(rows[0]["value"])


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

        sql = "SELECT name, admin, token_hash, created FROM users"
        if self._reader is not None:  # a read cursor: never waits for the writer
            with self._reader() as store:
                rows = store.query(sql).to_pylist()
        else:
            with self._lock:
                rows = self.store.query(sql).to_pylist()
        by_kid, by_name = {}, {}
        for r in rows:
            u = User(r["name"], bool(r["admin"]), _kid_of_hash(r["token_hash"]), r["created"])
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
        """The user a token belongs to, or None."""
        kid = key_id_of(token)
        if kid is None:
            return None
        self._fresh()
        entry = self._by_kid.get(kid)
        if entry is None:
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
    def add(self, name: str, admin: bool = False, replace: bool = False) -> str:
        with self._lock:
            token = add_user(self.store, name, admin, replace)
        self.reload()
        return token

    def remove(self, name: str) -> None:
        with self._lock:
            remove_user(self.store, name)
        self.reload()

    def all(self) -> list[User]:
        self._fresh()
        return sorted(self._by_name.values(), key=lambda u: u.name)
