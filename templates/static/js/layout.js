/* Blocks that scroll sideways (display formulas, code): exactly the overflowing ones are tab
 * stops, so the keyboard can scroll them (WCAG 2.1.1), and carry data-scroll so the stylesheet
 * shows that they scroll (a fade at the edge that has more).  Table wrappers are always tab
 * stops (templates/demo.html). */

function mark(scope = document) {
  for (const el of scope.querySelectorAll(".math-display, pre")) {
    const more = el.scrollWidth > el.clientWidth + 1;
    if (more) el.setAttribute("tabindex", "0");
    else el.removeAttribute("tabindex");
    update(el, more);
  }
  for (const el of scope.querySelectorAll(".table-wrap")) update(el, el.scrollWidth > el.clientWidth + 1);
}

/** data-scroll = "right", "left", "both" (where more content is) or absent. */
function update(el, more) {
  if (!more) { el.removeAttribute("data-scroll"); return; }
  const left = el.scrollLeft > 1;
  const right = el.scrollLeft + el.clientWidth < el.scrollWidth - 1;
  const value = left && right ? "both" : left ? "left" : right ? "right" : "";
  if (value) el.setAttribute("data-scroll", value); else el.removeAttribute("data-scroll");
}

export function setupLayout() {
  mark();
  window.addEventListener("load", () => mark());
  let timer = null;
  window.addEventListener("resize", () => { clearTimeout(timer); timer = setTimeout(() => mark(), 200); });
  document.addEventListener("scroll", (ev) => {
    const el = ev.target;
    if (el instanceof Element && el.hasAttribute("data-scroll")) update(el, true);
  }, { capture: true, passive: true });
}

/** After a demo's tables were replaced (once per frame). */
const dirty = new Set();
export function remark(el) {
  if (!dirty.size) setTimeout(() => { for (const d of dirty) mark(d); dirty.clear(); }, 0);
  dirty.add(el);
}
