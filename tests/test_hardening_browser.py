"""The live pages under bad conditions (issue 7, part 3): real Chromium, real Pyodide 0.27.7.

- Every control of every demo, both pages, both languages, gets six bad values (empty, NaN,
  negative, huge, non-numeric, out of range).  A ``<select>`` cannot hold a value outside its
  options, so the value is added as an option first (an edited page, or a future free-form
  control); a number ``<input>`` sanitises non-numbers to "" itself, and what the control then
  holds is what Python receives.  Expected outcome from CPython ``views.render`` for exactly the
  value the control holds: either the same ``TPMathError`` message in the page's language in the
  form's ``.control-msg``, ``aria-invalid`` on that control and the last good tables kept, or (a
  value that is in fact valid, e.g. a negative shift) the tables CPython computes.  The
  non-numeric value is an HTML payload: it must come back as text, never as markup.
- Runtime files corrupted on the wire (the wasm binary, the numpy wheel whose sha256 Pyodide
  checks against its lock file, the tpmath wheel) -> data-runtime="failed", the build-time
  tables, the page's sentence saying why.
- The worker dying mid-session.  No test hook exists in the page: the test reaches the worker
  through the DevTools protocol (Playwright's ``page.workers``), as a crash would, (1) with an
  uncaught exception in the worker's global scope (the page gets the Worker ``error`` event) ->
  app.js starts a fresh worker and the tables are live again; (2) with ``self.close()`` (a silent
  death) while the next runtime download is blocked -> the next render is unanswered, after
  app.js's request timeout the restart is tried, fails, and the page says so (runtime.crashed).
- No request leaves 127.0.0.1 (every request of every page and worker of this module).
"""

from __future__ import annotations

import time

import pytest

from test_pages_browser import (BOOT_TIMEOUT_MS, CJK, SET_JS, LivePage, cell_text, context, expected,  # noqa: F401
                                expected_error, html_files, live_pages, strings)
from tpmath import views

pytestmark = pytest.mark.browser

XSS = '<img src=x onerror="window.__tpPwned=1">'
ADD_OPTION_JS = """([demo, name, value]) => { const el = demo.querySelector("form").elements[name];
  if (el.tagName === "SELECT" && !Array.from(el.options).some(o => o.value === value)) {
    const o = document.createElement("option"); o.value = value; o.textContent = value;
    o.setAttribute("data-injected", ""); el.appendChild(o); } }"""
INJECTED_GONE_JS = "(d) => d.querySelectorAll('option[data-injected]').forEach(o => o.remove())"
NOT_PARSED_JS = "() => window.__tpPwned === undefined && document.querySelectorAll('img').length === 0"


def _text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def out_of_range(c) -> str:
    """A value just outside what the control allows (selects: a number none of the options is)."""
    if c.kind == "select":
        nums = [float(o) for o in c.options if str(o).lstrip("-").isdigit()]
        return _text(max(nums) * 1000 + 3) if nums else "no-such-choice"
    if c.max is not None:
        return _text(c.max * 2 + 1)
    return _text(c.min / 2) if c.min and c.min > 0 else "-1"


def bad_values(c) -> dict[str, str]:
    return {"empty": "", "NaN": "NaN", "negative": "-1", "huge": "1e308", "non-numeric": XSS,
            "out-of-range": out_of_range(c)}


TRIED: dict[str, int] = {}


