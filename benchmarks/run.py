#!/usr/bin/env python3
"""Benchmarks: what readers and maintainers feel, each next to its baseline in the same run.

    python3 benchmarks/run.py [--quick | --smoke] [--out benchmarks/results/latest.json] [--only SECTION ...]

Sections (see each module's docstring for exactly what is measured):

  core         (6) column→row MLP (d_model 4096, d_ff 16384, batch 64, tp 8, forward + backward)
               and vocab-parallel CE (V 50257 padded per Megatron, 512 positions, tp 8), sharded
               ÷ unsharded numpy reference; peak memory (tracemalloc)      -> core_bench.py
  build        (5) python build.py --runtime none, wall time and phases       -> site_bench.py
  bytes        (4) per page HTML + CSS + JS + tpmath wheel, raw and gzip; the runtime's bytes;
               (8) the precomputed results each page's demos fetch on first use
  browser      (1) time to live tables ÷ bare Pyodide+numpy page, cold and warm; (1s) time to
               ready / live tables of a repeat visit from the worker's memory snapshot, and what
               making the snapshot costs a first visit; (2) control latency p50/p95/max per
               control kind (2n: states never computed before, from ready and
               once the page settled; 2r: a step every 500 ms, the demo on screen, as a
               reader who reads between changes); (3) first contentful paint ÷ the page
               without scripts; (P7) control change -> tables + figure while the runtime is
               held back (precomputed results), p50/p95 per discrete control
               (Chromium at /usr/bin/chromium)                               -> browser_bench.py
  lighthouse   (7) Lighthouse 12, mobile preset: scores, FCP, LCP, TBT, CLS of every page in both
               languages, best of three runs (--quick: page 1 once)          -> lighthouse_bench.py

Prints a table and writes JSON.  --quick: a few repetitions (its figures are rough, a few
minutes).  --smoke: every measurement once at its smallest, under a minute on an idle machine:
what tests/test_benchmarks.py runs to check that the harness works and fills every row of the
table (its figures mean nothing; to boot Pyodide fewer times, its latency rows share one live
page and its snapshot-cost rows take page 1's side from the time-to-live visits).  Timings are never asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SECTIONS = ("core", "build", "bytes", "browser", "lighthouse")


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}{unit}" if abs(v) < 1000 else f"{v:,.0f}{unit}"
    return f"{v}{unit}"


def _kb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1024:.1f} KB"


def _spread(s: dict, scale: float = 1.0, unit: str = "") -> str:
    if not s or s.get("median") is None:
        return "-"
    return (f"{_fmt(s['median'] * scale, unit)} [{_fmt(s['min'] * scale)}–{_fmt(s['max'] * scale)}]")


def _ok(flag) -> str:
    return {True: "yes", False: "NO", None: ""}[flag]


def table(results: dict) -> str:
    """The human-readable summary: one row per figure, target and whether it is met."""
    rows = [("figure", "subject", "baseline", "ratio / value (median [min–max])", "target", "met")]
    br = results.get("browser") or {}
    ttl = br.get("time_to_live") or {}
    for visit in ("cold", "warm"):
        b = ttl.get(visit)
        if b:
            rows.append((f"(1) time to live tables, {visit}", _spread(b["subject"], 1, " s"),
                         _spread(b["baseline"], 1, " s"), _spread(b["ratio"]), "≤ 1.10", _ok(b.get("meets_target"))))
    for visit, c in ((v, (br.get("snapshot_cost") or {}).get(v)) for v in ("cold", "warm")):
        if c:
            rows.append((f"(1s) time to ready, {visit}, making the snapshot", _spread(c["subject"], 1, " s"),
                         _spread(c["baseline"], 1, " s") + " (no snapshot)", _spread(c["ratio"]), "≤ 1.05",
                         _ok(c.get("meets_target"))))
    b, r = ttl.get("snapshot"), ttl.get("snapshot_ready")
    if b and r:
        rows.append(("(1s) time to ready, repeat visit from the memory snapshot", _spread(r["subject"], 1, " s"),
                     _spread(r["baseline"], 1, " s"), _spread(r["ratio"]), "≤ 1.00", _ok(r.get("meets_target"))))
        rows.append(("(1s) time to live tables, repeat visit from the snapshot", _spread(b["subject"], 1, " s"),
                     _spread(b["baseline"], 1, " s"), _spread(b["ratio"]), "≤ 1.10", _ok(b.get("meets_target"))))
    for name, c in (br.get("control_latency") or {}).items():
        if name == "calibration_fixed_work_ms":
            rows.append(("(2) calibration: fixed ~1 ms of JS (machine noise)", f"p50 {_fmt(c['p50'])} ms", "",
                         f"p95 {_fmt(c['p95'])} ms, max {_fmt(c['max'])} ms", "", ""))
            continue
        a = c["applied_ms"]
        w, pg = c.get("worker_ms") or {}, c.get("page_ms") or {}
        rows.append((f"(2) control latency: {name} (n={a['n']})", f"p50 {_fmt(a['p50'])} ms",
                     f"worker p50 {_fmt(w.get('p50'))} / page p50 {_fmt(pg.get('p50'))} ms; "
                     f"sent ahead {c.get('kept', 0)}/{a['n']}",
                     f"p95 {_fmt(a['p95'])} ms, max {_fmt(a['max'])} ms", "p95 < 16 ms", _ok(c.get("meets_target"))))
    for key, when in (("new_state_latency", "from ready"), ("new_state_settled", "page settled")):
        for name, c in (br.get(key) or {}).items():
            a, w = c["applied_ms"], c.get("worker_ms") or {}
            rows.append((f"(2n) new states, {when}: {name} ({c['section']}, n={a['n']})", f"p50 {_fmt(a['p50'])} ms",
                         f"worker p50 {_fmt(w.get('p50'))} ms; first change {_fmt(c.get('first_ms'))} ms; "
                         f"sent ahead {c.get('kept', 0)}/{a['n']}",
                         f"p95 {_fmt(a['p95'])} ms, max {_fmt(a['max'])} ms; failures {c['failures']}",
                         "p95 < 16 ms", _ok(c.get("meets_target"))))
    for name, c in (br.get("reader_pace") or {}).items():
        a = c["applied_ms"]
        rows.append((f"(2r) a reader's pace, a step every {c['pause_ms']} ms: {name} ({c['section']}, n={a['n']})",
                     f"p50 {_fmt(a['p50'])} ms",
                     f"first change {_fmt(c.get('first_ms'))} ms; sent ahead {c.get('kept', 0)}/{a['n']}",
                     f"p95 {_fmt(a['p95'])} ms, max {_fmt(a['max'])} ms; failures {c['failures']}",
                     "p95 < 16 ms", _ok(c.get("meets_target"))))
    for name, c in (br.get("precomputed_latency") or {}).items():
        a = c["applied_ms"]
        rows.append((f"(P7) before ready: {name} ({c['section']}, n={a['n']})", f"p50 {_fmt(a['p50'])} ms",
                     f"first change {_fmt(c.get('first_change_ms'))} ms (fetches the file)",
                     f"p95 {_fmt(a['p95'])} ms, max {_fmt(a['max'])} ms; failures {c['failures']}",
                     "p95 ≤ 100 ms", _ok(c.get("meets_target"))))
    fp = br.get("first_paint")
    if fp:
        rows.append(("(3) first contentful paint, page 1", _spread(fp["subject"], 1, " ms"),
                     _spread(fp["baseline"], 1, " ms"), _spread(fp["ratio"]), "≤ 1.05", _ok(fp.get("meets_target"))))
    by = results.get("bytes")
    if by:
        for p in by["pages"]:
            parts = p["parts"]
            rows.append((f"(4) bytes {p['page']}", f"raw {_kb(p['raw'])}", f"gzip {_kb(p['gzip'])}",
                         "html {} css {} js {} wheel {} (gzip)".format(*(_kb(parts[k]["gzip"]) for k in
                                                                        ("html", "css", "js", "wheel"))),
                         "≤ 100 KB before the runtime (html + css + js, gzip)",
                         f"{_ok(p['page_gzip'] <= by['target_per_page'])} ({_kb(p['page_gzip'])} gzip, "
                         f"{_kb(p['page_raw'])} raw)"))
        for p in by["pages"]:
            r = p.get("results")
            if r and r["files"]:
                rows.append((f"(8) precomputed results {p['page']}", f"raw {_kb(r['raw'])}", f"gzip {_kb(r['gzip'])}",
                             f"{len(r['files'])} files (results + the language's strings), each fetched on first use", "", ""))
        rt = by["runtime"]
        rows.append(("(4) bytes Pyodide runtime (not counted above)", f"raw {_kb(rt['raw'])}",
                     f"gzip {_kb(rt['gzip'])}", "", "", ""))
    pc = results.get("precompute")
    if pc:
        rows.append(("(5b) build: precompute phase (runtime builds)", f"cold {_spread(pc['cold'], 1, ' s')}",
                     f"warm (cache) {_spread(pc['warm'], 1, ' s')}",
                     f"{sum(s['states'] for s in pc['sections'].values())} states, "
                     f"{len(pc['sections'])} sections", "", ""))
    bd = results.get("build")
    if bd:
        phases = ", ".join(f"{k} {v['median']:.2f}" for k, v in bd["phases"].items())
        rows.append(("(5) build time (python build.py --runtime none)", _spread(bd["wall"], 1, " s"),
                     f"in process {_spread(bd['in_process'], 1, ' s')}", phases, "≤ 2 s", _ok(bd.get("meets_target"))))
    core = results.get("core")
    if core:
        for key in ("mlp", "vocab_ce"):
            c = core[key]
            z = c["sizes"]   # (--smoke runs smaller sizes)
            label = (f"MLP {z['batch']}×{z['d_model']}×{z['d_ff']} tp {z['tp']}, fwd+bwd" if key == "mlp"
                     else f"vocab CE {z['positions']}×{z['vocab']} tp {z['tp']}")
            pk = c["peak_bytes"]
            rows.append((f"(6) {label}", _spread(c["subject"], 1, " s"), _spread(c["baseline"], 1, " s"),
                         f"{_spread(c['ratio'])}; peak mem {pk['subject'] / 2**20:.0f} / {pk['baseline'] / 2**20:.0f}"
                         f" MiB = {pk['ratio']}", "≤ 1.25", _ok(c.get("meets_target"))))
    lh = results.get("lighthouse")
    if lh:
        for p in lh["pages"]:
            sc, m = p["scores"], p["metrics"]
            rows.append((f"(7) Lighthouse {p['page']} (best of {p['runs']})",
                         "perf {} a11y {} bp {} seo {}".format(*(sc[c] for c in ("performance", "accessibility",
                                                                                "best-practices", "seo"))),
                         f"runs perf {', '.join(str(x) for x in p['performance_each'])}",
                         f"FCP {m['fcp_ms'] / 1000:.2f} s, LCP {m['lcp_ms'] / 1000:.2f} s, TBT {m['tbt_ms']} ms, "
                         f"CLS {m['cls']}; CPU index {p.get('benchmark_index')}",
                         "≥ 0.95 / 1 / 1 / 1", _ok(p["meets_target"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument("--quick", action="store_true", help="a few repetitions only (rough figures)")
    speed.add_argument("--smoke", action="store_true",
                       help="each measurement once at its smallest: checks the harness (tests/test_benchmarks.py)")
    parser.add_argument("--out", default=str(HERE / "results" / "latest.json"), help="JSON output file")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                        help="run only these sections")
    parser.add_argument("--dtype", default="float64", choices=("float32", "float64"),
                        help="dtype of the core benchmarks (default float64: numpy @ with BLAS; tpmath.kernels evaluates float16/32 in a fixed, slow order)")
    args = parser.parse_args(argv)

    import site_bench

    t0 = time.perf_counter()
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    results: dict = {"mode": mode, "quick": mode != "full", "sections": args.only,
                     "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                 "platform": platform.platform(),
                                 "load_avg_start": list(os.getloadavg())},
                     "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    failures = []

    def section(name, fn):
        print(f"[benchmarks] {name} …", file=sys.stderr, flush=True)
        s0 = time.perf_counter()
        try:
            results[name] = fn()
        except Exception as err:  # report, keep the other sections, exit 1 at the end
            failures.append(name)
            results[name] = None
            results.setdefault("errors", {})[name] = f"{type(err).__name__}: {err}"
            print(f"[benchmarks] {name} FAILED: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        results.setdefault("section_seconds", {})[name] = round(time.perf_counter() - s0, 2)

    if "build" in args.only:
        section("build", lambda: site_bench.bench_build({"full": 7, "quick": 2, "smoke": 1}[mode]))
        if mode == "full":   # cold: every state of every section computed (seconds, not CI's business)
            section("precompute", lambda: site_bench.bench_precompute(3))
    if "bytes" in args.only or "browser" in args.only:
        with tempfile.TemporaryDirectory(prefix="tp-bench-site-") as tmp:
            site = Path(tmp) / "site"
            site_bench.build_site(site, "local")
            if "bytes" in args.only:
                section("bytes", lambda: site_bench.bench_bytes(site))
            if "browser" in args.only:
                import browser_bench
                section("browser", lambda: browser_bench.run(site, mode))
    if "lighthouse" in args.only:
        import lighthouse_bench
        section("lighthouse", lambda: lighthouse_bench.bench(mode))
    if "core" in args.only:
        import core_bench
        section("core", lambda: core_bench.run(mode, args.dtype))

    results["machine"]["load_avg_end"] = list(os.getloadavg())
    results["total_seconds"] = round(time.perf_counter() - t0, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(table(results))
    print(f"\n{mode} run, {results['total_seconds']} s, "
          f"load average {results['machine']['load_avg_start'][0]:.1f} → {results['machine']['load_avg_end'][0]:.1f}"
          f" on {os.cpu_count()} CPUs; JSON: {out}")
    if failures:
        print(f"failed sections: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
