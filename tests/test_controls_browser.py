"""Controls that say the truth (issue 25 items 6, 20 and 26's control parts): real Chromium, real
Pyodide 0.27.7, the site built by tests/conftest.py.

- A refused value dims what no longer matches the controls, under one note in the page language
  ("showing the last valid setting"), until a valid value returns; on the row-parallel page a
  size only one layer cannot split leaves the other layer's tables live (= CPython).
- The memory calculator: "Paper's 1T" then "Llama-2-7B" answers (it was refused, with 1T's
  values greyed), and the greyed fields are 7B's.
- A number box holding text the browser cannot read as a number (1e400) says so, not "is empty".
- Links: several ignored values take the plural note, a 5 000-digit value is cut, a value of a
  field a preset sets is named as such; a refused value is not written into the address.
- Choices the current state refuses are offered disabled with the reason (ring steps, roots).
- Without JavaScript the page says once that it is static, and the controls are disabled.
- Permalinks and citation links: 24 × 24 px targets, names in the page language.
- At 320 px the sequence-parallel step select fits its demo.
"""

from __future__ import annotations

import json

import pytest

from test_pages_browser import BOOT_TIMEOUT_MS, OPEN_DEEP_JS, SET_JS, LivePage, cell_text, expected, strings  # noqa: F401
from tpmath import views

pytestmark = pytest.mark.browser

STALE_JS = """(demo) => ({
  stale: Array.from(demo.querySelectorAll("[data-stale]")).map(e =>
    e.matches("figure") ? "figure:" + e.dataset.figure :
    e.querySelector("table[data-table]") ? "table:" + e.querySelector("table").dataset.table :
    e.matches("[data-value]") ? "value:" + e.dataset.value :
    e.matches("[data-note]") ? "note:" + e.dataset.note :
    e.matches("details") ? "real" : e.tagName.toLowerCase()),
  note: (() => { const n = demo.querySelector(":scope > .stale-note"); return n && !n.hidden ? n.textContent : null; })(),
  opacity: (() => { const f = demo.querySelector("[data-stale]"); return f ? getComputedStyle(f).opacity : null; })()})"""


def _open(ctx, url: str, lang: str = "en") -> tuple:
    page = ctx.new_page()
    live = LivePage(page, lang, url)
    page.goto(url)
    page.wait_for_function("() => document.documentElement.dataset.runtime !== 'loading'", timeout=BOOT_TIMEOUT_MS)
    assert page.evaluate("document.documentElement.dataset.runtime") == "ready"
    page.evaluate(OPEN_DEEP_JS)      # the reader opens a deep dive to use its controls
    return page, live


def _idle(page, demo) -> None:
    page.evaluate("""(d) => new Promise(r => { const done = () => !d.hasAttribute("aria-busy");
      if (done()) return requestIdleCallback(() => r(), {timeout: 2000});
      const o = new MutationObserver(() => { if (done()) { o.disconnect(); requestIdleCallback(() => r(), {timeout: 2000}); } });
      o.observe(d, {attributes: true}); })""", demo)


@pytest.fixture(scope="module")
def ctx(new_context):
    return new_context()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_refused_value_dims_what_no_longer_matches_until_a_valid_one_returns(ctx, site_url, lang):
    page, live = _open(ctx, f"{site_url}{lang}/row-parallel.html", lang)
    s = strings(lang)
    demo = live.demo("row-linear")
    good = live.set("row-linear", {"tp": "2", "d_in": "4", "d_out": "4"})
    assert good["msg"] == "" and page.evaluate(STALE_JS, demo)["stale"] == []
    # tp = 4, d_in = 6: row parallel cannot split 6 input features over 4 ranks; column parallel can
    part = live.set("row-linear", {"tp": "4", "d_in": "6", "d_out": "4"})
    want = json.loads(views.render_json("row-linear", json.dumps(part["controls"]), lang))["result"]
    assert part["msg"] == cell_text(want["refused"]["error"], lang) and part["invalid"] == ["d_in"]
    st = page.evaluate(STALE_JS, demo)
    assert sorted(st["stale"]) == sorted(["table:row-ranks", "value:row-max-abs-err", "dt", "note:row-linear-comm",
                                          "figure:row-linear", "real"]), st
    assert st["note"] == s["site.stale"] and float(st["opacity"]) < 1
    exp = expected("row-linear", part["controls"], lang)     # the column layer is live: CPython's tables
    assert part["tables"]["col-ranks"] == exp["tables"]["col-ranks"]
    assert part["tables"]["row-ranks"] == good["tables"]["row-ranks"]       # kept, dimmed
    # both sizes refused: everything is the last valid setting
    both = live.set("row-linear", {"tp": "4", "d_in": "6", "d_out": "6"})
    assert both["invalid"] == ["d_in"] and both["msg"]
    st = page.evaluate(STALE_JS, demo)
    assert {"table:row-ranks", "table:col-ranks", "table:row-inputs", "figure:row-linear"} <= set(st["stale"])
    assert st["note"] == s["site.stale"]
    # the address keeps the setting shown, not the refused values
    page.wait_for_timeout(600)
    assert "d_in=6" not in page.evaluate("location.search")
    # a valid value: nothing dimmed, no note, no message
    ok = live.set("row-linear", {"tp": "2", "d_in": "6", "d_out": "6"})
    assert ok["msg"] == "" and ok["invalid"] == []
    st = page.evaluate(STALE_JS, demo)
    assert st["stale"] == [] and st["note"] is None
    page.wait_for_timeout(600)
    assert "d_in=6" in page.evaluate("location.search")        # an accepted value is written
    assert live.errors == []
    page.close()


