/* Baseline worker: Pyodide 0.27.7 + numpy (from the runtime's lock file), then `import numpy`. */
"use strict";
self.onmessage = async (event) => {
  try {
    importScripts(event.data.base + "pyodide.js");
    const pyodide = await loadPyodide({ indexURL: event.data.base, stdout: () => {}, stderr: () => {} });
    await pyodide.loadPackage("numpy", { messageCallback: () => {} });
    pyodide.runPython("import numpy");
    self.postMessage({ type: "ready" });
  } catch (err) {
    self.postMessage({ type: "failed", error: String(err) });
  }
};
