"""Accessibility (issue 7, part 6): axe-core in real Chromium, the keyboard, table and math semantics.

- axe-core 4.14.1 from npm (``scripts/fetch_axe.py``: ``npm pack``, sha512 integrity pinned) is
  injected with ``add_script_tag(path=...)`` into every page (the language choice and every
  content page in both languages, runtime ready, one demo showing an error message) in the light
  and the dark colour scheme, at a desktop and a phone width: no serious or critical violation.  The context bypasses the pages'
  CSP only so the injected script may run.
- Keyboard: every control of every page is reached with Tab (in document order) and changed
  with the arrow keys; the section's tables then equal CPython's ``views.render`` for the new
  value (or CPython's error message when the new value is refused).
- Every table has a caption and column headers; every demo-table row starts with a row header; every
  ``<math>`` has a text alternative (``alttext``).
"""

from __future__ import annotations

import collections
import html.parser
import importlib.util
from pathlib import Path

import pytest

from test_pages_browser import BOOT_TIMEOUT_MS, LivePage, diff, expected, expected_error, live_pages  # noqa: F401
from tpmath import views
from tpsite.build import CONTENTS

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
AXE_RUN_JS = """async () => {
  const r = await axe.run(document, {resultTypes: ["violations"]});
  return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => n.target.join(" ") + " :: " + (n.failureSummary || "").replace(/\\s+/g, " "))}));
}"""


