/* The in-browser Python (worker.js: Pyodide + numpy + tpmath) as an explicit state machine.
 *
 *   deferred ──reader asks──▶ loading ──ready──▶ ready ──worker died, restarts left──▶ restarting ──ready──▶ ready
 *      ▲                        │   ▲              │                                      │
 *      └──Save-Data / 2G────────┤   │              └─no restarts left─▶ crashed ◀─fail/stall─┘
 *                               │   └──Retry─── failed, crashed
 *                               └─fail/stall─▶ failed
 *
 * The download starts after the first paint, once the page is idle (startWhenIdle); a reader
 * whose browser asks to save data, or on a 2G-class connection, gets `deferred` instead: nothing
 * is downloaded until they ask (ask()).  `failed` and `crashed` are final until the reader presses
 * Retry (retry(): a fresh worker); meanwhile precomputed results still answer (demo.js).  <html data-runtime> shows "loading" (loading, restarting), "deferred", "ready", or
 * "failed" (failed, crashed).  Until ready, demos answer from precomputed results (`waiting`).
 * The worker reports the bytes of the runtime files it has received (`progress`); a boot fails when
 * it stalls: no byte for DOWNLOAD_STALL_MS while downloading, or a later stage (starting Python,
 * loading numpy: work, not bytes) not over within STAGE_STALL_MS.  A worker "dies" when
 * it raises an uncaught error after boot or leaves a request unanswered for REQUEST_TIMEOUT_MS
 * (renders take milliseconds); it is replaced at most MAX_RESTARTS times per page (no crash loop).
 * Requests are tracked here: a reply goes to its callback; a request lost with a dead worker is
 * reported to its `lost` callback so its owner can send it again to the next worker.
 *
 * The readers' programs (pydemo.js) run in a second Runtime made with {page: false}: its own
 * worker, started on the first Run, so a program can change neither the modules the demos use
 * nor how long they wait.  It touches no page attribute, has no request timeout (the reader has
 * Stop: restart()) and makes no memory snapshot.  The messages: js/protocol.js. */

import { MSG } from "./protocol.js";
import { answers } from "./answers.js";

const DOWNLOAD_STALL_MS = 20000;  // no byte of the runtime arrived for this long: the download stalled
const STAGE_STALL_MS = 60000;     // starting Python / loading numpy (CPU work) took longer than this
const REQUEST_TIMEOUT_MS = 15000;
const MAX_RESTARTS = 2;

const TRANSITIONS = {
  deferred: ["loading"],
  loading: ["loading", "ready", "failed", "deferred"],
  ready: ["restarting", "crashed"],
  restarting: ["restarting", "ready", "crashed"],
  failed: ["loading"],
  crashed: ["loading"],
};
const ATTRIBUTE = { deferred: "deferred", loading: "loading", restarting: "loading", ready: "ready", failed: "failed",
  crashed: "failed" };
const IDLE_TIMEOUT_MS = 1000;    // start anyway if the page never goes idle

/** The reader's browser asks to save data, or the connection is 2G-class (Network Information API). */
export function saveData() {
  const c = typeof navigator !== "undefined" ? navigator.connection : null;
  return !!c && (c.saveData === true || /(^|-)2g$/.test(String(c.effectiveType || "")));
}

/** fn() after the first paint (a frame, then a task), when the main thread is idle (or after
 * IDLE_TIMEOUT_MS).  Not after `load`: that waits for fonts and every preload, which the page's
 * first paint does not need either. */
function whenIdle(fn) {
  requestAnimationFrame(() => setTimeout(() => {
    if (typeof requestIdleCallback === "function") requestIdleCallback(fn, { timeout: IDLE_TIMEOUT_MS });
    else fn();
  }, 0));
}

export class Runtime {
  /** `config`: {base, wheel, workerUrl, snapshot} (absolute URLs; snapshot: {key, numpy, sha256}
   * or null, see worker.js) or null when the page has no runtime. */
  constructor(config, { page = true } = {}) {
    this.config = config;
    this.page = page;             // the page's runtime (the demos'), not the readers' programs'
    this.state = "loading";
    this.detail = "download";     // loading stage, or why it failed: failed | timeout | none
    this.worker = null;
    this.restarts = 0;
    this.bootTimer = null;
    this.nextId = 1;
    this.requests = new Map();    // id -> {reply, lost, timer}
    this.listeners = [];
    this.progressListeners = [];
    this.loaded = 0;              // bytes of runtime files the worker has received
  }

