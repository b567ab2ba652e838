/* Control values in the query string, and the reader's place in the language switch.
 *
 * - A control differing from its default is written to the query (history.replaceState: no
 *   reload, no history entry); a name used by several sections on the page is SECTION.NAME.
 *   Disabled controls are left out (another control, e.g. a preset, decides them).
 * - On load, the query's values are put in the controls; a value the control cannot hold (not an
 *   option, not a number, outside min/max, off its step) is ignored and the demo says so.
 * - The language links (.lang-switch) carry the query and the heading the reader is at (ids are
 *   equal across languages): the one in view when the reader was last below the header, else
 *   the heading of the demo last changed. */

import { tr } from "./i18n.js";
import { toSlider } from "./sliders.js";
import { idle } from "./layout.js";

let demos = [];
const nameCount = {};
let lastChanged = null;      // the demo the reader changed last (its heading is the place)

export function setupUrl(list) {
  demos = list;
  for (const d of demos) for (const el of d.controls()) nameCount[el.name] = (nameCount[el.name] || 0) + 1;
  restore();
  let queued = false;
  const onScroll = () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; updateLangLinks(); });
  };
  window.addEventListener("scroll", onScroll, { passive: true });
  // The query is written a little after a change: a language switch or a reload right after it
  // takes the latest values.
  for (const a of langLinks()) a.addEventListener("click", () => { flushUrl(); updateLangLinks(); });
  window.addEventListener("pagehide", flushUrl);
  window.addEventListener("hashchange", updateLangLinks);
  window.addEventListener("load", updateLangLinks);
  // Not now: it reads where the header is, and reading a position while the page is still being
  // parsed lays out the whole document a second time (a long task on a phone).  The next frame
  // lays it out anyway.
  requestAnimationFrame(updateLangLinks);
}

function queryKey(demo, name) {
  return nameCount[name] > 1 ? `${demo.name}.${name}` : name;
}

/** Whether `el` accepts `value` as given (the browser's own constraint checks for numbers). */
function holds(el, value) {
  el.value = value;
  if (el.tagName === "SELECT") return el.value === value;
  if (el.type === "number") return el.value !== "" && el.checkValidity();
  return el.value === value;
}

function restore() {
  const params = new URLSearchParams(window.location.search);
  for (const d of demos) {
    const ignored = [];
    for (const el of d.controls()) {
      const key = `${d.name}.${el.name}`;
      const value = params.has(key) ? params.get(key) : params.has(el.name) ? params.get(el.name) : null;
      if (value === null || value === el.value) continue;
      const before = el.value;
      if (holds(el, value)) {
        d.fromUrl.add(el.name);
        toSlider(el);
      } else {
        el.value = before;
        ignored.push([el.name, value]);
      }
    }
    if (ignored.length) {
      d.note = d.ignoredNote(ignored, "");
      d.showMessage();
    }
    if (d.fromUrl.size) d.request();
  }
}

function query() {
  const params = new URLSearchParams();
  for (const d of demos) {
    for (const el of d.controls()) {
      // a refused value is not written: the link keeps the setting the tables show
      const value = d.error && d.shown && el.name in d.shown ? d.shown[el.name] : el.value;
      if (!el.disabled && value !== d.defaults[el.name]) params.set(queryKey(d, el.name), value);
    }
  }
  const qs = params.toString();
  return qs ? "?" + qs : "";
}

/** The id of the heading a demo belongs to (the last h2–h4 with an id before it), else the demo's. */
function anchorOf(demo) {
  if (demo.anchor === undefined) {
    demo.anchor = demo.el.id || "";
    for (const h of document.querySelectorAll("h2[id], h3[id], h4[id]")) {
      if (h.compareDocumentPosition(demo.el) & Node.DOCUMENT_POSITION_FOLLOWING) demo.anchor = h.id;
      else break;
    }
  }
  return demo.anchor;
}

/** The heading the reader is at: the first one showing in the top quarter of the window, else the
 * last one scrolled past. */
function headingInView() {
  let above = "";
  const line = window.innerHeight / 4;
  for (const h of document.querySelectorAll("main h2[id], main h3[id], main h4[id]")) {
    const y = h.getBoundingClientRect().top;
    if (y < 0) { above = h.id; continue; }
    return y <= line ? h.id : above;
  }
  return above;
}

const WRITE_EVERY_MS = 200;   // browsers refuse bursts of history.replaceState (a dragged slider)
const WRITE_AFTER_MS = 100;   // after the change's answer, usually
let lastWrite = 0;
let writeTimer = null;

function write() {
  writeTimer = null;
  lastWrite = Date.now();
  const anchor = anchorOf(lastChanged);
  const url = window.location.pathname + query() + (anchor ? "#" + anchor : window.location.hash);
  if (url !== window.location.pathname + window.location.search + window.location.hash) {
    try { history.replaceState(history.state, "", url); } catch (err) { /* file:// and the like */ }
  }
  // In the next frame, not in the change's own task: it reads where the header is, which would
  // lay the page out before the answer is even asked for (the frame lays it out anyway).
  requestAnimationFrame(updateLangLinks);
}

/** A write still waiting: now. */
function flushUrl() {
  if (!writeTimer) return;
  clearTimeout(writeTimer);
  write();
}

/** A demo's controls changed: rewrite the query once the page is idle (while a slider moves, at
 * most every WRITE_EVERY_MS). */
export function writeUrl(demo) {
  lastChanged = demo;
  if (writeTimer) return;
  const wait = Math.max(0, lastWrite + WRITE_EVERY_MS - Date.now());
  // A little later, when the page is idle: replacing the URL costs a few ms (history.replaceState),
  // and in the change's own task or right after it the worker's answer would wait behind it.
  writeTimer = setTimeout(() => idle(() => { if (writeTimer) write(); }, 1000), Math.max(wait, WRITE_AFTER_MS));
}

/** A demo's answer arrived (accepted or refused): the query follows what it shows, without
 * making that demo the reader's place. */
export function refreshUrl() {
  if (lastChanged && !writeTimer) writeTimer = setTimeout(() => idle(() => { if (writeTimer) write(); }, 1000), WRITE_AFTER_MS);
}

function langLinks() {
  return document.querySelectorAll(".lang-switch[href]");
}

let place = "";   // the heading in view, as last seen while the language links were out of view

function updateLangLinks() {
  // The reader scrolls back up to the header to reach the links: the place is where they were
  // reading before the header came into view, not the top of the page.
  const links = langLinks();
  if (!links.length || links[0].getBoundingClientRect().bottom <= 0) place = headingInView() || place;
  const at = place || (lastChanged ? anchorOf(lastChanged) : "");
  const hash = at ? "#" + at : window.location.hash;
  for (const a of langLinks()) {
    if (!a.hasAttribute("data-base-href")) a.setAttribute("data-base-href", a.getAttribute("href").split(/[?#]/)[0]);
    const href = a.getAttribute("data-base-href") + window.location.search + hash;
    if (a.getAttribute("href") !== href) a.setAttribute("href", href);
  }
}
