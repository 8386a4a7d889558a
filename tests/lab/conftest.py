"""The `lab` suite: a real MooseFS file system with faults injected, run only when asked for.

    python -m pytest -m lab tests/lab -p no:xdist

It needs root, /dev/fuse, losetup and the MooseFS packages (`scripts/mfslab.sh install`).
Without `-m lab` in the command line its tests are skipped, so the default `pytest` run never
starts the lab. Knobs: IOLENS_LAB (state directory, default /tmp/iolens-mfslab-test),
IOLENS_LAB_PORT (port base, default 19619), IOLENS_LAB_ALIAS (first node alias or host
part, default 141), IOLENS_LAB_KEEP=1 (leave the lab up afterwards).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab.harness import SCRIPT, Lab, lab_missing

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    asked = "lab" in (config.option.markexpr or "")
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.lab)
            if not asked:
                item.add_marker(pytest.mark.skip(reason="the MooseFS lab suite runs with -m lab"))


def _install() -> None:
    """The MooseFS packages, when missing and apt-get can fetch them (a fresh CI machine)."""
    why = lab_missing()
    if why is None or "not installed" not in why or os.environ.get("IOLENS_LAB_NO_INSTALL") == "1":
        return
    if shutil.which("apt-get") is None:
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-q"], ["bash", str(SCRIPT), "install"]):
        subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800, check=False)


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    if os.geteuid() == 0:
        _install()
    why = lab_missing()
    if why:
        print(f"lab suite skipped: {why}")
        pytest.skip(why)
    lab = Lab(
        lab=Path(os.environ.get("IOLENS_LAB", "/tmp/iolens-mfslab-test")),
        port_base=int(os.environ.get("IOLENS_LAB_PORT", "19619")),
        alias_base=os.environ.get("IOLENS_LAB_ALIAS", "141"),
    )
    try:
        lab.up()
        yield lab
    finally:
        if os.environ.get("IOLENS_LAB_KEEP") == "1":
            lab.stop_all()
        else:
            lab.down()
