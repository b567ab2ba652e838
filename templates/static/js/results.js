/* Precomputed results (src/tpsite/precompute.py): the answers of a section's discrete control
 * states, computed at build time by the same view functions the worker runs.  A demo names its
 * file in data-results; it is fetched on first use (the reader focusing or touching the demo's
 * controls, or a change) and kept for the page's life.
 *
 *   {section, controls: [NAME, ...], states: {KEY: index}, pool: [...], results: [payload, ...]}
 *
 * KEY is JSON.stringify of the values the form sends, in `controls` order (verbatim strings:
 * a typed "0.10" is not the build's "0.1", so it goes to the runtime).  Repeated subtrees of the
 * payloads sit once in `pool` and are referenced as {"@": i}; a payload is resolved on lookup. */

const files = new Map();    // url -> {promise, data (undefined until settled; null if unusable)}

/** Start fetching `url` (once); resolves to the file's data or null. */
export function loadResults(url) {
  if (!url) return Promise.resolve(null);
  let entry = files.get(url);
  if (!entry) {
    entry = { data: undefined, promise: null };
    entry.promise = fetch(url, { credentials: "same-origin" })
      .then((resp) => (resp.ok ? resp.json() : null))
      .then((data) => (data && data.states && data.results && data.pool ? data : null))
      .catch(() => null)
      .then((data) => { entry.data = data; if (data) data.memo = new Map(); return data; });
    files.set(url, entry);
  }
  return entry.promise;
}

/** The file's data if it has arrived (null: it could not be used), undefined while on its way. */
export function loadedResults(url) {
  const entry = url ? files.get(url) : null;
  return entry ? entry.data : undefined;
}

/** The payload ({ok, result} or {ok: false, error, field}) for these control values, or null. */
export function lookup(data, values) {
  const key = JSON.stringify(data.controls.map((name) =>
    (Object.prototype.hasOwnProperty.call(values, name) ? values[name] : null)));
  const index = data.states[key];
  if (index === undefined) return null;
  return resolve(data.results[index], data);
}

/** Replace {"@": i} by pool entry i, resolved (entries are shared: results are never mutated). */
function resolve(x, data) {
  if (x === null || typeof x !== "object") return x;
  if (Array.isArray(x)) return x.map((v) => resolve(v, data));
  const keys = Object.keys(x);
  if (keys.length === 1 && keys[0] === "@") {
    const i = x["@"];
    if (!data.memo.has(i)) data.memo.set(i, resolve(data.pool[i], data));
    return data.memo.get(i);
  }
  const out = {};
  for (const k of keys) out[k] = resolve(x[k], data);
  return out;
}
