"""Where the compiled tracer library lives.

`pip install` (editable or not) builds `libiolens.so` into the package's `_lib/`
directory (see setup.py). A development build with `make -C tracer` is used as a
fallback so the tracer can be worked on without reinstalling.
"""

from __future__ import annotations

import os
from pathlib import Path

from iolens.errors import IolensError

LIB_NAME = "libiolens.so"


def library_path() -> Path:
    """The tracer library to put in LD_PRELOAD.

    Order: `$IOLENS_LIBRARY`, else the newer of the packaged `iolens/_lib/libiolens.so`
    and a source checkout's `tracer/build/libiolens.so` (so `make -C tracer` takes effect
    in an editable install without reinstalling). Raises IolensError if none exists.
    """
    env = os.environ.get("IOLENS_LIBRARY")
    if env:
        p = Path(env)
        if p.is_file():
            return p.resolve()
        raise IolensError(f"IOLENS_LIBRARY={env} does not exist")
    pkg = Path(__file__).resolve().parents[1]
    candidates = [pkg / "_lib" / LIB_NAME, pkg.parents[1] / "tracer" / "build" / LIB_NAME]
    found = [p for p in candidates if p.is_file()]
    if found:
        return max(found, key=lambda p: p.stat().st_mtime)
    raise IolensError(
        f"{LIB_NAME} not found (looked in {', '.join(str(c) for c in candidates)}); "
        "reinstall iolens with a C compiler available (`pip install .`) or run `make -C tracer`"
    )
