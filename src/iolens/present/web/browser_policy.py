"""What every answer tells the browser: the Content-Security-Policy and its companions.

The pages load their script and stylesheets from `/static` only and run no inline script
(chart data sits in `<script type="application/json">`, which is never executed), so
scripts are `'self'` alone: an injected `<script>` or `onclick=` would not run. Two inline
`<style>` elements exist and are allowed by their hashes only: the stylesheet of the
standalone job report (`/jobs/ID/report`, a file that also travels on its own) and the
one rule matplotlib writes into every SVG it draws. matplotlib also styles every mark with
a `style=` attribute, so attribute styles are allowed (`style-src-attr`); styles cannot run
code, and markup is escaped before it could carry one.

`frame-ancestors 'none'` and `X-Frame-Options: DENY` keep the UI out of other sites'
frames (clickjacking); `Referrer-Policy: same-origin` keeps URLs off other sites while
the pages' own form posts still carry their Origin (`no-referrer` would make it `null`).
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache

#: The `<style>` matplotlib's SVG backend writes into each figure (`_write_default_style`).
MATPLOTLIB_STYLE = "*{stroke-linejoin: round; stroke-linecap: butt}"


def style_hash(text: str) -> str:
    """A CSP source allowing exactly one inline `<style>` body."""
    digest = hashlib.sha256(text.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def _report_style() -> str:
    """The body of the job report's `<style>` element, as its template writes it."""
    from importlib import resources

    template = (resources.files("iolens.present") / "templates" / "report.html").read_text()
    found = re.search(r"<style>(.*?)</style>", template, re.S)
    return found.group(1) if found else ""


@cache
def content_security_policy() -> str:
    styles = " ".join(style_hash(t) for t in (_report_style(), MATPLOTLIB_STYLE) if t)
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            f"style-src-elem 'self' {styles}",
            "style-src-attr 'unsafe-inline'",
            "img-src 'self' data:",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


def security_headers() -> dict[str, str]:
    """The headers every response carries."""
    return {
        "Content-Security-Policy": content_security_policy(),
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "Cross-Origin-Opener-Policy": "same-origin",
    }
