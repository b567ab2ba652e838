"""The page's JavaScript (templates/static/app.js + js/) in real Chromium with real Pyodide 0.27.7.

What is compared with what:
- figures: the build-time SVG (tpsite's serialiser) = the live one (js/tree.js) after a round trip
  at the defaults, element for element (tag, namespace, sorted attributes, text); live figures =
  CPython's figure trees, translated, for several settings; the builder's whitelist = the one of
  src/tpmath/views/tree.py, and anything outside it is refused (the last good figure stays);
- table cells that are element trees (grids, rank tags): the live DOM = CPython's tree = the
  markup tpsite writes for the same cell;
- control state: disabled controls and their reasons, statically and live, = CPython's
  ``control_state``; presets fill and free their fields;
- sliders: each moves its named control by one step from the keyboard and the tables follow
  (= CPython for the new value); the named control moves its slider; a fast drag computes far
  fewer states than it passes through and ends on the last one;
- the "what changed" cue marks exactly the cells whose text changed (none animated under
  prefers-reduced-motion);
- URL state: values a control cannot hold, or that Python refuses, are ignored with a message
  (no error state); the language switch lands on the heading the reader is at;
- the Python demo: the reader's edited program runs in the worker (output or its own traceback),
  Reset brings back the page's program and output; comments and labels in the page language;
- layout at 320, 390 and 1280 px: no page scrolls sideways, numbers never break, touch targets
  are 44 px, formulas that scroll show it, the contents list has room for "13.";
- with JavaScript off the page is the complete static page.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from test_pages_browser import (BOOT_TIMEOUT_MS, CJK, OPEN_DEEP_JS, SET_JS, SETTLED_FN, LivePage, cell_text, context,  # noqa: F401
                                diff, expected, expected_error, html_files, live_pages, strings)
from tpmath import views
from tpmath.views import tree
from tpsite.render import _attr_value

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
SVG_NS = "http://www.w3.org/2000/svg"

# (tag with "svg:" for the SVG namespace, sorted [name, value] attributes, children or text);
# the cue's transient class and the hidden attribute are not part of a figure.
SER_FN = """function ser(el) {
  const ns = el.namespaceURI === "http://www.w3.org/2000/svg" ? "svg:" : "";
  const attrs = [];
  for (const a of el.attributes) {
    if (a.name === "hidden") continue;
    let v = a.value;
    if (a.name === "class") v = v.split(/\\s+/).filter(c => c && c !== "tp-changed").join(" ");
    if (a.name === "class" && v === "" && a.value.includes("tp-changed")) continue;   // only the cue's
    attrs.push([a.name, v]);
  }
  attrs.sort((x, y) => x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0);
  const kids = Array.from(el.children);
  return [ns + el.localName, attrs, kids.length ? kids.map(ser) : el.textContent];
}"""
FIGURES_JS = "async (demo) => { " + SER_FN + SETTLED_FN + """
  await settled();
  return Object.fromEntries(Array.from(demo.querySelectorAll("figure[data-figure]")).filter(f => !f.hidden)
    .map(f => [f.getAttribute("data-figure"), ser(f)])); }"""
STATE_JS = """(demo) => Object.fromEntries(Array.from(demo.querySelector("form.controls").elements).filter(e => e.name)
  .map(e => { const id = e.getAttribute("aria-describedby"); const why = id ? document.getElementById(id) : null;
    return [e.name, {disabled: e.disabled, value: e.value, why: why ? why.textContent : null,
      why_next_to_it: !!why && why.closest(".ctl") === e.closest(".ctl"),
      slider_disabled: Array.from(e.form.querySelectorAll("input[type=range]")).filter(s => s.dataset.for === e.name)
        .map(s => s.disabled)}]; }))"""
IDLE_JS = """(demo) => new Promise(resolve => {
  if (!demo.hasAttribute("aria-busy")) return resolve();
  const obs = new MutationObserver(() => { if (!demo.hasAttribute("aria-busy")) { obs.disconnect(); resolve(); } });
  obs.observe(demo, {attributes: true, attributeFilter: ["aria-busy"]});
})"""


def py_ser(node: dict, lang: str, svg: bool = False) -> list:
    """CPython's element tree in the shape of SER_FN, its text cells translated."""
    svg = svg or node["t"] == "svg"
    tag = ("svg:" if svg else "") + node["t"]
    attrs = sorted([k, v] for k, v in node.get("a", {}).items())
    if "x" in node:
        return [tag, attrs, cell_text(node["x"], lang)]
    kids = node.get("c", [])
    return [tag, attrs, [py_ser(c, lang, svg) for c in kids] if kids else ""]


def first_difference(a, b, path: str = "") -> str:
    """Where two serialised trees first differ (for the failure message)."""
    if a == b:
        return ""
    if not (isinstance(a, list) and isinstance(b, list) and len(a) == 3 and len(b) == 3):
        return f"{path}: {str(a)[:120]} != {str(b)[:120]}"
    if a[0] != b[0] or a[1] != b[1]:
        return f"{path}/{a[0]}: {a[0]} {a[1]} != {b[0]} {b[1]}"
    if isinstance(a[2], str) or isinstance(b[2], str) or len(a[2]) != len(b[2]):
        return f"{path}/{a[0]}: content {str(a[2])[:120]} != {str(b[2])[:120]}"
    return next((d for i, (x, y) in enumerate(zip(a[2], b[2])) if (d := first_difference(x, y, f"{path}/{a[0]}[{i}]"))), "")


def figures_difference(a: dict, b: dict) -> str:
    if set(a) != set(b):
        return f"figures {sorted(a)} != {sorted(b)}"
    return "; ".join(f"{k}{first_difference(a[k], b[k])}" for k in a if a[k] != b[k])


def demo_handle(page, section):
    return page.locator(f'.demo[data-section="{section}"]').element_handle()


@pytest.fixture(scope="module")
def opened(live_pages):
    """The live pages with what they showed before any render: figures and control state."""
    for live in live_pages.values():
        live.static_figures = {s: live.page.evaluate(FIGURES_JS, live.demo(s)) for s in live.sections()}
        live.static_state = {s: live.page.evaluate(STATE_JS, live.demo(s)) for s in live.sections()}
    return live_pages


