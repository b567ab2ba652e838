/* The page's strings and cells.  Two parts (data, not code): the few keys the page shows before any
 * result (inline, <script type="application/json" id="tp-i18n">) and the rest of the language's
 * strings (<meta name="tp-strings">, a JSON file fetched once, with the first result, and cached
 * across pages): a result's cells are translated only once it is here (whenStrings).
 * A cell is a formatted string (shown verbatim) or {key, args} (translated here, args are cells). */

let strings = null;
let loading = null;   // the fetch of the rest, once started
let complete = false;

function flatten(obj, prefix, out) {
  for (const [k, v] of Object.entries(obj)) {
    if (v !== null && typeof v === "object") flatten(v, prefix + k + ".", out);
    else out[prefix + k] = String(v);
  }
  return out;
}

function load() {
  const el = document.getElementById("tp-i18n");
  let data = {};
  try { data = el ? JSON.parse(el.textContent) : {}; } catch (err) { data = {}; }
  return flatten(data, "", {});
}

/** A promise of the language's strings; starts the fetch the first time.  A failed fetch still
 * resolves (a result then shows its keys rather than nothing) and is tried again next time. */
export function whenStrings() {
  if (complete) return Promise.resolve();
  if (loading) return loading;
  const meta = document.querySelector('meta[name="tp-strings"]');
  const url = meta ? meta.getAttribute("content") : "";
  if (!url) { complete = true; return Promise.resolve(); }
  loading = fetch(url)
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`${url}: HTTP ${r.status}`))))
    .then((data) => {
      if (!strings) strings = load();
      Object.assign(strings, flatten(data, "", {}));
      complete = true;
    })
    .catch((err) => { console.error(`tp strings: ${err.message}`); })
    .finally(() => { loading = null; });
  return loading;
}

/** Whether a result's cells can be translated now. */
export function stringsReady() {
  return complete;
}

export function has(key) {
  if (!strings) strings = load();
  return Object.prototype.hasOwnProperty.call(strings, key);
}

/** The string of `key` with its {name} placeholders filled from `args` (cells). */
export function tr(key, args) {
  // a choice without a label of its own (tpmath.i18n.option) shows as its value
  if (!has(key) && args && Object.prototype.hasOwnProperty.call(args, "as_typed")) return cellText(args.as_typed);
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

/** The page language as the views know it ("en", "zh", …: the first subtag of <html lang>). */
export function pageLang() {
  return (document.documentElement.getAttribute("lang") || "en").toLowerCase().split("-")[0];
}
