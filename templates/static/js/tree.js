/* Element trees -> DOM (ARCHITECTURE.md, "Element trees").
 *
 *   node := {t: TAG, a: {NAME: STRING}, c: [node, ...]} | {t: TAG, a: {...}, x: cell}
 *
 * The same trees are serialised to markup by tpsite at build time, so a live figure equals the
 * static one element for element.  `svg` and everything below it are SVG (createElementNS),
 * the rest HTML.  Only the tags and attributes of the whitelist below are built: it is the one of
 * src/tpmath/views/tree.py (SVG_TAGS, HTML_TAGS, ATTRS; tests/test_frontend_browser.py compares
 * them); anything else throws TreeError and the caller keeps the last good element.  Text goes
 * in with textContent: a tree can never carry markup or code. */

import { cellText } from "./i18n.js";

const SVG_NS = "http://www.w3.org/2000/svg";

export const SVG_TAGS = new Set(["svg", "g", "rect", "line", "path", "polygon", "circle", "text", "tspan",
  "title", "desc"]);
export const HTML_TAGS = new Set(["figure", "figcaption", "span", "table", "tbody", "tr", "td", "sub",
  "div", "caption", "thead", "tfoot", "th"]);
export const ATTRS = new Set(["class", "data-rank", "data-key", "data-part", "role", "aria-hidden", "aria-label",
  "id", "viewBox", "width", "height", "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "rx", "d", "points",
  "transform", "text-anchor", "dominant-baseline", "focusable", "scope", "tabindex", "aria-labelledby"]);
const DATA_ATTR = /^data-[a-z0-9-]+$/;

export class TreeError extends Error {}

function isCell(x) {
  if (typeof x === "string") return true;
  return x !== null && typeof x === "object" && typeof x.key === "string" &&
    Object.values(x.args || {}).every(isCell);
}

/** Check one node (not its children) against the whitelist; returns whether it is SVG. */
function checked(node, svg) {
  if (node === null || typeof node !== "object" || typeof node.t !== "string") {
    throw new TreeError("not a node: " + JSON.stringify(node));
  }
  const tag = node.t;
  const inSvg = svg || tag === "svg";
  if (!(inSvg ? SVG_TAGS : HTML_TAGS).has(tag)) throw new TreeError(`tag <${tag}> is not allowed here`);
  for (const [name, value] of Object.entries(node.a || {})) {
    if (!ATTRS.has(name) && !DATA_ATTR.test(name)) throw new TreeError(`attribute ${name} of <${tag}> is not allowed`);
    if (typeof value !== "string") throw new TreeError(`attribute ${name} of <${tag}> is not a string`);
  }
  if ("x" in node) {
    if ("c" in node) throw new TreeError(`<${tag}> has both text and children`);
    if (!isCell(node.x)) throw new TreeError(`text of <${tag}> is not a cell`);
  }
  return inSvg;
}

/** Throw TreeError unless the whole tree is buildable (nothing is built). */
export function validate(node, svg = false) {
  const inSvg = checked(node, svg);
  if (!("x" in node)) for (const child of node.c || []) validate(child, inSvg);
}

/** The DOM element of `node`; `svg`: whether the parent is SVG. Throws TreeError. */
export function build(node, svg = false) {
  const inSvg = checked(node, svg);
  const el = inSvg ? document.createElementNS(SVG_NS, node.t) : document.createElement(node.t);
  for (const [name, value] of Object.entries(node.a || {})) el.setAttribute(name, value);
  if ("x" in node) el.textContent = cellText(node.x);
  else for (const child of node.c || []) el.appendChild(build(child, inSvg));
  return el;
}
