"""libdarshan-util through cffi, without parsing its C header in every process.

PyDarshan's binding (`darshan.backend.cffi_backend`) hands its C declarations to cffi at
import, which parses them with pycparser: about 75 ms per process, on the path of every
`iolens darshan LOG` (a fresh process per log, as `drishti LOG` is run) and of every
importer worker. cffi can instead write the parsed declarations out once as a Python
module (its "out-of-line ABI mode": no compiler) that loads in a few milliseconds.

So the first process takes the declarations, the library's path and the record types
from PyDarshan and writes that module into the user's cache; later processes load it.
Its name carries a hash of PyDarshan's binding sources and the cffi and Python versions,
so an upgrade writes a new one. The cache is used only when the user owns it and nobody
else can write to it (it is executed); any failure falls back to PyDarshan's binding.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

#: PyDarshan's files that define the binding: what the cached module is keyed by.
_SOURCES = ("backend/cffi_backend.py", "backend/api_def_c.py", "backend/apmpi.py",
            "backend/apxc.py", "__init__.py")  # fmt: skip


@dataclass(frozen=True)
class Binding:
    """The library, its declarations, and the C type of each module's records."""

    ffi: Any
    lib: Any
    structdefs: dict[str, str]  # module -> "struct darshan_posix_file **" (PyDarshan's)

    def lib_version(self) -> str:
        return self.ffi.string(self.lib.darshan_log_get_lib_version()).decode()

    def counter_names(self, module: str, fcounters: bool = False, special: str = "") -> list[str]:
        """A module's counter names, from the library's own tables (as PyDarshan reads them);
        empty when the library has none for it."""
        mod = "MPIIO" if module == "MPI-IO" else module
        f = "f_" if fcounters else ""
        end = f"{mod.upper()}_{f.upper()}{special.upper()}NUM_INDICES"
        table = getattr(self.lib, f"{mod.lower()}_{f}{special.lower()}counter_names", None)
        names: list[str] = []
        if not table:
            return names
        while (name := self.ffi.string(table[len(names)]).decode()) != end:
            names.append(name)
        return names


@cache
def binding() -> Binding:
    """The binding, loaded once per process (forked children inherit it)."""
    try:
        key, where = _key(), cache_dir()
    except (OSError, ImportError):
        return _pydarshan()
    with contextlib.suppress(Exception):  # a cache we cannot use costs only the speed-up
        got = _load(where, key)
        if got is not None:
            return got
    made = _pydarshan()
    with contextlib.suppress(Exception):
        _write(where, key, made)
    return made


def cache_dir() -> Path:
    """Where the generated module lives: `$IOLENS_CACHE_DIR`, else the XDG cache."""
    base = os.environ.get("IOLENS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "iolens"
    )
    return Path(base) / "darshan-ffi"


def _key() -> str:
    import cffi

    spec = importlib.util.find_spec("darshan")  # finds the package without importing it
    if spec is None or spec.origin is None:
        raise ImportError("PyDarshan is not installed")
    root = Path(spec.origin).parent
    h = hashlib.sha256(f"{cffi.__version__} {sys.version}".encode())
    for rel in _SOURCES:
        with contextlib.suppress(FileNotFoundError):
            h.update((root / rel).read_bytes())
    return h.hexdigest()[:16]


def _load(where: Path, key: str) -> Binding | None:
    module, meta = where / f"_darshan_ffi_{key}.py", where / f"_darshan_ffi_{key}.json"
    if not (_trusted(where) and _trusted(module) and _trusted(meta)):
        return None
    info = json.loads(meta.read_text())
    spec = importlib.util.spec_from_file_location(f"_darshan_ffi_{key}", module)
    if spec is None or spec.loader is None:
        return None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    lib = mod.ffi.dlopen(info["library"])
    return Binding(mod.ffi, lib, dict(info["structdefs"]))


def _trusted(p: Path) -> bool:
    """Ours and writable by nobody else: the module is executed."""
    st = p.stat()
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _pydarshan() -> Binding:
    import darshan.backend.cffi_backend as cb

    return Binding(cb.ffi, cb.libdutil, dict(cb._structdefs))


def _write(where: Path, key: str, made: Binding) -> None:
    """The parsed declarations as cffi's out-of-line module, and the library's path."""
    import cffi
    import darshan.backend.cffi_backend as cb

    library = _loaded_path("libdarshan-util")
    if library is None:
        return
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    builder = cffi.FFI()
    builder.cdef(cb.API_def_c)
    builder.set_source(f"_darshan_ffi_{key}", None)
    meta = json.dumps({"library": library, "structdefs": made.structdefs})
    for suffix, write in ((".py", builder.emit_python_code), (".json", None)):
        fd, tmp = tempfile.mkstemp(dir=where, suffix=".tmp")
        os.close(fd)
        try:
            if write is None:
                Path(tmp).write_text(meta)
            else:
                with contextlib.redirect_stdout(io.StringIO()):  # cffi says "generating ..."
                    write(tmp)
            os.chmod(tmp, 0o600)
            os.replace(tmp, where / f"_darshan_ffi_{key}{suffix}")
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def _loaded_path(name: str) -> str | None:
    """The file this process mapped for the shared library `name` (Linux)."""
    with contextlib.suppress(OSError), open("/proc/self/maps") as maps:
        for line in maps:
            path = line.rsplit(None, 1)[-1]
            if os.path.basename(path).startswith(name) and ".so" in path:
                return path
    return None
