"""Building and running MPI programs under the tracer (Open MPI's mpicc and mpirun).

One place for what every MPI tracer test needs: the skip when MPI is not installed (CI
installs it with the cluster suite and runs these tests again after), the compile, and an
environment that preloads the tracer and lets Open MPI run as root and oversubscribe the
two cores.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

needs_mpi = pytest.mark.skipif(
    shutil.which("mpicc") is None or shutil.which("mpirun") is None,
    reason="no MPI (mpicc, mpirun)",
)


def mpicc(src: Path, out: Path, *flags: str) -> Path:
    res = subprocess.run(
        ["mpicc", "-O2", "-o", str(out), str(src), *flags], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    return out


def mpi_env(lib: Path, spool: Path, **extra: str) -> dict[str, str]:
    """This environment without iolens or preload settings, plus the tracer's and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    return env | {
        "LD_PRELOAD": str(lib),
        "IOLENS_SPOOL": str(spool),
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_rmaps_base_oversubscribe": "1",
        **extra,
    }
