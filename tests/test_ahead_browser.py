"""Ahead of the reader (templates/static/worker.js, js/demo.js ``statesBeside``), in real Chromium
with real Pyodide: the page tells the worker which states a reader reaches next, and the answers
the worker computed ahead are the ones CPython computes.

What is compared with what:
- the states the page sends along (recorded by wrapping ``Worker.postMessage`` in the test, the
  page itself unchanged) = the neighbours worked out here from the section's Control records:
  each enabled control one choice / one slider step either way, the control just moved first and
  its next step the way it moved first;
- once ready, each demo asks for its current state (the form's values) once, when it comes near
  the screen (not every demo of the page at once);
- a state the worker computed ahead reaches the page with its answer (recorded from the worker's
  messages) and a change to it is shown without a render request (only the states beside it go
  to the worker); a state not computed yet is asked for;
- the tables shown either way = ``tpmath.views.render`` in CPython.
"""

from __future__ import annotations

import json

import pytest

from test_pages_browser import BOOT_TIMEOUT_MS, LivePage, diff, expected
from tpmath import views

pytestmark = pytest.mark.browser

TAP_JS = """(() => {
  const Native = window.Worker;
  window.__sent = [];
  window.__answers = [];   // keys of the answers the worker sent ahead
  function Tapped(url, opts) {
    const w = new Native(url, opts);
    const post = w.postMessage.bind(w);
    w.postMessage = (msg, transfer) => {
      if (msg && (msg.type === "render" || msg.type === "ahead")) window.__sent.push(JSON.parse(JSON.stringify(msg)));
      return post(msg, transfer);
    };
    w.addEventListener("message", (ev) => { if (ev.data && ev.data.type === "answer") window.__answers.push(ev.data.key); });
    return w;
  }
  Tapped.prototype = Native.prototype;
  window.Worker = Tapped;
})();"""

SENT_JS = "() => window.__sent.splice(0)"
IDLE_JS = """(demo) => new Promise(resolve => {
  if (!demo.hasAttribute("aria-busy")) return resolve();
  const obs = new MutationObserver(() => { if (!demo.hasAttribute("aria-busy")) { obs.disconnect(); resolve(); } });
  obs.observe(demo, {attributes: true, attributeFilter: ["aria-busy"]});
})"""


def neighbours(section: str, values: dict, first: str | None = None, down: bool = False) -> list[dict]:
    """Each select-like control one option either way (next first), ``first``'s before the rest;
    ``down``: ``first`` was just moved down, so its previous option comes first."""
    controls = [c for c in views.sections()[section].controls if c.options]
    controls.sort(key=lambda c: c.name != first)       # stable: form order otherwise
    out = []
    for c in controls:
        opts = [str(o) for o in c.options]
        i = opts.index(str(values[c.name]))
        order = (i - 1, i + 1) if down and c.name == first else (i + 1, i - 1)
        out += [{**values, c.name: opts[j]} for j in order if 0 <= j < len(opts)]
    return out


@pytest.fixture(scope="module")
def live(new_context, site_url):
    ctx = new_context()
    ctx.add_init_script(TAP_JS)
    page = ctx.new_page()
    lp = LivePage(page, "en", "index.html")
    page.goto(f"{site_url}en/index.html", wait_until="domcontentloaded")
    page.wait_for_function("() => document.documentElement.dataset.runtime !== 'loading'", timeout=BOOT_TIMEOUT_MS)
    assert page.evaluate("document.documentElement.dataset.runtime") == "ready"
    yield lp
    page.close()


FORMS_JS = """() => Object.fromEntries(Array.from(document.querySelectorAll(".demo[data-section] form.controls"))
  .map(f => [f.closest('.demo').dataset.section,
             Object.fromEntries(Array.from(f.elements).filter(e => e.name).map(e => [e.name, e.value]))]))"""