def test_every_control_rejects_bad_values_in_both_languages(live_pages):
    tried = rejected = 0
    problems = []
    for (lang, name), live in sorted(live_pages.items()):
        for section in live.sections():
            base = dict(live.static[section]["controls"])
            good = live.set(section, base)
            assert good["msg"] == "", (lang, section, good["msg"])
            for c in views.sections()[section].controls:
                for kind, bad in bad_values(c).items():
                    live.page.evaluate(ADD_OPTION_JS, [live.demo(section), c.name, bad])
                    state = live.set(section, {**base, c.name: bad})
                    held = state["controls"][c.name]          # what the control really holds and sends
                    sent = {**base, c.name: held}
                    err = expected_error(section, sent, lang)
                    where = f"{lang}/{name} {section}.{c.name}={bad!r} ({kind}, held {held!r})"
                    tried += 1
                    if err is None:                            # in fact valid: the tables follow it
                        if state["msg"] != "" or state["invalid"] != []:
                            problems.append(f"{where}: unexpected message {state['msg']!r}")
                        elif state["tables"] != expected(section, sent, lang)["tables"]:
                            problems.append(f"{where}: live tables differ from CPython")
                        good = state
                        continue
                    rejected += 1
                    # the page's translation of the cell (a choice is named by its label there)
                    if state["msg"] != cell_text(err.cell, lang):
                        problems.append(f"{where}: message {state['msg']!r} != {cell_text(err.cell, lang)!r}")
                    if lang == "zh" and err.message("zh") != err.message("en") and not CJK.search(state["msg"]):
                        problems.append(f"{where}: message not in Chinese")
                    if state["invalid"] != [err.field or c.name]:
                        problems.append(f"{where}: aria-invalid on {state['invalid']}")
                    if state["tables"] != good["tables"] or state["values"] != good["values"]:
                        problems.append(f"{where}: the last good tables were not kept")
                    if held == XSS and XSS not in state["msg"]:
                        problems.append(f"{where}: the value is not quoted as text in {state['msg']!r}")
                live.page.evaluate(INJECTED_GONE_JS, live.demo(section))
                restored = live.set(section, base)
                if restored["msg"] or restored["invalid"]:
                    problems.append(f"{lang}/{name} {section}: defaults not accepted again: {restored['msg']!r}")
        assert live.page.evaluate(NOT_PARSED_JS), f"{lang}/{name}: a control value was parsed as HTML"
        assert live.errors == [], live.errors
    n_controls = sum(len(views.sections()[s].controls) for live in live_pages.values() for s in live.sections())
    assert tried == 6 * n_controls and n_controls >= 2 * 40      # every control, both languages
    assert {lang for lang, _ in live_pages} == {"en", "zh"} and len(live_pages) >= 4
    assert rejected > tried // 2
    TRIED.update(tried=tried, rejected=rejected, controls=n_controls)
    print(f"\nbad values tried in the browser: {tried} ({n_controls} controls over both pages and languages × 6), "
          f"rejected with a message: {rejected}")
    assert problems == [], "\n".join(problems)


# ---- runtime files corrupted on the wire ----------------------------------------------------------

def _corrupt(data: bytes) -> bytes:
    """Flip bytes in the middle (same length: only a hash or a decoder can notice)."""
    mid = len(data) // 2
    return data[:mid] + bytes(b ^ 0xFF for b in data[mid:mid + 64]) + data[mid + 64:]


def _fulfill_with(body: bytes, served: list[str]):
    def fulfill(route):
        served.append(route.request.url)
        route.fulfill(status=200, body=body, headers={
            "Content-Type": "application/wasm" if route.request.url.endswith(".wasm") else "application/zip"})
    return fulfill


CORRUPTED = {   # file name -> (language of the page, what notices)
    "pyodide.asm.wasm": ("en", "WebAssembly.instantiate"),
    "numpy-2.0.2-cp312-cp312-pyodide_2024_0_wasm32.whl": ("zh", "sha256 in pyodide-lock.json"),
    "tpmath-0.1.0-py3-none-any.whl": ("en", "zip reader / import"),
}


def test_corrupted_runtime_files_leave_a_static_page_that_says_why(new_context, site_url, built_site):
    opened = []
    for filename, (lang, _) in CORRUPTED.items():
        matches = [m for m in built_site.rglob(filename) if m.parent.name != "download"]   # not the readers' copy
        assert len(matches) == 1, f"{filename} not in the built site"
        body = _corrupt(matches[0].read_bytes())
        ctx = new_context()
        served: list[str] = []
        ctx.route(f"**/{filename}", _fulfill_with(body, served))
        page = ctx.new_page()
        live = LivePage(page, lang, "index.html")
        page.goto(f"{site_url}{lang}/index.html", wait_until="domcontentloaded")
        static = {s: live.snapshot(s) for s in live.sections()}
        opened.append((filename, live, static, served))
    for filename, live, static, served in opened:
        page = live.page
        page.wait_for_function("() => document.documentElement.dataset.runtime !== 'loading'", timeout=BOOT_TIMEOUT_MS)
        assert served, f"{filename} was never requested"
        assert page.evaluate("document.documentElement.dataset.runtime") == "failed", filename
        statuses = set(page.eval_on_selector_all(".runtime-status", "els => els.map(e => e.textContent)"))
        assert statuses == {strings(live.lang)["runtime.failed"]}, (filename, statuses)
        for section, snap in static.items():
            assert live.snapshot(section)["tables"] == snap["tables"], (filename, section)
        page.close()


