"""Where the fuzz targets' real seed files are: the parser golden cases and ../shared/data.

Shared data is read in place (its licences forbid copying some of it into the repo) and is
optional: without it the targets still run on the repo's own captures."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SHARED_DATA
from tests.fuzz.mutate import load

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "tests" / "cases"


def cases(family: str) -> list[Path]:
    """Input files of every `tests/cases/parse/<family>/*` case (INPUT_PATH resolved)."""
    out: list[Path] = []
    for case in sorted((CASES / "parse" / family).iterdir()):
        pointer = case / "INPUT_PATH"
        if pointer.is_file():
            out.append(SHARED_DATA / pointer.read_text().strip())
        out += sorted(p for p in case.glob("input.*") if p.is_file())
    return out


def shared(*patterns: str) -> list[Path]:
    """Files under ../shared/data matching the glob patterns ([] when it is absent)."""
    return sorted(p for pat in patterns for p in SHARED_DATA.glob(pat) if p.is_file())


def seeds(*groups: list[Path], limit: int = 64 * 1024) -> list[bytes]:
    return load([p for g in groups for p in g], limit)
