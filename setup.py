"""Build hook: compile the LD_PRELOAD tracer (tracer/) into iolens/_lib/libiolens.so.

All metadata lives in pyproject.toml; this file only adds the C build to `build_py`, so
both `pip install .` (library copied into the wheel) and `pip install -e .` (library
written next to the sources, in src/iolens/_lib/) get it without a separate step. Without
a C compiler the install still succeeds, with a warning: everything but `iolens trace`
works, and `iolens.tracefile.library_path()` explains what is missing.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
TRACER = ROOT / "tracer"
# Keep in step with tracer/Makefile.
CFLAGS = [
    "-O2", "-std=gnu11", "-fPIC", "-fvisibility=hidden", "-ftls-model=initial-exec",
    "-fno-strict-aliasing", "-Wall", "-Wextra",
]  # fmt: skip
LDFLAGS = ["-shared", "-Wl,-z,now", "-Wl,-z,noexecstack"]
LIBS = ["-ldl", "-lpthread"]


def build_tracer(dest: Path) -> bool:
    """Compile libiolens.so into `dest`; False (with a warning) if no compiler works."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(shlex.split(cc)[0]) is None:
        print(f"warning: iolens: no C compiler ({cc}); the tracer is not built", file=sys.stderr)
        return False
    sources = sorted(str(p) for p in (TRACER / "src").rglob("*.c"))
    if not sources:
        print(
            f"warning: iolens: no tracer sources under {TRACER} (an sdist without "
            "tracer/?); the tracer is not built",
            file=sys.stderr,
        )
        return False
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "libiolens.so"
        cmd = [
            *shlex.split(cc), *CFLAGS, f"-I{TRACER / 'include'}", f"-I{TRACER / 'src' / 'core'}",
            *LDFLAGS, "-o", str(out), *sources, *LIBS,
        ]  # fmt: skip
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            print(f"warning: iolens: building the tracer failed:\n{res.stderr}", file=sys.stderr)
            return False
        shutil.copy2(out, dest / "libiolens.so")
    return True


class BuildPyWithTracer(build_py):
    def run(self) -> None:
        # Editable installs import from src/, so the library goes there; a normal build
        # puts it in build_lib (and build_py's package_data copy must not find a stale one).
        if getattr(self, "editable_mode", False):
            build_tracer(ROOT / "src" / "iolens" / "_lib")
            super().run()
        else:
            super().run()
            build_tracer(Path(self.build_lib) / "iolens" / "_lib")

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outs = super().get_outputs(include_bytecode)
        lib = str(Path(self.build_lib) / "iolens" / "_lib" / "libiolens.so")
        return outs if lib in outs else [*outs, lib]


class BinaryDistribution(Distribution):
    """The wheel carries a compiled library: tag it for this platform, not py3-none-any."""

    def has_ext_modules(self) -> bool:
        return True


setup(cmdclass={"build_py": BuildPyWithTracer}, distclass=BinaryDistribution)
