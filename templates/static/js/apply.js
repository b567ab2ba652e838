/* Applying a section's result to its demo block (DOM contract: ARCHITECTURE.md, "Rendered demo
 * block"): tables (text cells and element-tree cells), values, notes, the real-ranks block and
 * figures.  The page is made equal to the result changing only what differs (figures and changed
 * table rows straight from their element trees, named parts of a drawing matched by name), and
 * whatever text changed is marked for a moment (the "what changed" cue, cue.js). */

import { cellText, tr } from "./i18n.js";
import { build, TreeError, validate } from "./tree.js";
import { markChanged } from "./cue.js";
import { idle } from "./layout.js";

function findIn(scope, attr, name) {
  for (const el of scope.querySelectorAll(`[${attr}]`)) if (el.getAttribute(attr) === name) return el;
  return null;
}

function setTexts(scope, attr, map, cue) {
  for (const [name, cell] of Object.entries(map)) {
    const el = findIn(scope, attr, name);
    if (!el) continue;
    const text = cellText(cell);
    if (el.textContent !== text) {
      el.textContent = text;
      if (cue) cue.push(el);
    }
  }
}

/** Drop the line breaks the static page has between elements (a built element has none). */
function dropBlank(el) {
  for (const node of Array.from(el.childNodes)) {
    if (node.nodeType === Node.TEXT_NODE && !node.data.trim()) node.remove();
  }
}

// The JSON of the element tree a figure, its drawings and their groups were last made from (a
// table: its body, rows and grid cells, which morphTree reaches at depths 0-2 as tables start at
// -2): a part whose tree did not change is not walked at all (a stage change lights another step
// of one drawing; the others, and most groups, stay as they are; a change of a few cells of a
// table of grids keeps its other rows and grids).
const treeOf = new WeakMap();
const KEYED_DEPTH = 2;
const TABLE_DEPTH = -2;

/** Make the element `old` (in the page) equal to the element tree `node` (validated): like morph,
 * but straight from the tree -- only the elements of a changed shape are built.  `keyed`: within
 * a drawing, the texts its numbers (data-key) had before this change, for the cue: a number is
 * marked when its own value changed, wherever its element now comes from. */
function morphTree(old, node, svg, cue, depth, keyed = null) {
  const inSvg = svg || node.t === "svg";
  const kids = "x" in node ? null : node.c || [];
  const key = kids && kids.length && depth >= 0 && depth <= KEYED_DEPTH ? JSON.stringify(node) : null;
  if (key !== null && treeOf.get(old) === key) return;
  if (kids && kids.length && old.childNodes.length !== old.childElementCount) dropBlank(old);
  if (old.localName !== node.t ||
      (kids && kids.length ? old.childNodes.length !== old.childElementCount || old.childElementCount === 0
                           : old.childElementCount !== 0)) {
    const fresh = build(node, svg);
    if (keyed) cueBuilt(fresh, keyed, cue); else markChanged(old, fresh, cue);
    old.replaceWith(fresh);
    if (key !== null) treeOf.set(fresh, key);
    return;
  }
  const attrs = node.a || {};
  for (const name of old.getAttributeNames()) if (!Object.prototype.hasOwnProperty.call(attrs, name)) old.removeAttribute(name);
  for (const name in attrs) if (old.getAttribute(name) !== attrs[name]) old.setAttribute(name, attrs[name]);
  if (!kids || !kids.length) {
    const text = kids ? "" : cellText(node.x);
    const was = old.textContent;
    if (was !== text) old.textContent = text;
    const k = attrs["data-key"];
    if (cue && (keyed && k !== undefined ? keyed.has(k) && keyed.get(k) !== text : was !== text)) cue.push(old);
    return;
  }
  if (node.t === "svg" && cue && !keyed) {
    keyed = new Map();
    for (const el of old.querySelectorAll("[data-key]")) keyed.set(el.getAttribute("data-key"), el.textContent);
  }
  morphChildren(old, kids, inSvg, cue, depth, keyed);
  if (key !== null) treeOf.set(old, key);
}

/* A figure with two drawings (fig-wide above the phone breakpoint and in print, fig-narrow below
 * it: style.css) shows one.  A change makes that one equal to its tree at once and the other,
 * hidden, when the page is idle next (at once when the window crosses the breakpoint or the page
 * is printed): half the DOM work inside the change. */
const PHONE = "(max-width: 40rem)";   // style.css
const later = new Map();   // a hidden drawing -> the tree it is to be made equal to
let phone = null;

/** Whether `tree` is the drawing of a figure the page does not show now. */
function unseen(tree) {
  const cls = ((tree.a || {}).class || "").split(" ");
  if (!cls.includes("fig-wide") && !cls.includes("fig-narrow")) return false;
  if (phone === null) {
    if (typeof matchMedia !== "function") return false;
    phone = matchMedia(PHONE);
    if (phone.addEventListener) phone.addEventListener("change", drawLater);
    else phone.addListener(drawLater);   // Safari before 14
    addEventListener("beforeprint", drawLater);
  }
  return cls.includes(phone.matches ? "fig-wide" : "fig-narrow");
}

