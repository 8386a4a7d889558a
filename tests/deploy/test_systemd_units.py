"""The systemd units parse cleanly, run as `iolens` with state in /var/lib/iolens, and are
hardened; checked with Debian's `systemd-analyze` (skipped where it is absent)."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

from iolens.collect.config import load_config
from iolens.collect.sources import source_names

UNITS = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
NAMES = ("iolens-server.service", "iolens-agent.service")
ANALYZE = shutil.which("systemd-analyze")
needs_systemd = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze not installed")


def unit(name: str) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    cp.read(UNITS / name)
    return cp


def staged(tmp_path: Path, extra: str = "") -> list[Path]:
    """The units with ExecStart pointing at an existing binary (verify checks it exists)."""
    out = []
    for name in NAMES:
        text = (UNITS / name).read_text().replace("/opt/iolens/bin/iolens", "/bin/true")
        (tmp_path / name).write_text(text + extra)
        out.append(tmp_path / name)
    return out


def verify(paths: list[Path]) -> subprocess.CompletedProcess[str]:
    assert ANALYZE is not None
    return subprocess.run(
        [ANALYZE, "verify", *map(str, paths)], capture_output=True, text=True, timeout=60
    )


@needs_systemd
def test_units_verify_without_a_warning(tmp_path):
    res = verify(staged(tmp_path))
    assert res.returncode == 0 and res.stderr.strip() == "", res.stderr


@needs_systemd
def test_verify_would_catch_a_mistake(tmp_path):
    res = verify(staged(tmp_path, extra="\n[Service]\nProtectSystem=sideways\n"))
    assert "protect system value" in res.stderr  # so the clean run above means something


@needs_systemd
@pytest.mark.parametrize(
    "name,limit", [("iolens-server.service", 2.5), ("iolens-agent.service", 2.5)]
)
def test_exposure_is_low(tmp_path, name, limit):
    staged(tmp_path)
    res = subprocess.run(
        [ANALYZE, "security", "--offline=yes", "--no-pager", str(tmp_path / name)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    level = float(res.stdout.split("Overall exposure level for")[1].split(":")[1].split()[0])
    assert level <= limit, res.stdout


@pytest.mark.parametrize("name", NAMES)
def test_runs_as_iolens_with_state_in_var_lib(name):
    svc = unit(name)["Service"]
    assert svc["User"] == "iolens" and svc["Group"] == "iolens"
    assert svc["StateDirectory"].split("/")[0] == "iolens"  # /var/lib/iolens[/...]
    assert svc["NoNewPrivileges"] == "yes" and svc["ProtectSystem"] == "strict"
    assert svc["ExecStart"].startswith("/opt/iolens/bin/iolens ")


def test_the_agent_unit_config_is_a_valid_agent_config():
    svc = unit("iolens-agent.service")["Service"]
    assert svc["ExecStart"].endswith("agent --config /etc/iolens/agent.toml")
    cfg = load_config(UNITS / "agent.toml", source_names())
    state = Path("/var/lib") / svc["StateDirectory"]
    assert cfg.agent.spool == state  # the outbox lives in the unit's state directory
    rw = svc["ReadWritePaths"].lstrip("-")
    assert Path(rw) == cfg.agent.trace_spool  # the one path outside it the agent writes
    assert "d /var/spool/iolens/traces 1777" in (UNITS / "iolens.tmpfiles").read_text()


def test_the_user_exists_by_sysusers():
    assert (UNITS / "iolens.sysusers").read_text().splitlines()[-1].split()[:2] == ["u", "iolens"]
