"""report.html: one self-contained page (inline CSS and SVG, a CSP of ``default-src 'none'``).

Rendered by Jinja2 with autoescaping from ``templates/report.html.j2``; the first 200 denials are
listed (report.json and report.csv have them all).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import jinja2


def render_html(document: dict[str, Any], denials: list[dict[str, Any]], errors: list[dict[str, Any]]) -> str:
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    source = resources.files("webhook.reports") / "templates" / "report.html.j2"
    template = environment.from_string(source.read_text())
    peak = max([sum(m.values()) for m in document["perMinute"]] + [1])
    return template.render(report=document, denials=denials, errors=errors, peak=peak)
