/* The page's strings (<script type="application/json" id="tp-i18n">, data not code) and cells.
 * A cell is a formatted string (shown verbatim) or {key, args} (translated here, args are cells). */

let strings = null;

function load() {
  const out = {};
  const el = document.getElementById("tp-i18n");
  let data = {};
  try { data = el ? JSON.parse(el.textContent) : {}; } catch (err) { data = {}; }
  const flatten = (obj, prefix) => {
    for (const [k, v] of Object.entries(obj)) {
      if (v !== null && typeof v === "object") flatten(v, prefix + k + ".");
      else out[prefix + k] = String(v);
    }
  };
  flatten(data, "");
  return out;
}

export function has(key) {
  if (!strings) strings = load();
  return Object.prototype.hasOwnProperty.call(strings, key);
}

/** The string of `key` with its {name} placeholders filled from `args` (cells). */
export function tr(key, args) {
  const text = has(key) ? strings[key] : key;
  if (!args) return text;
  return text.replace(/\{(\w+)\}/g, (m, name) =>
    Object.prototype.hasOwnProperty.call(args, name) ? cellText(args[name]) : m);
}

/** A text cell: verbatim string, or {key, args} translated. */
export function cellText(cell) {
  if (cell === null || cell === undefined) return "";
  if (typeof cell === "object" && typeof cell.key === "string") return tr(cell.key, cell.args);
  return String(cell);
}

/** Column headers and captions are i18n keys when they are plain strings. */
export function keyText(cell) {
  return cellText(typeof cell === "string" ? { key: cell } : cell);
}

/** The page language as the views know it ("en", "zh", …: the first subtag of <html lang>). */
export function pageLang() {
  return (document.documentElement.getAttribute("lang") || "en").toLowerCase().split("-")[0];
}
