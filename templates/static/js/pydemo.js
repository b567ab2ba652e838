/* Python demos ({{pydemo NAME}}): the reader edits the program in a plain <textarea> (accessible,
 * no editor library), Run executes their version (a fresh namespace, like `python demo.py`) and
 * shows its output or its error; Stop ends a program that does not finish; Reset brings back the
 * page's program, the output computed at build time and a fresh Python.  Without JavaScript the
 * page shows the highlighted program and that output.
 *
 * Readers' programs run in their own worker (a second Runtime, {page: false}), started on the
 * first Run: a program can rebind what tpmath's modules hold (`tpmath.fmt.num = …`) or loop
 * forever, and neither may reach the demos, whose worker never runs a reader's code.  Stop
 * terminates that worker and starts a fresh one; so does Reset once a program has run in it. */

import { Runtime } from "./runtime.js";
import { tr } from "./i18n.js";
import { MSG } from "./protocol.js";

const blocks = [];
let programs = null;      // the readers' Runtime, created by the first Run
let used = false;         // a program has run in the current programs' worker

function part(demo, selector) {
  return demo.querySelector(selector);
}

// The output box's label for each kind of output: a stop is the reader's, not the program's error.
const LABELS = { live: "runtime.pydemo_live", error: "runtime.pydemo_error", stopped: "runtime.pydemo_stopped_label",
  running: "runtime.pydemo_running" };

/** The output box, its label, and the notes below it (wrapped text, outside the <pre>). */
function setOutput(b, text, kind, notes = []) {
  b.output.textContent = text;
  b.note.textContent = notes.join("\n");     // one note a line (style.css: pre-line)
  b.note.hidden = notes.length === 0;
  b.output.setAttribute("data-kind", kind);
  b.label.textContent = kind === "built" ? b.builtLabel : tr(LABELS[kind]);
}

/** The page's notes on a worker's `output` message: the characters of output not kept, and why
 * input() found nothing to read. */
function outputNotes(msg) {
  const n = new Intl.NumberFormat(document.documentElement.lang || undefined).format(Number(msg.cut) || 0);
  return [msg.cut ? tr("runtime.pydemo_cut", { n }) : "", msg.input ? tr("runtime.pydemo_input") : ""].filter(Boolean);
}

export function setupPydemos(runtime) {
  for (const demo of document.querySelectorAll(".pydemo")) {
    const b = {
      demo,
      code: part(demo, "textarea.pydemo-code"),
      run: part(demo, "button[data-run]"),
      reset: part(demo, "button[data-reset]"),
      output: part(demo, ".pydemo-output"),
      label: part(demo, ".pydemo-label"),
      stop: null,
      note: null,
      queued: null,        // the program to send once the programs' worker is ready
      inflight: false,     // a program is running
      stopped: false,      // the reader pressed Stop while it ran
    };
    if (!b.code || !b.run || !b.output || !b.label) continue;
    b.built = b.output.textContent;
    b.builtLabel = b.label.textContent;
    for (const el of demo.querySelectorAll("[data-editor]")) el.hidden = false;   // label, textarea, reset
    const view = part(demo, ".highlight");
    if (view) view.hidden = true;
    b.stop = document.createElement("button");
    b.stop.type = "button";
    b.stop.className = "pydemo-stop";
    b.stop.setAttribute("data-stop", "");
    b.stop.textContent = tr("runtime.stop");
    b.stop.hidden = true;
    b.run.after(b.stop);
    b.note = document.createElement("p");
    b.note.className = "pydemo-note";
    b.note.hidden = true;
    b.output.after(b.note);
    b.run.addEventListener("click", () => run(b, runtime));
    b.stop.addEventListener("click", () => stop(b));
    if (b.reset) {
      b.reset.addEventListener("click", () => {
        if (b.queued !== null || b.inflight) stop(b);
        b.code.value = b.code.defaultValue;
        setOutput(b, b.built, "built");
        // what an earlier program changed in the interpreter goes too
        if (used && programs && programs.ready) { used = false; programs.restart(); }
      });
    }
    blocks.push(b);
  }
  runtime.subscribe((state, detail) => {
    for (const b of blocks) {
      b.run.disabled = state !== "ready" || busy(b);
      b.run.title = state === "ready" ? "" : tr(runtime.final ? "runtime.static" : "runtime." + detail);
    }
  });
}

function busy(b) {
  return b.queued !== null || b.inflight;
}

/** The programs' worker changed state: send what waits for it, or say it could not start. */
function onPrograms(state) {
  if (state === "restarting") used = false;
  for (const b of blocks) {
    if (state === "ready") send(b);
    else if (programs.final && b.queued !== null) {
      b.queued = null;
      done(b);
      setOutput(b, tr("runtime.pydemo_failed"), "error");
    }
  }
}

function run(b, runtime) {
  if (busy(b) || !runtime.ready) return;
  b.queued = b.code.value;
  b.stopped = false;
  b.run.disabled = true;
  b.stop.hidden = false;
  b.demo.setAttribute("aria-busy", "true");
  setOutput(b, "", "running");        // the last program's output would read as this one's
  if (!programs) {
    programs = new Runtime(runtime.config, { page: false });
    programs.subscribe(onPrograms);
    programs.start();
  } else if (programs.final) programs.retry();
  if (!programs.ready) b.label.textContent = tr("runtime.pydemo_starting");
  send(b);
}

function send(b) {
  if (b.queued === null || !programs || !programs.ready) return;
  const code = b.queued;
  b.queued = null;
  b.inflight = true;
  used = true;
  programs.send({ type: MSG.run, code }, (msg) => {
    done(b);
    setOutput(b, (msg.stdout || "") + (msg.error || ""), msg.error ? "error" : "live", outputNotes(msg));
  }, () => {
    done(b);
    setOutput(b, tr(b.stopped ? "runtime.pydemo_stopped" : "runtime.pydemo_lost"), b.stopped ? "stopped" : "error");
  });
}

/** Stop: a running program's worker is terminated and a fresh one starts; a program still
 * waiting for the worker to start is not sent. */
function stop(b) {
  if (b.inflight) {
    b.stopped = true;
    programs.restart();          // the run is lost: its callback says it was stopped
  } else if (b.queued !== null) {
    b.queued = null;
    done(b);
    setOutput(b, tr("runtime.pydemo_stopped"), "stopped");
  }
}

function done(b) {
  const focused = document.activeElement === b.stop;
  b.inflight = false;
  b.demo.removeAttribute("aria-busy");
  b.stop.hidden = true;
  b.run.disabled = document.documentElement.getAttribute("data-runtime") !== "ready";
  if (focused) b.run.focus();     // the reader's place: Stop is gone, Run is back
}