# ---- the worker dying mid-session -----------------------------------------------------------------

def _wait_runtime(page, state: str, timeout: int = BOOT_TIMEOUT_MS) -> None:
    page.wait_for_function(f"() => document.documentElement.dataset.runtime === {state!r}", timeout=timeout)


def test_worker_crash_restarts_once_then_says_so(new_context, site_url):
    ctx = new_context()
    page = ctx.new_page()
    live = LivePage(page, "en", "index.html")
    page.goto(f"{site_url}en/index.html")
    _wait_runtime(page, "ready")
    s = strings("en")
    section = "mlp" if "mlp" in live.sections() else live.sections()[0]
    base = dict(live.snapshot(section)["controls"])
    tp = next(c for c in views.sections()[section].controls if c.kind == "select")
    other = next(str(o) for o in tp.options if str(o) != base[tp.name])

    # 1. An uncaught exception in the worker: the page gets the Worker "error" event, replaces the
    #    worker, and the tables are live again (checked against CPython).
    assert len(page.workers) == 1
    first = page.workers[0]
    with page.expect_worker(timeout=10_000):
        first.evaluate("setTimeout(() => { throw new Error('simulated crash in the worker'); }, 0)")
    _wait_runtime(page, "ready")
    assert page.text_content(".runtime-status") == s["runtime.ready"]
    state = live.set(section, {**base, tp.name: other})
    assert state["msg"] == "" and state["tables"] == expected(section, {**base, tp.name: other}, "en")["tables"]
    live_tables = state["tables"]

    # 2. A silent death (self.close()) while the runtime cannot be downloaded again: the next
    #    render is never answered; after the request timeout the restart is tried, fails, and the
    #    page says so.  The change lost with the worker is a precomputed state (one control away
    #    from the static page's), so it is answered from the precomputed results while the
    #    replacement boots.  It is two or more choices from every state shown so far: the page
    #    shows states one step from those from the answers the worker sent ahead, without a request.
    opts = [str(o) for o in tp.options]
    far = next(o for o in reversed(opts) if min(abs(opts.index(o) - opts.index(v)) for v in (base[tp.name], other)) >= 2)
    lost = {**base, tp.name: far}
    ctx.route("**/pyodide/**", lambda route: route.abort())
    second = page.workers[-1]
    second.evaluate("setTimeout(() => self.close(), 0)")
    live.set(section, lost)        # returns when the demo is no longer busy
    _wait_runtime(page, "failed", timeout=60_000)
    statuses = set(page.eval_on_selector_all(".runtime-status", "els => els.map(e => e.textContent)"))
    assert statuses == {s["runtime.crashed"]}
    after = live.snapshot(section)
    assert after["tables"] == expected(section, lost, "en")["tables"] != live_tables
    assert not after["busy"] and after["msg"] == ""
    # A precomputed setting still answers (it was refused before: issue 25 item 22).
    again = live.set(section, {**base, tp.name: other})
    assert again["msg"] == "" and again["tables"] == expected(section, {**base, tp.name: other}, "en")["tables"]
    page.close()


def test_a_worker_that_keeps_dying_is_given_up_truthfully_and_retry_starts_a_fresh_one(new_context, site_url):
    """After MAX_RESTARTS replacements the page stops trying: the message says so (not "could not
    be restarted": no restart was tried), the precomputed settings still answer, and Retry
    (the button beside each demo) starts a fresh worker that answers live again."""
    ctx = new_context()
    page = ctx.new_page()
    live = LivePage(page, "en", "index.html")
    page.goto(f"{site_url}en/index.html")
    _wait_runtime(page, "ready")
    s = strings("en")
    for _ in range(2):                      # two crashes: two replacements
        with page.expect_worker(timeout=10_000):
            page.workers[-1].evaluate("setTimeout(() => { throw new Error('simulated crash'); }, 0)")
        _wait_runtime(page, "ready")
    page.workers[-1].evaluate("setTimeout(() => { throw new Error('simulated crash'); }, 0)")
    _wait_runtime(page, "failed", timeout=10_000)
    statuses = set(page.eval_on_selector_all(".runtime-status", "els => els.map(e => e.textContent)"))
    assert statuses == {s["runtime.gave_up"]}
    buttons = page.eval_on_selector_all(".runtime-line button", "els => els.map(e => e.textContent)")
    assert set(buttons) == {s["runtime.retry"]} and len(buttons) == page.eval_on_selector_all(".runtime-line", "els => els.length")
    # precomputed settings keep answering (item 22)
    section = "mlp"
    base = dict(live.snapshot(section)["controls"])
    state = live.set(section, {**base, "tp": "4"})
    assert state["msg"] == "" and state["tables"] == expected(section, {**base, "tp": "4"}, "en")["tables"]
    page.locator(".runtime-line button").first.click()
    _wait_runtime(page, "ready")
    assert page.eval_on_selector_all(".runtime-line button", "els => els.length") == 0
    state = live.set(section, {**base, "tp": "2"})
    assert state["msg"] == "" and state["tables"] == expected(section, {**base, "tp": "2"}, "en")["tables"]
    assert live.errors == []
    page.close()


