/* One live demo block (div.demo[data-section] > form.controls[data-section]): its controls, the
 * coalesced requests to the runtime, messages, control state, and applying results.
 *
 * Coalescing: at most one render per section is in flight; changes meanwhile only mark the demo
 * dirty, and when the answer arrives the latest control state is sent instead of applying a stale
 * result.  So dragging a slider computes the latest value, never a queue of old ones.
 * Before the runtime is ready (loading, restarting, or waiting for the reader to ask for it), a
 * change is answered from the section's precomputed results (results.js) when they hold its
 * state -- the same payload the worker would send; otherwise the demo is marked
 * data-state="pending" with a note until a result is applied.  Once the runtime is ready it
 * answers every change.  After it failed or stopped for good, the precomputed results still
 * answer; any other change is refused (the controls go back to what the tables show).
 *
 * A demo's own state, in one field (`state`), like Runtime's:
 *
 *   shown ──a change──▶ asking ──BUSY_DIM_MS──▶ slow
 *     ▲                   │                      │
 *     │                   └───────┬──────────────┘
 *     │                           ▼ not precomputed, the runtime not ready (at once, or
 *     │                        pending   after PENDING_AFTER_MS)
 *     └──answer shown, refused────┘ (from any state)
 *
 * shown: the tables answer the controls; asking: an answer is awaited (the worker's, the results
 * file, the strings); slow: awaited for BUSY_DIM_MS (dimmed); pending: waits for the runtime (a
 * note says so).  paint() writes the block's attributes from it and
 * nothing reads them back: data-state="pending", aria-busy while an answer is awaited (pending:
 * unless the runtime waits for the reader), data-slow (the dimming, style.css) when slow or so. */

import { cellText, pageLang, stringsReady, tr, whenStrings } from "./i18n.js";
import { applyResult, markStale } from "./apply.js";
import { showCue } from "./cue.js";
import { toSlider, valuesBeside } from "./sliders.js";
import { answers } from "./answers.js";
import { MSG } from "./protocol.js";

const PENDING_AFTER_MS = 100;    // a change not answered by then shows the pending state
const QUOTED_MAX = 60;           // a link's value longer than this is cut in a note (tpmath.errors.SHORT)
// An answer slower than this dims the block (style.css, data-slow): early enough that the dimmed
// frame is painted within 100 ms of the change (one frame after the timer), before the pending note.
const BUSY_DIM_MS = 80;
const URL_FIELDS_TRIED = 6;      // link values looked up as a preset's fields (2^6 lookups at most; precomputed())

let firstLive = false;

const STATES = {
  shown: ["shown", "asking", "pending"],
  asking: ["asking", "slow", "pending", "shown"],
  slow: ["slow", "pending", "shown"],
  pending: ["pending", "shown"],
};

/** Whether the control's value `now` lies below `before` on its scale (its options' order, or
 * the number itself): the reader moved it down. */
function below(el, now, before) {
  if (el.tagName === "SELECT") {
    const opts = Array.from(el.options, (o) => o.value);
    return opts.indexOf(now) < opts.indexOf(before);
  }
  return now !== "" && before !== "" && Number(now) < Number(before);
}

export class Demo {
  constructor(el, runtime) {
    this.el = el;
    this.name = el.getAttribute("data-section");
    this.form = el.querySelector("form.controls");
    this.runtime = runtime;
    this.state = "shown";       // see the module comment (STATES)
    this.inflight = null;       // id of the render in flight
    this.dirty = false;         // controls changed since the last render was sent
    this.cue = false;           // the next result follows a reader's change: show what changed
    this.error = "";            // message of the last refused state
    this.note = "";             // a value from the link was ignored (kept until the reader acts)
    this.fromUrl = new Set();   // controls set from the link and not yet confirmed by a result
    this.done = null;           // the control values of the last answer (applied or refused)
    this.ticket = 0;            // bumped by every request: a late precomputed lookup is dropped
    this.pendingTimer = null;   // PENDING_AFTER_MS after a change not answered at once
    this.slowTimer = null;      // BUSY_DIM_MS after asking
    this.resultsUrl = el.getAttribute("data-results");
    this.defaults = this.values();
    this.shown = { ...this.defaults };   // the control values the tables show
  }

  controls() {
    return Array.from(this.form.elements).filter((el) => el.name && /^(INPUT|SELECT|TEXTAREA)$/.test(el.tagName));
  }

