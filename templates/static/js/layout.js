/* Blocks that scroll sideways (formulas, code): exactly the overflowing ones are tab stops, so
 * the keyboard can scroll them (WCAG 2.1.1); the stylesheet shows that they scroll (a shadow on
 * the side that has more).  Table wrappers are always tab stops (templates/demo.html).
 *
 * Measuring (scrollWidth) must not force a layout while the page loads: a ResizeObserver reports
 * each block once the browser has laid it out anyway (and again when its width changes), and
 * the blocks a demo rewrote are measured when the page is idle.  Code blocks (few) are measured
 * once at idle time too, even inside blocks the browser skipped (content-visibility); after the
 * window is resized every block is measured again (the skipped ones are not laid out to report
 * their new width).  All reads come before all writes, so one pass never lays the page out twice. */

const SELECTOR = ".math-display, pre, math[display=inline]";

function mark(elements) {
  const more = Array.from(elements, (el) => el.scrollWidth > el.clientWidth + 1);   // reads ...
  Array.from(elements).forEach((el, i) => {                                          // ... then writes
    if (more[i]) { if (el.getAttribute("tabindex") !== "0") el.setAttribute("tabindex", "0"); }
    else if (el.hasAttribute("tabindex")) el.removeAttribute("tabindex");
  });
}

/** Run `fn` when the page is idle (at the latest after `timeout` ms). */
export const idle = (fn, timeout = 500) =>
  (typeof requestIdleCallback === "function" ? requestIdleCallback(fn, { timeout }) : setTimeout(fn, 50));

let observer = null;

/* On a phone the page links scroll sideways in one row (style.css): bring the current page's
 * link into that row's view, once, when the page is idle (no layout forced while it loads). */
function showCurrentPage() {
  const cur = document.querySelector('.site-nav a[aria-current="page"]');
  const row = cur && cur.closest("ul");
  if (!row || row.scrollWidth <= row.clientWidth + 1) return;
  const left = cur.offsetLeft - row.offsetLeft;
  if (left + cur.offsetWidth > row.scrollLeft + row.clientWidth) row.scrollLeft = left - 16;
}

export function setupLayout() {
  let timer = null;
  idle(showCurrentPage);
  window.addEventListener("resize", () => {
    clearTimeout(timer);
    timer = setTimeout(() => mark(document.querySelectorAll(SELECTOR)), 200);
  });
  if (typeof ResizeObserver !== "function") {     // old browsers: once, when the page is idle
    idle(() => mark(document.querySelectorAll(SELECTOR)));
    return;
  }
  // An entry of width 0 sits in a block the browser skipped (content-visibility: auto, off
  // screen): measuring it would force that layout; it is reported again once it is laid out.
  const laidOut = new Set();
  observer = new ResizeObserver((entries) => {
    const shown = entries.filter((e) => e.contentRect.width > 0).map((e) => e.target);
    for (const el of shown) laidOut.add(el);
    mark(shown);
  });
  for (const el of document.querySelectorAll(SELECTOR)) observer.observe(el);
  // (Not those in a closed <details> -- the real-ranks blocks: they are not rendered, measuring
  // one would lay its whole block out; opened, the observer reports them.)
  idle(() => mark(Array.from(document.querySelectorAll("pre")).filter((el) => !el.closest("details:not([open])"))));
  // A font that arrives after a block was measured (the math font) widens its content but not the
  // block itself, which the observer would not report: measure the laid-out blocks again.
  if (document.fonts && document.fonts.addEventListener) {
    document.fonts.addEventListener("loadingdone", () => idle(() => mark(Array.from(laidOut))));
  }
}

/** After a demo's tables were replaced (once per idle period, however many demos). */
const dirty = new Set();
export function remark(el) {
  if (!dirty.size) {
    idle(() => {
      const blocks = [];
      for (const d of dirty) for (const b of d.querySelectorAll(SELECTOR)) blocks.push(b);
      dirty.clear();
      if (observer) for (const b of blocks) observer.observe(b);   // new blocks: watched from now on
      // Not those in a closed <details> (the real-ranks output): measuring one lays its whole
      // block out, several ms after every change; opened, the observer reports them.
      mark(blocks.filter((b) => !b.closest("details:not([open])")));
    });
  }
  dirty.add(el);
}
