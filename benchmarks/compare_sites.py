"""Two built sites in one run: benchmark rows (1) time to live, (2) control latency, (2r) reader
pace and (P7) precomputed latency (browser_bench.py's functions), alternating which goes first.

    python3 benchmarks/compare_sites.py BEFORE_SITE AFTER_SITE [ROUNDS] [--out=FILE]

(each a `build.py --runtime local` output).  Timings are never asserted."""
import json
import sys
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE)); sys.path.insert(0, str(HERE.parent / "src"))
import browser_bench as bb
from playwright.sync_api import sync_playwright
args = [a for a in sys.argv[1:] if not a.startswith("--out")]
out_file = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--out=")), "compare_sites.json")
sites = {"before": Path(args[0]), "after": Path(args[1])}
rounds = int(args[2]) if len(args) > 2 else 2
bases, servers = {}, []
for k, p in sites.items():
    bb.prepare(p)
    srv, base = bb.start_server(p)
    servers.append(srv); bases[k] = base
out = {k: [] for k in sites}
with sync_playwright() as pw:
    browser = pw.chromium.launch(executable_path=bb.CHROMIUM, args=bb.CHROMIUM_ARGS, headless=True)
    for r in range(rounds):
        order = list(sites) if r % 2 == 0 else list(sites)[::-1]
        for k in order:
            res = {"time_to_live": bb.time_to_live(browser, bases[k], 1),
                   "control_latency": bb.control_latency(browser, bases[k], 20),
                   "reader_pace": bb.reader_latency(browser, bases[k], 12),
                   "precomputed_latency": bb.precomputed_latency(browser, bases[k], 20)}
            out[k].append(res)
            print(k, r, flush=True)
    browser.close()
for s in servers: s.shutdown()
Path(out_file).write_text(json.dumps(out, indent=1))