  /** fn(state, detail) on every transition (and once now). */
  subscribe(fn) {
    this.listeners.push(fn);
    fn(this.state, this.detail);
  }

  /** fn(loaded bytes) whenever the worker reports progress. */
  onProgress(fn) {
    this.progressListeners.push(fn);
  }

  get ready() { return this.state === "ready"; }
  get final() { return this.state === "failed" || this.state === "crashed"; }
  get booting() { return this.state === "loading" || this.state === "restarting"; }
  get deferred() { return this.state === "deferred"; }
  /** Not ready yet, but may become so: changes are answered from precomputed results meanwhile. */
  get waiting() { return this.booting || this.deferred; }
  /** The worker exists (downloading or starting), as opposed to waiting for idle time or the reader. */
  get started() { return this.worker !== null; }

  /** Start now (the benchmarks' and tests' pages call startWhenIdle through app.js). */
  start() {
    if (!this.config || typeof Worker === "undefined") { this.to("failed", "none"); return; }
    if (!this.worker) this.spawn();
  }

  /** Start after the first paint when the page is idle; on Save-Data / 2G wait for the reader. */
  startWhenIdle() {
    if (!this.config || typeof Worker === "undefined") { this.to("failed", "none"); return; }
    if (saveData()) { this.to("deferred", "deferred"); return; }
    whenIdle(() => { if (this.state === "loading" && !this.worker) this.start(); });
  }

  /** The reader asked for the live Python (the button shown while deferred). */
  ask() {
    if (this.state !== "deferred") return;
    this.to("loading", "download");
    this.start();
  }

  to(state, detail) {
    if (!TRANSITIONS[this.state].includes(state)) {
      console.error(`tp runtime: no transition ${this.state} -> ${state}`);
      return;
    }
    this.state = state;
    this.detail = detail || "";
    if (this.page) document.documentElement.setAttribute("data-runtime", ATTRIBUTE[state]);
    if (!this.booting && this.bootTimer) { clearTimeout(this.bootTimer); this.bootTimer = null; }
    if (this.final) this.stopWorker();
    if (this.page && state === "ready" && window.performance && performance.mark) performance.mark("tp-ready");
    for (const fn of this.listeners) fn(state, this.detail);
  }

  /** Boot failed (a first boot: failed; a replacement's: crashed, the page had been live). */
  bootFailed(why) {
    if (this.state === "loading") this.to("failed", why);
    else if (this.state === "restarting") this.to("crashed", "crashed");
  }

  /** The reader pressed Retry after a failed start or a crash: a fresh worker, restarts counted anew. */
  retry() {
    if (!this.final || !this.config || typeof Worker === "undefined") return;
    this.restarts = 0;
    this.loaded = 0;
    this.to("loading", "download");
    this.spawn();
  }

  /** Stop the worker now (the reader's Stop: a program that does not end) and start a fresh one;
   * the requests in flight are lost (their owners are told). */
  restart() {
    if (this.state !== "ready" && this.state !== "restarting") return;
    if (this.worker) { this.worker.terminate(); this.worker = null; }
    this.forget();
    this.to("restarting", "restarting");
    this.dropRequests();
    this.spawn();
  }

  /** The worker is gone: the answers it sent ahead go with it (answers.js; the page's runtime only). */
  forget() {
    if (this.page) answers.forgetAhead();
  }

  spawn() {
    const { base, wheel, workerUrl, snapshot } = this.config;
    try {
      const worker = new Worker(workerUrl, { type: "module" });
      this.worker = worker;
      worker.onmessage = (ev) => { if (worker === this.worker) this.onMessage(ev.data || {}); };
      worker.onerror = (ev) => {
        if (ev && ev.preventDefault) ev.preventDefault();
        if (worker !== this.worker) return;
        if (this.booting) this.bootFailed("failed");
        else this.died();
      };
      worker.postMessage({ type: MSG.boot, base, wheel, snapshot: snapshot || null, reader: !this.page });
      this.stage = "download";
      this.watchBoot();
    } catch (err) {
      this.bootFailed("failed");
    }
  }

