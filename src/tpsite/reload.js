// build.py --serve --watch only: tpsite/serve.py adds this script to every page it sends (the
// built files never contain it).  The page reloads once the watcher has served a newer build
// than the one it was sent with.
(() => {
  const sent = document.currentScript.dataset.version;
  const poll = () => fetch("/__watch__/version", { cache: "no-store" })
    .then((resp) => (resp.ok ? resp.text() : sent))
    .then((version) => { if (version !== sent) location.reload(); else setTimeout(poll, 100); })
    .catch(() => setTimeout(poll, 1000));     // the server restarting: try again
  poll();
})();
