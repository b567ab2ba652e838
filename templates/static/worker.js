/* The in-browser Python: Pyodide 0.27.7 + numpy 2.0.2 + the tpmath wheel, in a module worker
 * (new Worker(url, {type: "module"})).  Its messages: js/protocol.js, imported by both sides. */
import { MSG, answerKey } from "./js/protocol.js";

let booted = null;        // Promise<pyodide> once "boot" arrived
let renderJson = null;    // tpmath.views.render_json (a PyProxy)

function status(stage, detail, boot) {
  self.postMessage({ type: MSG.status, stage: stage, detail: detail || "", boot: boot || "" });
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
    if (loaded !== sent) { sent = loaded; self.postMessage({ type: MSG.progress, loaded: loaded }); }
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

/* pyodide.js and pyodide.asm.js (1.3 MB) are fetched (through the watched fetch: every chunk
 * counts; an import of the URL would show nothing until the whole file was in, and on a slow
 * connection the bar sat at 0 meanwhile) and then run from the fetched bytes: import() of a blob:
 * URL, local and quick (a module worker has no importScripts).  Both are classic scripts that set
 * globalThis.loadPyodide / _createPyodideModule, which they also do when run as a module.  If a
 * CSP sent with worker.js refuses blob: scripts, import() of the file's own URL (from the HTTP
 * cache by then) is the fallback. */
function fetchScript(url) {
  const blob = fetch(url).then((resp) => {
    if (!resp.ok) throw new Error(url.split("/").pop() + ": HTTP " + resp.status);
    return resp.blob();
  });
  blob.catch(() => {});   // reported where it is awaited
  return { url, blob };
}

async function runScript(script) {
  const local = URL.createObjectURL(new Blob([await script.blob], { type: "text/javascript" }));
  try {
    await import(local);
  } catch (err) {
    await import(script.url);
  } finally {
    URL.revokeObjectURL(local);
  }
}

/* loadPyodide skips its own load of pyodide.asm.js when _createPyodideModule exists (the
 * way Pyodide lets a page load that file itself).  A stand-in waits for the fetched file, runs it
 * (it defines the real function) and calls that: loadPyodide still starts the wasm, stdlib and
 * lock-file downloads at once, beside this one, as it did. */
function loadAsmFrom(script) {
  const standIn = async function (settings) {
    await runScript(script);
    if (self._createPyodideModule === standIn) throw new Error("pyodide.asm.js did not define _createPyodideModule");
    return self._createPyodideModule(settings);
  };
  self._createPyodideModule = standIn;
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

/* Memory snapshot (repeat visits).  Pyodide 0.27.7 can save the interpreter's memory right after
 * it starts and start from that copy later in about half the time.  Only before numpy: binary
 * extensions loaded before a snapshot are not restored ("table index is out of bounds"), and
 * making one after loadPackage fails.  So a first visit boots with _makeSnapshot, takes the
 * snapshot (21 MB, ~15 ms) before loading numpy, and stores it in Cache Storage once the page
 * says it is idle after ready; a later visit restores it, unpacks the numpy wheel itself (its
 * sha256 checked against the lock file's first: loadPackage, which checks it, is not used), then
 * imports.  The entry's key names the Pyodide version and the wasm/stdlib hashes
 * (tpsite.runtime.snapshot_config); its own sha256 is stored with it.  Any failure: one
 * console.info line, the entry is deleted, the normal boot runs (and makes a new snapshot).
 * Needs Cache Storage and crypto.subtle (secure contexts: https, localhost). */
const SNAPSHOT_CACHE = "tp-pyodide-snapshot";
const SITE_PACKAGES = "/lib/python3.12/site-packages";
const QUIET = { stdout: () => {}, stderr: () => {} };
let unsaved = null;    // {snap, bytes}: the snapshot this boot made, until the page is idle

function snapshotsUsable(snap) {
  return !!snap && typeof caches !== "undefined" && !!(self.crypto && self.crypto.subtle);
}

function snapshotUrl(snap) {
  return new URL("tp-snapshot/" + snap.key, self.location.href).href;
}

async function sha256hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

function fetchBytes(url, what) {
  const bytes = fetch(url).then((resp) => {
    if (!resp.ok) throw new Error(what + ": HTTP " + resp.status);
    return resp.arrayBuffer();
  });
  bytes.catch(() => {});   // reported where it is awaited
  return bytes;
}

/** The stored snapshot, checked against the sha256 stored with it; null when there is none. */
async function readSnapshot(snap) {
  const cache = await caches.open(SNAPSHOT_CACHE);
  const resp = await cache.match(snapshotUrl(snap));
  if (!resp) return null;
  const bytes = new Uint8Array(await resp.arrayBuffer());
  if (await sha256hex(bytes) !== resp.headers.get("x-tp-sha256")) throw new Error("sha256 mismatch");
  return bytes;
}

/** Store this boot's snapshot (replacing any other runtime's: one entry, 21 MB, at most). */
async function storeSnapshot() {
  const made = unsaved;
  unsaved = null;
  if (!made) return;
  const url = snapshotUrl(made.snap);
  const cache = await caches.open(SNAPSHOT_CACHE);
  for (const req of await cache.keys()) if (req.url !== url) await cache.delete(req);
  const headers = { "content-type": "application/octet-stream", "x-tp-sha256": await sha256hex(made.bytes) };
  await cache.put(url, new Response(made.bytes, { headers }));
}

async function forgetSnapshot(snap) {
  try { await (await caches.open(SNAPSHOT_CACHE)).delete(snapshotUrl(snap)); } catch (err) { /* gone anyway */ }
}

/** Python with numpy imported, from the stored snapshot (`stored`: readSnapshot's promise);
 * null when none is stored. */
async function restore(base, snap, stored, watch) {
  const bytes = await stored;
  if (!bytes) return null;
  const numpyBytes = fetchBytes(snap.numpy, "numpy wheel");   // while the interpreter restores
  const pyodide = await loadPyodide({ indexURL: base, ...QUIET, _loadSnapshot: bytes });
  watch.stage();
  status("numpy");
  const wheel = await numpyBytes;
  if (await sha256hex(wheel) !== snap.sha256) throw new Error("numpy wheel: sha256 mismatch");
  pyodide.unpackArchive(wheel, "wheel", { extractDir: SITE_PACKAGES });
  pyodide.runPython("import numpy");
  return pyodide;
}

/** The normal boot: numpy through loadPackage (checked against the lock file's sha256 by
 * Pyodide); with `snap`, the snapshot is taken on the way (before numpy). */
async function fresh(base, snap, watch) {
  const pyodide = await loadPyodide({ indexURL: base, ...QUIET, _makeSnapshot: !!snap });
  if (snap) {
    try { unsaved = { snap, bytes: pyodide.makeMemorySnapshot() }; } catch (err) { unsaved = null; }
  }
  watch.stage();
  status("numpy");
  await pyodide.loadPackage("numpy", { messageCallback: () => {} });
  return pyodide;
}

async function boot(base, wheel, snapshot, reader) {
  status("download");
  const watch = watchDownloads(["pyodide.asm.wasm", "python_stdlib.zip"], () => status("python"));
  // Pyodide's two scripts, counted like every other file (see fetchScript).
  const pyodideJs = fetchScript(base + "pyodide.js");
  const asmJs = fetchScript(base + "pyodide.asm.js");
  // The tpmath wheel (a few tens of KB) downloads while the runtime boots.
  const wheelBytes = fetchBytes(wheel, "tpmath wheel");
  // The stored snapshot is read (and its sha256 checked) while pyodide.js loads.
  const snap = snapshotsUsable(snapshot) ? snapshot : null;
  const stored = snap ? readSnapshot(snap) : null;
  if (stored) stored.catch(() => {});   // reported below, where it is awaited
  await runScript(pyodideJs);
  loadAsmFrom(asmJs);
  const stopWatchingWasm = watchWasm((err) => status("failed", "pyodide.asm.wasm: " + String(err)));
  let pyodide = null;
  let how = "normal";
  try {
    if (snap) {
      try {
        pyodide = await restore(base, snap, stored, watch);
        if (pyodide) how = "snapshot";
      } catch (err) {
        console.info("tp runtime: stored memory snapshot not used (" + String(err && err.message ? err.message : err)
          .split("\n")[0] + "); normal start");
        pyodide = null;
        how = "fallback";
        await forgetSnapshot(snap);
        status("python");
      }
    }
    // A reader's worker (pydemo.js) restores a stored snapshot but never makes one (21 MB held
    // for nothing: only the page's worker stores it).
    if (!pyodide) pyodide = await fresh(base, reader ? null : snap, watch);
  } finally {
    watch.stop();
    stopWatchingWasm();
  }
  // The tpmath wheel: a pure-Python wheel built by build.py; unpack it into site-packages.
  pyodide.unpackArchive(await wheelBytes, "wheel", { extractDir: SITE_PACKAGES });
  // numpy is imported now (the bare-boot cost); each view module is imported by its first render.
  pyodide.runPython("import json, numpy, tpmath.views");
  renderJson = pyodide.pyimport("tpmath.views").render_json;
  status("ready", "numpy " + pyodide.runPython("numpy.__version__"), how);
  return pyodide;
}

/* The last RESULTS_KEPT answers, by section, language and controls (least recently used goes
 * first).  A render is a pure function of those three, and a reader scrubbing a slider or stepping
 * back and forth through a select revisits states: those are answered without running Python.
 * Cleared when a reader's program runs (it could change what tpmath computes). */
const RESULTS_KEPT = 256;
const AHEAD_MAX = 48;        // states waiting to be computed ahead (a few ms each)
const answers = new Map();

function answer(section, controls, lang) {
  const key = answerKey(section, lang, controls);
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

/* Ahead of the reader: the worker computes answers the reader is likely to ask for next while it
 * is idle, one per task, so that a request arriving meanwhile waits for at most one of them.
 * Their answers join the kept ones and go to the page, which shows a change to one of them at
 * once: stepping or dragging on costs the page's own work, not Python's nor a round trip.  After
 * a render, the states one step from it (the page sends them: a slider's neighbouring positions,
 * a select's neighbouring choices) replace the list, and so do those of an "ahead" message with
 * `replace` (the page showed a state sent ahead); any other "ahead" message adds to it (once
 * the runtime is ready the page asks for each demo's current state, which imports its view
 * module -- the slowest answer of a visit -- and warms the code; a reader reaching for a demo's
 * controls adds its neighbours).  A reader's program clears it. */
let ahead = [];          // [section, lang, controls] still to compute, first first
let aheadTimer = null;

function computeAhead() {
  aheadTimer = null;
  const next = ahead.shift();
  if (!next) return;
  try {
    // To the page too: a reader's change to this state is then shown in the change's own task,
    // without a round trip to the worker (runtime.js keeps the latest few).
    self.postMessage({ type: MSG.answer, key: answerKey(...next), text: answer(next[0], next[2], next[1]) });
  } catch (err) { /* asked for, it reports */ }
  aheadTimer = setTimeout(computeAhead, 0);
}

function planAhead(msg, replace) {
  const states = (Array.isArray(msg.next) ? msg.next : []).map((c) => [msg.section, msg.lang || "en", c]);
  ahead = (replace ? states : ahead.concat(states)).slice(0, AHEAD_MAX);
  if (ahead.length && aheadTimer === null) aheadTimer = setTimeout(computeAhead, 0);
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
  self.postMessage({ type: MSG.result, id: msg.id, section: msg.section, text: text });
  planAhead(msg, true);
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

/* What a program prints is kept up to OUTPUT_MAX characters; the rest is counted, not kept (a
 * 10-million-character line would not be drawn at all, and a program printing in a loop would
 * fill the worker's memory).  The page says how much was cut. */
const OUTPUT_MAX = 100000;

function outputSink() {
  const out = [];
  let size = 0, cut = 0;
  return {
    batched: (line) => {
      const room = OUTPUT_MAX - size;
      if (room <= 0) { cut += line.length + 1; return; }
      const kept = line.length > room ? line.slice(0, room) : line;
      cut += line.length - kept.length;
      out.push(kept);
      size += kept.length + 1;
    },
    text: () => out.join("\n") + (out.length ? "\n" : ""),
    cut: () => cut,
  };
}

function run(pyodide, msg) {
  answers.clear();
  ahead = [];
  const sink = outputSink();
  pyodide.setStdout(sink);
  pyodide.setStderr(sink);
  // No keyboard behind the page: input() reads an end of file (EOFError) and the page says why,
  // instead of Pyodide's I/O error and its console errors.
  let asked = false;
  pyodide.setStdin({ stdin: () => { asked = true; return null; } });
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
  self.postMessage({ type: MSG.output, id: msg.id, stdout: sink.text(), cut: sink.cut(), input: asked, error: error });
}

self.onmessage = async (event) => {
  const msg = event.data || {};
  if (msg.type === MSG.boot) {
    if (booted) return;
    booted = boot(msg.base, msg.wheel, msg.snapshot, msg.reader === true);
    booted.catch((err) => status("failed", String(err && err.message ? err.message : err)));
    return;
  }
  if (!booted) return;
  let pyodide;
  try { pyodide = await booted; } catch (err) { return; }  // "failed" already reported
  if (msg.type === MSG.render) render(msg);
  else if (msg.type === MSG.ahead) planAhead(msg, msg.replace === true);
  else if (msg.type === MSG.run) run(pyodide, msg);
  else if (msg.type === MSG.idle) storeSnapshot().catch((err) => console.info("tp runtime: memory snapshot not stored: " + String(err)));
};
