#!/usr/bin/env python3
"""Screenshots of the built site in headless Chromium, light and dark, desktop and phone.

    python scripts/screenshots.py [--site site] [--out /tmp/shots] [--page en/index.html ...]

Serves the site with tpsite.serve on a free localhost port; writes one PNG per page,
colour scheme and viewport.  For looking at the pages as a reader would.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tpsite.serve import make_server, url_of  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
VIEWPORTS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--site", default=str(ROOT / "site"))
    parser.add_argument("--out", default="/tmp/shots")
    parser.add_argument("--page", action="append", help="page path below the site (repeatable)")
    parser.add_argument("--viewport", choices=sorted(VIEWPORTS), action="append")
    parser.add_argument("--scheme", choices=["light", "dark"], action="append")
    parser.add_argument("--full", action="store_true", help="full-page screenshots")
    parser.add_argument("--wait", type=float, default=0.5, help="seconds to wait after load")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    site = Path(args.site)
    pages = args.page or sorted(str(p.relative_to(site)) for p in site.glob("*/*.html"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    server = make_server(site, "127.0.0.1", 0, verbose=False)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = url_of(server)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            for page_path in pages:
                for scheme in args.scheme or ["light", "dark"]:
                    for vp in args.viewport or ["desktop"]:
                        ctx = browser.new_context(color_scheme=scheme, viewport=VIEWPORTS[vp],
                                                  device_scale_factor=1)
                        page = ctx.new_page()
                        page.goto(base + page_path, wait_until="load")
                        page.wait_for_timeout(int(args.wait * 1000))
                        name = f"{page_path.replace('/', '_').removesuffix('.html')}-{scheme}-{vp}.png"
                        page.screenshot(path=str(out / name), full_page=args.full)
                        print(out / name)
                        ctx.close()
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
