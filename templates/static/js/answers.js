/* The page's answers: one store for every answer a change can get without asking the worker.
 *
 *   precomputed  a section's results file (results.js: fetched on first use, kept for the page's
 *                life), looked up by the control values the form sends
 *   ahead        the latest AHEAD_KEPT answers the worker computed ahead of the reader
 *                (protocol.js `answer`), by answerKey; dropped when the worker is replaced (the
 *                next one starts from the wheel as built)
 *
 * A demo asks it first (demo.js request / fromResults); the page's Runtime fills and empties the
 * ahead part (runtime.js), the readers' programs' Runtime never touches it. */

import { answerKey } from "./protocol.js";
import { loadResults, loadedResults, lookup } from "./results.js";

const AHEAD_KEPT = 48;          // ~50 KB each
const ahead = new Map();        // answerKey(...) -> render_json text (oldest first)

export const answers = {
  /** An answer the worker computed ahead (render_json text): kept, the oldest dropped. */
  keep(key, text) {
    if (typeof key !== "string" || typeof text !== "string") return;
    ahead.delete(key);
    ahead.set(key, text);
    if (ahead.size > AHEAD_KEPT) ahead.delete(ahead.keys().next().value);
  },

  /** The answer sent ahead for a section's controls in a language (render_json text), or undefined. */
  ahead(section, lang, controls) {
    return ahead.get(answerKey(section, lang, controls));
  },

  /** Forget the answers sent ahead (the worker that computed them is gone). */
  forgetAhead() {
    ahead.clear();
  },

  /** Start fetching a section's results file (once); resolves to its data or null. */
  load: loadResults,

  /** The results file's data if it has arrived (null: unusable), undefined while on its way. */
  loaded: loadedResults,

  /** The precomputed payload for these control values in a file's data, or null. */
  lookup,
};
