/* The "what changed" cue: after a control change, the table cells, values and figure texts whose
 * text changed carry the class `tp-changed` for a moment; the stylesheet fades a highlight
 * (nothing under prefers-reduced-motion). */

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
 * Leaves are matched by data-key where both have one, else by position; when the shapes differ
 * (another rank count, another stage layout) nothing is marked: everything changed. */
export function markChanged(old, fresh, cue) {
  if (!cue) return;
  const a = leaves(old), b = leaves(fresh);
  if (a.length !== b.length) return;
  const byKey = new Map();
  for (const el of a) if (el.hasAttribute("data-key")) byKey.set(el.getAttribute("data-key"), el);
  b.forEach((el, i) => {
    const key = el.getAttribute("data-key");
    const before = key !== null && byKey.has(key) ? byKey.get(key) : a[i];
    if (before.tagName !== el.tagName) return;
    if (before.textContent !== el.textContent) cue.push(el);
  });
}

let timer = null;
const marked = new Set();

/** Mark `els` now (replacing an earlier cue) and unmark them after CUE_MS. */
export function showCue(els) {
  if (!els.length) return;
  for (const el of els) {
    el.classList.remove("tp-changed");
    marked.add(el);
  }
  void document.body.offsetWidth;   // restart the animation on elements marked again
  for (const el of els) el.classList.add("tp-changed");
  clearTimeout(timer);
  timer = setTimeout(() => {
    for (const el of marked) el.classList.remove("tp-changed");
    marked.clear();
  }, CUE_MS);
}