# ---- slow and stalled connections -----------------------------------------------------------------

SLOW_BYTES_PER_S = 100_000    # ~0.8 Mbit/s: pyodide.asm.js alone (236 kB gzip) takes seconds to arrive


def test_on_a_slow_connection_the_progress_bar_moves_from_the_first_byte(new_context, site_url):
    """Chromium's own network throttling (DevTools protocol; it applies to the worker's requests
    too).  Before the fix the worker's synchronous importScripts of pyodide.asm.js held every
    count back until that file was in: ~10 s at 0 at this rate, 21 s on Fast 3G."""
    ctx = new_context()
    page = ctx.new_page()
    cdp = ctx.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 150,
                                                   "downloadThroughput": SLOW_BYTES_PER_S,
                                                   "uploadThroughput": SLOW_BYTES_PER_S})
    first = []
    ctx.on("response", lambda r: first.append(time.monotonic()) if "/pyodide/" in r.url and not first else None)
    page.goto(f"{site_url}en/row-parallel.html", wait_until="domcontentloaded")
    page.wait_for_function("() => document.querySelector('progress.runtime-progress')", timeout=30_000)
    page.wait_for_function("() => document.querySelector('progress.runtime-progress').value > 0", timeout=20_000)
    moved = time.monotonic()
    assert first, "no runtime file arrived"
    assert moved - first[0] < 3.0, f"the bar moved {moved - first[0]:.1f} s after the first byte"
    assert page.evaluate("document.documentElement.dataset.runtime") == "loading"
    # the bar keeps moving: a slow download is not a stall
    v1 = page.evaluate("document.querySelector('progress.runtime-progress').value")
    page.wait_for_function(f"() => document.querySelector('progress.runtime-progress').value > {v1}", timeout=5_000)
    page.close()


def test_a_stalled_download_fails_after_no_progress_and_retry_works(new_context, site_url):
    """Every runtime request held (never answered): no byte arrives, so the stall rule gives up
    (20 s without progress, not a total time) with the failure sentence and a Retry button; with
    the network back, Retry starts a fresh worker that becomes ready and answers live."""
    ctx = new_context()
    holding = {"on": True}

    def hold(route):
        if holding["on"]:
            return            # never answered: a stalled connection
        route.continue_()

    ctx.route("**/pyodide/**", hold)
    page = ctx.new_page()
    live = LivePage(page, "zh", "index.html")
    t0 = time.monotonic()
    page.goto(f"{site_url}zh/index.html")
    _wait_runtime(page, "failed", timeout=45_000)
    took = time.monotonic() - t0
    assert 15 < took < 40, took
    s = strings("zh")
    statuses = set(page.eval_on_selector_all(".runtime-status", "els => els.map(e => e.textContent)"))
    assert statuses == {s["runtime.timeout"]} and CJK.search(s["runtime.timeout"])
    assert page.evaluate("document.querySelectorAll('progress').length") == 0
    retry = page.locator(".runtime-line button").first
    assert retry.text_content() == s["runtime.retry"]
    holding["on"] = False
    retry.click()
    _wait_runtime(page, "ready")
    assert set(page.eval_on_selector_all(".runtime-status", "els => els.map(e => e.textContent)")) == {s["runtime.ready"]}
    section = "vocab-ce"
    base = dict(live.snapshot(section)["controls"])
    state = live.set(section, {**base, "shift": "1.25"})          # not precomputed: the worker answers
    assert state["msg"] == "" and state["tables"] == expected(section, {**base, "shift": "1.25"}, "zh")["tables"]
    assert live.errors == []
    page.close()


