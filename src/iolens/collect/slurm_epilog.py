#!/usr/bin/env python3
"""The `iolens seff` line at the end of a user's job step: a Slurm SrunEpilog.

A plain Epilog's output reaches no user, so the line comes from the epilog that runs as
the user with the step's output: SrunEpilog, on the node that ran `srun`, after each job
step; its stdout is srun's, so in a batch job the job's output file. (A TaskEpilog also
runs as the user, but slurmstepd discards its output: only a TaskProlog's `print` lines
reach the task's output. Seen on the mini cluster, Slurm 22.05: tests/cluster.) It asks
the iolens server for the job's seff line (`GET /api/v1/jobs/ID/seff?format=line`) with a
short timeout and prints it; when the server is slow, down, refuses the token or has no
data for the job it prints nothing (`IOLENS_EPILOG_VERBOSE=1`: one `iolens: ...` note on
stderr) and exits 0: an epilog must never fail the job or hold it up.

Standard library only and no iolens import beyond this file: it starts in ~50 ms with
the system's python3, on every step of every job. Run it with the tracer off (`IOLENS_DISABLE=1`,
as the wrapper `iolens site slurm-files` writes does): srun's environment preloads the
tracer, and the interpreter's start-up is not the job's I/O.

Settings (environment, or `KEY=VALUE` lines of IOLENS_EPILOG_ENV, default
/etc/iolens/epilog.env: world-readable, so no secret in it):
  IOLENS_SERVER   the server's URL, e.g. http://iolens.example.org:8470
  IOLENS_TOKEN    the user's own token (`iolens user add NAME`), else the first line of
                  IOLENS_TOKEN_FILE (default ~/.config/iolens/token)
  IOLENS_EPILOG_TIMEOUT  seconds for the whole request (default 3)
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path

DEFAULT_ENV = "/etc/iolens/epilog.env"
DEFAULT_TIMEOUT = 3.0
MODES = ("srun",)


def settings(env: Mapping[str, str]) -> dict[str, str]:
    """The environment over the settings file's `KEY=VALUE` lines (a missing file: none)."""
    out: dict[str, str] = {}
    try:
        text = Path(env.get("IOLENS_EPILOG_ENV") or DEFAULT_ENV).read_text()
    except OSError:
        text = ""
    for raw in text.splitlines():
        key, eq, value = raw.strip().partition("=")
        if eq and key and not key.startswith("#"):
            out[key.strip()] = value.strip().strip("'\"")
    out.update({k: v for k, v in env.items() if k.startswith(("IOLENS_", "SLURM_", "HOME"))})
    return out


def mode_of(env: Mapping[str, str], arg: str | None = None) -> str | None:
    """srun: the argument, else Slurm's SLURM_SCRIPT_CONTEXT (epilog_srun); None for a
    context this is not meant for (a task epilog's output goes nowhere)."""
    if arg in MODES:
        return arg
    ctx = env.get("SLURM_SCRIPT_CONTEXT", "")
    return next((m for m in MODES if ctx == f"epilog_{m}"), None)


def token(s: Mapping[str, str]) -> str | None:
    if s.get("IOLENS_TOKEN"):
        return s["IOLENS_TOKEN"]
    default = Path(s.get("HOME") or Path.home()) / ".config" / "iolens" / "token"
    try:
        lines = Path(s.get("IOLENS_TOKEN_FILE") or default).read_text().split()
    except OSError:
        return None
    return lines[0] if lines else None


def fetch_line(s: Mapping[str, str]) -> tuple[str | None, str]:
    """(the line, or None; why not, for the verbose note)."""
    job, server = s.get("SLURM_JOB_ID", "").strip(), s.get("IOLENS_SERVER", "").strip()
    if not job or not server:
        return None, "no SLURM_JOB_ID or no IOLENS_SERVER"
    try:
        timeout = float(s.get("IOLENS_EPILOG_TIMEOUT") or DEFAULT_TIMEOUT)
    except ValueError:
        timeout = DEFAULT_TIMEOUT
    q = urllib.parse.quote(job, safe="")
    url = f"{server.rstrip('/')}/api/v1/jobs/{q}/seff?format=line"
    req = urllib.request.Request(url, headers={"Accept": "text/plain"})
    tok = token(s)
    if tok:
        req.add_header("Authorization", f"Bearer {tok}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            if resp.status != 200:
                return None, f"no I/O data for job {job} yet"
            body = resp.read(4096).decode("utf-8", "replace").strip()
    except urllib.error.HTTPError as exc:
        return None, f"server answered {exc.code} for job {job}"
    except (OSError, ValueError) as exc:  # refused, unreachable, timed out, bad URL
        return None, f"server {server} not reachable ({exc})"
    first = body.splitlines()[0] if body else ""
    return (first or None), "empty answer"


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Print the line; always 0."""
    try:
        args = sys.argv[1:] if argv is None else argv
        s = settings(os.environ if env is None else env)
        mode = mode_of(s, args[0] if args else None)
        if mode is None:
            return 0
        text, why = fetch_line(s)
        if text is None:
            if s.get("IOLENS_EPILOG_VERBOSE") == "1":
                print(f"iolens: no I/O summary: {why}", file=sys.stderr)
            return 0
        print(text, flush=True)
    except Exception as exc:  # never fail the job, whatever went wrong here
        if (env or os.environ).get("IOLENS_EPILOG_VERBOSE") == "1":
            print(f"iolens: no I/O summary: {json.dumps(str(exc))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