def test_a_number_the_browser_cannot_read_is_named_as_such(ctx, site_url):
    page, live = _open(ctx, f"{site_url}en/row-parallel.html")
    demo = live.demo("row-pairing")
    box = page.locator('.demo[data-section="row-pairing"] input[name="tokens"]')
    box.fill("1e400")                      # a number's syntax, beyond float64: the box holds ""
    box.dispatch_event("change")
    _idle(page, demo)
    snap = live.snapshot("row-pairing")
    label = page.locator('label[for="c-row-pairing-tokens"]').text_content().strip()
    assert snap["msg"] == strings("en")["site.bad_number"].format(name=label), snap["msg"]
    assert "empty" not in snap["msg"] and snap["invalid"] == ["tokens"]
    assert page.evaluate(STALE_JS, demo)["note"] == strings("en")["site.stale"]
    live.set("row-pairing", {"tokens": "8192"})
    assert live.snapshot("row-pairing")["msg"] == "" and page.evaluate(STALE_JS, demo)["stale"] == []
    page.close()


def test_leaving_a_paper_preset_for_a_model_preset_answers_with_its_values(ctx, site_url):
    """«Paper's 1T (Table 3)», then «Llama-2-7B»: was "pp=64 does not divide layers=32", stuck."""
    page, live = _open(ctx, f"{site_url}en/sequence-parallel.html")
    demo = live.demo("memory")
    state_js = """(d) => Object.fromEntries(Array.from(d.querySelector("form").elements).filter(e => e.name)
        .map(e => [e.name, [e.value, e.disabled]]))"""
    for first, second in (("paper-1t", "llama-2-7b"), ("paper-530b", "gpt-3-175b"), ("paper-1t", "custom")):
        one = live.set("memory", {"preset": first})
        assert one["msg"] == "", (first, one["msg"])
        two = live.set("memory", {"preset": second})
        assert two["msg"] == "", (first, second, two["msg"])
        got = page.evaluate(state_js, demo)
        owned = views.render("memory", two["controls"])["control_state"]
        for name, (value, disabled) in got.items():
            s = owned.get(name, {})
            assert disabled == bool(s.get("disabled")), (first, second, name)
            if "value" in s:
                assert value == s["value"], (first, second, name)
        exp = expected("memory", two["controls"], "en")
        assert two["tables"] == exp["tables"] and two["values"] == exp["values"], (first, second)
        assert page.evaluate(STALE_JS, demo)["stale"] == []
        live.set("memory", {"preset": "llama-2-7b"})
    assert live.errors == []
    page.close()


def test_link_notes_plural_cut_and_set_by_a_preset(ctx, site_url):
    s = strings("en")
    long = "9" * 5000
    page = ctx.new_page()
    live = LivePage(page, "en", "index")
    page.goto(f"{site_url}en/index.html?shards=99&shift={long}#vocab-ce")
    page.wait_for_function("() => document.querySelector('.demo[data-section=\"vocab-ce\"] .control-msg').textContent")
    msg = live.snapshot("vocab-ce")["msg"]
    cut = "9" * 59 + "…"
    assert msg == s["runtime.url_ignored_many"].format(values=f"shards = 99, shift = {cut}"), msg
    assert long not in msg and len(msg) < 400
    page.close()
    page = ctx.new_page()
    live = LivePage(page, "en", "sp")
    page.goto(f"{site_url}en/sequence-parallel.html?layers=40&vocab=7#memory")
    page.wait_for_function("() => document.documentElement.dataset.runtime !== 'loading'", timeout=BOOT_TIMEOUT_MS)
    _idle(page, live.demo("memory"))
    snap = live.snapshot("memory")
    assert snap["msg"] == s["runtime.url_set_by_many"].format(values="layers = 40, vocab = 7"), snap["msg"]
    assert snap["controls"]["layers"] == "32"
    page.close()


