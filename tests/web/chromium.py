"""Debian's Chromium for the browser tests, driven by Playwright (never a downloaded
browser): where it is, the marks that skip a test without it, and how to start it. The
`browser` fixture (tests/web/conftest.py) starts it once per module."""

from __future__ import annotations

import importlib.util
import shutil
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: A browser test's `pytestmark`: slow, and skipped without Chromium or Playwright.
NEEDS_CHROMIUM = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed"),
    pytest.mark.skipif(
        importlib.util.find_spec("playwright") is None, reason="pip install playwright"
    ),
]


def launch(playwright: Any) -> Any:
    """Start headless Chromium from a running `sync_playwright()`."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
