/* The in-browser Python: Pyodide 0.27.7 + numpy 2.0.2 + the tpmath wheel, in a Web Worker.
 *
 * Protocol (see ARCHITECTURE.md):
 *   page -> worker  {type: "boot", base, wheel}          first message: runtime base URL, wheel URL (absolute)
 *                   {type: "render", id, section, controls, lang}
 *                   {type: "run", id, code}
 *   worker -> page  {type: "status", stage: "download"|"python"|"numpy"|"ready"|"failed", detail}
 *                   {type: "progress", loaded}   bytes of runtime files received so far (during boot)
 *                   {type: "result", id, section, text}   text = views.render_json(...) (JSON)
 *                   {type: "output", id, stdout, error}
 * Requests that arrive during boot wait for it; the page sends at most one render per section at a time.
 */
"use strict";

let booted = null;        // Promise<pyodide> once "boot" arrived
let renderJson = null;    // tpmath.views.render_json (a PyProxy)

function status(stage, detail) {
  self.postMessage({ type: "status", stage: stage, detail: detail || "" });
}

/* Watch the boot's fetches (Pyodide streams its big files itself): tee each body and count it on
 * the side, handing Pyodide an identical Response (nothing is downloaded twice).  Every chunk adds
 * to the bytes reported to the page (at most every PROGRESS_MS); "download" lasts until the
 * files in `names` have arrived, then "python" while the interpreter starts. */
const PROGRESS_MS = 100;

function watchDownloads(names, onDone) {
  const realFetch = self.fetch;
  const pending = new Set(names);
  let loaded = 0, sent = 0, timer = null;
  let done = false;
  const finish = () => { if (!done) { done = true; onDone(); } };
  const report = () => {
    timer = null;
    if (loaded !== sent) { sent = loaded; self.postMessage({ type: "progress", loaded: loaded }); }
  };
  self.fetch = async function (input, init) {
    const resp = await realFetch(input, init);
    const name = String(input && input.url ? input.url : input).split("?")[0].split("/").pop();
    if (!resp.body) return resp;
    const [forPyodide, forCount] = resp.body.tee();
    (async () => {
      const reader = forCount.getReader();
      try {
        for (;;) {
          const chunk = await reader.read();
          if (chunk.done) break;
          loaded += chunk.value.byteLength;
          if (!timer) timer = setTimeout(report, PROGRESS_MS);
        }
      } catch (err) { return; }
      report();
      if (pending.delete(name) && pending.size === 0) finish();
    })();
    return new Response(forPyodide, { status: resp.status, statusText: resp.statusText, headers: resp.headers });
  };
  return { stage: finish, stop: () => { self.fetch = realFetch; finish(); } };
}

/* Pyodide 0.27.7 only console.warn()s when pyodide.asm.wasm fails to compile (corrupt or truncated
 * file) and loadPyodide then never settles: report that failure while loadPyodide runs (it makes
 * exactly one instantiation call, with no fallback). */
function watchWasm(onFail) {
  const real = { instantiate: WebAssembly.instantiate, instantiateStreaming: WebAssembly.instantiateStreaming };
  const wrap = (fn) => function () {
    return fn.apply(WebAssembly, arguments).catch((err) => { onFail(err); throw err; });
  };
  WebAssembly.instantiate = wrap(real.instantiate);
  if (real.instantiateStreaming) WebAssembly.instantiateStreaming = wrap(real.instantiateStreaming);
  return () => Object.assign(WebAssembly, real);
}