def demos_of(opened):
    return [(live, s) for live in opened.values() for s in live.sections()]


def other_option(section: str, base: dict):
    """The first control and an option other than the one the page opened on (a page may open a
    demo on other values than the section's defaults: {{demo NAME control=value}}) that renders
    (GPT-2 XL's 25 heads refuse the default tp 8)."""
    c = views.sections()[section].controls[0]
    return c.name, next((str(o) for o in c.options if str(o) != str(base[c.name])
                         and expected_error(section, {**base, c.name: str(o)}, "en") is None), None)


# ---- figures ----------------------------------------------------------------------------------

def test_static_figures_equal_live_figures_and_cpython_trees(opened):
    checked = 0
    problems = []
    for live, section in demos_of(opened):
        static = live.static_figures[section]
        if not static:
            continue
        base = dict(live.static[section]["controls"])
        name, other = other_option(section, base)
        if other is not None:                       # away and back: the figures are rebuilt live
            live.set(section, {**base, name: other})
            assert live.page.evaluate(FIGURES_JS, live.demo(section)) != static, section
        live.set(section, base)
        now = live.page.evaluate(FIGURES_JS, live.demo(section))
        where = f"{live.lang}/{live.slug_file} {section}"
        if now != static:
            problems.append(f"{where}: live figures at the defaults differ from the build's: "
                            + figures_difference(static, now))
        want = {k: py_ser(v, live.lang) for k, v in views.render(section, base, live.lang)["figures"].items()}
        if now != want:
            problems.append(f"{where}: live figures differ from CPython's trees: " + figures_difference(want, now))
        for setting in settings_for_figures(section):
            controls = {**base, **setting}
            state = live.set(section, controls)
            if state["msg"]:
                continue
            got = live.page.evaluate(FIGURES_JS, live.demo(section))
            want = {k: py_ser(v, live.lang) for k, v in views.render(section, controls, live.lang)["figures"].items()}
            if got != want:
                problems.append(f"{where} {setting}: live figures differ from CPython's trees: "
                                + figures_difference(want, got))
            checked += 1
        live.set(section, base)
        checked += 1
    assert checked >= 4, "no figure was compared"
    assert problems == [], "\n".join(problems)


# Change the mlp demo's tp and read its two drawings at once, then after `then` ran in the
# same task ("" = nothing, or an event dispatched), then once the page is idle.
DRAWINGS_JS = "async ([stage, tp, then]) => { " + SER_FN + SETTLED_FN + """
  const demo = document.querySelector('.demo[data-section="mlp"]');
  const fig = demo.querySelector('figure[data-figure="mlp"]');
  const both = () => ['fig-wide', 'fig-narrow'].map(c => ser(fig.querySelector('svg.' + c)));
  const form = demo.querySelector('form.controls');
  const done = new Promise(r => demo.addEventListener('tp-rendered', ev => r(ev.detail), {once: true}));
  form.elements.stage.value = stage;
  const el = form.elements.tp;
  el.value = tp;
  el.dispatchEvent(new Event('change', {bubbles: true}));
  const detail = await done;
  const now = both();
  if (then) window.dispatchEvent(new Event(then));
  const after = both();
  await settled();
  return {detail, now, after, idle: both()};
}"""


def test_the_hidden_drawing_follows_when_idle_or_before_printing(new_context, site_url):
    """A figure with a wide and a narrow drawing shows one (style.css's phone breakpoint): a change
    makes the shown one equal to CPython's tree at once, the hidden one once the page is idle, or
    at once before the page is printed (print shows the wide one)."""
    page = new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.goto(f"{site_url}en/index.html", wait_until="domcontentloaded")
    page.wait_for_function("() => document.documentElement.dataset.runtime !== 'loading'", timeout=BOOT_TIMEOUT_MS)
    base = dict(views.defaults("mlp"), stage="partial")    # a stage whose two drawings differ
    for tp, then in (("4", ""), ("1", "beforeprint")):
        fig = views.render("mlp", {**base, "tp": tp}, "en")["figures"]["mlp"]
        wide, narrow = (py_ser(svg, "en") for svg in fig["c"] if svg["t"] == "svg")
        got = page.evaluate(DRAWINGS_JS, [base["stage"], tp, then])
        assert got["detail"]["ok"] and got["detail"]["source"] == "live"
        assert got["now"][0] == wide                     # the wide window's drawing: at once
        assert got["now"][1] != narrow                   # the hidden one: not inside the change ...
        if then:
            assert got["after"][1] == narrow             # ... before printing: at once
        assert got["idle"] == [wide, narrow]             # ... and once the page is idle
    page.close()


def settings_for_figures(section: str) -> list[dict]:
    out = []
    for c in views.sections()[section].controls:
        if c.kind == "select":
            out += [{c.name: str(o)} for o in c.options if str(o) != str(c.default)][:2]
    return out[:4]


TREE_MODULE_JS = """async () => { const m = await import(new URL("../static/js/tree.js", location.href).href);
  return {svg: [...m.SVG_TAGS].sort(), html: [...m.HTML_TAGS].sort(), attrs: [...m.ATTRS].sort()}; }"""


def test_page_builder_whitelist_is_the_python_one(opened):
    page = opened[("en", "index.html")].page
    got = page.evaluate(TREE_MODULE_JS)
    assert got == {"svg": sorted(tree.SVG_TAGS), "html": sorted(tree.HTML_TAGS), "attrs": sorted(tree.ATTRS)}


