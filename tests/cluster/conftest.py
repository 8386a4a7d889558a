"""The `cluster` suite: a real Slurm mini cluster, run only when asked for.

    python -m pytest -m cluster tests/cluster -p no:xdist

It needs root (daemons, users, a blkio cgroup) and the Debian packages of
`scripts/minicluster.sh install` (installed here when missing and apt-get works). Without
`-m cluster` in the command line its tests are skipped, so the default `pytest` run never
starts a cluster. Knobs: IOLENS_MC (state directory, default /tmp/iolens-mc-test),
IOLENS_MC_PORT (server port, default 28470), IOLENS_MC_NO_INSTALL=1 (never apt-get).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster, missing_packages

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    asked = "cluster" in (config.option.markexpr or "")
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cluster)
            if not asked:
                item.add_marker(
                    pytest.mark.skip(reason="the Slurm cluster suite runs with -m cluster")
                )


def _ensure_packages(timings: dict[str, float]) -> None:
    missing = missing_packages()
    if not missing:
        timings["install_s"] = 0.0
        return
    if os.environ.get("IOLENS_MC_NO_INSTALL") == "1" or shutil.which("apt-get") is None:
        pytest.skip(f"missing {', '.join(missing)} and not installing them")
    t0 = time.monotonic()
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (
        ["apt-get", "update", "-q"],
        ["bash", str(HERE.parents[1] / "scripts" / "minicluster.sh"), "install"],
    ):
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
        if res.returncode != 0:
            pytest.skip(f"apt packages unavailable ({' '.join(cmd)}): {res.stderr[-500:]}")
    timings["install_s"] = round(time.monotonic() - t0, 1)
    still = missing_packages()
    if still:
        pytest.skip(f"still missing after install: {', '.join(still)}")


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    if os.geteuid() != 0:
        pytest.skip("the Slurm cluster suite needs root (daemons, users, cgroups)")
    timings: dict[str, float] = {}
    _ensure_packages(timings)
    mc = Cluster(
        mc=Path(os.environ.get("IOLENS_MC", "/tmp/iolens-mc-test")),
        port=int(os.environ.get("IOLENS_MC_PORT", "28470")),
        token="mc-" + secrets.token_hex(12),
        timings=timings,
    )
    try:
        mc.start()
        yield mc
    finally:
        mc.stop()
