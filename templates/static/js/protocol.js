/* The page–worker protocol: the one description of the messages between the page (js/runtime.js,
 * for js/demo.js and js/pydemo.js) and the worker (worker.js, a module worker), imported by both.
 *
 * page → worker
 *   boot    {base, wheel, snapshot, reader}   first; absolute URLs (the meta tags); snapshot:
 *           {key, numpy, sha256} or null (worker.js "Memory snapshot"); reader: the readers'
 *           programs' worker, which restores a stored snapshot but makes none
 *   render  {id, section, controls, lang, next}   next: the control states one step from
 *           `controls`, likeliest first (Demo.statesBeside), computed ahead once idle
 *   ahead   {section, lang, next, replace?, controls?}   compute `next` when idle, no reply (each
 *           comes as an `answer`); replace: instead of the list so far (the page just showed
 *           `controls` from an answer sent ahead)
 *   run     {id, code}   a reader's program
 *   idle    {}   after ready, the page is idle: store the snapshot this boot made
 * worker → page
 *   status    {stage: download|python|numpy|ready|failed, detail, boot}   boot (with ready):
 *             snapshot | fallback | normal
 *   progress  {loaded}   bytes of the runtime files received so far (during boot)
 *   result    {id, section, text}   text: views.render_json(...), JSON text parsed by the page (a
 *             string crosses as one copy; a parsed result would be cloned node by node):
 *             {ok: true, result} or {ok: false, error, field}
 *   output    {id, stdout, cut, input, error}   cut: characters beyond the 100 000 kept; input:
 *             the program called input(); error: its traceback without Pyodide's frames
 *   answer    {key, text}   a state computed ahead: key = answerKey(...), text as in `result`
 *
 * Requests that arrive during boot wait for it; the page sends at most one render per section
 * at a time (the latest control state).  Both sides keep answers by answerKey: the worker its
 * last 256 (a state revisited runs no Python), the page the latest 48 sent ahead (a change to
 * one is shown in its own task).  A reader's program clears both. */

export const MSG = Object.freeze({
  boot: "boot", render: "render", ahead: "ahead", run: "run", idle: "idle",
  status: "status", progress: "progress", result: "result", output: "output", answer: "answer",
});

/** The key of an answer: a render is a pure function of section, language and controls (in form
 * order: the page's values() and the worker's copy of them list the controls alike). */
export function answerKey(section, lang, controls) {
  return JSON.stringify([section, lang, controls]);
}
