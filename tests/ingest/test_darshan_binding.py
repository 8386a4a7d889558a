"""libdarshan-util's cached binding (`ingest.darshan_binding`): the same library, types and
counter names as PyDarshan's, without PyDarshan's header parse in later processes; a cache
that cannot be trusted or read costs only the speed-up.

Each case runs in a fresh interpreter (the binding is loaded once per process) with its
own cache directory, and reads a real log end to end."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: A real log PyDarshan ships (found without importing PyDarshan into the test process)
_SPEC = importlib.util.find_spec("darshan")
LOG = Path(_SPEC.origin if _SPEC and _SPEC.origin else "/nonexistent").parent / (
    "examples/example_logs/example.darshan"
)

#: Run in the child: what the binding gives, what PyDarshan's gives, and what was imported.
PROBE = """
import json, sys
from iolens.ingest.darshan_binding import binding
from iolens.ingest.darshan_reader import read_log
b = binding()
mods = ["POSIX", "MPI-IO", "STDIO", "H5F", "H5D", "PNETCDF_FILE", "PNETCDF_VAR", "LUSTRE",
        "DFS", "DAOS", "BGQ", "APMPI", "APXC"]
ours = {m: [b.counter_names(m), b.counter_names(m, True)] for m in mods}
parsed_header = "pycparser" in sys.modules or "darshan.backend.cffi_backend" in sys.modules
job = read_log(sys.argv[1]) if len(sys.argv) > 1 else None
import darshan.backend.cffi_backend as cb
theirs = {m: [cb.counter_names(m) or [], cb.counter_names(m, True) or []] for m in mods}
print(json.dumps({
    "parsed_header": parsed_header,
    "same_names": ours == theirs,
    "posix_names": len(ours["POSIX"][0]),
    "same_structs": b.structdefs == dict(cb._structdefs),
    "same_version": b.lib_version() == cb.get_lib_version(),
    "posix_bytes": None if job is None else int(job.counters("POSIX")["POSIX_BYTES_WRITTEN"].sum()),
}))
"""


def _probe(cache: Path, log: Path | None = LOG) -> dict:
    env = {**os.environ, "IOLENS_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT / "src")}
    args = [sys.executable, "-c", PROBE] + ([str(log)] if log else [])
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _files(cache: Path) -> list[Path]:
    d = cache / "darshan-ffi"
    return sorted(d.iterdir()) if d.is_dir() else []


needs_log = pytest.mark.skipif(not LOG.is_file(), reason=f"{LOG} not present")


@needs_log
def test_the_first_process_writes_the_binding_and_the_next_loads_it_without_a_parse(
    tmp_path: Path,
) -> None:
    first = _probe(tmp_path)
    assert first["parsed_header"]  # nothing cached yet: PyDarshan's binding, then written
    written = _files(tmp_path)
    assert [p.suffix for p in written] == [".json", ".py"]
    assert all(p.stat().st_mode & 0o077 == 0 for p in written)  # the user's alone
    again = _probe(tmp_path)
    assert not again["parsed_header"]
    # the same library, types and names as PyDarshan's: the log reads the same
    for got in (first, again):
        assert got["same_names"] and got["same_structs"] and got["same_version"]
        assert got["posix_names"] > 50
    assert again["posix_bytes"] == first["posix_bytes"] > 0


@needs_log
def test_a_cache_others_can_write_is_not_executed(tmp_path: Path) -> None:
    _probe(tmp_path, None)
    module = next(p for p in _files(tmp_path) if p.suffix == ".py")
    module.write_text("raise SystemExit('executed an untrusted cache')\n")
    module.chmod(0o666)
    got = _probe(tmp_path)
    assert got["parsed_header"] and got["same_names"] and got["posix_bytes"] > 0


@needs_log
def test_a_damaged_cache_is_replaced_and_an_unwritable_one_costs_only_time(
    tmp_path: Path,
) -> None:
    _probe(tmp_path, None)
    meta = next(p for p in _files(tmp_path) if p.suffix == ".json")
    meta.write_text("{not json")
    assert _probe(tmp_path)["parsed_header"]  # could not load it: PyDarshan's, rewritten
    assert json.loads(meta.read_text())["library"]
    assert not _probe(tmp_path)["parsed_header"]

    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    got = _probe(blocked)  # the cache cannot even be created
    assert got["parsed_header"] and got["same_names"] and got["posix_bytes"] > 0
