/* Blocks that scroll sideways (formulas, code): exactly the overflowing ones are tab stops, so
 * the keyboard can scroll them (WCAG 2.1.1); the stylesheet shows that they scroll (a shadow on
 * the side that has more).  Table wrappers are always tab stops (templates/demo.html). */

function mark(scope = document) {
  for (const el of scope.querySelectorAll(".math-display, pre, math[display=inline]")) {
    const more = el.scrollWidth > el.clientWidth + 1;
    if (more) el.setAttribute("tabindex", "0");
    else el.removeAttribute("tabindex");
  }
}

export function setupLayout() {
  mark();
  window.addEventListener("load", () => mark());
  let timer = null;
  window.addEventListener("resize", () => { clearTimeout(timer); timer = setTimeout(() => mark(), 200); });
}

/** After a demo's tables were replaced (once per task, however many demos). */
const dirty = new Set();
export function remark(el) {
  if (!dirty.size) setTimeout(() => { for (const d of dirty) mark(d); dirty.clear(); }, 0);
  dirty.add(el);
}