BAD_NODES = [
    {"t": "script", "x": "alert(1)"},                                       # not a tag of either list
    {"t": "svg", "c": [{"t": "foreignObject"}]},                            # SVG that could host HTML
    {"t": "svg", "c": [{"t": "a", "a": {"href": "javascript:alert(1)"}}]},
    {"t": "svg", "a": {"onload": "alert(1)"}},                              # event handler
    {"t": "svg", "a": {"style": "fill:red"}},                               # colours live in the stylesheet
    {"t": "figure", "c": [{"t": "rect"}]},                                  # SVG tag outside <svg>
    {"t": "svg", "a": {"width": 3}},                                        # attribute values are strings
    {"t": "span", "x": {"nokey": 1}},                                       # text is a cell
    {"t": "span", "x": "a", "c": []},                                       # text and children
    {"t": "svg", "a": {"data-x\"><img": "1"}},
]
REFUSE_JS = """async (bad) => {
  const m = await import(new URL("../static/js/tree.js", location.href).href);
  const refused = bad.map(node => { try { m.build(node); return false; } catch (e) { return e instanceof m.TreeError; } });
  const ok = m.build({t: "figure", a: {"class": "tp-figure"}, c: [{t: "svg", a: {viewBox: "0 0 10 10"},
    c: [{t: "title", x: {key: "site.title"}}, {t: "text", a: {x: "1"}, x: "<b>1</b>"}]}]});
  const svg = ok.firstElementChild;
  return {refused, ns: [ok.namespaceURI, svg.namespaceURI, svg.firstElementChild.namespaceURI],
          viewBox: svg.getAttribute("viewBox"), title: svg.firstElementChild.textContent,
          text: svg.lastElementChild.textContent, elements: ok.querySelectorAll("*").length};
}"""


def test_page_builder_refuses_what_the_contract_forbids(opened):
    page = opened[("en", "index.html")].page
    got = page.evaluate(REFUSE_JS, BAD_NODES)
    assert got["refused"] == [True] * len(BAD_NODES)
    assert got["ns"] == ["http://www.w3.org/1999/xhtml", SVG_NS, SVG_NS]
    assert got["viewBox"] == "0 0 10 10" and got["title"] == strings("en")["site.title"]
    assert got["text"] == "<b>1</b>" and got["elements"] == 3      # text stays text


BAD_FIGURE_JS = """async ([demo, bad]) => {
  const m = await import(new URL("../static/js/apply.js", location.href).href);
  const copy = demo.cloneNode(true);
  const before = copy.querySelector("figure[data-figure]");
  const name = before.getAttribute("data-figure");
  const kept = before.cloneNode(true);
  m.applyResult(copy, {figures: {[name]: bad}, tables: {}, values: {}, notes: {}});
  const after = copy.querySelector(`figure[data-figure="${name}"]`);
  return after === before && after.isEqualNode(kept);
}"""


def test_a_figure_outside_the_whitelist_keeps_the_last_good_one(opened):
    live = opened[("en", "index.html")]
    section = next(s for s in live.sections() if live.static_figures[s])
    n_errors = len(live.errors)
    bad = {"t": "figure", "a": {"class": "tp-figure"}, "c": [{"t": "svg", "c": [{"t": "foreignObject"}]}]}
    assert live.page.evaluate(BAD_FIGURE_JS, [live.demo(section), bad])
    logged = live.errors[n_errors:]
    assert len(logged) == 1 and "foreignObject" in logged[0], logged   # a console error says why
    del live.errors[n_errors:]


GRID_JS = """async (node) => { """ + SER_FN + """
  const m = await import(new URL("../static/js/apply.js", location.href).href);
  const demo = document.createElement("div");
  demo.setAttribute("data-section", "t");
  const wrap = document.createElement("div");
  wrap.className = "table-wrap";
  const old = document.createElement("table");
  old.setAttribute("data-table", "t");
  wrap.appendChild(old);
  demo.appendChild(wrap);
  m.applyResult(demo, {tables: {t: node}});    // the worker's table tree (views/table.py), morphed in
  const table = demo.querySelector("table[data-table=t]");
  const part = (p) => Array.from(p.rows).map(r => Array.from(r.cells).map(c => [c.tagName.toLowerCase(),
      c.className, c.children.length ? Array.from(c.children).map(ser) : c.textContent]));
  return {body: part(table.tBodies[0]), foot: part(table.tFoot)};
}"""
MARKUP_JS = "(markup) => { " + SER_FN + """
  const t = document.createElement("template"); t.innerHTML = markup;   // the test parses the builder's markup
  return Array.from(t.content.children).map(ser); }"""


def test_grid_and_rank_tag_cells_equal_cpython_and_the_builder(opened):
    from tpsite.render import Translator, tree_html
    live = opened[("zh", "index.html")]
    rows = [[tree.rank_tag(0), tree.grid([[1.5, -2.0], [0.25, 4.0]], rank=0)],
            [tree.rank_tag(1), tree.grid([1.0, -1e-9, 3.0], rank=1)]]
    foot = [[{"key": "label.nothing"}, tree.grid([[0.0]])], ["Σ", {"key": "label.nothing"}]]
    from tpmath.views.table import table_tree
    record = {"caption": "cap.mlp_ranks", "columns": ["col.rank", "col.output"], "rows": rows, "foot": foot}
    got = live.page.evaluate(GRID_JS, table_tree("t", "t", record))
    t = Translator(strings("zh"), "zh", "test")

    def want_cell(j, cell):
        tag = "th" if j == 0 else "td"
        if isinstance(cell, dict) and "el" in cell:
            built = live.page.evaluate(MARKUP_JS, str(tree_html(cell["el"], t)))   # what tpsite writes
            assert built == [py_ser(cell["el"], "zh")]
            return [tag, "", built]
        prose = "prose" if isinstance(cell, dict) and j > 0 else ""
        return [tag, prose, cell_text(cell, "zh")]

    assert got["body"] == [[want_cell(j, c) for j, c in enumerate(r)] for r in rows]
    assert got["foot"] == [[want_cell(j, c) for j, c in enumerate(r)] for r in foot]


# ---- control state ------------------------------------------------------------------------------

def want_state(section: str, controls: dict | None, lang: str) -> dict:
    result = views.render(section, controls, lang)
    names = [c.name for c in views.sections()[section].controls]
    st = result.get("control_state", {})
    return {n: {"disabled": bool(st.get(n, {}).get("disabled")),
                "why": cell_text(st[n]["why"], lang) if st.get(n, {}).get("disabled") and "why" in st[n] else None}
            for n in names}


def _disabled_view(state: dict) -> dict:
    return {n: {"disabled": s["disabled"], "why": s["why"]} for n, s in state.items()}