  values() {
    return Object.fromEntries(this.controls().map((el) => [el.name, el.value]));
  }

  /** Set controls (and their sliders) to `values`. */
  setValues(values) {
    for (const el of this.controls()) {
      if (Object.prototype.hasOwnProperty.call(values, el.name) && el.value !== values[el.name]) {
        el.value = values[el.name];
        toSlider(el);
      }
    }
  }

  // ---- messages ---------------------------------------------------------------------------
  /** The form's message line: an error, else "waiting for the runtime", else the link note. */
  showMessage(field) {
    const out = this.form.querySelector(".control-msg");
    const pending = this.state === "pending";
    const wait = this.resultsUrl && answers.loaded(this.resultsUrl) === undefined ? "runtime.pending_results"
      : this.runtime.deferred ? "runtime.pending_deferred" : "runtime.pending";
    const text = this.error || (pending ? tr(wait) : "") || this.note;
    if (out && out.textContent !== text) out.textContent = text;
    if (out) out.setAttribute("data-kind", this.error ? "error" : pending ? "pending" : this.note ? "note" : "");
    if (field !== undefined) {
      for (const el of this.controls()) {
        if (field && el.name === field) el.setAttribute("aria-invalid", "true");
        else el.removeAttribute("aria-invalid");
      }
    }
    this.paint();
  }

  // ---- state ------------------------------------------------------------------------------
  to(state) {
    if (!STATES[this.state].includes(state)) {
      console.error(`tp demo ${this.name}: no transition ${this.state} -> ${state}`);
      return;
    }
    const was = this.state;
    this.state = state;
    if (state !== "asking") { clearTimeout(this.slowTimer); this.slowTimer = null; }
    if (state === "asking" && was !== "asking") {
      this.slowTimer = setTimeout(() => { this.slowTimer = null; if (this.state === "asking") this.to("slow"); }, BUSY_DIM_MS);
    }
    if (state === "shown" || state === "pending") { clearTimeout(this.pendingTimer); this.pendingTimer = null; }
    this.paint();
  }

  /** An answer is awaited: asking (a state already waiting stays as it is). */
  ask() {
    if (this.state === "shown") this.to("asking");
  }

  /** The answer was shown or the change refused. */
  settle() {
    this.to("shown");
  }

  /** Waiting for the runtime: the pending note (and, unless it waits for the reader, dimmed). */
  pend() {
    this.to("pending");
    this.showMessage();
  }

  /** The block's attributes from `state` (never read back). */
  paint() {
    const waiting = this.state === "pending" && !this.runtime.deferred;   // busy while the runtime comes
    const attrs = { "data-state": this.state === "pending" ? "pending" : null,
      "aria-busy": this.state === "asking" || this.state === "slow" || waiting ? "true" : null,
      "data-slow": this.state === "slow" || waiting ? "" : null };
    for (const [name, value] of Object.entries(attrs)) {
      if (value === null) this.el.removeAttribute(name);
      else if (this.el.getAttribute(name) !== value) this.el.setAttribute(name, value);
    }
  }

  /** The runtime's state changed (not to ready or failed): the pending note names what it waits for. */
  runtimeChanged() {
    this.paint();
    this.showMessage();
  }

  /** The reader is about to use the controls: fetch the precomputed results now (once). */
  prefetch() {
    if (!this.runtime.ready && this.resultsUrl) answers.load(this.resultsUrl);
    // With the runtime ready: have it compute the states one step away now (the section's first
    // one also imports its view module, the slowest answer of a visit).
    this.ahead(this.statesBeside(this.values()));
    whenStrings();
  }

  // ---- requests ---------------------------------------------------------------------------
  /** The reader changed a control. */
  changed() {
    this.note = "";
    this.fromUrl.clear();
    this.cue = true;
    this.request();
  }

  /** Nothing can compute this change (the runtime failed or stopped, the state was not computed in
   * advance): say so, and keep controls = tables. */
  refuse() {
    this.dirty = false;
    this.settle();
    this.setValues(this.shown);
    this.fromUrl.clear();
    this.error = tr("runtime.static");
    this.showMessage(null);
  }

