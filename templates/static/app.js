/* Live demos: every control re-runs tpmath (core + views) in a Pyodide Web Worker (worker.js, a
 * module worker; its messages: js/protocol.js).  This entry module wires the parts in js/:
 *
 *   runtime.js  the worker as a state machine (loading → ready → failed / crashed, bounded restarts;
 *               started when the page is idle, or deferred until asked on Save-Data / 2G)
 *   status.js   the status sentence, download progress and "load it" button beside each demo
 *   demo.js     one demo block as a state machine: coalesced requests, messages, control state
 *   answers.js  the one answer store: precomputed results (results.js) and answers sent ahead
 *   protocol.js the page–worker messages (worker.js imports it too)
 *   apply.js    results → tables, values, notes, real-ranks block, figures (tree.js builds trees)
 *   cue.js      the "what changed" cue      sliders.js  range sliders beside scrubbed controls
 *   url.js      control values in the query, the reader's place in the language switch
 *   pydemo.js   editable Python demos       layout.js   blocks that scroll sideways
 *   i18n.js     the page's strings
 *
 * No inline scripts, no innerHTML, no eval: text goes in with textContent, elements with
 * createElement(NS).  DOM contract: ARCHITECTURE.md ("Rendered demo block", "Element trees");
 * <html data-runtime="loading|ready|failed">; performance marks tp-ready / tp-first-live and a
 * "tp-rendered" event (detail {section, ok}) for benchmarks/run.py. */

import { Runtime } from "./js/runtime.js";
import { setupStatus } from "./js/status.js";
import { Demo } from "./js/demo.js";
import { fromSlider, setupSliders, toSlider } from "./js/sliders.js";
import { refreshUrl, setupUrl, writeUrl } from "./js/url.js";
import { setupPydemos } from "./js/pydemo.js";
import { remark, setupLayout } from "./js/layout.js";
import { whenStrings } from "./js/i18n.js";

function meta(name) {
  const el = document.querySelector(`meta[name="${name}"]`);
  return el ? el.getAttribute("content") : null;
}

function runtimeConfig() {
  const base = meta("tp-pyodide"), wheel = meta("tp-wheel");
  if (!base || !wheel) return null;
  // URLs in a worker resolve against the worker script, so make them absolute here.
  const abs = new URL(base, document.baseURI).href;
  const key = meta("tp-snapshot"), numpy = meta("tp-numpy-wheel"), sha256 = meta("tp-numpy-sha256");
  return { base: abs, wheel: new URL(wheel, document.baseURI).href,
           workerUrl: new URL("worker.js", import.meta.url).href,
           snapshot: key && numpy && sha256 ? { key, numpy: new URL(numpy, abs).href, sha256 } : null };
}

// The controls are disabled in the static page (nothing answers them without a script, and
// noscript.css says so): enable them.  Each control's own disabled state (the view's) is its own.
for (const set of document.querySelectorAll("form.controls > fieldset.controls-set[disabled]")) set.disabled = false;

const runtime = new Runtime(runtimeConfig());
setupStatus(runtime);
// After the first paint, when idle: the page reads and answers discrete changes (precomputed
// results) without it; on Save-Data / 2G only when the reader asks.
runtime.startWhenIdle();

const demos = [];
for (const el of document.querySelectorAll(".demo[data-section]")) {
  if (el.querySelector("form.controls")) demos.push(new Demo(el, runtime));
}
const byForm = new Map(demos.map((d) => [d.form, d]));

function onControl(ev) {
  const form = ev.target && ev.target.closest ? ev.target.closest("form.controls") : null;
  const demo = form ? byForm.get(form) : null;
  if (!demo) return;
  if (ev.type === "submit") ev.preventDefault();
  const target = ev.target;
  if (target.matches && target.matches("input[type=range][data-for]")) fromSlider(target);
  else if (target.name) toSlider(target);
  demo.changed();       // first: the request goes to the worker before the page's own work
  writeUrl(demo);
}

for (const d of demos) {
  setupSliders(d.form);
  for (const type of ["input", "change", "submit"]) d.form.addEventListener(type, onControl);
  // The reader reaches for the controls: fetch the section's precomputed results now.
  for (const type of ["focusin", "pointerdown"]) d.form.addEventListener(type, () => d.prefetch(), { once: true });
}
setupUrl(demos);
setupPydemos(runtime);
setupLayout();
document.addEventListener("tp-rendered", (ev) => { remark(ev.target); refreshUrl(); });

/* Once ready, each demo near the screen has the worker compute its
 * shown state, once: the demos a reader is about to use, not all of them at once (a phone's CPU,
 * and a first change right after ready would wait behind the others). */
let warmer = null;
function warmNearScreen() {
  if (warmer || typeof IntersectionObserver !== "function") return;
  const owner = new Map();
  for (const d of demos) owner.set(d.el, d);
  const warmed = new Set();
  warmer = new IntersectionObserver((entries) => {
    for (const e of entries) {
      const d = owner.get(e.target);
      if (!e.isIntersecting || !d || warmed.has(d)) continue;
      warmed.add(d);
      d.warm();
      warmer.unobserve(d.el);
    }
  }, { rootMargin: "50% 0px" });
  for (const el of owner.keys()) warmer.observe(el);
}

runtime.subscribe((state) => {
  if (state === "ready") {
    if (demos.length) whenStrings();   // the first live answer's cells are keys
    for (const d of demos) d.flush();
    warmNearScreen();
  }
  else if (runtime.final) for (const d of demos) d.stop();
  else for (const d of demos) d.runtimeChanged();   // the pending note names what it waits for
});