def test_each_demo_asks_for_the_state_it_shows_once_near_the_screen(live):
    page = live.page
    forms = page.evaluate(FORMS_JS)
    assert len(forms) >= 8
    page.wait_for_function("() => window.__sent.some(m => m.type === 'ahead')")
    first = [(m["section"], m["next"]) for m in page.evaluate(SENT_JS) if m["type"] == "ahead"]
    # At the top of the page: the demos near the first screen, not every demo of the page.
    assert first and len(first) < len(forms), first
    assert all(nxt == [forms[s]] for s, nxt in first), first
    last = list(forms)[-1]
    assert last not in dict(first)
    # (the last demo is in a folded deep dive: it is near the screen once the reader opens it there)
    page.evaluate("(s) => { const d = document.querySelector(`.demo[data-section='${s}']`).closest('details');"
                  " if (d) d.open = true; }", last)
    page.locator(f'.demo[data-section="{last}"]').scroll_into_view_if_needed()
    page.wait_for_function("(s) => window.__sent.some(m => m.type === 'ahead' && m.section === s)", arg=last)
    later = [(m["section"], m["next"]) for m in page.evaluate(SENT_JS) if m["type"] == "ahead"]
    assert (last, [forms[last]]) in later
    # once per demo
    sections = [s for s, _ in first + later]
    assert len(sections) == len(set(sections)), sections
    page.evaluate("window.scrollTo(0, 0)")


def answer_key(section: str, controls: dict) -> str:
    """worker.js's key of an answer (the controls in form order, as the page sends them)."""
    return json.dumps([section, "en", controls], separators=(",", ":"), ensure_ascii=False)


def test_the_states_one_step_away_are_computed_ahead_and_shown_without_asking(live):
    page, section = live.page, "mlp"
    demo = live.demo(section)
    page.evaluate(SENT_JS)
    slider = page.locator(f'.demo[data-section="{section}"] input[type=range][data-for="stage"]')
    slider.focus()                                   # reaching for the controls: neighbours of the shown state
    start = live.snapshot(section)["controls"]
    page.wait_for_function("() => window.__sent.length > 0")
    sent = page.evaluate(SENT_JS)
    assert [(m["type"], m["section"]) for m in sent] == [("ahead", section)]
    assert sent[0]["next"] == neighbours(section, start)

    opts = [str(o) for o in next(c for c in views.sections()[section].controls if c.name == "stage").options]
    i = opts.index(start["stage"])
    key = "ArrowRight" if i + 2 < len(opts) else "ArrowLeft"
    step = 1 if key == "ArrowRight" else -1
    back = "ArrowLeft" if key == "ArrowRight" else "ArrowRight"
    # Two steps one way, one step back: each state was computed ahead (it is one step from the
    # one before) and sent to the page, which shows it without a render request and tells the
    # worker the states beside it -- the control just moved first, the way it moves first.
    for n, press, first, down in ((1, key, None, False), (2, key, "stage", step == -1),
                                  (1, back, "stage", back == "ArrowLeft")):
        want_controls = {**start, "stage": opts[i + n * step]}
        page.wait_for_function("(k) => window.__answers.includes(k)", arg=answer_key(section, want_controls))
        page.keyboard.press(press)
        page.evaluate(IDLE_JS, demo)
        state = live.snapshot(section)
        assert state["controls"] == want_controls
        # (other demos scrolled near the screen may ask for their shown state meanwhile)
        sent = [m for m in page.evaluate(SENT_JS) if m["section"] == section]
        assert [(m["type"], m.get("replace"), m.get("controls")) for m in sent] == [("ahead", True, want_controls)]
        assert sent[0]["next"] == neighbours(section, want_controls, first=first, down=down)
        assert diff(f"en {section} stage={want_controls['stage']}", state,
                    expected(section, want_controls, "en")) == []
    assert sent[0]["next"][0]["stage"] == opts[i]          # turned back: where the reader is heading
    # A state no one computed yet (two choices from every state shown) is asked for, with the
    # states beside it.
    far = {**start, "stage": next(opts[j] for j in (i - 2 * step, i + 4 * step) if 0 <= j < len(opts))}
    assert answer_key(section, far) not in page.evaluate("window.__answers")
    state = live.set(section, far)
    assert state["controls"] == far
    renders = [m for m in page.evaluate(SENT_JS) if m["type"] == "render"]
    assert [m["controls"] for m in renders] == [far]
    assert renders[0]["next"] == neighbours(section, far, first="stage",
                                            down=opts.index(far["stage"]) < opts.index(want_controls["stage"]))
    assert diff(f"en {section} stage={far['stage']}", state, expected(section, far, "en")) == []
    assert live.errors == []