def test_static_page_shows_the_control_state(opened):
    seen_disabled = 0
    for live, section in demos_of(opened):
        got = live.static_state[section]
        opened_on = dict(live.static[section]["controls"])      # the defaults, or the page's own values
        assert _disabled_view(got) == want_state(section, opened_on, live.lang), (live.lang, section)
        for name, s in got.items():
            if s["disabled"]:
                seen_disabled += 1
                assert s["why_next_to_it"] and all(s["slider_disabled"]), (section, name)
    assert seen_disabled >= 4      # AllToAll's op and root (page 1), AllReduce's root (page 2), the preset's fields


def test_controls_that_do_nothing_are_disabled_with_their_reason(opened):
    from tpmath import collectives as core
    checked = demos = 0
    for live, section in demos_of(opened):
        if section != "collectives":
            continue
        demos += 1
        base = dict(live.static[section]["controls"])
        for name in core.NAMES:
            controls = {**base, "collective": name}
            state = live.set(section, controls)
            assert state["msg"] == "", (name, state["msg"])
            got = live.page.evaluate(STATE_JS, live.demo(section))
            assert _disabled_view(got) == want_state(section, controls, live.lang), (live.lang, name)
            assert got["op"]["disabled"] == (not core.REGISTRY[name].reduces)          # the record, not the view
            assert got["root"]["disabled"] == (core.REGISTRY[name].root is None)
            for s in got.values():
                assert s["why_next_to_it"] or not s["disabled"]
                assert all(d == s["disabled"] for d in s["slider_disabled"])
            checked += 1
        live.set(section, base)
    assert demos >= 2 and checked == demos * len(core.NAMES)


def test_presets_fill_and_disable_their_fields_custom_frees_them(opened):
    from tpmath import comm_cost as cc
    fields = ("hidden", "seq", "layers", "heads")
    checked = refused = 0
    for live, section in demos_of(opened):
        if section != "comm-cost":
            continue
        page, demo = live.page, live.demo(section)
        base = dict(live.static[section]["controls"])
        for preset, p in cc.PRESETS.items():
            good = live.set(section, base)
            wanted = {**base, "preset": preset}
            if p["heads"] % int(base["tp"]):
                # TP does not divide the preset's heads (GPT-2 XL: 25 at tp 8): a message next to tp
                # naming the head count, and the last good tables stay.
                state = live.set(section, wanted)
                err = expected_error(section, wanted, live.lang)
                assert err is not None and err.field == "tp" and state["msg"] == err.message(live.lang)
                assert str(p["heads"]) in state["msg"] and state["invalid"] == ["tp"]
                assert state["tables"] == good["tables"], "the last good tables must stay"
                refused += 1
                wanted["tp"] = str(max(t for t in range(1, int(base["tp"])) if p["heads"] % t == 0))
            state = live.set(section, wanted)
            assert state["msg"] == "", (preset, state["msg"])
            got = page.evaluate(STATE_JS, demo)
            for k in fields:
                assert got[k]["disabled"] and got[k]["value"] == str(p[k]), (preset, k, got[k])
                assert got[k]["why"] == cell_text({"key": "note.row_set_by_preset", "args": {"name": p["label"]}},
                                                  live.lang)
            assert page.evaluate("(d) => !d.querySelector('[data-note=comm-preset]').hidden", demo)
            assert diff(preset, state, expected(section, state["controls"], live.lang)) == []
            checked += 1
        # Custom: the fields are editable, keep the last preset's values, and the preset note goes.
        state = live.set(section, {**state["controls"], "preset": "custom"})
        got = page.evaluate(STATE_JS, demo)
        assert not any(s["disabled"] for s in got.values())
        assert [got[k]["value"] for k in fields] == [str(p[k]) for k in fields]
        assert all(s["why"] is None for s in got.values())
        assert page.evaluate("(d) => d.querySelector('[data-note=comm-preset]').hidden", demo)
        custom = {**state["controls"], "hidden": "2048", "heads": "16", "tp": "4"}
        state = live.set(section, custom)
        assert state["msg"] == "" and diff("custom", state, expected(section, custom, live.lang)) == []
        # custom heads that tp does not divide: refused, naming them
        bad = live.set(section, {**custom, "heads": "32", "tp": "3"})       # 2048/32 whole, 3 ∤ 32
        assert "32" in bad["msg"] and bad["invalid"] == ["tp"] and bad["tables"] == state["tables"]
        live.set(section, base)
        assert not page.evaluate("(d) => d.querySelector('[data-note=comm-preset]').hidden", demo)
    assert checked == 2 * len(cc.PRESETS) and refused == 2


# ---- sliders ------------------------------------------------------------------------------------

SLIDERS_JS = """(demo) => Array.from(demo.querySelectorAll("input[type=range][data-for]")).map(s => {
  const c = s.form.elements.namedItem(s.dataset.for);
  return {name: s.dataset.for, scale: s.dataset.scale, min: +s.min, max: +s.max, step: s.step, pos: +s.value,
    top: s.dataset.max ? +s.dataset.max : null, hidden: s.hidden, disabled: s.disabled, label: s.getAttribute("aria-labelledby"),
    named: !!s.name, valuetext: s.getAttribute("aria-valuetext"),
    shown: c.tagName === "SELECT" ? c.selectedOptions[0].textContent : c.value, value: c.value,
    options: c.tagName === "SELECT" ? Array.from(c.options).map(o => o.value) : null,
    height: s.getBoundingClientRect().height}; })"""


def slider_value(s: dict, pos: int) -> float | str:
    """What the named control must hold with its slider at ``pos`` (the scales of js/sliders.js,
    written out from their definitions)."""
    if s["scale"] == "index":
        return s["options"][pos]
    if s["scale"] == "log2":
        return float(2 ** pos)
    if s["scale"] == "symlog":
        v = math.copysign(10 ** (abs(pos) / s["max"] * math.log10(1 + s["top"])) - 1, pos)
        return math.copysign(s["top"], v) if abs(v) >= s["top"] else float(f"{v:.2g}")
    return float(pos) if s["step"] in ("1", "any") else round(pos, 10)


