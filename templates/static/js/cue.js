/* The "what changed" cue: after a control change, the table cells, values and figure texts whose
 * text changed carry the class `tp-changed` for a moment; the stylesheet fades a highlight
 * (nothing under prefers-reduced-motion).  What changed inside a closed fold marks its summary. */

const CUE_MS = 1600;

/** Innermost elements (no element children): table cells, grid entries, SVG texts and shapes. */
function leaves(root) {
  const out = [];
  const walk = (el) => {
    if (el.children.length === 0) out.push(el);
    else for (const child of el.children) walk(child);
  };
  walk(root);
  return out;
}

/** Push onto `cue` the leaves of `fresh` whose text differs from the same leaf of `old`.
 * A leaf with a data-key (a number in a figure) is matched by its key; the others by position,
 * and only when both have as many leaves (another rank count or stage layout changes the shape:
 * then only keyed numbers can be compared). */
export function markChanged(old, fresh, cue) {
  if (!cue) return;
  const a = leaves(old), b = leaves(fresh);
  const byKey = new Map();
  for (const el of a) if (el.hasAttribute("data-key")) byKey.set(el.getAttribute("data-key"), el);
  const sameShape = a.length === b.length;
  b.forEach((el, i) => {
    const key = el.getAttribute("data-key");
    const before = key !== null ? byKey.get(key) : sameShape ? a[i] : undefined;
    if (!before || before.tagName !== el.tagName) return;
    if (before.textContent !== el.textContent) cue.push(el);
  });
}

let timer = null;
let marked = [];

function clear() {
  for (const el of marked) {
    el.classList.remove("tp-changed");
    if (!el.classList.length) el.removeAttribute("class");   // as built: no empty class="" left
  }
  marked = [];
}

// Texts a reader never sees (a drawing's accessible name): marking them would show nothing.
const UNSEEN = new Set(["title", "desc"]);

/** What a reader can see of `el`: the summary of the outermost closed <details> holding it (a
 * demo's folded tables, a deep dive), else `el` itself -- a change inside a fold is not silent. */
function shown(el) {
  let seen = el;
  for (let d = el.closest("details:not([open])"); d; d = d.parentElement && d.parentElement.closest("details:not([open])")) {
    seen = d.querySelector(":scope > summary") || seen;
  }
  return seen;
}

/** Mark `els` now, replacing the previous cue (its marks go at once), and unmark them after CUE_MS. */
export function showCue(els) {
  clear();
  clearTimeout(timer);
  els = [...new Set(els.filter((el) => !UNSEEN.has(el.localName)).map(shown))];
  if (!els.length) return;
  marked = els;
  for (const el of els) el.classList.add("tp-changed");
  timer = setTimeout(clear, CUE_MS);
}