# ---- readers' programs ------------------------------------------------------------------------------

RUN_JS = """async ([demo, code]) => {
  demo.querySelector("textarea.pydemo-code").value = code;
  demo.querySelector("button[data-run]").click();
  await new Promise(resolve => { const obs = new MutationObserver(() => {
    if (!demo.hasAttribute("aria-busy")) { obs.disconnect(); resolve(); } });
    obs.observe(demo, {attributes: true, attributeFilter: ["aria-busy"]}); });
  const out = demo.querySelector(".pydemo-output"), note = demo.querySelector(".pydemo-note");
  return {output: out.textContent, kind: out.dataset.kind, label: demo.querySelector(".pydemo-label").textContent,
          note: note.hidden ? null : note.textContent};
}"""
HOSTILE = "\n".join([
    "import tpmath.fmt as f",
    "f.num = lambda *a, **k: 'HACKED'",
    "f.err = lambda *a, **k: 'HACKED'",
    "import tpmath.views as v",
    "v.render_json = lambda *a, **k: '{\"ok\": false, \"error\": \"HACKED\", \"field\": null}'",
    "print('patched')", ""])
PYDEMO_TEXT_JS = "(d) => d.querySelector('.pydemo-output').textContent + d.querySelector('textarea').value"


@pytest.fixture(scope="module")
def program_pages(new_context, site_url):
    """The row-parallel page (it has the Python demo) in both languages, runtime ready."""
    ctx = new_context()
    pages = {}
    for lang in ("en", "zh"):
        page = ctx.new_page()
        pages[lang] = LivePage(page, lang, "row-parallel.html")
        page.goto(f"{site_url}{lang}/row-parallel.html")
    for live in pages.values():
        _wait_runtime(live.page, "ready")
    yield pages
    for live in pages.values():
        live.page.close()


def test_a_hostile_program_leaves_every_demo_unchanged(program_pages):
    """The program rebinds tpmath.fmt.num and views.render_json: before the fix it ran in the
    demos' worker and 312 cells read HACKED.  It runs in its own worker now; every demo still
    shows CPython's values after it, and Reset gives the reader a fresh Python too."""
    from test_pages_browser import settings_for
    live = program_pages["en"]
    page = live.page
    demo = page.locator(".pydemo").first.element_handle()
    built = page.evaluate("(d) => d.querySelector('.pydemo-output').textContent", demo)
    assert page.evaluate(RUN_JS, [demo, HOSTILE])["output"] == "patched\n"
    got = page.evaluate(RUN_JS, [demo, "import tpmath.fmt as f\nprint(f.num(1.5))\n"])
    assert got["output"] == "HACKED\n"              # it did change its own interpreter
    checked = 0
    for section in live.sections():
        base = dict(live.snapshot(section)["controls"])
        for setting in settings_for(section)[:2] + [{"seed": "777"} if "seed" in base else {}]:
            controls = {**base, **setting}
            if expected_error(section, controls, "en") is not None:
                continue
            state = live.set(section, controls)
            assert state["msg"] == "", (section, setting, state["msg"])
            assert state["tables"] == expected(section, controls, "en")["tables"], (section, setting)
            checked += 1
        live.set(section, base)
    assert checked >= 2 * len(live.sections())
    rest = page.inner_text("body").replace(page.evaluate(PYDEMO_TEXT_JS, demo), "")
    assert "HACKED" not in rest
    page.click(".pydemo button[data-reset]")
    assert page.evaluate("(d) => d.querySelector('.pydemo-output').textContent", demo) == built
    source = page.evaluate("(d) => d.querySelector('textarea').value", demo)
    got = page.evaluate(RUN_JS, [demo, "import tpmath.fmt as f\nprint(f.num(1.5))\n"])
    assert got["output"] != "HACKED\n" and got["kind"] == "live"   # Reset: a fresh interpreter
    assert page.evaluate(RUN_JS, [demo, source])["output"] == built
    assert live.errors == []


