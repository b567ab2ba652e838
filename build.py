#!/usr/bin/env python3
"""Build the bilingual site into site/ (and optionally serve it).

    python build.py                        build site/ (runtime copied from the local cache)
    python build.py --runtime cdn          point the pages at the official Pyodide CDN
    python build.py --base-url URL         the published address: canonical/hreflang/og URLs, sitemap.xml
    python build.py --serve [--port 8000]  build, then serve on http://127.0.0.1:8000/
    python build.py --serve --watch        and rebuild on every save; the open page reloads
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "src"))

from tpsite import BuildError  # noqa: E402
from tpsite.build import RUNTIME_MODES, build  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "site"), help="output directory (default: site/)")
    parser.add_argument("--content", default=None, help="content directory (default: content/)")
    parser.add_argument("--runtime", choices=RUNTIME_MODES, default="local",
                        help="in-browser Python: local copy, official CDN, or none (default: local)")
    parser.add_argument("--base-url", default=None, metavar="URL",
                        help="the published address (e.g. https://user.github.io/repo/): absolute canonical, "
                             "hreflang and link-preview URLs, sitemap.xml")
    parser.add_argument("--serve", action="store_true", help="serve the site after building it")
    parser.add_argument("--watch", action="store_true",
                        help="with --serve: rebuild what changed on every save and reload the open page")
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to serve on (default: 8000; 0 = any free)")
    parser.add_argument("--timings", action="store_true", help="print per-phase timings as JSON")
    args = parser.parse_args(argv)
    if args.watch:
        if not args.serve:
            parser.error("--watch needs --serve")
        from tpsite.watch import watch
        return watch(args.out, args.host, args.port, args.content, runtime=args.runtime, base_url=args.base_url)
    try:
        result = build(args.out, content_dir=args.content, runtime=args.runtime, quiet=False,
                       base_url=args.base_url)
    except BuildError as err:
        print(f"build failed: {err}", file=sys.stderr)
        return 1
    if args.timings:
        import json
        print(json.dumps(result, indent=2, sort_keys=True))
    if args.serve:
        from tpsite.serve import serve
        serve(args.out, args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
