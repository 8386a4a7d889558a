"""Golden-file switches for the parser tests.

`--update-golden` only registers when pytest loads this conftest at start-up (e.g.
`pytest tests/parse --update-golden`); from the repo root use `IOLENS_UPDATE_GOLDEN=1`.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/cases/parse/**/expected.json from the current parsers",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """True when expected files should be rewritten instead of compared."""
    if os.environ.get("IOLENS_UPDATE_GOLDEN") == "1":
        return True
    return bool(request.config.getoption("--update-golden", default=False))
