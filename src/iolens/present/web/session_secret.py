"""The secret that signs session cookies: outside the store, readable by the server only.

Whoever holds it can forge a session for any account, admins included, so it must not
travel with the store file (a read-only copy, a backup or a file shared for debugging;
issue 19 forged an admin session from a 0644 copy). It comes from, in this order:

1. `$IOLENS_SESSION_SECRET` (at least 32 characters), for sites that keep secrets in a
   vault or a systemd credential;
2. `STORE.secret` beside the store: 32 random bytes (hex) created with `O_EXCL` and mode
   0600 on first start. One readable by group or others, or not a regular file (a
   symlink), is refused with an error naming it, never used.

Stores from before kept the secret in their `meta` table: `forget_legacy` deletes it on
the first start, so an old copy of the file no longer helps and the sessions it signed end.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from iolens.errors import InputError
from iolens.store.base import Store

ENV = "IOLENS_SESSION_SECRET"
SUFFIX = ".secret"
MIN_LENGTH = 32
#: Where stores before issue 19 kept it (`meta` table).
LEGACY_KEY = "web_session_secret"


def secret_file(location: str) -> Path:
    """`STORE.secret`, beside the store file (or dataset directory)."""
    return Path(f"{location}{SUFFIX}")


def session_secret(store: Store) -> bytes:
    """The cookie-signing secret for this store's server; InputError naming what is wrong."""
    from_env = os.environ.get(ENV)
    if from_env is not None:
        if len(from_env.strip()) < MIN_LENGTH:
            raise InputError(ENV, f"the session secret needs at least {MIN_LENGTH} characters")
        return from_env.strip().encode()
    return _from_file(secret_file(store.location))


def _from_file(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return _read(path)
    except OSError as exc:
        raise InputError(str(path), f"cannot create the session secret: {exc.strerror}") from None
    value = secrets.token_hex(32)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, (value + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return value.encode()


def _read(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:  # ELOOP: a symlink
        raise InputError(str(path), f"cannot read the session secret: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(str(path), "the session secret is not a regular file")
        if st.st_mode & 0o077:
            raise InputError(
                str(path),
                f"the session secret is readable by others (mode {stat.S_IMODE(st.st_mode):04o}); "
                "chmod 600 it, or delete it to have a new one made (every session ends)",
            )
        value = os.read(fd, 4096).decode(errors="replace").strip()
    finally:
        os.close(fd)
    if len(value) < MIN_LENGTH:
        raise InputError(
            str(path),
            f"the session secret is shorter than {MIN_LENGTH} characters; delete it to have a "
            "new one made",
        )
    return value.encode()


def forget_legacy(store: Store) -> bool:
    """Delete a secret an older iolens kept in the store; True if there was one."""
    rows = store.query("SELECT count(*) AS n FROM meta WHERE key = ?", [LEGACY_KEY]).to_pylist()
    if not rows[0]["n"]:
        return False
    store.execute("DELETE FROM meta WHERE key = ?", [LEGACY_KEY])
    return True
