/* Baseline for benchmarks/run.py: start a worker that boots Pyodide and imports numpy.
 * performance.mark("bare-ready") and <html data-runtime="ready"> once numpy is imported. */
(function () {
  "use strict";
  var root = document.documentElement;
  var base = document.querySelector('meta[name="tp-pyodide"]').getAttribute("content");
  var worker = new Worker(new URL("bare-worker.js", document.currentScript.src).href);
  worker.onmessage = function (ev) {
    if (ev.data && ev.data.type === "ready") {
      performance.mark("bare-ready");
      root.setAttribute("data-runtime", "ready");
    } else {
      root.setAttribute("data-runtime", "failed");
    }
  };
  worker.postMessage({ base: new URL(base, document.baseURI).href });
})();
