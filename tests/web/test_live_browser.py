"""The live job page in a real browser (Debian Chromium via Playwright): the "Now" section
of a running job fills itself from the live endpoint and follows new data and a mid-run
slowdown without the page reloading, under the server's Content-Security-Policy."""

from __future__ import annotations

import re

import pytest

from tests.loopback import free_port, start_server, stop
from tests.present.test_live import history_store, ship
from tests.web.chromium import NEEDS_CHROMIUM, launch

playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
expect = playwright.expect
pytestmark = NEEDS_CHROMIUM

RECORD_CSP = """window.__csp = [];
document.addEventListener('securitypolicyviolation',
  e => window.__csp.push(e.violatedDirective));"""


def test_the_now_section_updates_in_place_and_shows_the_slowdown(tmp_path):
    db, port, log = tmp_path / "s.duckdb", free_port(), tmp_path / "serve.log"
    tokens = history_store(db)
    server = start_server(
        db, port, log, "--analyze-every", "0", "--components-every", "0", "--live-every", "1"
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for k in range(5):  # the first half of the five normal minutes
            ship(base, "run1", k)
        with playwright.sync_playwright() as p:
            browser = launch(p)
            try:
                ctx = browser.new_context()
                ctx.set_default_timeout(60_000)
                ctx.add_init_script(RECORD_CSP)
                page = ctx.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(f"{base}/jobs/run1?token={tokens['alice']}")
                expect(page.locator("#live-updated")).to_have_text(re.compile("^updated"))
                page.evaluate("window.__same_page = true")  # gone if the page reloads
                first = page.inner_text("#live-written")
                assert first not in ("", "-")
                assert "Slower" not in page.inner_text("#live-verdict")
                for k in range(5, 14):  # the rest of the normal minutes, then 2 slow ones
                    ship(base, "run1", k)
                verdict = page.locator("#live-verdict")
                expect(verdict).to_have_text(
                    re.compile("^Slower than earlier runs"), timeout=90_000
                )
                assert page.evaluate("window.__same_page === true")
                assert page.inner_text("#live-written") != first
                expect(page.locator("#live-findings")).to_contain_text("IOL006", timeout=60_000)
                assert page.evaluate("window.__csp") == []
                assert not errors, errors
                page.screenshot(path=str(tmp_path / "live.png"), full_page=True)
            finally:
                browser.close()
    finally:
        stop(server)