  request() {
    this.dirty = true;
    this.ticket++;
    if (this.refuseBadNumber()) return;
    if (this.runtime.waiting || this.runtime.final) { this.fromResults(); return; }
    if (!this.runtime.ready || this.inflight !== null) return;
    const controls = this.values();
    this.dirty = false;
    if (sameValues(controls, this.done)) {   // already answered (e.g. the change event ending a drag)
      this.cue = false;
      this.settle();
      this.showMessage();
      return;
    }
    const next = this.statesBeside(controls);
    const kept = answers.ahead(this.name, pageLang(), controls);
    if (kept !== undefined) {
      // Computed ahead by the worker: shown in this task, so the control and its result reach the
      // screen in one frame; the worker moves on to the states beside this one.
      this.ahead(next, controls);
      this.answer(JSON.parse(kept), controls, true);
      return;
    }
    this.ask();
    this.inflight = this.runtime.send({ type: MSG.render, section: this.name, controls, lang: pageLang(), next },
      (msg) => this.onReply(msg, controls),
      () => { this.inflight = null; this.request(); });   // lost with its worker: wait for the next
  }

  /** The states one step from `controls` that a reader reaches next: each enabled control moved
   * one slider step or one choice either way (the step up first), the controls just moved first,
   * and a control just moved down steps down first: a drag or a run of arrow keys goes on the
   * way it went (the worker computes them ahead in this order, worker.js).  Typed numbers are
   * not guessed. */
  statesBeside(controls) {
    const moved = (el) => (this.done && this.done[el.name] !== controls[el.name] ? 0 : 1);
    const states = [];
    for (const el of this.controls().filter((c) => !c.disabled).sort((a, b) => moved(a) - moved(b))) {
      let values = valuesBeside(el);
      if (values === null && el.tagName === "SELECT") {
        const opts = Array.from(el.options).filter((o) => !o.disabled).map((o) => o.value);
        const i = opts.indexOf(controls[el.name]);
        values = i < 0 ? [] : [opts[i + 1], opts[i - 1]].filter((v) => v !== undefined);
      }
      if (values && !moved(el) && below(el, controls[el.name], this.done[el.name])) values.reverse();
      for (const v of values || []) states.push({ ...controls, [el.name]: v });
    }
    return states;
  }

  /** Runtime not ready (loading, deferred, failed or stopped): answer from the precomputed results;
   * else mark pending (it may come) or refuse (it will not). */
  fromResults() {
    const controls = this.values();
    const ticket = this.ticket;
    const answer = (data) => {
      if (ticket !== this.ticket) return;                  // a later change is being answered
      if (this.runtime.ready) { if (this.dirty) this.request(); return; }   // the runtime took over
      const payload = data ? this.precomputed(data, controls) : null;
      if (!payload) { if (this.runtime.final) this.refuse(); else this.pend(); return; }
      this.dirty = false;
      this.answer(payload, controls, false);
    };
    this.pendingAfter();
    const data = answers.loaded(this.resultsUrl);
    if (data !== undefined || !this.resultsUrl) { answer(data || null); return; }
    this.ask();     // an answer is awaited (the file); dimmed only if it is slow
    answers.load(this.resultsUrl).then(answer);
  }

  /** Show the pending state if this change (or a later one: an input event and its change event
   * are two requests) is still unanswered after PENDING_AFTER_MS: the results file or the strings
   * may be on their way over a slow connection. */
  pendingAfter() {
    if (this.pendingTimer || this.state === "pending") return;
    this.pendingTimer = setTimeout(() => {
      this.pendingTimer = null;
      if (this.state !== "shown" && !this.runtime.ready) this.pend();
    }, PENDING_AFTER_MS);
  }

  /** Have the worker compute the states `next` when idle (worker.js "Ahead of the reader");
   * `shown`: the controls the page just showed from an answer sent ahead (`next` is what is beside
   * them, and replaces what the worker still had to compute). */
  ahead(next, shown = null) {
    const msg = { type: MSG.ahead, section: this.name, lang: pageLang(), next };
    this.runtime.tell(shown ? { ...msg, controls: shown, replace: true } : msg);
  }

  /** The runtime became ready: send what is waiting. */
  flush() {
    if (this.dirty) this.request();
  }

  /** Have the worker compute the state the tables show (it imports the section's view module:
   * the reader's first change need not wait for that).  app.js calls it once, when the demo
   * comes near the screen with the runtime ready. */
  warm() {
    this.ahead([this.values()]);
  }

