"""A demo's folded tables ({{demo NAME tables=folded}}: templates/demo.html details.tables-fold) in
real Chromium: a link into them opens them, printing opens them all, and, closed, they still
follow every control change -- the cells morphed to the new result (equal to CPython's), the
summary marked when a cell changed and its count kept, no cue left on a cell nobody can see."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from test_pages_browser import BOOT_TIMEOUT_MS, LivePage, diff, expected  # noqa: F401

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
PAGE = "transformer-layer.html"          # its attention demo folds its 8 tables
CAPTION = "cap-attention-att-heads"      # a caption inside that fold
CLOSED = "document.querySelectorAll('details.tables-fold:not([open])').length"


def _summary(lang: str, n: int) -> str:
    """The summary line, from the string file itself (not from the page)."""
    site = tomllib.loads((ROOT / "content" / "i18n" / f"{lang}.site.toml").read_text(encoding="utf-8"))["site"]
    return site["tables_fold_one"] if n == 1 else site["tables_fold"].format(n=n)


def test_a_link_into_folded_tables_opens_them_and_printing_opens_all(new_context, site_url):
    ctx = new_context()
    page = ctx.new_page()
    page.goto(f"{site_url}en/sequence-parallel.html")
    folds = page.evaluate(CLOSED)
    assert folds == 2, "page 4 folds the tables of its two main-path demos"
    page.evaluate("dispatchEvent(new Event('beforeprint'))")
    assert page.evaluate(CLOSED) == 0
    page.evaluate("dispatchEvent(new Event('afterprint'))")
    assert page.evaluate(CLOSED) == folds
    page.goto(f"{site_url}en/{PAGE}#{CAPTION}")
    page.wait_for_function(f"() => document.getElementById({CAPTION!r}).closest('details.tables-fold').open")
    top = page.evaluate(f"document.getElementById({CAPTION!r}).getBoundingClientRect().top")
    assert 0 <= top < page.viewport_size["height"], "the linked table is scrolled into view"
    page.close()
    ctx.close()


CUE_JS = """async ([demo, values]) => {
  const form = demo.querySelector("form.controls");
  for (const [name, value] of Object.entries(values)) form.elements[name].value = value;
  const shown = new Promise(resolve => demo.addEventListener("tp-rendered", resolve, {once: true}));
  form.elements[Object.keys(values)[0]].dispatchEvent(new Event("change", {bubbles: true}));
  await shown;      // the answer and its cue are in the page (js/demo.js)
  const fold = demo.querySelector(":scope > details.tables-fold");
  const summary = fold.querySelector(":scope > summary");
  return {open: fold.open, summaryMarked: summary.classList.contains("tp-changed"),
          cellsMarked: fold.querySelectorAll("table .tp-changed").length,
          shown: [...fold.querySelectorAll("table[data-table]")].filter(t => !t.closest("[hidden]")).length,
          summary: summary.textContent}; }"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_closed_folded_tables_follow_the_controls_and_mark_their_summary(new_context, site_url, lang):
    ctx = new_context()
    page = ctx.new_page()
    live = LivePage(page, lang, PAGE)
    page.goto(f"{site_url}{lang}/{PAGE}")
    page.wait_for_function("() => document.documentElement.dataset.runtime !== 'loading'", timeout=BOOT_TIMEOUT_MS)
    assert page.evaluate("document.documentElement.dataset.runtime") == "ready"
    demo = live.demo("attention")
    base = dict(live.snapshot("attention")["controls"])
    change = {"tp": "4" if base["tp"] != "4" else "2"}
    got = page.evaluate(CUE_JS, [demo, change])
    assert got["open"] is False, "a control change does not unfold the tables"
    assert got["summaryMarked"] and got["cellsMarked"] == 0, got
    assert got["summary"] == _summary(lang, got["shown"])
    # the folded cells are the new result's, cell for cell (CPython renders the reference)
    state = live.snapshot("attention")
    assert diff("folded", state, expected("attention", state["controls"], lang)) == []
    page.close()
    ctx.close()
