/* Live demos: every control re-runs tpmath (core + views) in a Pyodide Web Worker.
 *
 * No inline scripts, no innerHTML: everything the page shows is set with textContent.
 * DOM contract: ARCHITECTURE.md ("Rendered demo block"); worker protocol: worker.js.
 *  - <html data-runtime="loading|ready|failed">; staged progress in each demo's .runtime-status.
 *  - control input/change -> {type: "render"} with all of the section's control values, coalesced
 *    per section (one request in flight, only the latest state computed next).
 *  - results rebuild the section's tables / values / notes; TPMathError messages go to the form's
 *    .control-msg and mark the control aria-invalid; the last good tables stay.
 *  - control values live in the query string (history.replaceState); .lang-switch links carry them.
 *  - a worker that dies after boot (an uncaught error event, or a render unanswered for
 *    REQUEST_TIMEOUT_MS: renders take milliseconds) is replaced by a fresh one, which recomputes
 *    the sections that were waiting; if the fresh one cannot boot, the page says so
 *    (runtime.crashed) and keeps the last tables.  At most MAX_RESTARTS per page (no crash loop).
 */
(function () {
  "use strict";

  var BOOT_TIMEOUT_MS = 60000;
  var REQUEST_TIMEOUT_MS = 15000;
  var MAX_RESTARTS = 2;
  var root = document.documentElement;
  var scriptSrc = (document.currentScript && document.currentScript.src) || "";

  // ---- DOM ready ------------------------------------------------------------------------------
  // Status callbacks can arrive before the DOM is parsed: queue them until setup() has run.
  var isSetUp = false;
  var readyQueue = [];
  function onReady(fn) { if (isSetUp) fn(); else readyQueue.push(fn); }
  function init() {
    setup();
    isSetUp = true;
    var q = readyQueue; readyQueue = [];
    q.forEach(function (fn) { fn(); });
  }

  // ---- runtime: start the worker first thing --------------------------------------------------
  var worker = null;
  var runtime = "loading";
  var stage = "download";
  var bootTimer = null;
  var restarts = 0;
  var restarting = false;   // a replacement worker is booting: its failure means "crashed"

  function metaContent(name) {
    var el = document.querySelector('meta[name="' + name + '"]');
    return el ? el.getAttribute("content") : null;
  }

  function startWorker() {
    var base = metaContent("tp-pyodide");
    var wheel = metaContent("tp-wheel");
    if (!base || !wheel || typeof Worker === "undefined") {
      setRuntime("failed", "none");
      return;
    }
    try {
      // URLs in a worker resolve against the worker script, so make them absolute here.
      var absBase = new URL(base, document.baseURI).href;
      var absWheel = new URL(wheel, document.baseURI).href;
      var workerUrl = new URL("worker.js", scriptSrc || document.baseURI).href;
      worker = new Worker(workerUrl);
      worker.onmessage = onWorkerMessage;
      worker.onerror = function (ev) {
        if (ev && ev.preventDefault) ev.preventDefault();
        if (runtime === "loading") setRuntime("failed", restarting ? "crashed" : "failed");
        else if (runtime === "ready") workerDied();
      };
      worker.postMessage({ type: "boot", base: absBase, wheel: absWheel });
      bootTimer = setTimeout(function () {
        if (runtime === "loading") {
          worker.terminate();
          setRuntime("failed", restarting ? "crashed" : "timeout");
        }
      }, BOOT_TIMEOUT_MS);
    } catch (err) {
      setRuntime("failed", "failed");
    }
  }

  root.setAttribute("data-runtime", "loading");
  startWorker();

  /** The ready worker stopped answering or threw outside a request: replace it (bounded). */
  function workerDied() {
    if (runtime !== "ready") return;
    if (worker) { worker.terminate(); worker = null; }
    if (restarts >= MAX_RESTARTS) { setRuntime("failed", "crashed"); return; }
    restarts++;
    restarting = true;
    Object.keys(sections).forEach(function (sname) {   // resent once the new worker is ready
      var sec = sections[sname];
      clearTimeout(sec.timer);
      if (sec.inflight !== null) { sec.inflight = null; sec.pending = true; }
    });
    Object.keys(pydemos).forEach(function (id) { onOutput({ id: Number(id), stdout: "", error: tr("runtime.crashed") }); });
    setRuntime("loading", "restarting");
    startWorker();
  }

  // ---- i18n -----------------------------------------------------------------------------------
  var strings = null;

  function loadStrings() {
    var out = {};
    var el = document.getElementById("tp-i18n");
    var data = {};
    try { data = el ? JSON.parse(el.textContent) : {}; } catch (err) { data = {}; }
    (function flatten(obj, prefix) {
      Object.keys(obj).forEach(function (k) {
        var v = obj[k];
        if (v !== null && typeof v === "object") flatten(v, prefix + k + ".");
        else out[prefix + k] = String(v);
      });
    })(data, "");
    return out;
  }

  function tr(key, args) {
    if (!strings) strings = loadStrings();
    var text = Object.prototype.hasOwnProperty.call(strings, key) ? strings[key] : key;
    if (!args) return text;
    return text.replace(/\{(\w+)\}/g, function (m, name) {
      return Object.prototype.hasOwnProperty.call(args, name) ? cellText(args[name]) : m;
    });
  }

  /** A cell: a formatted string (verbatim) or {key, args} (translated). */
  function cellText(cell) {
    if (cell === null || cell === undefined) return "";
    if (typeof cell === "object" && typeof cell.key === "string") return tr(cell.key, cell.args);
    return String(cell);
  }

  function pageLang() {
    var lang = (root.getAttribute("lang") || "en").toLowerCase();
    return lang.indexOf("zh") === 0 ? "zh" : "en";
  }

  // ---- status ---------------------------------------------------------------------------------
  function setStatusText(key) {
    var text = tr("runtime." + key);
    var els = document.querySelectorAll(".runtime-status");
    for (var i = 0; i < els.length; i++) {
      if (els[i].textContent !== text) els[i].textContent = text;
    }
  }

  // Performance marks and a "tp-rendered" event (detail: {section, ok}) when a section's result
  // has been applied, for benchmarks/run.py and anyone timing the page.
  var firstLive = false;
  function mark(name) {
    if (window.performance && performance.mark) performance.mark(name);
  }

  function setRuntime(state, key) {
    if (state === "ready" && runtime !== "ready") mark("tp-ready");
    runtime = state;
    root.setAttribute("data-runtime", state);
    if (bootTimer && state !== "loading") { clearTimeout(bootTimer); bootTimer = null; }
    if (state === "failed") {
      if (worker) { worker.terminate(); worker = null; }
      onReady(function () {
        setStatusText(key || "failed");
        resetToDefaults();
        var demos = document.querySelectorAll(".demo");
        for (var i = 0; i < demos.length; i++) demos[i].removeAttribute("aria-busy");
        updatePydemoButtons();
      });
    } else if (state === "ready") {
      restarting = false;
      onReady(function () {
        setStatusText("ready");
        updatePydemoButtons();
        renderRestored();
        Object.keys(sections).forEach(function (sname) { if (sections[sname].pending) request(sections[sname]); });
      });
    } else {
      onReady(function () { setStatusText(key); });
    }
  }

  function onWorkerMessage(event) {
    var msg = event.data || {};
    if (msg.type === "status") {
      if (runtime !== "loading") return;
      if (msg.stage === "ready") setRuntime("ready");
      else if (msg.stage === "failed") setRuntime("failed", restarting ? "crashed" : "failed");
      else { stage = msg.stage; setRuntime("loading", msg.stage); }
    } else if (msg.type === "result") {
      onResult(msg);
    } else if (msg.type === "output") {
      onOutput(msg);
    }
  }

  // ---- sections and controls ------------------------------------------------------------------
  var sections = {};     // name -> {demo, form, defaults: {name: value}, inflight, pending, id}
  var nameCount = {};    // control name -> number of forms on the page that have it
  var restored = {};     // section -> true when the URL changed one of its controls
  var nextId = 1;

  function controlsOf(form) {
    var out = [];
    for (var i = 0; i < form.elements.length; i++) {
      var el = form.elements[i];
      if (el.name && (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA")) out.push(el);
    }
    return out;
  }

  function values(sec) {
    var out = {};
    controlsOf(sec.form).forEach(function (el) { out[el.name] = el.value; });
    return out;
  }

  function setup() {
    var demos = document.querySelectorAll(".demo[data-section]");
    for (var i = 0; i < demos.length; i++) {
      var demo = demos[i];
      var form = demo.querySelector("form.controls");
      if (!form) continue;
      var name = demo.getAttribute("data-section");
      var sec = { name: name, demo: demo, form: form, defaults: {}, inflight: null, pending: false, timer: null };
      controlsOf(form).forEach(function (el) {
        sec.defaults[el.name] = el.value;
        nameCount[el.name] = (nameCount[el.name] || 0) + 1;
      });
      sections[name] = sec;
      form.addEventListener("input", onControl);
      form.addEventListener("change", onControl);
      form.addEventListener("submit", function (ev) { ev.preventDefault(); onControl(ev); });
    }
    restoreFromUrl();
    updateLangLinks();
    setupPydemos();
    markScrollable();
    window.addEventListener("load", markScrollable);
    window.addEventListener("resize", function () { clearTimeout(markScrollable.timer); markScrollable.timer = setTimeout(markScrollable, 200); });
  }

  /** A display formula or code block wider than the column scrolls sideways; keyboard users must be
   * able to focus it to scroll (WCAG 2.1.1), so exactly the overflowing ones are tab stops (tables'
   * wrappers always are: see templates/demo.html). */
  function markScrollable() {
    var els = document.querySelectorAll(".math-display, pre");
    for (var i = 0; i < els.length; i++) {
      if (els[i].scrollWidth > els[i].clientWidth + 1) els[i].setAttribute("tabindex", "0");
      else els[i].removeAttribute("tabindex");
    }
  }

  function sectionOf(el) {
    var form = el && el.closest ? el.closest("form.controls") : null;
    if (!form) return null;
    var demo = form.closest(".demo[data-section]");
    return demo ? sections[demo.getAttribute("data-section")] || null : null;
  }

  function onControl(ev) {
    var sec = sectionOf(ev.target);
    if (!sec) return;
    writeUrl(sec);
    if (runtime === "failed") {
      showMessage(sec, tr("runtime.static"), null);
      return;
    }
    request(sec);
  }

  // ---- coalesced requests ---------------------------------------------------------------------
  function request(sec) {
    if (!worker || runtime !== "ready") { if (runtime === "loading") sec.pending = true; return; }
    if (sec.inflight !== null) { sec.pending = true; return; }
    sec.pending = false;
    sec.inflight = nextId++;
    sec.demo.setAttribute("aria-busy", "true");
    sec.timer = setTimeout(workerDied, REQUEST_TIMEOUT_MS);
    worker.postMessage({ type: "render", id: sec.inflight, section: sec.name, controls: values(sec), lang: pageLang() });
  }

  function onResult(msg) {
    var sec = sections[msg.section];
    if (!sec || msg.id !== sec.inflight) return;
    clearTimeout(sec.timer);
    sec.inflight = null;
    if (sec.pending) { request(sec); return; }   // stale: compute the latest state instead
    sec.demo.removeAttribute("aria-busy");
    var payload = msg.payload || {};
    if (payload.ok) {
      showMessage(sec, "", null);
      apply(sec, payload.result || {});
      if (!firstLive) { firstLive = true; mark("tp-first-live"); }
    } else {
      showMessage(sec, payload.error ? cellText(payload.error) : tr("runtime.failed"), payload.field || null);
    }
    sec.demo.dispatchEvent(new CustomEvent("tp-rendered", { bubbles: true, detail: { section: sec.name, ok: !!payload.ok } }));
  }

  function showMessage(sec, text, field) {
    var out = sec.form.querySelector(".control-msg");
    if (out && out.textContent !== text) out.textContent = text;
    controlsOf(sec.form).forEach(function (el) {
      if (field && el.name === field) el.setAttribute("aria-invalid", "true");
      else el.removeAttribute("aria-invalid");
    });
  }

  // ---- applying results -----------------------------------------------------------------------
  function apply(sec, result) {
    var tables = result.tables || {};
    var seen = {};
    Object.keys(tables).forEach(function (name) {
      seen[name] = true;
      var table = findIn(sec.demo, "data-table", name);
      if (!table) {
        table = document.createElement("table");
        table.setAttribute("data-table", name);
        var all = sec.demo.querySelectorAll("table[data-table]");
        var after = all.length ? all[all.length - 1] : null;
        if (after) after.parentNode.insertBefore(table, after.nextSibling);
        else sec.demo.appendChild(table);
      }
      table.hidden = false;
      fillTable(table, tableModel(tables[name]));
    });
    var existing = sec.demo.querySelectorAll("table[data-table]");
    for (var i = 0; i < existing.length; i++) {
      if (!seen[existing[i].getAttribute("data-table")]) existing[i].hidden = true;
    }
    setTexts(sec.demo, "data-value", result.values || {});
    setTexts(sec.demo, "data-note", result.notes || {});
    // The real-ranks block: the command and every rank's output follow the controls.
    (result.real || []).forEach(function (run, i) {
      setTexts(sec.demo, "data-real-command", mapOf(String(i), run.command));
      setTexts(sec.demo, "data-real-output", mapOf(String(i), run.output));
    });
  }

  function mapOf(key, value) {
    var m = {};
    m[key] = value;
    return m;
  }

  function findIn(scope, attr, name) {
    var els = scope.querySelectorAll("[" + attr + "]");
    for (var i = 0; i < els.length; i++) if (els[i].getAttribute(attr) === name) return els[i];
    return null;
  }

  function setTexts(scope, attr, map) {
    Object.keys(map).forEach(function (name) {
      var el = findIn(scope, attr, name);
      if (!el) return;
      var text = cellText(map[name]);
      if (el.textContent !== text) el.textContent = text;
    });
  }

  /** Translated text of a table spec: {caption, head: [..], rows: [[..]], foot: [[..]]}. */
  function tableModel(spec) {
    var rows = function (list) {
      return (list || []).map(function (row) { return row.map(cellText); });
    };
    return {
      caption: spec.caption ? cellText(typeof spec.caption === "string" ? { key: spec.caption } : spec.caption) : null,
      head: (spec.columns || []).map(function (c) { return cellText(typeof c === "string" ? { key: c } : c); }),
      rows: rows(spec.rows),
      foot: rows(spec.foot),
    };
  }

  function domRows(part) {
    if (!part) return [];
    var out = [];
    for (var i = 0; i < part.rows.length; i++) {
      var cells = part.rows[i].cells;
      var row = [];
      for (var j = 0; j < cells.length; j++) row.push(cells[j].textContent);
      out.push(row);
    }
    return out;
  }

  function sameRows(a, b) {
    if (a.length !== b.length) return false;
    for (var i = 0; i < a.length; i++) {
      if (a[i].length !== b[i].length) return false;
      for (var j = 0; j < a[i].length; j++) if (a[i][j] !== b[i][j]) return false;
    }
    return true;
  }

  /** Rebuild caption / thead / tbody / tfoot, touching only the parts whose text changed. */
  function fillTable(table, model) {
    if (model.caption !== null) {
      var cap = table.caption || table.createCaption();
      if (cap.textContent !== model.caption) cap.textContent = model.caption;
    }
    var headNow = table.tHead ? domRows(table.tHead) : [];
    if (!sameRows(headNow, [model.head])) {
      var thead = document.createElement("thead");
      var tr0 = thead.insertRow();
      model.head.forEach(function (text) {
        var th = document.createElement("th");
        th.setAttribute("scope", "col");
        th.textContent = text;
        tr0.appendChild(th);
      });
      replacePart(table, table.tHead, thead);
    }
    var body = table.tBodies.length ? table.tBodies[0] : null;
    if (!body || !sameRows(domRows(body), model.rows)) {
      replacePart(table, body, buildRows("tbody", model.rows, body));
    }
    var foot = table.tFoot;
    if (model.foot.length === 0) {
      if (foot) table.removeChild(foot);
    } else if (!foot || !sameRows(domRows(foot), model.foot)) {
      replacePart(table, foot, buildRows("tfoot", model.foot, foot));
    }
  }

  /** Rows whose first cell is a row header; cell classes (e.g. numeric alignment) are kept by column. */
  function buildRows(tag, rows, old) {
    var classes = [];
    if (old && old.rows.length) {
      var cells = old.rows[0].cells;
      for (var k = 0; k < cells.length; k++) classes.push(cells[k].className);
    }
    var part = document.createElement(tag);
    rows.forEach(function (row) {
      var tr = part.insertRow();
      row.forEach(function (text, j) {
        var cell = document.createElement(j === 0 ? "th" : "td");
        if (j === 0) cell.setAttribute("scope", "row");
        if (classes[j]) cell.className = classes[j];
        cell.textContent = text;
        tr.appendChild(cell);
      });
    });
    return part;
  }

  function replacePart(table, old, fresh) {
    if (old) { table.replaceChild(fresh, old); return; }
    if (fresh.tagName === "THEAD") {
      var after = table.caption ? table.caption.nextSibling : table.firstChild;
      table.insertBefore(fresh, after);
    } else if (fresh.tagName === "TBODY") {
      table.insertBefore(fresh, table.tFoot);
    } else {
      table.appendChild(fresh);
    }
  }

  // ---- URL state ------------------------------------------------------------------------------
  function queryKey(sec, name) {
    return nameCount[name] > 1 ? sec.name + "." + name : name;
  }

  function restoreFromUrl() {
    var params = new URLSearchParams(window.location.search);
    Object.keys(sections).forEach(function (sname) {
      var sec = sections[sname];
      controlsOf(sec.form).forEach(function (el) {
        var key = sname + "." + el.name;
        var value = params.has(key) ? params.get(key) : (params.has(el.name) ? params.get(el.name) : null);
        if (value === null || value === el.value) return;
        el.value = value;
        if (el.tagName === "SELECT" && el.value !== value) {   // not one of the options
          el.value = sec.defaults[el.name];
          return;
        }
        restored[sname] = true;
      });
    });
  }

  /** Once the runtime is ready: compute the sections whose controls came from the URL. */
  function renderRestored() {
    Object.keys(restored).forEach(function (sname) { request(sections[sname]); });
    restored = {};
  }

  function resetToDefaults() {
    Object.keys(restored).forEach(function (sname) {
      var sec = sections[sname];
      controlsOf(sec.form).forEach(function (el) { el.value = sec.defaults[el.name]; });
    });
    restored = {};
  }

  function currentQuery() {
    var params = new URLSearchParams();
    Object.keys(sections).forEach(function (sname) {
      var sec = sections[sname];
      controlsOf(sec.form).forEach(function (el) {
        if (el.value !== sec.defaults[el.name]) params.set(queryKey(sec, el.name), el.value);
      });
    });
    var qs = params.toString();
    return qs ? "?" + qs : "";
  }

  /** The anchor a shared link should land on: the heading the demo belongs to (ids are equal
   * across languages), else the demo block itself. */
  function anchorOf(sec) {
    if (sec.anchor === undefined) {
      sec.anchor = sec.demo.id || "";
      var heads = document.querySelectorAll("h2[id], h3[id], h4[id]");
      for (var i = 0; i < heads.length; i++) {
        if (heads[i].compareDocumentPosition(sec.demo) & Node.DOCUMENT_POSITION_FOLLOWING) sec.anchor = heads[i].id;
        else break;
      }
    }
    return sec.anchor;
  }

  function writeUrl(sec) {
    var anchor = anchorOf(sec);
    var hash = anchor ? "#" + anchor : window.location.hash;
    var url = window.location.pathname + currentQuery() + hash;
    if (url !== window.location.pathname + window.location.search + window.location.hash) {
      try { history.replaceState(history.state, "", url); } catch (err) { /* file:// etc. */ }
    }
    updateLangLinks();
  }

  function updateLangLinks() {
    var links = document.querySelectorAll("a.lang-switch[href]");
    for (var i = 0; i < links.length; i++) {
      var a = links[i];
      if (!a.hasAttribute("data-base-href")) a.setAttribute("data-base-href", a.getAttribute("href").split(/[?#]/)[0]);
      var href = a.getAttribute("data-base-href") + window.location.search + window.location.hash;
      if (a.getAttribute("href") !== href) a.setAttribute("href", href);
    }
  }

  // ---- Python demos (Run button) --------------------------------------------------------------
  var pydemos = {};   // request id -> demo element

  function pydemoSource(demo) {
    // The builder embeds the exact source as JSON data (not code) next to the highlighted copy.
    var json = demo.querySelector("script.pydemo-source[type='application/json']");
    if (json) {
      try { return String(JSON.parse(json.textContent)); } catch (err) { /* fall back below */ }
    }
    var code = demo.querySelector("pre code, pre");
    return code ? code.textContent : "";
  }

  function pydemoOutput(demo) {
    return demo.querySelector("[data-output], .pydemo-output, output");
  }

  function pydemoButton(demo) {
    var btn = demo.querySelector("button[data-run], button.run");
    if (!btn) {
      btn = document.createElement("button");
      btn.type = "button";
      btn.className = "run";
      btn.setAttribute("data-run", "");
      btn.textContent = tr("runtime.run");
      var out = pydemoOutput(demo);
      if (out) out.parentNode.insertBefore(btn, out); else demo.appendChild(btn);
    }
    return btn;
  }

  function setupPydemos() {
    var demos = document.querySelectorAll(".pydemo");
    for (var i = 0; i < demos.length; i++) {
      (function (demo) {
        var btn = pydemoButton(demo);
        btn.addEventListener("click", function () {
          if (runtime !== "ready" || !worker) return;
          var id = nextId++;
          pydemos[id] = demo;
          btn.disabled = true;
          demo.setAttribute("aria-busy", "true");
          worker.postMessage({ type: "run", id: id, code: pydemoSource(demo) });
        });
      })(demos[i]);
    }
    updatePydemoButtons();
  }

  function updatePydemoButtons() {
    var btns = document.querySelectorAll(".pydemo button[data-run], .pydemo button.run");
    for (var i = 0; i < btns.length; i++) {
      btns[i].disabled = runtime !== "ready";
      btns[i].title = runtime === "ready" ? "" : tr("runtime." + (runtime === "failed" ? "static" : stage));
    }
  }

  function onOutput(msg) {
    var demo = pydemos[msg.id];
    if (!demo) return;
    delete pydemos[msg.id];
    demo.removeAttribute("aria-busy");
    var btn = demo.querySelector("button[data-run], button.run");
    if (btn) btn.disabled = false;
    var out = pydemoOutput(demo);
    if (out) out.textContent = (msg.stdout || "") + (msg.error ? msg.error : "");
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
