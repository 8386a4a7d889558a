"""The node-side commands run without the analysis stack (the `iolens[agent]` install).

Each command runs in a fresh interpreter where importing any server-only package raises
ImportError, even lazily inside a function: a command that needs one fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iolens.collect.sources import source_names
from iolens.present.cli.entry import SERVER_ONLY, command

ROOT = Path(__file__).resolve().parents[1]
NODE = ROOT / "tests" / "cases" / "collect" / "node" / "debian12-vm"
#: Never imported by the node commands (besides SERVER_ONLY): the web and plotting stack.
HEAVY = (
    *SERVER_ONLY,
    "httpx",
    "scipy",
    "pywt",
    "jinja2",
    "uvicorn",
    "darshan",
    "prometheus_client",
)

RUNNER = """
import importlib.abc, json, sys
HEAVY = set(json.loads(sys.argv[1]))

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
            raise ModuleNotFoundError(f"no module {name} (light install)", name=name)
        return None

sys.meta_path.insert(0, Block())
sys.argv = ["iolens", *sys.argv[2:]]
from iolens.present.cli.entry import main
try:
    main()
finally:
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
    print("LOADED=" + json.dumps(loaded), file=sys.stderr)
"""


def run_light(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(HEAVY), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


def loaded(res: subprocess.CompletedProcess[str]) -> list[str]:
    line = next(x for x in res.stderr.splitlines() if x.startswith("LOADED="))
    return list(json.loads(line.removeprefix("LOADED=")))


def test_agent_round_runs_light_with_every_source(tmp_path):
    spool = tmp_path / "spool"
    res = run_light("agent", "--once", "--json", "--root", str(NODE), "--spool", str(spool))
    assert res.returncode == 0, res.stderr
    assert loaded(res) == []
    assert json.loads(res.stdout)["pending"] == 1  # no server: the batch waits in the spool
    assert len(list((spool / "outbox").glob("*.iolb"))) == 1


def test_config_and_hook_run_light(tmp_path):
    res = run_light("config", "sample")
    assert res.returncode == 0 and loaded(res) == []
    assert all(f"[sources.{s}]" in res.stdout for s in source_names())
    res = run_light("config", "show")
    assert res.returncode == 0 and loaded(res) == []
    assert json.loads(res.stdout)["agent"]["spool"] == "/var/spool/iolens"
    env = {"SLURM_JOB_ID": "77", "SLURM_JOB_USER": "ann", "SLURM_JOB_NODELIST": "n[1-2]"}
    res = run_light("hook", "slurm", "epilog", "--spool", str(tmp_path / "hook"), env=env)
    assert res.returncode == 0 and loaded(res) == []
    assert "kept in" in res.stderr
    assert len(list((tmp_path / "hook").glob("*.iolb"))) == 1


def test_server_commands_say_which_install_they_need():
    res = run_light("jobs")
    assert res.returncode == 2
    assert "pip install 'iolens[server]'" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    "argv,expected",
    [(["--help"], None), (["agent", "--once"], "agent"), (["hook", "slurm"], "hook")],
)
def test_command_is_the_first_word(argv, expected):
    assert command(argv) == expected
