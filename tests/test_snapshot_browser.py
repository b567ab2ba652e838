"""The runtime's memory snapshot (issue 15 item 4, issue 18 item 5), in real Chromium with real
Pyodide from 127.0.0.1.

A first visit boots normally, takes a Pyodide memory snapshot before numpy and stores it in
Cache Storage once the page is idle after ready; a second visit in the same browser context
restores it (``<html data-runtime-boot="snapshot">``).  What is compared with what:

- the stored entry: under the key the build derived from the pinned runtime
  (:func:`tpsite.runtime.snapshot_config`), a Pyodide snapshot (its magic number), with the
  sha256 stored beside it equal to Python's hashlib of the same bytes;
- a continuous control change after a snapshot boot shows what CPython's ``views.render`` gives,
  and the same markup as after the normal boot of the first visit; the status sentence passes
  through the same stages;
- a damaged entry (bytes changed, so its sha256 no longer matches) and an entry that is not a
  snapshot at all (its sha256 right, so the restore itself fails) each give a normal boot
  (``data-runtime-boot="fallback"``) that becomes ready and right, and are replaced by a good
  entry that the next visit restores.
"""

from __future__ import annotations

import base64
import re
import hashlib
import time

import pytest

from tpsite import runtime as rt
from test_pages_browser import BOOT_TIMEOUT_MS, SNAPSHOT_JS, diff, expected, strings
from test_precomputed_browser import CHANGE_JS

pytestmark = pytest.mark.browser

CACHE = "tp-pyodide-snapshot"

# Every stored entry: [url, byte length, the x-tp-sha256 header, sha256 of the bytes, first word].
ENTRIES_JS = """async (name) => {
  const cache = await caches.open(name);
  const out = [];
  for (const req of await cache.keys()) {
    const resp = await cache.match(req);
    const buf = await resp.arrayBuffer();
    const sha = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", buf)),
                           (b) => b.toString(16).padStart(2, "0")).join("");
    out.push([req.url, buf.byteLength, resp.headers.get("x-tp-sha256"), sha, new Uint32Array(buf, 0, 1)[0]]);
  }
  return out;
}"""
# A stored entry's bytes, base64 (for hashlib on the Python side).
ENTRY_B64_JS = """async ([name, url]) => {
  const bytes = new Uint8Array(await (await (await caches.open(name)).match(url)).arrayBuffer());
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s);
}"""
# Replace an entry: `mode` "flip" changes bytes in the middle and keeps the stored sha256;
# "garbage" stores zero bytes of the same length with their own (right) sha256.
DAMAGE_JS = """async ([name, url, mode]) => {
  const cache = await caches.open(name);
  const resp = await cache.match(url);
  let bytes = new Uint8Array(await resp.arrayBuffer());
  let sha = resp.headers.get("x-tp-sha256");
  if (mode === "flip") { for (let i = 0; i < 64; i++) bytes[(bytes.length >> 1) + i] ^= 0xff; }
  else {
    bytes = new Uint8Array(bytes.length);
    sha = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)),
                     (b) => b.toString(16).padStart(2, "0")).join("");
  }
  await cache.put(url, new Response(bytes, { headers: { "x-tp-sha256": sha } }));
  return sha;
}"""
# The status sentences of the first demo's runtime line, in order (set before the page's scripts).
STATUS_WATCH_JS = """(() => {
  window.__tpStatuses = [];
  const seen = () => {
    const el = document.querySelector(".runtime-status");
    const text = el ? el.textContent : null;
    if (text && window.__tpStatuses[window.__tpStatuses.length - 1] !== text) window.__tpStatuses.push(text);
  };
  new MutationObserver(seen).observe(document, { subtree: true, childList: true, characterData: true });
})();"""

SECTION, CHANGE = "vocab-ce", {"shift": "1.5"}     # continuous: only the runtime answers it


def _visit(page, url):
    page.goto(url)
    page.wait_for_function("() => ['ready', 'failed'].includes(document.documentElement.dataset.runtime)",
                           timeout=BOOT_TIMEOUT_MS)
    assert page.evaluate("document.documentElement.dataset.runtime") == "ready"
    return page.evaluate("document.documentElement.dataset.runtimeBoot")


