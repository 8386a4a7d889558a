"""A real `iolens serve` on loopback, for the scheduler-hook and `--server` query tests."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

TOKEN = "t0k"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    db: Path, port: int, log: Path, *extra: str, token: str = TOKEN
) -> subprocess.Popen[bytes]:
    """Start `iolens serve` (stderr to `log`, never a pipe nobody drains) and wait for it;
    `extra` are more `serve` options."""
    cmd = [sys.executable, "-m", "iolens", "serve", "--db", str(db), "--port", str(port)]
    with open(log, "ab") as err:
        proc = subprocess.Popen(
            [*cmd, "--agent-token", token, *extra], stdout=subprocess.DEVNULL, stderr=err
        )
    deadline = time.monotonic() + 90  # a loaded 2-core CI box can take 30 s to import
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"iolens serve did not start:\n{log.read_text()}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
