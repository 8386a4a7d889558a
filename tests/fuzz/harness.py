"""The fuzz suite's budget, its one property, and its count of inputs run.

Profiles (`IOLENS_FUZZ`): `ci` (default: every target small, the suite well under a minute
on two cores, derandomized so CI is reproducible), `medium` (x10, ~67k inputs, for finding
bugs on a workstation) and `long` (x200, ~1.3 M inputs: the figure recorded in
docs/reliability.md). `IOLENS_FUZZ_SCALE` overrides the multiplier. Each target names its
CI budget; the profile scales it.

The property every target checks: the code under test returns, or raises
:class:`iolens.errors.InputError` naming the input; any other exception fails the test,
and hypothesis' deadline bounds the time one input may take.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings

from iolens.errors import InputError

_F = TypeVar("_F", bound=Callable[..., Any])

SCALES = {"ci": 1, "medium": 10, "long": 200}
PROFILE = os.environ.get("IOLENS_FUZZ", "ci")
if PROFILE not in SCALES:
    raise SystemExit(f"IOLENS_FUZZ={PROFILE!r}: expected one of {', '.join(SCALES)}")
SCALE = int(os.environ.get("IOLENS_FUZZ_SCALE", SCALES[PROFILE]))

#: Time one input may take. Generous against a shared, loaded CI machine; the host-list
#: regression (>10 s before its cap) is far beyond it.
DEADLINE = timedelta(milliseconds=int(os.environ.get("IOLENS_FUZZ_DEADLINE_MS", "3000")))

_SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile(
    "ci", deadline=DEADLINE, derandomize=True, suppress_health_check=_SLOW, print_blob=True
)
settings.register_profile("medium", deadline=DEADLINE, suppress_health_check=_SLOW)
settings.register_profile(
    "long", deadline=DEADLINE, suppress_health_check=_SLOW, report_multiple_bugs=True
)
settings.load_profile(PROFILE)

#: Inputs run per target in this session (explicit @examples included).
COUNTS: Counter[str] = Counter()


def fuzz(examples: int, **overrides: Any) -> Callable[[_F], _F]:
    """Give a target `examples` inputs in the CI profile (scaled by the profile), and
    count every input it runs; `overrides` are other hypothesis settings (a deadline a
    target needs). Put it under `@given`."""

    def deco(fn: _F) -> _F:
        name = f"{fn.__module__.rsplit('.', 1)[-1]}::{fn.__name__}"

        @functools.wraps(fn)
        def counted(*args: Any, **kwargs: Any) -> Any:
            COUNTS[name] += 1
            return fn(*args, **kwargs)

        return settings(max_examples=max(1, examples * SCALE), **overrides)(counted)  # type: ignore[return-value]

    return deco


def only_input_errors(call: Callable[[], Any], *names: str) -> Any:
    """`call()`'s result, or None when it raised an InputError whose message names one of
    `names` (the file, directory or request the input came from) in one short line (an
    error quoting a 5,000-digit token whole is no use to the person reading it)."""
    try:
        return call()
    except InputError as exc:
        text = str(exc)
        assert any(n in text for n in names), f"InputError does not name the input: {text}"
        assert "\n" not in text and len(text) < 1000, f"not one short line: {text[:300]!r}..."
        return None


def scratch(name: str) -> Path:
    """A private temporary directory for a target's files, removed when the run ends.
    (Targets write one file per input: a function-scoped tmp_path would be one per test,
    and hypothesis refuses function-scoped fixtures anyway.)"""
    path = Path(tempfile.mkdtemp(prefix=f"iolens-fuzz-{name}-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