  /** The runtime is gone (until a Retry): the tables stay as they are; a change still waiting is
   * answered from the precomputed results or refused (controls go back to the tables). */
  stop() {
    this.inflight = null;
    const waited = this.dirty || this.state === "pending";
    if (this.state !== "pending") this.settle();
    if (waited) this.request();
    else this.showMessage();
  }

  onReply(msg, sent) {
    this.inflight = null;
    if (this.dirty && !sameValues(this.values(), sent)) { this.request(); return; }   // stale: compute the latest instead
    this.dirty = false;
    this.answer(JSON.parse(msg.text), sent, true);
  }

  /** Apply an answer to the control values `sent`: the worker's (`live`) or a precomputed one.
   * The first one waits for the language's strings (its cells are keys); a later change meanwhile
   * makes it stale (its own answer follows). */
  answer(payload, sent, live) {
    if (stringsReady()) { this.show(payload, sent, live); return; }
    this.ask();
    const ticket = this.ticket;
    whenStrings().then(() => { if (ticket === this.ticket) this.show(payload, sent, live); });
  }

  show(payload, sent, live) {
    if (this.badNumber()) return;               // for values the controls no longer hold
    this.done = sent;
    if (!payload.ok && this.fromUrl.size) {        // the link's values are refused together
      this.note = this.ignoredNote([...this.fromUrl].map((n) => [n, sent[n]]), cellText(payload.error));
      this.setValues(Object.fromEntries([...this.fromUrl].map((n) => [n, this.defaults[n]])));
      this.fromUrl.clear();
      this.done = null;
      this.request();
      return;
    }
    if (!payload.ok && this.release(payload.field)) { this.done = null; this.request(); return; }
    this.settle();
    const refused = payload.ok ? (payload.result || {}).refused || null : payload;
    if (payload.ok) {
      const result = payload.result || {};
      this.error = refused ? cellText(refused.error) : "";
      if (this.fromUrl.size && result.control_state) this.note = this.overriddenNote(result.control_state, sent) || this.note;
      this.fromUrl.clear();
      const changed = applyResult(this.el, result);
      if (result.control_state) this.applyControlState(result.control_state);
      this.markStale(result.stale || null);
      const before = this.shown;
      this.shown = this.values();
      if (refused && refused.field in before) this.shown[refused.field] = before[refused.field];
      if (this.cue) showCue(changed);   // (an empty list still ends the previous cue)
      if (live && !firstLive) { firstLive = true; if (window.performance && performance.mark) performance.mark("tp-first-live"); }
    } else {
      this.error = cellText(payload.error) || tr("runtime.failed");
      // the view's state for the refused values (a preset's greyed fields): controls = message
      if (payload.control_state) this.applyControlState(payload.control_state);
      this.markStale("all");
    }
    this.cue = false;
    this.showMessage(refused ? refused.field || null : null);
    this.el.dispatchEvent(new CustomEvent("tp-rendered", { bubbles: true,
      detail: { section: this.name, ok: !!payload.ok, source: live ? "live" : "precomputed" } }));
  }

  /** "The link's value shift = 1e308 was ignored: why" (values as the link had them, a long one
   * cut; `key`: url_ignored or url_set_by, with _many for several values). */
  ignoredNote(pairs, why, key = "runtime.url_ignored") {
    const cut = (v) => (v.length > QUOTED_MAX ? v.slice(0, QUOTED_MAX - 1) + "…" : v);
    const list = pairs.map(([n, v]) => `${n} = ${cut(String(v))}`).join(", ");
    const text = tr(pairs.length > 1 ? key + "_many" : key, { values: list, why: "" });
    return key === "runtime.url_ignored" && why ? text + " " + why : text;
  }

  /** The link's values of fields the view then set itself (a preset's): say so (the reason is
   * beside each field). */
  overriddenNote(state, sent) {
    const set = [...this.fromUrl].filter((n) => owns(state, n) && state[n].value !== sent[n]);
    if (!set.length) return "";
    return tr(set.length > 1 ? "runtime.url_set_by_many" : "runtime.url_set_by",
      { values: set.map((n) => `${n} = ${sent[n]}`).join(", ") });
  }

