/* The runtime's state beside every demo (div.runtime-line): the status sentence, a <progress> while
 * the runtime downloads and starts, and a button: while it is deferred (Save-Data, 2G) the one
 * that loads it, after a failed start or a crash Retry (a fresh worker).
 *
 * The progress bar counts the bytes of the runtime files the worker has received against their
 * total (<meta name="tp-runtime-bytes">); without that total it is indeterminate.  It is labelled
 * by the status sentence (which names the stage: downloading, starting Python, loading numpy) and
 * removed once the runtime is ready or has failed.  The button gives the download size
 * (<meta name="tp-runtime-download">: the compressed bytes a static host sends). */

import { pageLang, tr } from "./i18n.js";

function metaNumber(name) {
  const el = document.querySelector(`meta[name="${name}"]`);
  const n = el ? Number(el.getAttribute("content")) : NaN;
  return Number.isFinite(n) && n > 0 ? n : null;
}

/** "8.8 MB" in the page's language. */
export function megabytes(bytes) {
  const mb = new Intl.NumberFormat(document.documentElement.lang || pageLang(),
    { maximumFractionDigits: 1, minimumFractionDigits: 1 }).format(bytes / 1e6);
  return tr("runtime.size_mb", { mb });
}

function statusText(state, detail, size) {
  if (state === "ready") return tr("runtime.ready");
  if (state === "deferred") return tr("runtime.deferred", { size });
  return tr("runtime." + (detail || state));
}

export function setupStatus(runtime) {
  const total = metaNumber("tp-runtime-bytes");
  const download = metaNumber("tp-runtime-download");
  const size = download ? megabytes(download) : "";
  const lines = Array.from(document.querySelectorAll(".runtime-line")).map((line, i) => {
    const text = line.querySelector(".runtime-status");
    if (text && !text.id) text.id = `runtime-status-${i}`;
    return { line, text, progress: null, button: null };
  });

  const showProgress = (l, on) => {
    if (on && !l.progress) {
      l.progress = document.createElement("progress");
      l.progress.className = "runtime-progress";
      if (l.text) l.progress.setAttribute("aria-labelledby", l.text.id);
      if (total) l.progress.max = total;
      l.line.appendChild(l.progress);
    } else if (!on && l.progress) {
      l.progress.remove();
      l.progress = null;
    }
  };
  // kind: "ask" (deferred), "retry" (failed or crashed) or null
  const showButton = (l, kind) => {
    if (l.button && l.button.dataset.kind !== kind) {
      const focused = document.activeElement === l.button;
      l.button.remove();
      l.button = null;
      if (focused && l.text) { l.text.tabIndex = -1; l.text.focus(); }   // keep the reader's place
    }
    if (kind && !l.button) {
      l.button = document.createElement("button");
      l.button.type = "button";
      l.button.className = kind === "ask" ? "runtime-ask" : "runtime-ask runtime-retry";
      l.button.dataset.kind = kind;
      l.button.textContent = kind === "ask" ? tr("runtime.ask", { size }) : tr("runtime.retry");
      l.button.addEventListener("click", () => (kind === "ask" ? runtime.ask() : runtime.retry()));
      l.line.appendChild(l.button);
    }
  };
  const setProgress = (loaded) => {
    for (const l of lines) {
      if (!l.progress || !total) continue;
      l.progress.value = Math.min(loaded, total);
    }
  };

  runtime.subscribe((state, detail) => {
    const text = statusText(state, detail, size);
    for (const l of lines) {
      if (l.text && l.text.textContent !== text) l.text.textContent = text;
      showProgress(l, runtime.booting && runtime.started);
      showButton(l, state === "deferred" ? "ask" : runtime.final && detail !== "none" ? "retry" : null);
    }
    setProgress(runtime.loaded);
  });
  runtime.onProgress(setProgress);
  return { size };
}
