"""The system-views page in headless Debian Chromium: every figure drew marks, and no
label or legend text runs outside its SVG's viewport (a clipped top label or legend is
the bug issue 23 found on other charts)."""

from __future__ import annotations

from tests.web.chromium import NEEDS_CHROMIUM
from tests.web.test_browser import SVG_MARKS, _no_csp_violation, _shot, page_of

__all__ = ["page_of"]  # the fixture, shared with test_browser.py

pytestmark = NEEDS_CHROMIUM

# Each <text> of each figure against its SVG's viewBox, in the SVG's own units.
OUTSIDE = """() => Array.from(document.querySelectorAll('div.figure > svg')).flatMap(s => {
  const vb = s.viewBox.baseVal;
  return Array.from(s.querySelectorAll('text')).map(t => [t.textContent, t.getBBox()])
    .filter(([_, b]) => b.x < vb.x - 0.5 || b.y < vb.y - 0.5 ||
                        b.x + b.width > vb.x + vb.width + 0.5 ||
                        b.y + b.height > vb.y + vb.height + 0.5)
    .map(([text, b]) => `${s.getAttribute('aria-label')}: ${text}`); })"""


def test_sysviews_page_draws_every_figure_inside_its_viewport(server, web_db, page_of):
    page = page_of()
    page.goto(f"{server}/admin/top?token={web_db.tokens['root']}")  # a query to time
    page.goto(f"{server}/admin/sysviews")
    _no_csp_violation(page)
    labels = page.locator("div.figure > svg").evaluate_all(
        "ss => ss.map(s => s.getAttribute('aria-label'))"
    )
    for want in ("average I/O volume by core-hours", "I/O-mode mix by volume and job count",
                 "MDS load by client system", "OSTs by position", "query time CDF"):  # fmt: skip
        assert want in labels, labels
    assert all(n > 0 for n in page.evaluate(SVG_MARKS))
    assert page.evaluate(OUTSIDE) == []
    _shot(page, "admin-sysviews")
