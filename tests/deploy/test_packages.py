"""`python -m build` makes an sdist and a wheel a site can deploy: the wheel carries the
compiled tracer, installs light (`iolens[agent]`) or full (`iolens[server]`) in a fresh
venv, and traces from either. Needs a C compiler and PyPI (or a pip cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER_ONLY = ("duckdb", "pyarrow", "numpy", "pandas", "sklearn", "matplotlib", "fastapi")

pytestmark = pytest.mark.slow


#: The installed package, never this checkout's sources.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def sh(*cmd: str | Path, **kw: object) -> subprocess.CompletedProcess[str]:
    kw.setdefault("env", CLEAN_ENV)
    kw.setdefault("cwd", "/")
    res = subprocess.run(  # type: ignore[call-overload]
        [str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw
    )
    assert res.returncode == 0, f"{cmd}: {res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    return res


def venv(path: Path, *install: str | Path) -> Path:
    base = getattr(sys, "_base_executable", sys.executable)
    sh(base, "-m", "venv", path)
    sh(path / "bin" / "python", "-m", "pip", "install", "-q", *install)
    return path / "bin"


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("dist")
    tools = venv(tmp / "tools", "build")
    sh(tools / "python", "-m", "build", "--sdist", "--wheel", "--outdir", tmp / "out", ROOT)
    (sdist,) = (tmp / "out").glob("iolens-*.tar.gz")
    (wheel,) = (tmp / "out").glob("iolens-*.whl")
    return {"sdist": sdist, "wheel": wheel, "tmp": tmp}


def test_sdist_carries_the_tracer_sources_and_deploy_files(dist):
    with tarfile.open(dist["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"setup.py", "pyproject.toml", "tracer/Makefile"} <= names
    assert any(n.startswith("tracer/src/") and n.endswith(".c") for n in names)
    assert any(n.startswith("tracer/include/") and n.endswith(".h") for n in names)
    assert {"deploy/systemd/iolens-agent.service", "deploy/spack/py-iolens/package.py"} <= names
    assert not any("__pycache__" in n or n.endswith(".so") for n in names)


def test_wheel_carries_the_compiled_tracer(dist):
    wheel = dist["wheel"]
    assert wheel.name.endswith(f"-linux_{os.uname().machine}.whl")  # a binary wheel
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        lib = z.read("iolens/_lib/libiolens.so")
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert lib[:4] == b"\x7fELF"
    assert {
        "iolens/site/slurm/iolens_spank.c",
        "iolens/present/web/static/vendor/uplot/LICENSE",
    } <= names
    assert "Provides-Extra: agent" in meta and "Provides-Extra: server" in meta
    base = [
        line
        for line in meta.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    assert sorted(line.split()[1].split(">")[0] for line in base) == ["pydantic", "rich", "typer"]


def test_agent_install_traces_and_ships_without_the_analysis_stack(dist, tmp_path):
    bin_ = venv(tmp_path / "agent", f"{dist['wheel']}[agent]")
    py = bin_ / "python"
    probe = "import importlib.util as u, json; print(json.dumps([m for m in %r if u.find_spec(m)]))"
    assert json.loads(sh(py, "-c", probe % (SERVER_ONLY,)).stdout) == []
    lib = sh(
        py,
        "-c",
        "import iolens, pathlib; "
        "print(pathlib.Path(iolens.__file__).parent / '_lib' / 'libiolens.so')",
    ).stdout.strip()
    assert Path(lib).is_file()

    # A job's process under the tracer, as the SPANK plug-in starts it, writes its file...
    traces = tmp_path / "root" / "var" / "spool" / "iolens" / "traces"
    traces.mkdir(parents=True)
    env = {**CLEAN_ENV, "LD_PRELOAD": lib, "IOLENS_SPOOL": str(traces), "IOLENS_JOB_ID": "77"}
    sh("sh", "-c", f"echo hello > {tmp_path / 'out.txt'}", env=env)
    (trace,) = traces.glob("*.iolens")
    # ...and the light agent ships it: no server here, so it waits in the outbox.
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nroot = "{tmp_path / "root"}"\nspool = "{tmp_path / "spool"}"\n')
    res = sh(bin_ / "iolens", "agent", "--config", config, "--once", "--json")
    assert json.loads(res.stdout)["pending"] == 2  # the round's batch and the trace
    assert not trace.exists()

    res = subprocess.run(
        [bin_ / "iolens", "jobs"], capture_output=True, text=True, env=CLEAN_ENV, cwd="/"
    )
    assert res.returncode == 2 and "iolens[server]" in res.stderr


def test_full_install_traces_a_command(dist, tmp_path):
    bin_ = venv(tmp_path / "full", f"{dist['wheel']}[server]")
    db = tmp_path / "t.duckdb"
    out = tmp_path / "out.txt"
    res = sh(
        bin_ / "iolens",
        "trace",
        "--db",
        db,
        "--job-id",
        "9",
        "--json",
        "--",
        "sh",
        "-c",
        f"echo hello > {out}",
    )
    assert json.loads(res.stdout)["files"] >= 1
    res = sh(bin_ / "iolens", "job", "9", "--db", db, "--json")
    assert json.loads(res.stdout)["job_id"] == "9"