def test_every_slider_steps_its_control_from_the_keyboard_and_the_tables_follow(opened):
    moved, problems = 0, []
    for live, section in demos_of(opened):
        page = live.page
        base = dict(live.static[section]["controls"])
        live.set(section, base)
        sliders = page.evaluate(SLIDERS_JS, live.demo(section))
        declared = {c.name for c in views.sections()[section].controls if c.slider}
        assert {s["name"] for s in sliders} == declared, section
        for s in sliders:
            where = f"{live.lang}/{live.slug_file} {section}.{s['name']}"
            assert not s["hidden"] and not s["named"] and s["label"] == f"l-{section}-{s['name']}", where
            assert s["valuetext"] == s["shown"], where          # the value it stands for, as shown
            if s["disabled"]:
                continue
            key, pos = ("ArrowLeft", s["pos"] - 1) if s["pos"] >= s["max"] else ("ArrowRight", s["pos"] + 1)
            if s["scale"] == "lin" and s["step"] not in ("1", "any"):
                pos = s["pos"] + (-1 if key == "ArrowLeft" else 1) * float(s["step"])
            handle = page.locator(f'.demo[data-section="{section}"] input[type=range][data-for="{s["name"]}"]')
            handle.focus()
            page.keyboard.press(key)
            page.evaluate(IDLE_JS, live.demo(section))
            state = live.snapshot(section)
            value = state["controls"][s["name"]]
            want = slider_value(s, pos)
            ok = value == want if isinstance(want, str) else math.isclose(float(value), want, rel_tol=1e-9)
            if not ok:
                problems.append(f"{where}: {key} gave {value!r}, want {want!r}")
                continue
            err = expected_error(section, state["controls"], live.lang)
            if err is not None:     # e.g. d_in 5 with tp 2: CPython's message, the tables kept
                if state["msg"] != err.message(live.lang):
                    problems.append(f"{where}: {value!r}: {state['msg']!r} != {err.message(live.lang)!r}")
                live.set(section, base)
                continue
            problems += diff(where, state, expected(section, state["controls"], live.lang))
            after = next(x for x in page.evaluate(SLIDERS_JS, live.demo(section)) if x["name"] == s["name"])
            if after["valuetext"] != after["shown"]:
                problems.append(f"{where}: aria-valuetext {after['valuetext']!r} != {after['shown']!r}")
            moved += 1
            live.set(section, base)
    assert problems == [], "\n".join(problems)
    assert moved >= 2 * 15


REVERSE_JS = """([demo, name, value]) => { const c = demo.querySelector("form").elements.namedItem(name);
  c.value = value; c.dispatchEvent(new Event("input", {bubbles: true}));
  const s = Array.from(demo.querySelectorAll("input[type=range]")).find(x => x.dataset.for === name);
  return {pos: +s.value, valuetext: s.getAttribute("aria-valuetext")}; }"""


def test_typing_in_the_named_control_moves_its_slider(opened):
    live = opened[("en", "row-parallel.html")]
    base = dict(live.static["row-pairing"]["controls"])
    got = live.page.evaluate(REVERSE_JS, [live.demo("row-pairing"), "hidden", "8192"])
    assert got == {"pos": 13, "valuetext": "8192"}                   # 2^13
    got = live.page.evaluate(REVERSE_JS, [live.demo("row-pairing"), "hidden", "5120"])   # exact, not a power of 2
    assert got == {"pos": round(math.log2(5120)), "valuetext": "5120"}
    live.page.evaluate(IDLE_JS, live.demo("row-pairing"))
    assert live.snapshot("row-pairing")["controls"]["hidden"] == "5120"
    live.set("row-pairing", base)
    en = opened[("en", "index.html")]
    got = en.page.evaluate(REVERSE_JS, [en.demo("vocab-ce"), "shift", "-99"])
    assert got["pos"] == -round(math.log10(100) / math.log10(1 + views.sections()["vocab-ce"].controls[2].max) * 100)
    en.page.evaluate(IDLE_JS, en.demo("vocab-ce"))
    en.set("vocab-ce", dict(en.static["vocab-ce"]["controls"]))


DRAG_JS = """async ([demo, name, positions, gap]) => {
  const s = Array.from(demo.querySelectorAll("input[type=range]")).find(x => x.dataset.for === name);
  let rendered = 0;
  const count = () => { rendered++; };
  demo.addEventListener("tp-rendered", count);
  for (const p of positions) {
    s.value = String(p);
    s.dispatchEvent(new Event("input", {bubbles: true}));
    if (gap) await new Promise(r => setTimeout(r, gap));
  }
  s.dispatchEvent(new Event("change", {bubbles: true}));        // the release ends the drag
  const atRelease = rendered;
  await new Promise(resolve => {
    const done = () => !demo.hasAttribute("aria-busy");
    if (done()) return resolve();
    const obs = new MutationObserver(() => { if (done()) { obs.disconnect(); resolve(); } });
    obs.observe(demo, {attributes: true, attributeFilter: ["aria-busy"]});
  });
  demo.removeEventListener("tp-rendered", count);
  return {rendered, afterRelease: rendered - atRelease};
}"""


@pytest.mark.parametrize("gap_ms", [0, 8])
def test_dragging_computes_only_the_latest_value(opened, gap_ms):
    """Events faster than the worker: a handful of renders for 51 states.  At any pace: once the
    slider is released at most one render remains (the latest state; never a queue of old ones),
    and the release's own change event computes nothing new."""
    live = opened[("en", "index.html")]
    base = dict(live.static["vocab-ce"]["controls"])
    positions = list(range(-60, 41, 2))                 # 51 positions, shift from about -250 to 40
    got = live.page.evaluate(DRAG_JS, [live.demo("vocab-ce"), "shift", positions, gap_ms])
    state = live.snapshot("vocab-ce")
    s = next(x for x in live.page.evaluate(SLIDERS_JS, live.demo("vocab-ce")) if x["name"] == "shift")
    assert math.isclose(float(state["controls"]["shift"]), slider_value(s, positions[-1]), rel_tol=1e-12)
    assert 1 <= got["rendered"] <= len(positions) and got["afterRelease"] <= 1, got
    if gap_ms == 0:
        assert got["rendered"] <= 2, got
    assert diff("drag", state, expected("vocab-ce", state["controls"], "en")) == []
    live.set("vocab-ce", base)


