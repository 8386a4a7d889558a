"""How the CLI finds the `iolens serve` that owns a store, and proves it may use it.

DuckDB lets one process hold a database file. While `iolens serve` holds it, it writes two
files beside the store and removes them when it stops cleanly:

- `STORE.server` (mode 644): `{"url", "pid", "host", "store", "started"}`, so any command
  given that store finds the server without flags;
- `STORE.server-token` (mode 600): a random token, new at each start, that the server
  accepts as an administrator. Only the account running the server (and root) can read it,
  so its owner's commands (imports, `user add`, re-analysis) work without `--token`.
  The cookie-signing secret is another file (`STORE.secret`, `web/session_secret.py`);
  this token is a different secret that lives only as long as the server.

A file whose server is gone (dead pid on this host, or no answer on `/healthz`) is stale
and ignored: a crash leaves it behind, the next `iolens serve` overwrites it.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path

SERVER_SUFFIX = ".server"
TOKEN_SUFFIX = ".server-token"
HEALTH_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Server:
    """A running server for a store: where to ask, and the owner's token when readable."""

    url: str
    pid: int | None = None
    store: str | None = None
    token: str | None = None


def server_file(store: Path) -> Path:
    return Path(f"{store}{SERVER_SUFFIX}")


def token_file(store: Path) -> Path:
    return Path(f"{store}{TOKEN_SUFFIX}")


def connect_url(host: str, port: int) -> str:
    """The URL clients use: a wildcard address is reached on loopback from this host."""
    if host in ("0.0.0.0", "", "*"):
        host = "127.0.0.1"
    elif host in ("::", "[::]"):
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def new_token() -> str:
    return f"iolsrv_{secrets.token_urlsafe(32)}"


def announce(store: Path, url: str, token: str) -> None:
    """Write both files for a server of this process."""
    info = {
        "url": url,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "store": str(store),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _write(token_file(store), token + "\n", 0o600)
    _write(server_file(store), json.dumps(info, indent=1) + "\n", 0o644)


def withdraw(store: Path) -> None:
    """Remove the files, if they are still this process's (a clean stop)."""
    info = _read_info(store)
    if info is not None and info.get("pid") not in (None, os.getpid()):
        return
    for path in (server_file(store), token_file(store)):
        path.unlink(missing_ok=True)


def find(store: Path) -> Server | None:
    """The live server announced beside `store`, or None (none, or stale)."""
    info = _read_info(store)
    if info is None or not isinstance(info.get("url"), str):
        return None
    pid = info.get("pid") if isinstance(info.get("pid"), int) else None
    if pid is not None and info.get("host") == socket.gethostname() and not _alive(pid):
        return None
    if not healthy(info["url"]):
        return None
    return Server(info["url"], pid, str(info.get("store") or store), owner_token(store))


def owner_token(store: Path) -> str | None:
    """The server's owner token when this account can read it."""
    try:
        return token_file(store).read_text().strip() or None
    except OSError:
        return None


def healthy(url: str) -> bool:
    import httpx

    try:
        res = httpx.get(url.rstrip("/") + "/healthz", timeout=HEALTH_TIMEOUT_S)
    except httpx.HTTPError:
        return False
    return res.status_code == 200


def stale_url(store: Path) -> str | None:
    """The URL of an announced server that does not answer (for the locked-store message)."""
    info = _read_info(store)
    return info.get("url") if info is not None and isinstance(info.get("url"), str) else None


def _read_info(store: Path) -> dict[str, object] | None:
    try:
        info = json.loads(server_file(store).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another account's process: alive
        return True
    return True


def _write(path: Path, text: str, mode: int) -> None:
    """Atomically, created with its final mode (a token is never world-readable)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
