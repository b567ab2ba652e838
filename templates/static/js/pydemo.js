/* Python demos ({{pydemo NAME}}): the reader edits the program in a plain <textarea> (accessible,
 * no editor library), Run executes their version in the worker (a fresh namespace, like
 * `python demo.py`) and shows its output or its error; Reset brings back the page's program and
 * the output computed at build time.  Without JavaScript the page shows the highlighted program
 * and that output. */

import { tr } from "./i18n.js";

const blocks = [];

function part(demo, selector) {
  return demo.querySelector(selector);
}

function setOutput(b, text, kind) {
  b.output.textContent = text;
  b.output.setAttribute("data-kind", kind);
  b.label.textContent = kind === "built" ? b.builtLabel
    : tr(kind === "error" ? "runtime.pydemo_error" : "runtime.pydemo_live");
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
    };
    if (!b.code || !b.run || !b.output || !b.label) continue;
    b.built = b.output.textContent;
    b.builtLabel = b.label.textContent;
    for (const el of demo.querySelectorAll("[data-editor]")) el.hidden = false;   // label, textarea, reset
    const view = part(demo, ".highlight");
    if (view) view.hidden = true;
    b.run.addEventListener("click", () => run(b, runtime));
    if (b.reset) {
      b.reset.addEventListener("click", () => {
        b.code.value = b.code.defaultValue;
        setOutput(b, b.built, "built");
      });
    }
    blocks.push(b);
  }
  runtime.subscribe((state, detail) => {
    for (const b of blocks) {
      b.run.disabled = state !== "ready" || b.demo.hasAttribute("aria-busy");
      b.run.title = state === "ready" ? "" : tr(runtime.final ? "runtime.static" : "runtime." + detail);
    }
  });
}

function run(b, runtime) {
  const sent = runtime.send({ type: "run", code: b.code.value }, (msg) => {
    done(b, runtime);
    const text = (msg.stdout || "") + (msg.error || "");
    setOutput(b, text, msg.error ? "error" : "live");
  }, () => {
    done(b, runtime);
    setOutput(b, tr("runtime.pydemo_lost"), "error");
  });
  if (sent === null) return;
  b.run.disabled = true;
  b.demo.setAttribute("aria-busy", "true");
}

function done(b, runtime) {
  b.demo.removeAttribute("aria-busy");
  b.run.disabled = !runtime.ready;
}