def _fetch_axe():
    spec = importlib.util.spec_from_file_location("fetch_axe", ROOT / "scripts" / "fetch_axe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def axe_js() -> Path:
    """The verified axe.min.js (fetched through npm the first time; fails, never skips, without it)."""
    fetch_axe = _fetch_axe()
    try:
        return fetch_axe.ensure()
    except fetch_axe.FetchError as err:
        pytest.fail(f"axe-core unavailable: {err} (run python3 scripts/fetch_axe.py)")


@pytest.fixture(scope="module")
def context(new_context):
    """Used by ``live_pages`` (tests/test_pages_browser.py): CSP bypassed so add_script_tag can inject axe."""
    return new_context(bypass_csp=True)


# Resolves once the demo is no longer waiting for the worker (pages in background tabs throttle
# requestAnimationFrame polling, so wait on the attribute itself).
IDLE_JS = """(demo) => new Promise(resolve => {
  if (!demo.hasAttribute("aria-busy")) return resolve();
  const obs = new MutationObserver(() => { if (!demo.hasAttribute("aria-busy")) { obs.disconnect(); resolve(); } });
  obs.observe(demo, {attributes: true, attributeFilter: ["aria-busy"]});
})"""

DESKTOP = {"width": 1280, "height": 720}
# Light and dark, at a desktop width and a phone width (where wide tables and formulas scroll).
VIEWS = [(1280, "light"), (1280, "dark"), (390, "light"), (390, "dark")]

FINDINGS: dict = {}


def test_axe_no_serious_or_critical_violations(live_pages, context, site_url, axe_js):
    pages = dict(live_pages)
    choice = context.new_page()
    choice.goto(f"{site_url}index.html?choose")
    pages[("", "index.html")] = LivePage(choice, "en", "index.html")
    for lang in sorted({lang for lang, _ in live_pages}):     # the contents pages (no runtime)
        contents = context.new_page()
        contents.goto(f"{site_url}{lang}/{CONTENTS}")
        pages[(lang, CONTENTS)] = LivePage(contents, lang, CONTENTS)
    counts: collections.Counter = collections.Counter()
    serious = []
    scanned = 0
    for (lang, name), live in sorted(pages.items()):
        page = live.page
        sections = live.sections()
        if sections:   # an error on show: the message, aria-invalid, live tables around it
            section = sections[0]
            first = views.sections()[section].controls[0]
            live.page.evaluate("""([demo, name]) => { const el = demo.querySelector("form").elements[name];
                const o = document.createElement("option"); o.value = "bad"; o.textContent = "bad";
                o.setAttribute("data-injected", ""); el.appendChild(o); }""", [live.demo(section), first.name])
            state = live.set(section, {first.name: "bad"})
            assert state["msg"] and state["invalid"] == [first.name]
        page.add_script_tag(path=str(axe_js))
        for width, scheme in VIEWS:
            if page.viewport_size["width"] != width:
                page.set_viewport_size({"width": width, "height": 844})
                page.wait_for_timeout(400)          # app.js re-marks overflowing blocks 200 ms after a resize
                # ... measured on the page's own clock: on a busy machine its timers run late
                page.evaluate("""() => new Promise(r => requestAnimationFrame(() =>
                    setTimeout(() => requestIdleCallback(r, {timeout: 2000}), 300)))""")
            page.emulate_media(color_scheme=scheme)
            assert page.evaluate(f"matchMedia('(prefers-color-scheme: {scheme})').matches")
            for v in page.evaluate(AXE_RUN_JS):
                counts[f"{v['id']} ({v['impact']})"] += len(v["nodes"])
                if v["impact"] in ("serious", "critical"):
                    serious.append(f"{lang}/{name} {width}px {scheme}: {v['id']} ({v['impact']}) {v['help']}: "
                                   + "; ".join(v["nodes"][:3]))
            scanned += 1
        page.emulate_media(color_scheme="light")
        page.set_viewport_size(DESKTOP)
        if sections:
            page.evaluate("(d) => d.querySelectorAll('option[data-injected]').forEach(o => o.remove())",
                          live.demo(sections[0]))
            live.set(sections[0], dict(live.static[sections[0]]["controls"]))
    choice.close()
    for (lang, name), live in pages.items():
        if name == CONTENTS:
            live.page.close()
    FINDINGS.update(scanned=scanned, counts=dict(counts))
    print(f"\naxe-core: {scanned} page×scheme scans; violations by rule (nodes): {dict(counts) or 'none'}")
    assert scanned == len(VIEWS) * len(pages) and len(pages) >= 5
    assert serious == [], "\n".join(serious)


def _controls_in_order(live: LivePage) -> list[list[str]]:
    """Every enabled named control.  A disabled one (it does nothing in the current state, e.g. the
    root of AllToAll) is not a tab stop; tests/test_frontend_browser.py checks that its reason is
    shown next to it and tied to it with aria-describedby."""
    return live.page.eval_on_selector_all(
        ".demo[data-section] form.controls [name]:not(:disabled)",
        "els => els.map(e => [e.closest('.demo').dataset.section, e.name])")


def test_every_control_is_reached_with_tab_in_order(live_pages):
    for (lang, name), live in sorted(live_pages.items()):
        page = live.page
        want = _controls_in_order(live)
        assert want, f"{lang}/{name}: no controls"
        page.evaluate("() => { document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0); }")
        page.focus("body")
        reached, seen_other = [], 0
        for _ in range(len(want) + 400):
            page.keyboard.press("Tab")
            got = page.evaluate("""() => { const e = document.activeElement; const d = e && e.closest('.demo[data-section]');
                return e && e.name && d && e.closest('form.controls') ? [d.dataset.section, e.name] : null; }""")
            if got is None:
                seen_other += 1
            elif got not in reached:
                reached.append(got)
            if len(reached) == len(want):
                break
        assert reached == want, f"{lang}/{name}: Tab reached {len(reached)} of {len(want)} controls"
        assert seen_other > 0   # links and buttons are tab stops too: the walk really moved


def _key_for(control, value: str) -> str:
    """ArrowDown moves a select to the next option / a number down one step; at the end go up."""
    if control.kind == "select":
        opts = [str(o) for o in control.options]
        return "ArrowUp" if opts.index(value) == len(opts) - 1 else "ArrowDown"
    if control.max is not None and float(value) >= control.max:
        return "ArrowDown"
    return "ArrowUp"


def test_every_control_is_operated_with_arrow_keys(live_pages):
    changed, refused, problems = 0, 0, []
    for (lang, name), live in sorted(live_pages.items()):
        page = live.page
        for section, cname in _controls_in_order(live):
            base = dict(live.static[section]["controls"])
            control = next(c for c in views.sections()[section].controls if c.name == cname)
            locator = page.locator(f'.demo[data-section="{section}"] [name="{cname}"]')
            locator.focus()
            page.keyboard.press(_key_for(control, base[cname]))
            page.evaluate(IDLE_JS, live.demo(section))
            state = live.snapshot(section)
            where = f"{lang}/{name} {section}.{cname}"
            if state["controls"][cname] == base[cname]:
                problems.append(f"{where}: the arrow key did not change {base[cname]!r}")
                continue
            err = expected_error(section, state["controls"], lang)
            if err is not None:
                refused += 1
                if state["msg"] != err.message(lang):
                    problems.append(f"{where}: {state['msg']!r} != {err.message(lang)!r}")
            else:
                changed += 1
                problems += diff(where, state, expected(section, state["controls"], lang))
            live.set(section, base)
    print(f"\nkeyboard: {changed} controls changed tables by arrow key, {refused} gave CPython's message")
    assert problems == [], "\n".join(problems)
    assert changed > 0


class _Semantics(html.parser.HTMLParser):
    """Tables (caption, header cells) and <math alttext> in a built page.  A grid cell's own
    table (``role="presentation"``: a matrix laid out, not a data table) is not a table here, and
    its rows are not rows of the table holding it."""

    def __init__(self):
        super().__init__()
        self.tables: list[dict] = []
        self.maths: list[str | None] = []
        self._stack: list[dict] = []
        self.grids = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            # A grid inside a cell (role="presentation": a matrix laid out, not a data table of
            # its own) is not counted; its rows and cells must not count for the outer table.
            self._stack.append({"caption": "", "in_caption": False, "cols": 0, "rows": 0, "row_heads": 0,
                                "demo": "data-table" in a, "layout": a.get("role") == "presentation",
                                "part": None, "cell": 0})
            return
        if tag == "math":
            self.maths.append(a.get("alttext"))
        if not self._stack or self._stack[-1]["layout"]:
            return
        t = self._stack[-1]
        if tag == "caption":
            t["in_caption"] = True
        elif tag in ("thead", "tbody", "tfoot"):
            t["part"] = tag
        elif tag == "tr":
            t["cell"] = 0
            if t["part"] != "thead":
                t["rows"] += 1
        elif tag in ("th", "td"):
            if t["part"] == "thead" and tag == "th" and a.get("scope") == "col":
                t["cols"] += 1
            elif t["part"] != "thead" and t["cell"] == 0 and tag == "th" and a.get("scope") == "row":
                t["row_heads"] += 1
            t["cell"] += 1

    def handle_endtag(self, tag):
        if not self._stack:
            return
        if tag == "caption":
            self._stack[-1]["in_caption"] = False
        elif tag == "table":
            t = self._stack.pop()
            if t["layout"]:
                assert not (t["caption"] or t["cols"] or t["row_heads"]), "a presentation grid with table semantics"
                self.grids += 1
            else:
                self.tables.append(t)

    def handle_data(self, data):
        if self._stack and self._stack[-1]["in_caption"]:
            self._stack[-1]["caption"] += data


def test_tables_have_captions_and_headers_and_math_has_alttext(built_site):
    n_tables = n_math = n_grids = 0
    for path in sorted(built_site.rglob("*.html")):
        rel = path.relative_to(built_site).as_posix()
        sem = _Semantics()
        sem.feed(path.read_text(encoding="utf-8"))
        for i, t in enumerate(sem.tables):
            assert t["caption"].strip(), f"{rel}: table {i} has no caption"
            assert t["cols"] > 0, f"{rel}: table {i} ({t['caption']!r}) has no column headers"
            if t["demo"]:   # demo tables: one row per rank / item, named by its first cell
                assert t["row_heads"] == t["rows"], f"{rel}: table {i} ({t['caption']!r}): rows without a row header"
        for alt in sem.maths:
            assert alt and alt.strip(), f"{rel}: <math> without alttext"
        n_tables += len(sem.tables)
        n_math += len(sem.maths)
        n_grids += sem.grids
    assert n_tables > 40 and n_math > 500 and n_grids > 100, (n_tables, n_math, n_grids)