# ---- the "what changed" cue ---------------------------------------------------------------------

TEXTS_JS = """(demo) => { const out = {};
  demo.querySelectorAll("table[data-table]").forEach(t => [t.tBodies[0], t.tFoot].forEach((p, k) => { if (!p) return;
    Array.from(p.rows).forEach((r, i) => Array.from(r.cells).forEach((c, j) => {
      out[`${t.dataset.table}/${k}/${i}/${j}`] = [c.textContent, c.classList.contains("tp-changed") ||
        !!c.querySelector(".tp-changed"), c.children.length === 0]; })); }));
  demo.querySelectorAll("dd[data-value]").forEach(d => { out["value/" + d.dataset.value] = [d.textContent,
    d.classList.contains("tp-changed"), true]; });
  // the drawing the window shows (the other one is made equal to its tree later, without the cue)
  demo.querySelectorAll("figure:not([hidden]) svg text[data-key]").forEach(t => {
    if (getComputedStyle(t.closest("svg")).display === "none") return;
    out["fig/" + t.closest("svg").getAttribute("class") + "/" + t.dataset.key] = [t.textContent,
      t.classList.contains("tp-changed"), true]; });
  // shown: whether the mark changes how the element looks (its background, or a figure text's fill)
  const marked = demo.querySelector(".tp-changed");
  out.shown = null;
  if (marked) {
    const look = () => { const s = getComputedStyle(marked); return [s.backgroundColor, s.fill, s.fontWeight].join(); };
    const on = look(); marked.classList.remove("tp-changed"); const off = look(); marked.classList.add("tp-changed");
    out.shown = on !== off;
  }
  return out; }"""


def same_shape(before: dict, after: dict, key: str) -> bool:
    """Whether the table or value of ``key`` has the same cells before and after (else the cue
    compares nothing in it: everything changed)."""
    head = key.split("/")[0] + "/"
    if head == "value/":
        return True
    part = "/".join(key.split("/")[:2]) + "/"
    return {k for k in before if k.startswith(part)} == {k for k in after if k.startswith(part)}


# Set the controls and read the texts as soon as the answer is shown (tp-rendered): the cue lasts
# 1.6 s, and waiting for the page to be idle as well (LivePage.set) took longer than that on a busy
# CI machine.
CUE_SET_JS = """async ([demo, values]) => { const texts = """ + TEXTS_JS + """;
  const form = demo.querySelector("form.controls");
  let last = null;
  for (const [name, value] of Object.entries(values)) { form.elements[name].value = value; last = form.elements[name]; }
  const shown = new Promise(resolve => demo.addEventListener("tp-rendered", resolve, {once: true}));
  (last || form.elements[0]).dispatchEvent(new Event("change", {bubbles: true}));
  await shown;     // dispatched right after the answer and its cue are in the page (js/demo.js)
  return texts(demo); }"""


def _cue_check(live, section, change):
    before = live.page.evaluate(TEXTS_JS, live.demo(section))
    after = live.page.evaluate(CUE_SET_JS, [live.demo(section), change])
    changed = {k for k, v in after.items() if k != "shown" and k in before and before[k][0] != v[0]
               and (k.startswith("fig/") or same_shape(before, after, k))}
    marked = {k for k, v in after.items() if k != "shown" and v[1]}
    return changed, marked, after["shown"]


def test_what_changed_is_marked_and_not_shown_under_reduced_motion(opened):
    live = opened[("en", "index.html")]
    base = dict(live.static["vocab-ce"]["controls"])
    live.set("vocab-ce", base)
    changed, marked, shown = _cue_check(live, "vocab-ce", {**base, "target": "0"})
    assert changed and marked == changed, (sorted(changed ^ marked))
    assert shown is True
    live.page.emulate_media(reduced_motion="reduce")
    try:
        changed, marked, shown = _cue_check(live, "vocab-ce", base)
        assert changed and marked == changed
        assert shown is False
    finally:
        live.page.emulate_media(reduced_motion="no-preference")
    # A figure's numbers are matched by their data-key: from tp 2 to tp 4 some partial results stay
    # and some change (the page opens at the shards, whose numbers keep their keys: none change).
    mlp = dict(live.static["mlp"]["controls"])
    live.set("mlp", {**mlp, "stage": "partial", "tp": "2"})
    changed, marked, _ = _cue_check(live, "mlp", {**mlp, "stage": "partial", "tp": "4"})
    changed_fig = {k for k in changed if k.startswith("fig/")}
    assert changed_fig and changed_fig == {k for k in marked if k.startswith("fig/")}
    live.set("mlp", mlp)


# ---- URL state ----------------------------------------------------------------------------------

def _open(ctx, url):
    page = ctx.new_page()
    live = LivePage(page, "en", url)
    page.goto(url)
    page.wait_for_function("() => document.documentElement.dataset.runtime !== 'loading'", timeout=BOOT_TIMEOUT_MS)
    return page, live


def test_invalid_values_in_the_url_are_ignored_with_a_message(new_context, site_url):
    ctx = new_context()
    s = strings("en")
    # Not an option, and a number outside the control's bounds: refused before Python runs.
    page, live = _open(ctx, f"{site_url}en/index.html?shards=99&shift=1e308&stage=forward#vocab-ce")
    for section in ("vocab-ce", "mlp"):
        page.evaluate(IDLE_JS, live.demo(section))
    vocab = live.snapshot("vocab-ce")
    assert vocab["msg"] == s["runtime.url_ignored_many"].format(values="shards = 99, shift = 1e308")   # several: plural
    assert vocab["invalid"] == [] and vocab["controls"] == {k: _attr_value(v) for k, v in views.defaults("vocab-ce").items()}
    assert diff("url", vocab, expected("vocab-ce", vocab["controls"], "en")) == []
    mlp = live.snapshot("mlp")                  # the valid part of the link is applied
    assert mlp["controls"]["stage"] == "forward" and mlp["msg"] == ""
    assert diff("url mlp", mlp, expected("mlp", mlp["controls"], "en")) == []
    assert page.evaluate("document.querySelectorAll('.demo[data-state]').length") == 0
    assert live.errors == []
    page.close()
    # Values each control holds, but which Python refuses together (tp does not divide hidden).
    query = "comm-cost.preset=custom&comm-cost.hidden=1000&comm-cost.tp=3"
    page, live = _open(ctx, f"{site_url}en/row-parallel.html?{query}")
    page.evaluate(IDLE_JS, live.demo("comm-cost"))
    cost = live.snapshot("comm-cost")
    assert cost["msg"].startswith(s["runtime.url_ignored_many"].format(values="preset = custom, hidden = 1000, tp = 3"))
    assert cost["invalid"] == []
    assert cost["controls"] == {k: _attr_value(v) for k, v in views.defaults("comm-cost").items()}
    assert cost["tables"] == expected("comm-cost", None, "en")["tables"]
    assert live.errors == []
    page.close()


