"""The first screen shows the idea (issue 15 item 5), in real Chromium, both languages.

- page 1 opens on the column→row MLP demo (issue 27 item 1): after a setup of at most 80 words,
  its live figure's top is inside the first screen at 1280×900 and the first two at 390×844, its
  stepper at stage 1; no page draws a figure twice;
- the phone header is compact and the contents list is folded (details/summary, works without
  JavaScript); on a wide screen the sidebar list is shown instead.
"""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.browser

HAN = r"[\u3400-\u4dbf\u4e00-\u9fff]"
BOX_JS = """(sel) => { const r = document.querySelector(sel).getBoundingClientRect();
  return {top: r.top + scrollY, bottom: r.bottom + scrollY, height: r.height}; }"""


FIRST_JS = """() => { const fig = document.querySelector('article figure.tp-figure');
  const r = fig.getBoundingClientRect();
  const demo = fig.closest('.demo');
  // the article's prose before the figure (the lead and headings aside): the opening's setup
  const before = Array.from(document.querySelectorAll('article > p:not(.lead)'))
    .filter(p => p.compareDocumentPosition(fig) & Node.DOCUMENT_POSITION_FOLLOWING);
  return {top: r.top + scrollY, height: r.height, section: demo && demo.dataset.section,
          controls: demo.querySelector('form.controls').getBoundingClientRect().top + scrollY,
          stage: demo.querySelector('select[name=stage]').selectedIndex,
          setup: before.map(p => p.textContent)}; }"""


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("width,height,screens", [(1280, 900, 1), (390, 844, 2)])
def test_page_one_opens_on_the_mlp_figure_at_its_first_step(new_context, site_url, lang, width, height, screens):
    """Issue 27 item 1: the live figure's top inside the first screen at 1280 x 900 (the first two
    at 390 x 844), after a setup of at most 80 words, its stepper at the first step."""
    ctx = new_context(viewport={"width": width, "height": height})
    ctx.route("**/pyodide/**", lambda route: route.abort())     # the static page is what a reader sees first
    page = ctx.new_page()
    page.goto(f"{site_url}{lang}/index.html")
    page.wait_for_load_state("load")
    first = page.evaluate(FIRST_JS)
    assert first["section"] == "mlp" and first["height"] > 200          # the drawing, not an empty box
    assert first["top"] < screens * height, (lang, width, first["top"])
    assert first["controls"] < screens * height                         # the reader can act at once
    assert first["stage"] == 0, "the stepper starts at stage 1"
    words = sum(len(re.findall(r"[A-Za-z0-9]+", t)) + len(re.findall(HAN, t)) / 2 for t in first["setup"])
    assert 0 < words <= 80, (lang, first["setup"])
    header = page.evaluate(BOX_JS, "header.site-header")
    toc_open = page.evaluate("() => document.querySelector('.toc-fold details').open")
    toc_shown = page.evaluate("""() => [getComputedStyle(document.querySelector('.toc-side')).display,
                                        getComputedStyle(document.querySelector('.toc-fold')).display]""")
    if width < 600:
        assert header["height"] <= 130, header                          # title + language on one row, links below
        assert toc_shown == ["none", "block"] and toc_open is False
    else:
        assert toc_shown[0] != "none" and toc_shown[1] == "none"
    ctx.close()


def test_no_page_shows_a_figure_twice(built_site):
    """Issue 27 item 1: each figure of a page (its data-figure name) is drawn in one place."""
    for path in sorted(built_site.glob("*/*.html")):
        names = re.findall(r'<figure\b[^>]*\bdata-figure="([^"]+)"', path.read_text(encoding="utf-8"))
        twice = sorted({n for n in names if names.count(n) > 1})
        assert not twice, (path.relative_to(built_site).as_posix(), twice)


def test_the_folded_contents_list_opens_without_javascript(new_context, site_url):
    ctx = new_context(viewport={"width": 390, "height": 844}, java_script_enabled=False)
    page = ctx.new_page()
    page.goto(f"{site_url}zh/row-parallel.html")
    links = page.locator(".toc-fold a")
    assert links.count() > 3 and not links.first.is_visible()
    page.click(".toc-fold summary")
    assert links.first.is_visible()
    links.first.click()
    assert page.evaluate("location.hash") == links.first.get_attribute("href")
    ctx.close()
