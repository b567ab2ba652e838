"""(4) bytes per page and (5) build time.

Build time: ``python build.py --runtime none`` in a fresh interpreter (what a maintainer
waits for, imports included; the Pyodide runtime copy excluded), wall clock, and the
builder's own per-phase breakdown (``--timings``: content, math, views, markdown, runtime,
render).

Bytes: for every page of a ``--runtime local`` build, the HTML plus what it references
(stylesheets, scripts, the worker script app.js starts, the tpmath wheel named in
``<meta name="tp-wheel">``), raw and gzip-compressed (level 6, what web servers use);
and the runtime's own files (everything under the Pyodide base URL).
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlparse

from stats import summary

ROOT = Path(__file__).resolve().parents[1]


def build_site(out: Path, runtime: str) -> tuple[float, dict]:
    """Run build.py into ``out``; return (wall seconds, the builder's result dict)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "--runtime", runtime, "--out", str(out),
                           "--timings"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"build.py --runtime {runtime} failed:\n{proc.stdout}\n{proc.stderr}")
    text = proc.stdout
    return wall, json.loads(text[text.index("{"):])


def bench_build(reps: int) -> dict:
    walls, phases = [], {}
    with tempfile.TemporaryDirectory(prefix="tp-bench-build-") as tmp:
        out = Path(tmp) / "site"
        build_site(out, "none")                       # warm-up: .pyc files, page cache
        for _ in range(reps):
            wall, result = build_site(out, "none")
            walls.append(wall)
            for k, v in result.get("timings", {}).items():
                phases.setdefault(k, []).append(float(v))
            info = {k: result.get(k) for k in ("pages", "formulas", "demos")}
    return {"unit": "s", "command": "python build.py --runtime none", "wall": summary(walls),
            "in_process": summary([sum(p) for p in zip(*phases.values())]) if phases else None,
            "phases": {k: summary(v) for k, v in phases.items()}, "site": info,
            "samples": [round(w, 4) for w in walls], "target": 2.0,
            "meets_target": bool(walls) and summary(walls)["median"] <= 2.0}


def bench_precompute(reps: int) -> dict:
    """The build's precompute phase (issue 15) in this process: every demo section of the real
    pages, with an empty results cache (cold: what a first build or CI pays) and again with the
    cache it filled (warm: every later build until tpmath changes)."""
    import os
    sys.path.insert(0, str(ROOT / "src"))
    import importlib
    tb = importlib.import_module("tpsite.build")      # (the package exports a function named build)
    from tpsite import content as tc, precompute
    content = tc.load_content(ROOT / "content")
    prepared = tb.prepare_pages(content)
    cold, warm = [], []
    saved = os.environ.get("TP_RESULTS_CACHE")
    try:
        for _ in range(reps):
            with tempfile.TemporaryDirectory(prefix="tp-bench-results-") as cache:
                os.environ["TP_RESULTS_CACHE"] = cache
                t0 = time.perf_counter()
                made = tb.precompute_results(content, prepared)
                cold.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                tb.precompute_results(content, prepared)
                warm.append(time.perf_counter() - t0)
    finally:
        if saved is None:
            os.environ.pop("TP_RESULTS_CACHE", None)
        else:
            os.environ["TP_RESULTS_CACHE"] = saved
    files = {id(r): r for r in made.values()}.values()
    return {"unit": "s", "cold": summary(cold), "warm": summary(warm),
            "sections": {r.section: {"states": r.states, "unique": r.unique, "rule": r.rule, "bytes": len(r.data),
                                     "gzip": len(gzip.compress(r.data, 6, mtime=0))} for r in files},
            "rule": {"full_states_max": precompute.FULL_STATES_MAX, "near_changes": precompute.NEAR_CHANGES,
                     "near_budget_gzip": precompute.NEAR_BUDGET_GZIP,
                     "number_values_max": precompute.NUMBER_VALUES_MAX}}


# ------------------------------------------------------------------------------- bytes

class _Refs(HTMLParser):
    """Collect the URLs a page makes the browser load before it is live."""

    def __init__(self):
        super().__init__()
        self.css, self.js, self.meta, self.results = [], [], {}, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "link" and "stylesheet" in (a.get("rel") or "").split() and a.get("href"):
            self.css.append(a["href"])
        elif tag == "script" and a.get("src"):
            self.js.append(a["src"])
        elif tag == "meta" and a.get("name"):
            self.meta[a["name"]] = a.get("content") or ""
        if a.get("data-results"):
            self.results.append(a["data-results"])


def _local(site: Path, page_url: str, ref: str) -> Path | None:
    url = urljoin(page_url, ref)
    if urlparse(url).netloc != "site":
        return None                                   # absolute URL elsewhere (e.g. a CDN)
    path = site / urlparse(url).path.lstrip("/")
    return path if path.is_file() else None