def test_choices_the_state_refuses_are_disabled_with_the_reason(ctx, site_url):
    page, live = _open(ctx, f"{site_url}en/index.html")
    options_js = """([d, name]) => Array.from(d.querySelector("form").elements[name].options)
        .map(o => [o.value, o.disabled, o.textContent])"""
    live.set("ring", {"ranks": "3", "algorithm": "ring", "step": "2"})
    opts = page.evaluate(options_js, [live.demo("ring"), "step"])
    beyond = cell_text({"key": "note.ring_step_beyond", "args": {"steps": "4"}}, "en")
    for value, disabled, text in opts:
        assert disabled == (int(value) > 4), (value, disabled)
        assert (beyond in text) == disabled, text
    live.set("collectives", {"collective": "broadcast", "ranks": "2"})
    roots = page.evaluate(options_js, [live.demo("collectives"), "root"])
    assert [v for v, off, _ in roots if off] == ["2", "3"] and all("R1" in t for v, off, t in roots if off)
    page.close()


def test_without_javascript_the_page_says_once_it_is_static(new_context, site_url):
    ctx = new_context(java_script_enabled=False)
    page = ctx.new_page()
    for lang in ("en", "zh"):
        page.goto(f"{site_url}{lang}/row-parallel.html")
        notes = page.locator(".noscript-note")
        assert notes.count() == 1 and notes.first.is_visible()
        assert notes.first.text_content() == strings(lang)["site.noscript"]
        forms = page.locator("form.controls")
        assert forms.count() > 3
        # every control is disabled (issue 25 item 26: not merely inert), through its form's fieldset
        assert page.evaluate("""Array.from(document.querySelectorAll('form.controls')).every(f =>
            f.querySelector(':scope > fieldset[disabled]') &&
            Array.from(f.elements).filter(e => e.name).every(e => e.matches(':disabled')))""")
        assert all(not el.is_visible() for el in page.query_selector_all(".runtime-line"))
        page.keyboard.press("Tab")          # the controls take no focus
        assert page.evaluate("!document.activeElement.closest || !document.activeElement.closest('form.controls')")
    page.close()
    # with JavaScript the controls are live (not inert)
    page = new_context().new_page()
    page.goto(f"{site_url}en/row-parallel.html")
    page.wait_for_function("() => document.querySelectorAll('form.controls fieldset[disabled]').length === 0")
    # enabled: only the controls the view disables (their own attribute) are :disabled
    assert page.evaluate("""Array.from(document.querySelectorAll('form.controls')).every(f =>
        Array.from(f.elements).filter(e => e.name).every(e => e.matches(':disabled') === e.hasAttribute('disabled')))""")
    assert page.locator(".noscript-note").count() == 0 or not page.locator(".noscript-note").first.is_visible()
    page.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_permalinks_and_citations_are_24px_targets_named_in_the_page_language(new_context, site_url, lang):
    ctx = new_context(viewport={"width": 390, "height": 800})
    ctx.route("**/pyodide/**", lambda route: route.abort())
    page = ctx.new_page()
    page.goto(f"{site_url}{lang}/index.html")
    page.evaluate(OPEN_DEEP_JS)      # the deep dives' links too, as a reader who opens them sees them
    boxes = page.evaluate("""() => Array.from(document.querySelectorAll("a.headerlink, a.cite")).map(a => {
        const r = a.getBoundingClientRect(); return [a.className, r.width, r.height, a.getAttribute("aria-label")]; })""")
    assert any(c == "headerlink" for c, *_ in boxes) and any(c == "cite" for c, *_ in boxes)
    s = strings(lang)
    for cls, w, h, name in boxes:
        assert w >= 24 and h >= 24, (cls, w, h, name)
        assert name and name != "#" and not name.startswith("["), (cls, name)
        stem = s["site.permalink_named"].split("{")[0] if cls == "headerlink" else s["site.cite"].split("{")[0]
        assert name.startswith(stem), (cls, name)
    page.close()


def test_the_step_select_fits_at_320px(new_context, site_url):
    ctx = new_context(viewport={"width": 320, "height": 800})
    ctx.route("**/pyodide/**", lambda route: route.abort())
    page = ctx.new_page()
    for lang in ("en", "zh"):
        page.goto(f"{site_url}{lang}/sequence-parallel.html")
        over = page.evaluate("""() => Array.from(document.querySelectorAll(".demo form.controls select")).map(s => {
            const d = s.closest(".demo").getBoundingClientRect(), r = s.getBoundingClientRect();
            return [s.name, r.left >= d.left - 0.5 && r.right <= d.right + 0.5, r.right, d.right]; })
            .filter(x => !x[1])""")
        assert over == [], (lang, over)
    page.close()