def test_a_runaway_program_can_be_stopped_while_the_demos_keep_answering(program_pages):
    for lang, live in program_pages.items():
        page = live.page
        s = strings(lang)
        demo = page.locator(".pydemo").first
        handle = demo.element_handle()
        page.evaluate(RUN_JS, [handle, "print(1)\n"])            # the programs' worker is started
        page.evaluate("([d, c]) => { d.querySelector('textarea').value = c; d.querySelector('button[data-run]').click(); }",
                      [handle, "while True:\n    pass\n"])
        stop = demo.locator("button[data-stop]")
        stop.wait_for(state="visible", timeout=5_000)
        assert stop.text_content() == s["runtime.stop"]
        assert demo.locator("button[data-run]").is_disabled()
        # the demos answer live meanwhile (their worker never runs readers' code)
        section = "row-linear"
        base = dict(live.snapshot(section)["controls"])
        t0 = time.monotonic()
        state = live.set(section, {**base, "seed": "4242"})
        assert time.monotonic() - t0 < 5
        assert state["msg"] == "" and state["tables"] == expected(section, {**base, "seed": "4242"}, lang)["tables"]
        assert page.evaluate("document.documentElement.dataset.runtime") == "ready"
        stop.click()
        page.wait_for_function("(d) => !d.hasAttribute('aria-busy')", arg=handle, timeout=5_000)
        out = page.evaluate("(d) => [d.querySelector('.pydemo-output').textContent, "
                            "d.querySelector('.pydemo-output').dataset.kind, d.querySelector('.pydemo-label').textContent]", handle)
        assert out == [s["runtime.pydemo_stopped"], "stopped", s["runtime.pydemo_stopped_label"]]   # the reader's stop, no error
        assert not stop.is_visible() and demo.locator("button[data-run]").is_enabled()
        got = page.evaluate(RUN_JS, [handle, "print(6 * 7)\n"])    # a fresh worker runs the next one
        assert got["output"] == "42\n" and got["kind"] == "live"
        live.set(section, base)
        assert live.errors == []


def test_huge_output_is_cut_with_a_note_and_input_says_it_is_not_available(program_pages):
    for lang, live in program_pages.items():
        page = live.page
        s = strings(lang)
        handle = page.locator(".pydemo").first.element_handle()
        got = page.evaluate(RUN_JS, [handle, "print('x' * 10_000_000)\n"])
        kept = len(got["output"].rstrip("\n"))
        assert 1000 <= kept < 10_000_000 and set(got["output"].rstrip("\n")) == {"x"}
        n = f"{10_000_000 - kept:,}"                      # en and zh both group by thousands with ","
        assert got["note"] == s["runtime.pydemo_cut"].format(n=n), got["note"]
        box = page.evaluate("(d) => { const r = d.querySelector('.pydemo-output').getBoundingClientRect(); "
                            "return [r.width, r.height]; }", handle)
        assert box[0] > 100 and box[1] > 10
        got = page.evaluate(RUN_JS, [handle, "print('before')\nname = input('name? ')\nprint(name)\n"])
        assert got["kind"] == "error" and got["label"] == s["runtime.pydemo_error"]
        assert got["output"].startswith("before\n")
        assert got["note"] == s["runtime.pydemo_input"]
        assert "EOFError" in got["output"] and "Errno 29" not in got["output"]
        # the note fits the column (wrapped text, not a line of the output box)
        fits = page.evaluate("(d) => { const n = d.querySelector('.pydemo-note'); return n.scrollWidth <= n.clientWidth; }", handle)
        assert fits
        got = page.evaluate(RUN_JS, [handle, "print('short')\n"])
        assert got["note"] is None and got["output"] == "short\n"      # a later run clears the notes
        if lang == "zh":
            assert CJK.search(s["runtime.pydemo_input"])
        assert live.errors == []


# ---- no request leaves 127.0.0.1 ------------------------------------------------------------------

def test_no_request_leaves_127_0_0_1(live_pages, request_log, built_site):
    """Every request of every page and worker opened through this session's contexts so far (under
    pytest-xdist: this worker's; tests/conftest.py's new_context checks every context at the end)."""
    urls = request_log.urls
    for lang, name in html_files(built_site):
        assert any(u.endswith(f"/{lang}/{name}") for u in urls), f"{lang}/{name} not loaded"
    for needed in ("/pyodide/pyodide.asm.wasm", "/pyodide/python_stdlib.zip", "-py3-none-any.whl",
                   "/pyodide/numpy-2.0.2-cp312-cp312-pyodide_2024_0_wasm32.whl", "/static/worker.js"):
        assert any(u.split("?")[0].endswith(needed) for u in urls), f"no request for {needed}"
    assert request_log.foreign() == [], request_log.foreign()