def _sizes(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    return len(data), len(gzip.compress(data, compresslevel=6, mtime=0))


def page_bytes(site: Path, html: Path) -> dict:
    """Raw and gzip bytes of one page and everything it needs except the Pyodide runtime."""
    rel = html.relative_to(site).as_posix()
    page_url = "http://site/" + rel
    parser = _Refs()
    parser.feed(html.read_text(encoding="utf-8"))
    files = {"html": [html]}
    files["css"] = [p for p in (_local(site, page_url, h) for h in parser.css) if p]
    js = [p for p in (_local(site, page_url, h) for h in parser.js) if p]
    # app.js is an ES module: count the modules it imports (static imports, followed), and the
    # worker it starts (static/worker.js, resolved against app.js).
    for p in list(js):
        worker = p.parent / "worker.js"
        if p.name == "app.js" and worker.is_file() and worker not in js:
            js.append(worker)
    todo = list(js)
    while todo:
        p = todo.pop()
        for ref in re.findall(r'^\s*import\b[^"\']*["\'](\.{1,2}/[^"\']+)["\']', p.read_text(encoding="utf-8"), re.M):
            dep = (p.parent / ref).resolve()
            if dep.is_file() and dep not in js:
                js.append(dep)
                todo.append(dep)
    files["js"] = js
    wheel = _local(site, page_url, parser.meta.get("tp-wheel", "")) if parser.meta.get("tp-wheel") else None
    files["wheel"] = [wheel] if wheel else []
    out = {"page": rel, "parts": {}}
    raw_total = gz_total = 0
    for kind, paths in files.items():
        raw = gz = 0
        for p in paths:
            r, g = _sizes(p)
            raw, gz = raw + r, gz + g
        out["parts"][kind] = {"raw": raw, "gzip": gz, "files": [p.relative_to(site).as_posix() for p in paths]}
        raw_total, gz_total = raw_total + raw, gz_total + gz
    out["raw"], out["gzip"] = raw_total, gz_total
    # What a reader who only reads downloads: the wheel is fetched by the runtime's boot only.
    out["page_gzip"] = sum(out["parts"][k]["gzip"] for k in ("html", "css", "js"))
    out["page_raw"] = sum(out["parts"][k]["raw"] for k in ("html", "css", "js"))
    out["pyodide_base"] = parser.meta.get("tp-pyodide")
    # Precomputed results of the page's demos (not in the totals: each is fetched on first use).
    results = sorted({p for p in (_local(site, page_url, h) for h in parser.results) if p})
    # ... and the language's strings the results' cells name (one file per language, cached).
    strings = _local(site, page_url, parser.meta["tp-strings"]) if parser.meta.get("tp-strings") else None
    if strings:
        results.append(strings)
    sizes = [_sizes(p) for p in results]
    out["results"] = {"raw": sum(r for r, _ in sizes), "gzip": sum(g for _, g in sizes),
                      "files": {p.name: {"raw": r, "gzip": g} for p, (r, g) in zip(results, sizes)}}
    return out


def runtime_bytes(site: Path, base: str | None, page_rel: str) -> dict:
    """The Pyodide runtime's files as served (local mode): every file under its base URL."""
    if not base:
        return {"raw": 0, "gzip": 0, "files": {}}
    d = _local(site, "http://site/" + page_rel, base + "pyodide.js")
    if d is None:
        return {"raw": None, "gzip": None, "files": {}, "note": f"runtime not local: {base}"}
    files = {}
    for p in sorted(d.parent.iterdir()):
        if p.is_file() and p.name != "SHA256SUMS":
            r, g = _sizes(p)
            files[p.name] = {"raw": r, "gzip": g}
    # pyodide.mjs is the ES-module twin of pyodide.js: a worker loads one of them only.
    loaded = {k: v for k, v in files.items() if k != "pyodide.mjs"}
    return {"raw": sum(v["raw"] for v in loaded.values()), "gzip": sum(v["gzip"] for v in loaded.values()),
            "files": files, "note": "pyodide.mjs not counted (a worker loads pyodide.js or .mjs, not both)"}


def bench_bytes(site: Path) -> dict:
    pages = [page_bytes(site, p) for p in sorted(site.glob("*/*.html"))]
    base = next((p["pyodide_base"] for p in pages if p["pyodide_base"]), None)
    page_rel = next((p["page"] for p in pages if p["pyodide_base"]), "")
    limit = 100 * 1024
    return {"unit": "bytes", "pages": pages, "runtime": runtime_bytes(site, base, page_rel),
            "target_per_page": limit,
            "meets_target": all(p["raw"] <= limit for p in pages),
            "max_page_raw": max((p["raw"] for p in pages), default=0),
            "max_page_gzip": max((p["gzip"] for p in pages), default=0)}


if __name__ == "__main__":
    site = Path(sys.argv[1])
    print(json.dumps(bench_bytes(site), indent=1))