async function boot(base, wheel) {
  status("download");
  const watch = watchDownloads(["pyodide.asm.wasm", "python_stdlib.zip"], () => status("python"));
  // The tpmath wheel (a few tens of KB) downloads while the runtime boots.
  const wheelBytes = fetch(wheel).then((resp) => {
    if (!resp.ok) throw new Error("tpmath wheel: HTTP " + resp.status);
    return resp.arrayBuffer();
  });
  wheelBytes.catch(() => {});   // reported below, where it is awaited
  importScripts(base + "pyodide.js");
  const stopWatchingWasm = watchWasm((err) => status("failed", "pyodide.asm.wasm: " + String(err)));
  let pyodide;
  try {
    pyodide = await loadPyodide({ indexURL: base, stdout: () => {}, stderr: () => {} });
    watch.stage();
    status("numpy");
    // numpy comes from the runtime's own lock file (checked against its sha256 by Pyodide).
    await pyodide.loadPackage("numpy", { messageCallback: () => {} });
  } finally {
    watch.stop();
    stopWatchingWasm();
  }
  // The tpmath wheel: a pure-Python wheel built by build.py; unpack it into site-packages.
  pyodide.unpackArchive(await wheelBytes, "wheel");
  // numpy is imported now (the bare-boot cost); each view module is imported by its first render.
  pyodide.runPython("import json, numpy, tpmath.views");
  renderJson = pyodide.pyimport("tpmath.views").render_json;
  status("ready", "numpy " + pyodide.runPython("numpy.__version__"));
  return pyodide;
}

/* The last RESULTS_KEPT answers, by section, language and controls (least recently used goes
 * first).  A render is a pure function of those three, and a reader scrubbing a slider or stepping
 * back and forth through a select revisits states: those are answered without running Python.
 * Cleared when a reader's program runs (it could change what tpmath computes). */
const RESULTS_KEPT = 256;
const answers = new Map();

function answer(section, controls, lang) {
  const key = JSON.stringify([section, lang, controls]);
  let text = answers.get(key);
  if (text === undefined) {
    text = renderJson(section, JSON.stringify(controls), lang);
    if (answers.size >= RESULTS_KEPT) answers.delete(answers.keys().next().value);
  } else {
    answers.delete(key);          // to the back: most recently used
  }
  answers.set(key, text);
  return text;
}

function render(msg) {
  // The answer goes to the page as JSON text: posting a string is a copy of its bytes, where a
  // parsed result (thousands of figure and grid nodes) is cloned node by node -- several ms on
  // every control change.  The page parses it once.
  let text;
  try {
    text = answer(msg.section, msg.controls || {}, msg.lang || "en");
  } catch (err) {
    // Not a TPMathError (those come back as {ok: false}): a bug; report it, keep the page alive.
    text = JSON.stringify({ ok: false, error: String(err && err.message ? err.message : err).trim().split("\n").pop(),
                            field: null, internal: true });
  }
  self.postMessage({ type: "result", id: msg.id, section: msg.section, text: text });
}

/* A reader's program failed: its traceback without the frames of Pyodide's own machinery
 * (what `python demo.py` would print). */
function readerTraceback(text) {
  const lines = String(text).replace(/\s+$/, "").split("\n");
  const out = [];
  let keep = true;
  for (const line of lines) {
    if (/^ {2}File "/.test(line)) keep = line.startsWith('  File "<exec>"');
    else if (!/^ {3,}/.test(line)) keep = true;   // "Traceback …" and the final error line
    if (keep) out.push(line);
  }
  return out.join("\n") + "\n";
}

function run(pyodide, msg) {
  answers.clear();
  const out = [];
  const sink = { batched: (line) => out.push(line) };
  pyodide.setStdout(sink);
  pyodide.setStderr(sink);
  let error = null;
  try {
    // A fresh namespace per run, like `python demo.py`.
    const ns = pyodide.toPy({ __name__: "__main__" });
    try { pyodide.runPython(msg.code, { globals: ns }); } finally { ns.destroy(); }
  } catch (err) {
    error = readerTraceback(err && err.message ? err.message : err);
  } finally {
    pyodide.setStdout({ batched: () => {} });
    pyodide.setStderr({ batched: () => {} });
  }
  self.postMessage({ type: "output", id: msg.id, stdout: out.join("\n") + (out.length ? "\n" : ""), error: error });
}

self.onmessage = async (event) => {
  const msg = event.data || {};
  if (msg.type === "boot") {
    if (booted) return;
    booted = boot(msg.base, msg.wheel);
    booted.catch((err) => status("failed", String(err && err.message ? err.message : err)));
    return;
  }
  if (!booted) return;
  let pyodide;
  try { pyodide = await booted; } catch (err) { return; }  // "failed" already reported
  if (msg.type === "render") render(msg);
  else if (msg.type === "run") run(pyodide, msg);
};
