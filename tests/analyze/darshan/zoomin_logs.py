"""Darshan logs for the zoom-in tests: the darshan package's examples (always present) and
the shared corpora (skipped when absent), read once per session."""

from __future__ import annotations

import copy
import functools
from importlib.resources import files
from pathlib import Path

import pytest

from iolens.ingest.darshan_reader import read_log
from iolens.model.darshan import DarshanJob
from tests.conftest import SHARED_DATA

#: The example logs shipped inside the `darshan` package (always installed).
EXAMPLES = Path(str(files("darshan.examples.example_logs")))
LOGS = SHARED_DATA / "darshan-logs"
GENERATED = SHARED_DATA / "darshan-logs-generated"


def example(name: str) -> Path:
    return EXAMPLES / name


def shared(*parts: str) -> Path:
    """A log of the shared corpora; the test is skipped when it is not on this machine."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.is_file():
        pytest.skip(f"{p} is not available")
    return p


@functools.cache
def _read(path: str) -> DarshanJob:
    return read_log(path)


def job(path: Path) -> DarshanJob:
    """A fresh copy of the log's job (tests edit copies, the cache stays pristine)."""
    return copy.deepcopy(_read(str(path)))