  /** Give up on a boot that stalls, whatever its total time: while downloading, DOWNLOAD_STALL_MS
   * from the last byte (a slow connection still delivers bytes; a hung one does not); in a later
   * stage (CPU work, no bytes to count), STAGE_STALL_MS from its start.  Called on every progress
   * report and stage change. */
  watchBoot() {
    clearTimeout(this.bootTimer);
    const ms = this.stage === "download" ? DOWNLOAD_STALL_MS : STAGE_STALL_MS;
    this.bootTimer = setTimeout(() => { if (this.booting) this.bootFailed("timeout"); }, ms);
  }

  stopWorker() {
    if (this.worker) { this.worker.terminate(); this.worker = null; }
    this.forget();
    this.dropRequests();
  }

  /** Every request in flight is lost: tell its owner (it may resend once a worker is ready). */
  dropRequests() {
    const lost = [...this.requests.values()];
    this.requests.clear();
    for (const w of lost) { clearTimeout(w.timer); w.lost(); }
  }

  /** The ready worker threw or stopped answering: replace it, a bounded number of times. */
  died() {
    if (this.state !== "ready") return;
    // No crash loop: after MAX_RESTARTS the page stops trying, and says so (not "could not be
    // restarted": no restart was tried); Retry is the reader's.
    if (this.restarts >= MAX_RESTARTS) { this.to("crashed", "gave_up"); return; }
    this.restarts++;
    if (this.worker) { this.worker.terminate(); this.worker = null; }
    this.forget();
    this.to("restarting", "restarting");
    this.dropRequests();
    this.spawn();
  }

  onMessage(msg) {
    if (msg.type === MSG.progress) {
      if (!this.booting) return;
      this.watchBoot();
      this.loaded = Number(msg.loaded) || 0;
      for (const fn of this.progressListeners) fn(this.loaded);
      return;
    }
    if (msg.type === MSG.status) {
      if (!this.booting) return;
      if (msg.stage !== "failed") this.stage = msg.stage;
      this.watchBoot();
      if (msg.stage === "ready") this.becameReady(msg.boot);
      else if (msg.stage === "failed") this.bootFailed("failed");
      else if (this.state === "loading") this.to("loading", msg.stage);
      return;
    }
    if (msg.type === MSG.answer) { if (this.page) answers.keep(msg.key, msg.text); return; }
    const w = this.requests.get(msg.id);
    if (!w) return;
    this.requests.delete(msg.id);
    clearTimeout(w.timer);
    w.reply(msg);
  }

  /** The worker is ready.  <html data-runtime-boot> says how it started: "snapshot" (from the
   * memory snapshot an earlier visit stored), "fallback" (a stored snapshot was not usable, so
   * the normal boot ran) or "normal".  Once the page is idle the worker may
   * store the snapshot this boot made (never before ready: it is 21 MB to write). */
  becameReady(boot) {
    if (!this.page) { this.to("ready", "ready"); return; }
    document.documentElement.setAttribute("data-runtime-boot", ["snapshot", "fallback"].includes(boot) ? boot : "normal");
    this.to("ready", "ready");
    const worker = this.worker;
    whenIdle(() => { if (worker && worker === this.worker) worker.postMessage({ type: MSG.idle }); });
  }

  /** Post a message that has no answer (dropped unless ready). */
  tell(msg) {
    if (this.ready && this.worker) this.worker.postMessage(msg);
  }

  /** Send a request ({type, ...}: an id is added); null when the runtime is not ready. */
  send(msg, reply, lost) {
    if (!this.ready || !this.worker) return null;
    const id = this.nextId++;
    const timer = this.page ? setTimeout(() => this.died(), REQUEST_TIMEOUT_MS) : null;
    this.requests.set(id, { reply, lost, timer });
    this.worker.postMessage({ ...msg, id });
    return id;
  }
}