PLACE_JS = """(index) => { const hs = Array.from(document.querySelectorAll("main h2[id], main h3[id]"));
  const h = hs[Math.min(index, hs.length - 1)]; window.scrollTo(0, h.getBoundingClientRect().top + window.scrollY - 8);
  return h.id; }"""


@pytest.mark.parametrize("width", [1280, 390])
def test_language_switch_keeps_the_section_in_view(new_context, site_url, width):
    ctx = new_context(viewport={"width": width, "height": 800})
    ctx.route("**/pyodide/**", lambda route: route.abort())     # the place does not need Python
    page = ctx.new_page()
    page.goto(f"{site_url}en/row-parallel.html")
    page.wait_for_load_state("load")
    hid = page.evaluate(PLACE_JS, 7)
    page.wait_for_timeout(150)
    assert page.get_attribute("a.lang-switch", "href").endswith(f"#{hid}")
    page.click("a.lang-switch")
    page.wait_for_load_state("load")
    assert "/zh/" in page.url and page.url.endswith(f"#{hid}")
    top = page.evaluate(f"document.getElementById({hid!r}).getBoundingClientRect().top")
    assert 0 <= top < 200, top
    page.close()


# ---- the Python demo ----------------------------------------------------------------------------

RUN_JS = """async ([demo, code]) => {
  const ta = demo.querySelector("textarea.pydemo-code");
  ta.value = code; ta.dispatchEvent(new Event("input", {bubbles: true}));
  const out = demo.querySelector(".pydemo-output");
  const before = out.textContent + "\\u0000" + out.dataset.kind;
  demo.querySelector("button[data-run]").click();
  await new Promise(resolve => { const obs = new MutationObserver(() => {
    if (!demo.hasAttribute("aria-busy")) { obs.disconnect(); resolve(); } });
    obs.observe(demo, {attributes: true, attributeFilter: ["aria-busy"]}); });
  return {output: out.textContent, kind: out.dataset.kind, label: demo.querySelector(".pydemo-label").textContent};
}"""
UI_JS = """(demo) => { const ta = demo.querySelector("textarea.pydemo-code"); const lab = document.querySelector(`label[for="${ta.id}"]`);
  return {textarea: !ta.hidden && ta.offsetHeight > 0, label: lab && !lab.hidden ? lab.textContent : null,
    highlight: !demo.querySelector(".highlight").hidden, reset: !demo.querySelector("button[data-reset]").hidden,
    code: ta.value, original: ta.defaultValue, output: demo.querySelector(".pydemo-output").textContent,
    outLabel: demo.querySelector(".pydemo-label").textContent}; }"""


def test_the_readers_edited_program_runs_and_reset_restores(opened):
    ran = 0
    for (lang, name), live in sorted(opened.items()):
        page = live.page
        for demo in page.query_selector_all(".pydemo"):
            s = strings(lang)
            ui = page.evaluate(UI_JS, demo)
            assert ui["textarea"] and not ui["highlight"] and ui["reset"]
            assert ui["label"] == s["site.pydemo_edit"] and ui["outLabel"] == s["site.pydemo_output"]
            source = content_demo(lang, demo.get_attribute("data-demo"))
            assert ui["code"] == ui["original"] == source
            built = ui["output"]
            got = page.evaluate(RUN_JS, [demo, "import numpy as np\nprint('sum', int(np.arange(5).sum()))\n"])
            assert got == {"output": "sum 10\n", "kind": "live", "label": s["runtime.pydemo_live"]}
            got = page.evaluate(RUN_JS, [demo, "x = 1\nprint(undefined_name)\n"])
            assert got["kind"] == "error" and got["label"] == s["runtime.pydemo_error"]
            assert got["output"].splitlines()[-1] == "NameError: name 'undefined_name' is not defined"
            assert 'File "<exec>", line 2' in got["output"] and "_pyodide" not in got["output"]
            got = page.evaluate(RUN_JS, [demo, "def f(:\n"])
            assert got["kind"] == "error" and "SyntaxError" in got["output"] and "_pyodide" not in got["output"]
            demo.query_selector("button[data-reset]").click()
            ui = page.evaluate(UI_JS, demo)
            assert ui["code"] == source and ui["output"] == built and ui["outLabel"] == s["site.pydemo_output"]
            got = page.evaluate(RUN_JS, [demo, source])              # the page's own program, live
            assert got["output"] == built and got["kind"] == "live"
            if lang != "en":
                assert CJK.search(source) and CJK.search(built)       # comments and labels translated
            ran += 1
    assert ran >= 2


def content_demo(lang: str, name: str) -> str:
    path = ROOT / "content" / "demos" / lang / f"{name}.py"
    return (path if path.is_file() else ROOT / "content" / "demos" / f"{name}.py").read_text(encoding="utf-8")


# ---- layout -------------------------------------------------------------------------------------

