"""The pages in a real browser: headless Debian Chromium driven by Playwright (never a
downloaded browser). A user and an admin log in, open every page, the plots must have
drawn (uPlot canvases with pixels, server SVGs with marks), and a user clicks from a job to
its finding and to the slow OST it used, all under the server's Content-Security-Policy:
no page may trip it (issue 19). Screenshots go to build/test-artifacts/web/."""

from __future__ import annotations

import pytest

from tests.web.chromium import NEEDS_CHROMIUM
from tests.web.conftest import ARTIFACTS

pytestmark = NEEDS_CHROMIUM

# Every canvas has drawn something (uPlot draws axes and lines into it).
CANVAS_DRAWN = """() => Array.from(document.querySelectorAll('div.chart canvas')).map(c => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
  return n; })"""
SVG_MARKS = """() => Array.from(document.querySelectorAll('div.figure > svg')).map(
  s => s.querySelectorAll('rect, circle, line, polyline, path').length)"""

X_RANGE = """() => { const u = document.querySelector('div.chart').uplot;
  return [u.scales.x.min, u.scales.x.max]; }"""


# Every CSP violation of the page, as the browser reports it (init scripts run outside the CSP).
RECORD_CSP = """window.__csp = [];  // each: directive, blocked URI, source
document.addEventListener('securitypolicyviolation', e =>
  window.__csp.push([e.violatedDirective, e.blockedURI || "inline", e.sourceFile].join(" ")));"""


@pytest.fixture
def page_of(browser):
    contexts = []
    errors: list[str] = []
    violations: list[str] = []

    def make():
        ctx = browser.new_context(viewport={"width": 1360, "height": 900})
        ctx.set_default_timeout(120_000)
        ctx.add_init_script(RECORD_CSP)
        contexts.append(ctx)
        page = ctx.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on(
            "console",
            lambda m: (
                violations.append(f"{page.url}: {m.text}")
                if "Content Security Policy" in m.text
                else None
            ),
        )
        return page

    yield make
    for c in contexts:
        c.close()
    assert not errors, f"JavaScript errors: {errors}"
    assert not violations, f"CSP violations: {violations}"


def _no_csp_violation(page) -> None:
    """The page loaded under the server's CSP and broke none of it."""
    assert page.evaluate("window.__csp") == [], page.url


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _plots(page, canvases: int = 0, svgs: int = 0) -> None:
    _no_csp_violation(page)
    drawn = page.evaluate(CANVAS_DRAWN)
    marks = page.evaluate(SVG_MARKS)
    assert len(drawn) >= canvases and all(n > 100 for n in drawn), (page.url, drawn)
    assert len(marks) >= svgs and all(n > 0 for n in marks), (page.url, marks)
    assert drawn or marks, page.url


def test_user_logs_in_and_follows_a_job_to_its_finding_and_slow_ost(server, web_db, page_of):
    page = page_of()
    res = page.goto(f"{server}/jobs/{web_db.job}")
    assert "frame-ancestors 'none'" in res.headers["content-security-policy"]
    assert page.locator("input#token").count() == 1  # 401: the login form
    page.fill("input#token", web_db.tokens[web_db.user])
    page.click("button[type=submit]")
    page.wait_for_url(f"{server}/jobs/{web_db.job}")  # back where we were going

    # my jobs: only mine, searchable and sortable
    page.goto(f"{server}/jobs")
    users = page.locator("#jobs tbody tr td:nth-child(2)").all_inner_texts()
    assert users and set(users) == {web_db.user}
    assert len(users) == len(web_db.a_jobs)
    page.click("#jobs th a:text('job')")
    page.wait_for_load_state()
    ids = page.locator("#jobs tbody tr td:first-child").all_inner_texts()
    assert ids in (sorted(ids), sorted(ids, reverse=True))
    page.fill("input[name=q]", web_db.job)
    page.click("form.filters button")
    page.wait_for_load_state()
    assert page.locator("#jobs tbody tr").count() == 1
    _shot(page, "user-jobs")

    page.click(f"#jobs a:text-is('{web_db.job}')")
    page.wait_for_url(f"{server}/jobs/{web_db.job}")
    page.wait_for_selector("div.chart canvas")
    _plots(page, canvases=2, svgs=3)  # client + layers; sizes, operations, OST heatmap
    # the access-pattern surveyor: the files `iolens job --json` lists, on the page
    api = page.request.get(f"{server}/api/jobs/{web_db.job}").json()
    shown = page.locator("#access tbody tr td:first-child").all_inner_texts()
    assert shown and shown == [f["path"] for f in api["access_pattern_files"][:10]]
    # zoom: drag across the first chart, its x range narrows
    over = page.locator("div.chart .u-over").first
    over.scroll_into_view_if_needed()  # findings above can push it below the fold
    box = over.bounding_box()
    before = page.evaluate(X_RANGE)
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2, steps=5)
    page.mouse.up()
    after = page.evaluate(X_RANGE)
    assert after[1] - after[0] < (before[1] - before[0]) * 0.8
    _shot(page, "user-job")

    page.click(f"a.code:text-is('{web_db.finding}')")
    page.wait_for_url(f"{server}/findings/{web_db.finding}*")
    assert web_db.finding in page.locator("h1").inner_text()
    assert page.locator("dl.doc dd").count() == 3  # symptom, why, what to do
    _shot(page, "user-finding")

    page.go_back()
    page.wait_for_selector("a.comp.slow")
    page.click(f"a.comp.slow:has-text('{web_db.slow_ost}')")
    page.wait_for_url(f"{server}/jobs/{web_db.job}/components/{web_db.slow_ost}")
    page.wait_for_selector("div.chart canvas")
    _plots(page, canvases=1)
    assert "slow_ost" in page.content()
    _shot(page, "user-slow-ost")

    page.goto(f"{server}/jobs/{web_db.job}/report")
    assert page.locator("svg").count() >= 1
    _no_csp_violation(page)  # its own stylesheet and matplotlib's, allowed by their hashes
    # someone else's job, and the admin pages: not for this user
    res = page.goto(f"{server}/jobs/{web_db.b_jobs[0]}")
    assert res.status == 404
    assert page.goto(f"{server}/admin").status == 403
    # logging out ends the session
    page.goto(f"{server}/jobs")
    page.click("form.who button")
    page.wait_for_url(f"{server}/login")
    assert page.goto(f"{server}/jobs").status == 401


