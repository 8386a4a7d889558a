"""A real `iolens serve` process on loopback, for tests that kill and restart it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db: Path, port: int, token: str = "t0k") -> subprocess.Popen[bytes]:
    """Start `iolens serve` and wait until /healthz answers (30 s at most)."""
    cmd = [sys.executable, "-m", "iolens", "serve", "--db", str(db), "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "--agent-token", token],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "server did not start")