  /** The precomputed answer for `controls`, or null.  A link's value for a field the view sets
   * itself (a preset's) is not in the results' states (the view ignores it); the live answer is
   * then that of the same form with such fields as the static page has them (the state a reader
   * reaches by picking the preset): the smallest set of link fields that answer owns. */
  precomputed(data, controls) {
    const hit = answers.lookup(data, controls);
    const names = [...this.fromUrl].filter((n) => controls[n] !== this.defaults[n]);
    if (hit || !names.length || names.length > URL_FIELDS_TRIED) return hit;
    const subsets = Array.from({ length: (1 << names.length) - 1 }, (_, i) => names.filter((n, j) => (i + 1) & (1 << j)))
      .sort((a, b) => a.length - b.length);
    for (const set of subsets) {
      const payload = answers.lookup(data, { ...controls, ...Object.fromEntries(set.map((n) => [n, this.defaults[n]])) });
      const state = payload && payload.ok ? (payload.result || {}).control_state || {} : null;
      if (state && set.every((n) => owns(state, n))) return payload;
    }
    return null;
  }

  /** Dim what no longer matches the controls (apply.js). */
  markStale(stale) {
    markStale(this.el, stale);
  }

  /** A refusal of a value the reader cannot edit (a field the view set, e.g. a preset's: greyed,
   * data-set): those fields go back to the static page's values and the change is sent again,
   * so leaving a preset never leaves its values behind (issue 25 item 20; tpsite/precompute.py
   * walks the same retry).  False when there is nothing to release. */
  release(field) {
    const at = this.controls().find((el) => el.name === field);
    if (!at || !at.disabled || !at.hasAttribute("data-set")) return false;
    let changed = false;
    for (const el of this.controls()) {
      if (el.disabled && el.hasAttribute("data-set") && el.value !== this.defaults[el.name]) {
        el.value = this.defaults[el.name];
        toSlider(el);
        changed = true;
      }
    }
    return changed;
  }

  /** A number box holding text the browser cannot read as a number (1e400, "1e"): its value is
   * "" and the view would call it empty, so the page names the fault itself. */
  badNumber() {
    return this.controls().find((el) => el.validity && el.validity.badInput) || null;
  }

  refuseBadNumber() {
    const el = this.badNumber();
    if (!el) return false;
    const lab = el.id ? document.querySelector(`label[for="${el.id}"]`) : null;
    this.dirty = false;
    this.error = tr("site.bad_number", { name: lab ? lab.textContent.trim() : el.name });
    this.settle();
    this.markStale("all");
    this.showMessage(el.name);
    return true;
  }

  // ---- control state ----------------------------------------------------------------------
  /** {NAME: {disabled, value, why, options}} from the view: a control that does nothing is
   * disabled with its reason next to it; a preset may set a value; `options` ({VALUE: why})
   * disables single choices of a select, each labelled with its reason. */
  applyControlState(state) {
    for (const el of this.controls()) {
      const s = state[el.name] || {};
      el.disabled = !!s.disabled;
      el.toggleAttribute("data-set", !!s.disabled && typeof s.value === "string");   // see release()
      if (el.tagName === "SELECT") setOptions(el, s.options || {});
      if (typeof s.value === "string" && el.value !== s.value) el.value = s.value;
      this.setWhy(el, s.disabled && s.why ? cellText(s.why) : "");
      toSlider(el);
    }
  }

  setWhy(el, text) {
    const id = `why-${this.name}-${el.name}`;
    let why = document.getElementById(id);
    if (!text) {
      if (why) why.remove();
      el.removeAttribute("aria-describedby");
      return;
    }
    if (!why) {
      why = document.createElement("small");
      why.className = "ctl-why";
      why.id = id;
      (el.closest(".ctl") || el.parentElement).appendChild(why);
    }
    if (why.textContent !== text) why.textContent = text;
    el.setAttribute("aria-describedby", id);
  }
}

/** A select's choices: the ones named in `off` disabled, "label (why)"; the others their label
 * (data-label: built once by the builder, tpsite/render.py). */
function setOptions(select, off) {
  for (const opt of select.options) {
    const label = opt.getAttribute("data-label");
    const why = Object.prototype.hasOwnProperty.call(off, opt.value) ? cellText(off[opt.value]) : null;
    const text = why === null ? label : tr("site.option_off", { label, why });
    opt.disabled = why !== null;
    if (opt.textContent !== text) opt.textContent = text;
  }
}

/** Whether the view set control `name` itself in `state` (disabled with a value: a preset's field). */
function owns(state, name) {
  const s = state[name];
  return !!s && !!s.disabled && typeof s.value === "string";
}

function sameValues(a, b) {
  if (!a || !b) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}