ADMIN_PAGES = {
    "admin-now": ("/admin", 0, 0),
    "admin-now-busy": ("/admin?at=busiest", 0, 0),
    "admin-load": ("/admin/load", 0, 3),
    "admin-anomalies": ("/admin/anomalies", 0, 0),
    "admin-anomaly": ("/admin/anomalies/{key}", 1, 0),
    "admin-interference": ("/admin/interference", 0, 1),
    "admin-mds": ("/admin/mds", 1, 1),
    "admin-switches": ("/admin/switches", 0, 0),  # no agent on the compute nodes: no plot
    "admin-top": ("/admin/top", 0, 2),
    "admin-factors": ("/admin/factors", 0, 2),
    "admin-component": ("/admin/components/{ost}", 1, 0),
    "admin-users": ("/admin/users", 0, 0),
    "admin-other-users-job": ("/jobs/{other_job}", 2, 3),
    "api-docs": ("/docs", 0, 0),
}


def test_admin_opens_every_page_and_the_plots_render(server, web_db, page_of):
    page = page_of()
    page.goto(f"{server}/admin?token={web_db.tokens['root']}")
    assert page.url == f"{server}/admin"  # the token left the address bar
    busiest = page.locator("a:has-text('busiest minute')").get_attribute("href")
    assert page.locator("a.tile").count() >= 15  # every forwarder, OST and MDT
    for name, (path, canvases, svgs) in ADMIN_PAGES.items():
        url = path.format(key=web_db.episode_key, ost=web_db.slow_ost, other_job=web_db.b_jobs[0])
        if "busiest" in url:
            url = busiest
        res = page.goto(server + url)
        assert res.status == 200, (url, res.status)
        _no_csp_violation(page)
        if canvases:
            page.wait_for_selector("div.chart canvas")
        if canvases or svgs:
            _plots(page, canvases, svgs)
        _shot(page, name)
    # the simulated switches have no monitored host: the page says so instead of plotting
    page.goto(f"{server}/admin/switches")
    assert "No switch traffic" in page.content() and "InfiniBand port counters" in page.content()
    # load of every forwarder / OST / MDS, colour-coded, at the busiest minute
    page.goto(server + busiest)
    levels = page.locator("a.tile").evaluate_all("ts => ts.map(t => t.className)")
    assert any(("mid" in c) or ("high" in c) or ("low" in c) for c in levels)
    # from the anomaly list to the slow OST's page
    page.goto(f"{server}/admin/anomalies")
    page.click(f"#anomalies tr:has-text('slow_ost') a:text-is('{web_db.slow_ost}')")
    page.wait_for_url(f"{server}/admin/components/{web_db.slow_ost}")
    page.wait_for_selector("div.chart canvas")
    _plots(page, canvases=1)


INJECT = """() => new Promise(done => {
  document.addEventListener('securitypolicyviolation', e => done(e.violatedDirective));
  const s = document.createElement('script'); s.textContent = 'window.__ran = "ran"';
  document.body.appendChild(s); setTimeout(() => done(String(window.__ran)), 3000); })"""


def test_an_injected_inline_script_does_not_run(server, web_db, browser):
    """Were markup ever injected into a page, its inline script would be refused."""
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        page.goto(f"{server}/jobs?token={web_db.tokens[web_db.user]}")
        assert page.url == f"{server}/jobs"
        assert page.evaluate(INJECT) in ("script-src-elem", "script-src")
    finally:
        ctx.close()