def _entries(page, magic, timeout_s=60):
    """The stored entries once there is a whole snapshot: [(url, size, sha256)]."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = page.evaluate(ENTRIES_JS, CACHE)
        if got and all(e[2] == e[3] and e[4] == magic for e in got):
            return [tuple(e[:3]) for e in got]
        assert time.monotonic() < deadline, f"no snapshot stored within {timeout_s} s: {got}"
        page.wait_for_timeout(250)


def _live_change(page, lang):
    got = page.evaluate(CHANGE_JS, [SECTION, CHANGE, 30_000])
    assert got["detail"] == {"section": SECTION, "ok": True, "source": "live"}
    snap = page.evaluate(SNAPSHOT_JS, page.locator(f'.demo[data-section="{SECTION}"]').element_handle())
    controls = dict(snap["controls"])
    assert controls["shift"] == CHANGE["shift"]
    assert diff(f"{lang} {SECTION} {CHANGE}", snap, expected(SECTION, controls, lang)) == []
    return {k: got[k] for k in ("tables", "figures", "values", "notes", "controls", "msg")}


def _open(new_context):
    ctx = new_context()
    ctx.add_init_script(STATUS_WATCH_JS)
    page = ctx.new_page()
    errors, infos = [], []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: (errors if msg.type == "error" else infos).append(msg.text))
    return ctx, page, errors, infos


def _magic(built_site) -> int:
    """Pyodide's snapshot magic number, read from the runtime the site serves."""
    text = (built_site / "pyodide" / "pyodide.asm.js").read_text(encoding="utf-8")
    name = re.search(r'if\(e\[0\]!==([\w$]+)\)throw new Error\("Snapshot has invalid magic number"\)', text).group(1)
    return int(re.search(r"(?<![\w$])" + re.escape(name) + r"=(\d+|0x[0-9a-fA-F]+)[,;]", text).group(1), 0)


def test_first_visit_stores_a_snapshot_and_the_next_visit_boots_from_it(new_context, site_url, built_site):
    ctx, page, errors, _ = _open(new_context)
    url = site_url + "en/index.html"
    assert _visit(page, url) == "normal"
    normal = _live_change(page, "en")
    normal_statuses = page.evaluate("window.__tpStatuses")
    magic = _magic(built_site)
    (entry_url, size, sha), = _entries(page, magic)
    key = page.get_attribute('meta[name="tp-snapshot"]', "content")
    assert key == rt.snapshot_config()["key"] and entry_url.endswith("/tp-snapshot/" + key)
    assert rt.PYODIDE_VERSION in key and rt.CORE_SHA256["pyodide.asm.wasm"][:16] in key
    data = base64.b64decode(page.evaluate(ENTRY_B64_JS, [CACHE, entry_url]))
    assert len(data) == size > 10_000_000                    # the interpreter's memory (~21 MB)
    assert hashlib.sha256(data).hexdigest() == sha
    assert int.from_bytes(data[:4], "little") == magic

    page.goto("about:blank")
    assert _visit(page, url) == "snapshot"
    live = _live_change(page, "en")
    assert live == normal
    statuses = page.evaluate("window.__tpStatuses")
    s = strings("en")
    stages = [s[f"runtime.{k}"] for k in ("loading", "download", "python", "numpy", "ready")]
    for seq in (statuses, normal_statuses):
        assert seq[-1] == s["runtime.ready"] and set(seq) <= set(stages), seq
        assert [stages.index(t) for t in seq] == sorted(stages.index(t) for t in seq), seq   # in order
    assert s["runtime.numpy"] in statuses
    assert page.evaluate("document.querySelectorAll('progress').length") == 0
    assert [tuple(e[:3]) for e in page.evaluate(ENTRIES_JS, CACHE)] == [(entry_url, size, sha)]   # kept
    assert errors == []
    ctx.close()


@pytest.mark.parametrize("mode", ["flip", "garbage"])
def test_a_damaged_snapshot_falls_back_to_the_normal_boot(new_context, site_url, built_site, mode):
    ctx, page, errors, infos = _open(new_context)
    magic = _magic(built_site)
    url = site_url + "zh/index.html"
    assert _visit(page, url) == "normal"
    (entry_url, size, sha), = _entries(page, magic)
    page.goto(site_url + "index.html")          # the language choice: no runtime of its own
    bad_sha = page.evaluate(DAMAGE_JS, [CACHE, entry_url, mode])
    assert (bad_sha == sha) == (mode == "flip")
    infos.clear()
    assert _visit(page, url) == "fallback"      # the stored one was tried and refused; not "failed"
    _live_change(page, "zh")
    (new_url, new_size, _), = _entries(page, magic)       # a whole snapshot again, same key
    assert new_url == entry_url and new_size == size
    # At most one console.info line says why (Chromium hands a worker's console to Playwright
    # only most of the time, so its absence proves nothing).
    assert len([m for m in infos if "snapshot" in m]) <= 1, infos
    assert errors == []
    page.goto("about:blank")
    assert _visit(page, url) == "snapshot"
    ctx.close()