LAYOUT_JS = """() => {
  const W = document.documentElement.clientWidth;
  const visible = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0 &&
    getComputedStyle(el).visibility !== "hidden"; };
  const small = [];
  for (const el of document.querySelectorAll("form.controls select, form.controls input, .pydemo-bar button, a.lang-switch, .toc-fold summary, button.runtime-ask")) {
    if (!visible(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.height < 44 || r.width < 44) small.push(`${el.tagName.toLowerCase()}.${el.className}[${el.name || el.dataset.for || ""}] ${Math.round(r.width)}x${Math.round(r.height)}`);
  }
  const split = [];
  const walker = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const i = n.data.search(/<\\s*\\d/);
    if (i < 0 || !n.parentElement.closest("td, dd, th")) continue;
    const j = n.data.slice(i + 1).search(/\\d/) + i + 1;
    const rect = (k) => { const r = document.createRange(); r.setStart(n, k); r.setEnd(n, k + 1); return r.getBoundingClientRect(); };
    if (Math.abs(rect(i).top - rect(j).top) > 2) split.push(n.data);
  }
  const scrolling = [];
  for (const el of document.querySelectorAll(".math-display, math[display=inline]")) {
    if (el.closest(".math-display") && el.tagName.toLowerCase() === "math") continue;
    if (el.scrollWidth <= el.clientWidth + 1) continue;
    const cs = getComputedStyle(el);
    scrolling.push({shows: cs.backgroundImage.includes("radial-gradient"), focusable: el.tabIndex === 0,
                    what: el.textContent.slice(0, 40)});
  }
  const heads = Array.from(document.querySelectorAll("tbody th[scope=row]")).map(th => getComputedStyle(th).whiteSpace);
  // the contents list shown at this width: the sidebar, or the folded one (opened to measure it)
  const toc = Array.from(document.querySelectorAll(".toc-side > ol, .toc-fold > details > ol"))
    .find(ol => getComputedStyle(ol.closest("nav")).display !== "none");
  if (toc && toc.parentElement.tagName === "DETAILS") toc.parentElement.open = true;
  let marker = null;
  if (toc) {
    const items = toc.children.length;
    const cs = getComputedStyle(toc.children[0]);
    const ctx = document.createElement("canvas").getContext("2d");
    ctx.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
    marker = {items, need: ctx.measureText(items + ". ").width, have: parseFloat(getComputedStyle(toc).paddingLeft)};
  }
  // Tables: how far each scrolls sideways, and whether its caption stays inside the wrapper's
  // box before and after the table is scrolled to its end (a caption that scrolls with its table
  // is clipped on a phone); the region is still named by the caption.
  const tables = [];
  for (const wrap of document.querySelectorAll(".table-wrap")) {
    if (wrap.hidden || !wrap.offsetParent) continue;
    const cap = wrap.querySelector(":scope > table > caption");
    const over = wrap.scrollWidth - wrap.clientWidth;
    const out = (c) => { const w = wrap.getBoundingClientRect(), r = c.getBoundingClientRect();
                         return Math.max(w.left - r.left, r.right - w.right); };
    let clipped = null;
    if (cap) {
      const before = out(cap);
      wrap.scrollLeft = over;
      clipped = Math.max(before, out(cap));
      wrap.scrollLeft = 0;
    }
    tables.push({name: (wrap.querySelector("table").dataset.table || (cap ? cap.textContent : "")).slice(0, 40),
                 over, clipped, named: !cap || wrap.getAttribute("aria-labelledby") === cap.id});
  }
  return {W, sw: document.documentElement.scrollWidth, small, split, scrolling, heads: [...new Set(heads)], marker,
          tables};
}"""


@pytest.mark.parametrize("width", [320, 390, 1280])
def test_layout_at_phone_and_desktop_widths(new_context, site_url, built_site, width):
    """With JavaScript on (sliders shown) and the runtime blocked (the static tables)."""
    ctx = new_context(viewport={"width": width, "height": 844})
    ctx.route("**/pyodide/**", lambda route: route.abort())
    problems = []
    markers = 0
    for lang, name in html_files(built_site):
        page = ctx.new_page()
        page.goto(f"{site_url}{lang}/{name}")
        page.wait_for_function("() => document.documentElement.dataset.runtime === 'failed'", timeout=30_000)
        page.evaluate(OPEN_DEEP_JS)      # as a reader who opens every deep dive sees them
        page.wait_for_timeout(300)
        r = page.evaluate(LAYOUT_JS)
        where = f"{lang}/{name} at {width} px"
        if r["sw"] > r["W"]:
            problems.append(f"{where}: the page is {r['sw']} px wide")
        if width < 600 and r["small"]:
            problems.append(f"{where}: touch targets under 44 px: {r['small'][:5]}")
        if r["split"]:
            problems.append(f"{where}: '<' split from its number: {r['split'][:3]}")
        bad = [s for s in r["scrolling"] if not (s["shows"] and s["focusable"])]
        if bad:
            problems.append(f"{where}: formulas scroll without showing it or without a tab stop: {bad[:3]}")
        if r["heads"] and r["heads"] != ["normal"]:
            problems.append(f"{where}: row headers do not wrap: {r['heads']}")
        for t in r["tables"]:
            if t["clipped"] is not None and t["clipped"] > 1:
                problems.append(f"{where}: caption of {t['name']!r} leaves its wrapper by {t['clipped']} px")
            if not t["named"]:
                problems.append(f"{where}: table region {t['name']!r} is not named by its caption")
            # A table that scrolls by a few pixels is an accident: it fits, or it clearly scrolls.
            if width >= 1280 and 0 < t["over"] < 24:
                problems.append(f"{where}: {t['name']!r} scrolls sideways by only {t['over']} px")
        if r["marker"]:
            markers += 1
            if r["marker"]["have"] < r["marker"]["need"]:
                problems.append(f"{where}: contents list numbers clipped: {r['marker']}")
        page.close()
    assert markers >= 2
    assert problems == [], "\n".join(problems)


def test_without_javascript_the_static_page_is_complete(new_context, site_url, built_site):
    ctx = new_context(java_script_enabled=False)
    page = ctx.new_page()
    page.goto(f"{site_url}en/row-parallel.html")
    assert page.locator("input[type=range]").count() > 0
    assert all(not el.is_visible() for el in page.query_selector_all("input[type=range]"))
    assert page.locator(".pydemo .highlight").first.is_visible()
    assert not page.locator("textarea.pydemo-code").first.is_visible()
    assert page.locator("table[data-table]").count() > 5
    assert page.evaluate("document.documentElement.dataset.runtime") == "loading"   # nothing claims to be live
    page.close()