/** Make the hidden drawings equal to their latest trees. */
function drawLater() {
  const todo = Array.from(later);
  later.clear();
  for (const [el, tree] of todo) if (el.isConnected) morphTree(el, tree, false, null, 1);
}

/** A child's name: its data-part or data-key (groups and numbers of a drawing), else null. */
function nameOf(get) {
  const part = get("data-part");
  return part !== null && part !== undefined ? part : get("data-key") ?? null;
}

/** Make `old`'s children the trees `kids`.  Named children are matched by name (another rank
 * count inserts or drops the lanes of the ranks in between: the others keep their elements);
 * an unnamed child, or one whose name is new, takes the element at its place when that has its
 * tag and no name still wanted; anything unmatched is built, anything left over removed. */
function morphChildren(old, kids, inSvg, cue, depth, keyed) {
  const olds = Array.from(old.children);
  const names = kids.map((child) => nameOf((a) => (child.a || {})[a]));
  const wanted = new Set(names.filter((n) => n !== null));
  const named = new Map();   // name -> indices in olds, ascending
  olds.forEach((el, i) => {
    const n = nameOf((a) => el.getAttribute(a));
    if (n === null) return;
    if (!named.has(n)) named.set(n, []);
    named.get(n).push(i);
  });
  let i = 0;
  kids.forEach((child, k) => {
    const n = names[k];
    let j = -1;
    const list = n !== null ? named.get(n) : null;
    while (list && list.length && list[0] < i) list.shift();
    if (list && list.length) j = list.shift();
    else if (i < olds.length && olds[i].localName === child.t && !wanted.has(nameOf((a) => olds[i].getAttribute(a)))) j = i;
    if (j >= 0) {
      for (; i < j; i++) olds[i].remove();   // not in the new tree at this place
      i = j + 1;
      if (depth === 0 && child.t === "svg" && unseen(child)) {
        if (!later.size) idle(drawLater, 1000);
        later.set(olds[j], child);
      } else {
        later.delete(olds[j]);
        morphTree(olds[j], child, inSvg, cue, depth + 1, keyed);
      }
    } else {
      const fresh = build(child, inSvg);
      if (keyed) cueBuilt(fresh, keyed, cue);
      if (i < olds.length) old.insertBefore(fresh, olds[i]); else old.appendChild(fresh);
    }
  });
  for (; i < olds.length; i++) olds[i].remove();
}

/** Mark the numbers of a built subtree whose value changed (by data-key, against `keyed`). */
function cueBuilt(fresh, keyed, cue) {
  if (!cue) return;
  const els = fresh.hasAttribute("data-key") ? [fresh] : fresh.querySelectorAll("[data-key]");
  for (const el of els) {
    const k = el.getAttribute("data-key");
    if (el.childElementCount === 0 && keyed.has(k) && keyed.get(k) !== el.textContent) cue.push(el);
  }
}

/** The element a table lives in (its scrolling wrapper, when it has one). */
function boxOf(table) {
  return table.parentElement && table.parentElement.classList.contains("table-wrap") ? table.parentElement : table;
}

/** A demo's folded tables (templates/demo.html: details.tables-fold), or null. */
function foldOf(demo) {
  return demo.querySelector(":scope > details.tables-fold");
}

/** The fold's summary counts the tables it shows now (another state can show more or fewer). */
function countFold(demo) {
  const fold = foldOf(demo);
  const summary = fold && fold.querySelector(":scope > summary");
  if (!summary) return;
  const n = [...fold.querySelectorAll("table[data-table]")].filter((t) => !boxOf(t).hidden).length;
  const text = n === 1 ? tr("site.tables_fold_one") : tr("site.tables_fold", { n });   // as render.tables_summary
  if (summary.textContent !== text) summary.textContent = text;
}

/** Validate a whole tree first: a table or figure is changed whole or not at all. */
function valid(kind, name, node) {
  try {
    validate(node);
    return true;
  } catch (err) {
    if (!(err instanceof TreeError)) throw err;
    console.error(`tp ${kind} ${name}: ${err.message}; the last good one stays`);
    return false;
  }
}

/** Figures and tables are both element trees, morphed into the page from their depth (a table is
 * the whole div.table-wrap of tpmath/views/table.py, from TABLE_DEPTH: see treeOf).  One the
 * static page did not have (another control state) is added where `place` puts it; one the result
 * lacks is hidden (the parts `keep` names stay as they are). */
const PARTS = {
  figure: {
    attr: "data-figure", selector: "figure[data-figure]", depth: 0, box: (el) => el,
    place(demo, fresh) {   // figures come before the values and the tables (templates/demo.html)
      const first = demo.querySelector("dl.values, details.tables-fold, .table-wrap, table[data-table], [data-note], details.real-ranks");
      if (first) first.before(fresh); else demo.appendChild(fresh);
    },
  },
  table: {
    attr: "data-table", selector: "table[data-table]", depth: TABLE_DEPTH, box: boxOf,
    place(demo, fresh) {   // after the last table (in the fold, when the tables are folded)
      const all = demo.querySelectorAll("table[data-table]");
      const after = all.length ? boxOf(all[all.length - 1]) : null;
      if (after) after.after(fresh); else (foldOf(demo) || demo).appendChild(fresh);
    },
  },
};

