#!/usr/bin/env python3
"""Measure the live demos in real Chromium (figures for the notes; nothing is asserted).

    python3 scripts/measure_live.py [--runs 3] [--shots /tmp/shots]

- time from navigation to live tables (runtime ready + first render) vs a bare page that
  only boots Pyodide + numpy in a worker, same run, cold cache each time; their ratio;
- control change -> tables updated, p50 / p95 over 50 changes;
- bytes per page excluding the runtime (HTML, CSS, JS, the tpmath wheel);
- screenshots of the loading, ready, error and runtime-blocked states.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tpsite.serve import make_server  # noqa: E402

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]

BARE_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>bare</title>
<script src="bare.js" defer></script></head><body><p id="s">loading</p></body></html>"""
BARE_JS = """var w = new Worker("bare-worker.js");
w.onmessage = function (e) { document.documentElement.setAttribute("data-runtime", e.data); };
w.postMessage(new URL("pyodide/", document.baseURI).href);"""
BARE_WORKER = """self.onmessage = async function (e) {
  importScripts(e.data + "pyodide.js");
  var py = await loadPyodide({indexURL: e.data});
  await py.loadPackage("numpy");
  py.runPython("import numpy");
  self.postMessage("ready");
};"""

# Change the demo's controls, resolve when its result has been applied (aria-busy removed).
CHANGE_JS = """async ([demo, values]) => {
  const form = demo.querySelector("form.controls");
  for (const [k, v] of Object.entries(values)) form.elements[k].value = v;
  const t0 = performance.now();
  const done = new Promise(resolve => {
    const obs = new MutationObserver(() => { if (!demo.hasAttribute("aria-busy")) { obs.disconnect(); resolve(); } });
    obs.observe(demo, {attributes: true, attributeFilter: ["aria-busy"]});
  });
  form.elements[Object.keys(values)[0]].dispatchEvent(new Event("change", {bubbles: true}));
  await done;
  return performance.now() - t0;
}"""


def pct(values, q):
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shots", default="/tmp/shots")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright
    from tpmath import views

    tmp = Path(tempfile.mkdtemp(prefix="tp-measure-"))
    site = tmp / "site"
    subprocess.run([sys.executable, str(ROOT / "build.py"), "--runtime", "local", "--out", str(site)],
                   check=True, cwd=ROOT, capture_output=True)
    (site / "bare.html").write_text(BARE_HTML)
    (site / "bare.js").write_text(BARE_JS)
    (site / "bare-worker.js").write_text(BARE_WORKER)
    server = make_server(site, "127.0.0.1", 0, verbose=False)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    shots = Path(args.shots)
    shots.mkdir(parents=True, exist_ok=True)
    report: dict = {}

    # Bytes per page, excluding the runtime (site/pyodide/).
    shared = {p.relative_to(site).as_posix(): p.stat().st_size for p in (site / "static").iterdir() if p.is_file()}
    pages = {p.relative_to(site).as_posix(): p.stat().st_size for p in site.glob("*/*.html")}
    gz = {k: len(gzip.compress((site / k).read_bytes(), 9)) for k in list(pages) + list(shared)}
    report["bytes"] = {"pages": pages, "shared_static": shared, "gzip": gz,
                       "per_page_total": {k: v + sum(shared.values()) for k, v in pages.items()},
                       "per_page_total_gzip": {k: gz[k] + sum(gz[s] for s in shared) for k in pages}}

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page_url = base + "en/index.html"

        def first_section(page):
            return page.eval_on_selector(".demo[data-section]", "e => e.dataset.section")

        live_ms, bare_ms = [], []
        for _ in range(args.runs):
            for kind in ("bare", "live"):
                ctx = browser.new_context()       # cold HTTP cache every time
                page = ctx.new_page()
                t0 = time.perf_counter()
                if kind == "bare":
                    page.goto(base + "bare.html")
                    page.wait_for_function("() => document.documentElement.dataset.runtime === 'ready'", timeout=120_000)
                    bare_ms.append((time.perf_counter() - t0) * 1000)
                else:
                    page.goto(page_url)
                    page.wait_for_function("() => document.documentElement.dataset.runtime === 'ready'", timeout=120_000)
                    section = first_section(page)
                    demo = page.locator(f'.demo[data-section="{section}"]').element_handle()
                    controls = page.evaluate("(d) => Object.fromEntries(Array.from(d.querySelector('form').elements)"
                                             ".filter(e => e.name).map(e => [e.name, e.value]))", demo)
                    page.evaluate(CHANGE_JS, [demo, controls])   # first live tables on screen
                    live_ms.append((time.perf_counter() - t0) * 1000)
                ctx.close()
        report["boot_ms"] = {"live_tables": live_ms, "bare_pyodide_numpy": bare_ms,
                             "live_median": statistics.median(live_ms), "bare_median": statistics.median(bare_ms),
                             "ratio_of_medians": statistics.median(live_ms) / statistics.median(bare_ms)}

        # Control change -> tables updated, 50 changes alternating between settings that differ.
        ctx = browser.new_context(viewport={"width": 1200, "height": 900})
        page = ctx.new_page()
        held = []   # hold the wasm download so the loading state can be photographed
        page.route("**/pyodide/pyodide.asm.wasm", lambda route: held.append(route))
        page.goto(page_url)
        page.wait_for_function("() => document.querySelector('.runtime-status').textContent.length > 0")
        page.wait_for_timeout(300)
        page.locator(".demo").first.screenshot(path=str(shots / "loading.png"))
        for route in held:
            route.continue_()
        page.unroute("**/pyodide/pyodide.asm.wasm")
        page.wait_for_function("() => document.documentElement.dataset.runtime === 'ready'", timeout=120_000)
        section = first_section(page)
        demo = page.locator(f'.demo[data-section="{section}"]').element_handle()
        sec = views.sections()[section]
        sel = next(c for c in sec.controls if c.kind == "select")
        opts = [str(o) for o in sel.options]
        lat = [page.evaluate(CHANGE_JS, [demo, {sel.name: opts[i % len(opts)]}]) for i in range(1, 51)]
        report["change_ms"] = {"section": section, "control": sel.name, "n": len(lat),
                               "p50": pct(lat, 0.5), "p95": pct(lat, 0.95), "max": max(lat)}
        page.evaluate(CHANGE_JS, [demo, {sel.name: str(sel.default)}])
        page.locator(f'.demo[data-section="{section}"]').screenshot(path=str(shots / "ready.png"))
        # An error state: shift = 1e308 in the vocabulary demo (or the first number control anywhere).
        names = page.eval_on_selector_all(".demo[data-section]", "els => els.map(e => e.dataset.section)")
        for sname in sorted(names, key=lambda n: n != "vocab-ce"):
            number = next((c for c in views.sections()[sname].controls if c.kind == "number"), None)
            if number:
                d = page.locator(f'.demo[data-section="{sname}"]')
                page.evaluate(CHANGE_JS, [d.element_handle(), {number.name: "1e308"}])
                d.screenshot(path=str(shots / "error.png"))
                break
        ctx.close()

        ctx = browser.new_context(viewport={"width": 1200, "height": 900})
        ctx.route("**/pyodide/**", lambda route: route.abort())
        page = ctx.new_page()
        page.goto(base + "zh/index.html")
        page.wait_for_function("() => document.documentElement.dataset.runtime === 'failed'", timeout=120_000)
        page.locator(".demo").first.screenshot(path=str(shots / "blocked-zh.png"))
        ctx.close()
        browser.close()
    server.shutdown()
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
