/* One live demo block (div.demo[data-section] > form.controls[data-section]): its controls, the
 * coalesced requests to the runtime, messages, control state, and applying results.
 *
 * Coalescing: at most one render per section is in flight; changes meanwhile only mark the demo
 * dirty, and when the answer arrives the latest control state is sent instead of applying a stale
 * result.  So dragging a slider computes the latest value, never a queue of old ones.
 * A change that has to wait for the runtime (still loading or restarting) marks the demo
 * data-state="pending" with a note until a result is applied. */

import { cellText, has, pageLang, tr } from "./i18n.js";
import { applyResult } from "./apply.js";
import { showCue } from "./cue.js";
import { toSlider } from "./sliders.js";

let firstLive = false;

export class Demo {
  constructor(el, runtime) {
    this.el = el;
    this.name = el.getAttribute("data-section");
    this.form = el.querySelector("form.controls");
    this.runtime = runtime;
    this.inflight = null;       // id of the render in flight
    this.dirty = false;         // controls changed since the last render was sent
    this.cue = false;           // the next result follows a reader's change: show what changed
    this.error = "";            // message of the last refused state
    this.note = "";             // a value from the link was ignored (kept until the reader acts)
    this.fromUrl = new Set();   // controls set from the link and not yet confirmed by a result
    this.done = null;           // the control values of the last answer (applied or refused)
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
    const pending = this.el.getAttribute("data-state") === "pending";
    const text = this.error || (pending ? tr("runtime.pending") : "") || this.note;
    if (out && out.textContent !== text) out.textContent = text;
    if (out) out.setAttribute("data-kind", this.error ? "error" : pending ? "pending" : this.note ? "note" : "");
    if (field !== undefined) {
      for (const el of this.controls()) {
        if (field && el.name === field) el.setAttribute("aria-invalid", "true");
        else el.removeAttribute("aria-invalid");
      }
    }
  }

  setPending(on) {
    if (on) { this.el.setAttribute("data-state", "pending"); this.el.setAttribute("aria-busy", "true"); }
    else this.el.removeAttribute("data-state");
    this.showMessage();
  }

  // ---- requests ---------------------------------------------------------------------------
  /** The reader changed a control. */
  changed() {
    this.note = "";
    this.fromUrl.clear();
    this.cue = true;
    if (this.runtime.final) {   // nothing can compute it: say so, and keep controls = tables
      this.setValues(this.shown);
      this.error = tr("runtime.static");
      this.showMessage(null);
      return;
    }
    this.request();
  }

  request() {
    this.dirty = true;
    if (this.runtime.booting) { this.setPending(true); return; }
    if (!this.runtime.ready || this.inflight !== null) return;
    const controls = this.values();
    this.dirty = false;
    if (sameValues(controls, this.done)) {   // already answered (e.g. the change event ending a drag)
      this.cue = false;
      this.setPending(false);
      this.el.removeAttribute("aria-busy");
      return;
    }
    this.el.setAttribute("aria-busy", "true");
    this.inflight = this.runtime.send({ type: "render", section: this.name, controls, lang: pageLang() },
      (msg) => this.onReply(msg, controls),
      () => { this.inflight = null; this.request(); });   // lost with its worker: wait for the next
  }

  /** The runtime became ready: send what is waiting. */
  flush() {
    if (this.dirty) this.request();
  }

  /** The runtime is gone for good: the tables stay as they are; controls go back to them. */
  stop() {
    this.inflight = null;
    this.el.removeAttribute("aria-busy");
    if (this.el.getAttribute("data-state") === "pending") {   // a change that can no longer be applied
      this.el.removeAttribute("data-state");
      this.setValues(this.shown);
      this.fromUrl.clear();
      this.error = tr("runtime.static");
    }
    this.dirty = false;
    this.showMessage();
  }

  onReply(msg, sent) {
    this.inflight = null;
    if (this.dirty && !sameValues(this.values(), sent)) { this.request(); return; }   // stale: compute the latest instead
    this.dirty = false;
    this.done = sent;
    const payload = msg.payload || {};
    if (!payload.ok && this.fromUrl.size) {        // the link's values are refused together
      this.note = this.ignoredNote([...this.fromUrl].map((n) => [n, sent[n]]), cellText(payload.error));
      this.setValues(Object.fromEntries([...this.fromUrl].map((n) => [n, this.defaults[n]])));
      this.fromUrl.clear();
      this.done = null;
      this.request();
      return;
    }
    this.el.removeAttribute("aria-busy");
    this.setPending(false);
    if (payload.ok) {
      const result = payload.result || {};
      this.error = "";
      this.fromUrl.clear();
      const changed = applyResult(this.el, result);
      if (result.control_state) this.applyControlState(result.control_state);
      this.shown = this.values();
      if (this.cue) showCue(changed);   // (an empty list still ends the previous cue)
      if (!firstLive) { firstLive = true; if (window.performance && performance.mark) performance.mark("tp-first-live"); }
    } else {
      this.error = cellText(payload.error) || tr("runtime.failed");
    }
    this.cue = false;
    this.showMessage(payload.ok ? null : payload.field || null);
    this.el.dispatchEvent(new CustomEvent("tp-rendered", { bubbles: true, detail: { section: this.name, ok: !!payload.ok } }));
  }

  /** "The link's value shift = 1e308 was ignored: why" (values as the link had them). */
  ignoredNote(pairs, why) {
    const list = pairs.map(([n, v]) => `${n} = ${v}`).join(", ");
    return tr("runtime.url_ignored", { values: list }) + (why ? " " + why : "");
  }

  // ---- control state ----------------------------------------------------------------------
  /** {NAME: {disabled, value, why, options}} from the view: a control that does nothing is
   * disabled with its reason next to it; a preset may set a value; `options` ({VALUE: why})
   * disables single choices of a select, each labelled with its reason. */
  applyControlState(state) {
    for (const el of this.controls()) {
      const s = state[el.name] || {};
      el.disabled = !!s.disabled;
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

/** A select's choices: the ones named in `off` disabled, "label (why)"; the others as built. */
function setOptions(select, off) {
  const key = (v) => v.replace(/-/g, "_");
  for (const opt of select.options) {
    const k = `opt.${key(select.name)}.${key(opt.value)}`;
    const label = has(k) ? tr(k) : opt.value;
    const why = Object.prototype.hasOwnProperty.call(off, opt.value) ? cellText(off[opt.value]) : null;
    const text = why === null ? label : tr("site.option_off", { label, why });
    opt.disabled = why !== null;
    if (opt.textContent !== text) opt.textContent = text;
  }
}

function sameValues(a, b) {
  if (!a || !b) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}
