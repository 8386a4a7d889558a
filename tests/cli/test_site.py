"""`iolens site slurm-files`: the Slurm integration files a site installs (issue 9)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from iolens.tracefile import decode_dir
from tests.conftest import run_cli
from tests.tracer.conftest import needs_cc, tracer_lib  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
SPANK_H = Path("/usr/include/slurm/spank.h")


def test_packaged_hook_is_the_scripts_one():
    packaged = ROOT / "src" / "iolens" / "site" / "slurm" / "slurm-hook.sh"
    assert packaged.read_text() == (ROOT / "scripts" / "slurm-hook.sh").read_text()


def test_slurm_files_are_written_filled_in(tmp_path):
    lib = tmp_path / "libiolens.so"
    lib.write_bytes(b"\x7fELF")
    res = run_cli(
        "site", "slurm-files", str(tmp_path / "site"), "--lib", str(lib),
        "--spool", "/var/spool/x", "--server", "http://srv:8470", "--token", "sekret",
        "--no-build", "--json",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    d = Path(out["dir"])
    assert out["spank_built"] is False and out["spank_not_built_because"] == "--no-build"
    assert set(out["files"]) == {
        "iolens_spank.c", "plugstack.conf", "taskprolog.sh", "iolens-slurm-hook", "hook.env",
        "slurm.conf.iolens", "iolens-seff-epilog", "iolens_seff_epilog.py", "epilog.env",
    }  # fmt: skip
    assert (d / "plugstack.conf").read_text().split() == [
        "optional", str(d / "iolens_spank.so"), f"lib={lib}", "spool=/var/spool/x"
    ]  # fmt: skip
    env = (d / "hook.env").read_text()
    assert "IOLENS_SERVER=http://srv:8470" in env and "IOLENS_TOKEN=sekret" in env
    assert (d / "hook.env").stat().st_mode & 0o077 == 0  # the token stays private
    assert str(d / "hook.env") in (d / "iolens-slurm-hook").read_text()
    conf = (d / "slurm.conf.iolens").read_text()
    assert f"PlugStackConfig={d / 'plugstack.conf'}" in conf
    assert f"PrologSlurmctld={d / 'iolens-slurm-hook'}" in conf
    assert f"SrunEpilog={d / 'iolens-seff-epilog'}" in conf
    # the epilog runs as the user: its settings are readable and hold no token
    epilog_env = (d / "epilog.env").read_text()
    assert epilog_env == "IOLENS_SERVER=http://srv:8470\n" and "sekret" not in epilog_env
    assert (d / "epilog.env").stat().st_mode & 0o004


def test_the_written_seff_epilog_reads_its_own_settings(tmp_path):
    """The installed epilog finds the server in the epilog.env written beside it (a dead
    port here: it says so on stderr when asked, prints nothing and exits 0)."""
    from tests.loopback import free_port

    lib = tmp_path / "libiolens.so"
    lib.write_bytes(b"\x7fELF")
    server = f"http://127.0.0.1:{free_port()}"
    res = run_cli(
        "site", "slurm-files", str(tmp_path / "site"), "--lib", str(lib), "--server", server,
        "--no-build",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "7", "IOLENS_EPILOG_VERBOSE": "1"}
    hook = subprocess.run(
        [str(tmp_path / "site" / "iolens-seff-epilog"), "srun"],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert hook.returncode == 0 and hook.stdout == ""
    assert f"server {server} not reachable" in hook.stderr


def test_taskprolog_preloads_once_and_honours_the_opt_out(tmp_path):
    lib = tmp_path / "libiolens.so"
    lib.write_bytes(b"\x7fELF")
    res = run_cli("site", "slurm-files", str(tmp_path), "--lib", str(lib), "--no-build")
    assert res.returncode == 0, res.stderr
    script = str(tmp_path / "taskprolog.sh")

    def prolog(**env: str) -> list[str]:
        base = {"PATH": os.environ["PATH"], **env}
        return subprocess.run(
            ["sh", script], env=base, capture_output=True, text=True, check=True
        ).stdout.splitlines()

    spool = "/var/spool/iolens/traces"
    assert prolog() == [f"export LD_PRELOAD={lib}", f"export IOLENS_SPOOL={spool}"]
    assert prolog(LD_PRELOAD="/x.so") == [
        f"export LD_PRELOAD={lib}:/x.so", f"export IOLENS_SPOOL={spool}"
    ]  # fmt: skip
    assert prolog(LD_PRELOAD=f"/x.so:{lib}", IOLENS_SPOOL="/mine") == []
    assert prolog(IOLENS_DISABLE="1") == []


@pytest.mark.skipif(
    not SPANK_H.exists() or shutil.which("cc") is None, reason="no <slurm/spank.h> or cc"
)
def test_spank_plugin_builds_warning_free(tmp_path):
    src = ROOT / "src" / "iolens" / "site" / "slurm" / "iolens_spank.c"
    res = subprocess.run(
        ["cc", "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o",
         str(tmp_path / "p.so"), str(src)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    syms = subprocess.run(
        ["nm", "-D", "--defined-only", str(tmp_path / "p.so")], capture_output=True, text=True
    ).stdout
    assert "slurm_spank_init" in syms and "slurm_spank_task_init" in syms


def test_site_topology_sample_load_and_show(tmp_path):
    """`--sample` prints a file that loads; `--show --json` reports what is stored; a bad
    file is one `error:` line naming the file and key, and creates no store."""
    sample = run_cli("site", "topology", "--sample")
    assert sample.returncode == 0 and "[[forwarders]]" in sample.stdout
    site = tmp_path / "site.toml"
    site.write_text(sample.stdout)
    db = str(tmp_path / "s.duckdb")
    res = run_cli("site", "topology", str(site), "--db", db, "--show", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["loaded"]["forwarding"] == 1024 and out["loaded"]["components"]["oss"] == 2
    assert out["stored"]["forwarding"] == 1024
    assert {f["component_id"]: f["nodes"] for f in out["stored"]["forwarders"]} == {
        "fwd01": 512,
        "fwd02": 512,
    }
    human = run_cli("site", "topology", "--db", db, "--show")
    assert human.returncode == 0 and "fwd01" in human.stdout and "oss01" in human.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[[forwarders]]\nname = "f"\nnodes = "c1"\npeak_bw = "fast"\n')
    res = run_cli("site", "topology", str(bad), "--db", str(tmp_path / "new.duckdb"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip() == f"error: {bad}: forwarders[0] (f).peak_bw: not a rate: 'fast'"
    assert not (tmp_path / "new.duckdb").exists()


@needs_cc
def test_the_seff_epilog_stays_out_of_the_jobs_io(tmp_path, tracer_lib):  # noqa: F811
    """srun's environment preloads the tracer, and an epilog's Python start-up is about a
    thousand stats and opens: the wrapper turns the tracer off for it. Against the same
    interpreter run as the epilog used to be (python3 on the file, traced)."""
    from tests.loopback import free_port

    lib = tmp_path / "libiolens.so"
    lib.write_bytes(b"\x7fELF")
    site = tmp_path / "site"
    res = run_cli(
        "site", "slurm-files", str(site), "--lib", str(lib),
        "--server", f"http://127.0.0.1:{free_port()}", "--no-build",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr

    def traced_calls(cmd: list[str], spool: Path) -> int:
        spool.mkdir()
        env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "7", "LD_PRELOAD": str(tracer_lib),
               "IOLENS_SPOOL": str(spool), "IOLENS_JOB_ID": "7"}  # fmt: skip
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout == "", done.stderr
        return sum(t.client_io.num_rows for t in decode_dir(spool))

    wrapped = traced_calls([str(site / "iolens-seff-epilog"), "srun"], tmp_path / "a")
    bare = traced_calls(["python3", str(site / "iolens_seff_epilog.py"), "srun"], tmp_path / "b")
    assert bare > 100 and wrapped <= 10, (bare, wrapped)