function applyParts(kind, demo, trees, cue, keep) {
  const { attr, selector, depth, box, place } = PARTS[kind];
  const seen = new Set(keep);
  for (const [name, node] of Object.entries(trees)) {
    seen.add(name);
    if (!valid(kind, name, node)) continue;
    const old = findIn(demo, attr, name);
    if (!old) { place(demo, build(node)); continue; }
    const target = box(old);
    // hidden since it was last made: its tree is not what treeOf says (a keyed figure would be skipped)
    if (target.hidden) treeOf.delete(target);
    morphTree(target, node, false, cue, depth);   // (also shows it again: a tree has no `hidden`)
  }
  for (const el of demo.querySelectorAll(selector)) {
    if (!seen.has(el.getAttribute(attr))) box(el).hidden = true;
  }
}

/** Sentences under the tables: shown when the result has them, hidden when it has not (e.g. the
 * preset note once "Custom" is chosen); a note the static page did not have is added. */
function applyNotes(demo, notes, keep) {
  for (const el of demo.querySelectorAll("[data-note]")) {
    const name = el.getAttribute("data-note");
    if (!(name in notes) && !keep.includes(name)) el.hidden = true;
  }
  for (const [name, cell] of Object.entries(notes)) {
    let el = findIn(demo, "data-note", name);
    if (!el) {
      el = document.createElement("p");
      el.setAttribute("data-note", name);
      const all = demo.querySelectorAll("[data-note], .table-wrap");
      // under the tables, out of their fold (a note is prose the main path reads)
      const last = all.length ? all[all.length - 1] : null;
      const after = last && (last.closest("details.tables-fold") || last);
      if (after) after.after(el); else demo.appendChild(el);
    }
    el.hidden = false;
    const text = cellText(cell);
    if (el.textContent !== text) el.textContent = text;
  }
}

/** Everything a result shows; returns the elements whose text changed (for the cue).  The parts a
 * result names in `stale` (views/row_linear.py `partial`: a layer the controls refuse) are kept as they
 * are; markStale dims them. */
export function applyResult(demo, result) {
  const cue = [];
  const keep = result.stale || {};
  if (result.figures) applyParts("figure", demo, result.figures, cue, keep.figures || []);
  applyParts("table", demo, result.tables || {}, cue, keep.tables || []);
  countFold(demo);
  setTexts(demo, "data-value", result.values || {}, cue);
  applyNotes(demo, result.notes || {}, keep.notes || []);
  (result.real || []).forEach((run, i) => {
    setTexts(demo, "data-real-command", { [i]: run.command }, null);
    setTexts(demo, "data-real-output", { [i]: run.output }, null);
  });
  return cue;
}

/** Mark what no longer matches the controls (data-stale: dimmed by style.css) and say once, above
 * it, that it shows the last valid setting: `stale` is "all" (the controls were refused), a
 * result's {tables, values, notes, figures, real} (one part refused) or null (all current). */
export function markStale(demo, stale) {
  const named = (kind, name) => stale === "all" || (!!stale && (stale[kind] || []).includes(name));
  let any = false;
  const mark = (el, on) => {
    if (on) { any = true; if (!el.hasAttribute("data-stale")) el.setAttribute("data-stale", ""); }
    else if (el.hasAttribute("data-stale")) el.removeAttribute("data-stale");
  };
  for (const t of demo.querySelectorAll("table[data-table]")) mark(boxOf(t), named("tables", t.getAttribute("data-table")));
  for (const f of demo.querySelectorAll("figure[data-figure]")) mark(f, named("figures", f.getAttribute("data-figure")));
  for (const n of demo.querySelectorAll("[data-note]")) mark(n, !n.hidden && named("notes", n.getAttribute("data-note")));
  for (const d of demo.querySelectorAll("dd[data-value]")) {
    const on = named("values", d.getAttribute("data-value"));
    mark(d, on);
    if (d.previousElementSibling && d.previousElementSibling.tagName === "DT") mark(d.previousElementSibling, on);
  }
  for (const r of demo.querySelectorAll("details.real-ranks")) mark(r, stale === "all" || !!(stale && stale.real));
  let note = demo.querySelector(":scope > .stale-note");
  if (!any) { if (note) note.hidden = true; return; }
  if (!note) {
    note = document.createElement("p");
    note.className = "stale-note";
    const after = demo.querySelector(":scope > .runtime-line") || demo.querySelector(":scope > form.controls");
    if (after) after.after(note); else demo.prepend(note);
  }
  note.hidden = false;
  const text = tr("site.stale");
  if (note.textContent !== text) note.textContent = text;
}
