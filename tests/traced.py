"""Run a small Python program under the real tracer, writing into a given spool."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from iolens.errors import IolensError
from iolens.tracefile import library_path

# A program the tracer cannot finish: its 1 MiB record budget spills to the `.partial`
# file (random offsets), then SIGKILL, before the end of the trace is written.
KILLED = """
import os, random, signal, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o600)
r = random.Random(0)
for i in range(40000):  # random offsets: the 1 MiB budget spills to the .partial file
    os.pwrite(fd, b"x", r.randrange(1 << 20))
os.kill(os.getpid(), signal.SIGKILL)
"""


def tracer_library() -> Path:
    """The built libiolens.so, or skip the test (no C compiler at install time)."""
    try:
        return library_path()
    except IolensError as exc:
        pytest.skip(f"tracer library not built: {exc}")


def traced_python(spool: Path, code: str, *args: str, job: str) -> None:
    """`python -c code args...` with the tracer preloaded, as job `job`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env |= {"LD_PRELOAD": str(tracer_library()), "IOLENS_SPOOL": str(spool), "IOLENS_JOB_ID": job}
    subprocess.run([sys.executable, "-c", code, *args], env=env, check=True)
