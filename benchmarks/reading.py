#!/usr/bin/env python3
"""How a page reads (issue 27): length, first picture, walls of prose, terms used before defined.

    python3 benchmarks/reading.py [--site DIR] [--json] [--check]

Every page of every language of a built site (without --site: `build.py --runtime none` into a
temporary directory) is opened in Chromium (/usr/bin/chromium) at 1280 × 900 as a reader who
follows only the main path sees it: every ``<details>`` closed (deep dives folded) and every
block the stylesheet lets the browser skip (``content-visibility``) laid out, so heights are
real.  Languages are the site's directories holding pages (``<main id="main"><article>``);
pages are in the order of the language's navigation.  Per page:

- screens: the document's height ÷ 900 at 1280 px (target ≤ 12);
- prose words on the main path: text in ``main`` outside closed details (their summary line
  counts), figures, demos, tables, code, formulas, headings, form controls, nav, header and
  footer.  A word is a run of letters or digits (joined by ' ’ . -); each CJK character counts
  half a word (issue 27: 250 English words ≈ 500 Chinese characters);
- the first figure (``figure.tp-figure``, the live figure of a demo) on the main path: its
  top in px at 1280 × 900 (target: inside the first screen, < 900) and at 390 × 844 (within
  two screens, < 1688);
- the longest run of prose words with nothing to look at between (a figure, demo block,
  Python demo, table, display formula ``math[display=block]``, image),
  and the heading holding most of that run (target ≤ 250);
- terms used before their definition: the glossary's tracked terms (content/i18n/glossary.toml
  ``[[term.track]]``) whose first use on the main path (prose, headings, inline code: a whole
  word, a hyphenated compound being one word, or a substring in CJK; a "$…$" spelling: an inline
  formula whose LaTeX tokens hold it, not under an accent such as \bar, nor inside a longer
  name) comes before the page's ``<dfn id="dfn-ID">`` and is not inside a
  link to an existing definition (``#dfn-ID`` on this page or another page of the site; a
  ``<dfn>`` in a table on the main path counts where the table is).  A
  term never defined on the page is "undefined"; a language without spellings for the tracked
  terms fails the target (it cannot be checked).  Target: 0.

Prints one markdown table (✓ / ✗ per target) and the terms of each page (a failing term with the
heading of its first use); --json prints the
measures instead; --check exits 1 when a page misses a target.
"""

from __future__ import annotations

import argparse
import functools
import json
import posixpath
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
WIDE = (1280, 900)
PHONE = (390, 844)
MAX_SCREENS = 12
MAX_RUN_WORDS = 250
PHONE_FIGURE_SCREENS = 2
TERMS_ALLOWED = 0

# ------------------------------------------------------------------------------ in the page

# Returns the main path as events in document order; the counting is done in Python (below), so
# the rules are written once and tested on a synthetic page.
MEASURE_JS = r"""
async () => {
  await document.fonts.ready;
  // The stylesheet's skippable blocks: which selectors, then force them all to be laid out.
  const skipped = [];
  for (const sheet of document.styleSheets) {
    let rules; try { rules = sheet.cssRules; } catch (e) { continue; }
    for (const r of rules) if (r.style && r.style.contentVisibility) skipped.push(r.selectorText);
  }
  const force = document.createElement("style");
  force.textContent = "*, *::before, *::after { content-visibility: visible !important; }";
  document.head.append(force);
  for (const d of document.querySelectorAll("details[open]")) d.removeAttribute("open");
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));

  const VISUAL = "figure, .demo, .pydemo, table, .table-wrap, math[display=block], img, svg, video, canvas";
  const SKIP = "script, style, noscript, template, nav, header, footer, pre, select, option, button, input, textarea, output, progress, .headerlink";
  const BLOCK = "p, li, dd, dt, blockquote, summary, caption, figcaption, td, th, h1, h2, h3, h4, h5, h6, label, legend, div, section, article, main, details, form, fieldset, ul, ol, dl";
  const blocks = new Map();
  const blockOf = (el) => { const b = el.closest(BLOCK); if (!blocks.has(b)) blocks.set(b, blocks.size); return blocks.get(b); };
  const hrefOf = (el) => { const a = el.closest("a[href]"); return a ? a.getAttribute("href") : null; };
  const rendered = (el) => el.getClientRects().length > 0;
  const top = (el) => el.getBoundingClientRect().top + window.scrollY;
  const events = [];
  const walk = (node, inHeading) => {
    for (const child of node.childNodes) {
      if (child.nodeType === Node.TEXT_NODE) {
        if (child.data.trim()) events.push({kind: inHeading ? "htext" : "text", text: child.data,
                                            block: blockOf(child.parentElement), href: hrefOf(child.parentElement)});
        continue;
      }
      if (child.nodeType !== Node.ELEMENT_NODE) continue;
      const el = child;
      if (el.matches(SKIP)) continue;
      if (!rendered(el) && getComputedStyle(el).display !== "contents") continue;
      if (el.matches(VISUAL) && !(el.localName === "math")) {
        if (el.getBoundingClientRect().height > 0) {
          events.push({kind: "visual", what: el.localName + (el.className && typeof el.className === "string" ? "." + el.className.split(" ")[0] : ""), top: top(el)});
          // A table that defines a term (a notation table) defines it on the main path.
          for (const d of el.querySelectorAll("dfn[id]")) if (!d.closest("details:not([open])")) events.push({kind: "dfn", id: d.id.replace(/^dfn-/, "")});
        }
        continue;
      }
      if (el.localName === "math") {
        if (el.getAttribute("display") === "block") {
          events.push({kind: "visual", what: "math", top: top(el)});
        } else {
          events.push({kind: "math", alt: el.getAttribute("alttext") || el.textContent, block: blockOf(el), href: hrefOf(el)});
        }
        continue;
      }
      if (el.localName === "code") {
        events.push({kind: "code", text: el.textContent, block: blockOf(el), href: hrefOf(el)});
        continue;
      }
      if (/^h[1-6]$/.test(el.localName)) {
        const own = [...el.childNodes].filter(n => !(n.nodeType === 1 && n.matches(".headerlink")));
        events.push({kind: "heading", level: +el.localName[1], id: el.id || null,
                     text: own.map(n => n.textContent).join("").replace(/\u200b/g, "").trim().replace(/\s+/g, " ")});
        walk(el, true);
        continue;
      }
      if (el.localName === "dfn") events.push({kind: "dfn", id: (el.id || "").replace(/^dfn-/, "")});
      if (el.localName === "details" && !el.open) {
        const summary = [...el.children].find(c => c.localName === "summary");
        if (summary) walk(summary, inHeading);
        continue;
      }
      walk(el, inHeading);
    }
  };
  const main = document.querySelector("main");
  if (main) walk(main, false);
  return {height: Math.max(document.documentElement.scrollHeight, document.body.scrollHeight),
          skipped, events};
}
"""

FIRST_FIGURE_JS = r"""
async () => {
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const f = [...document.querySelectorAll("main figure.tp-figure")]
    .find(el => !el.closest("details:not([open])") && el.getBoundingClientRect().height > 0);
  return f ? f.getBoundingClientRect().top + window.scrollY : null;
}
"""

# ------------------------------------------------------------------------------ counting

CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
CJK_RE = re.compile(f"[{CJK}]")
WORD_RE = re.compile(r"[^\W_]+(?:['’.\-][^\W_]+)*")


def words(text: str) -> float:
    """Words of prose: runs of letters or digits, plus half a word per CJK character."""
    cjk = len(CJK_RE.findall(text))
    return len(WORD_RE.findall(CJK_RE.sub(" ", text))) + cjk / 2


def _segments(events: list[dict]):
    """(kind, heading, text) pieces: prose between headings and things to look at, in order."""
    heading, buf, last_block = None, [], None
    for e in events:
        k = e["kind"]
        if k == "text":
            buf.append(e["text"] if e["block"] == last_block else " " + e["text"])
            last_block = e["block"]
        elif k in ("code", "math"):
            buf.append(" ")
            last_block = e["block"]
        elif k in ("heading", "visual"):
            if buf:
                yield "prose", heading, "".join(buf)
            buf, last_block = [], None
            if k == "heading":
                heading = e["text"]
            else:
                yield "visual", heading, e["what"]
    if buf:
        yield "prose", heading, "".join(buf)


def prose(events: list[dict]) -> dict:
    """Total prose words and the longest run between two things to look at."""
    total, runs, run = 0.0, [], {}
    for kind, heading, text in _segments(events):
        if kind == "visual":
            runs.append(run)
            run = {}
            continue
        n = words(text)
        total += n
        run[heading] = run.get(heading, 0.0) + n
    runs.append(run)
    longest = max(runs, key=lambda r: sum(r.values()))
    heading = max(longest, key=longest.get) if longest else None
    return {"prose_words": total, "longest_run": sum(longest.values()), "longest_run_heading": heading}


# A formula's LaTeX as tokens (commands, single characters; spaces and braces dropped): "$f$"
# is a use in "Y=f(X)" but not in "\bar f" (an accent makes another symbol) or "\frac".
_LATEX_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|[^\s{}]")
_ACCENTS = {"\\bar", "\\overline", "\\hat", "\\widehat", "\\tilde", "\\widetilde", "\\dot", "\\ddot",
            "\\vec", "\\check", "\\breve", "\\acute", "\\grave", "\\underline"}


def _tokens(latex: str) -> list[str]:
    return _LATEX_TOKEN.findall(latex)


def _in_formula(spelling: list[str], alt: str) -> bool:
    """Whether a formula uses the symbol: its tokens in a row, no letter or accent before them
    and no letter after them."""
    toks, n = _tokens(alt), len(spelling)
    for i in range(len(toks) - n + 1):
        if toks[i:i + n] != spelling:
            continue
        before = toks[i - 1] if i else ""
        after = toks[i + n] if i + n < len(toks) else ""
        if not (before.isalpha() or before in _ACCENTS or after.isalpha()):
            return True
    return False


def _is_formula(spelling: str) -> bool:
    return len(spelling) > 2 and spelling.startswith("$") and spelling.endswith("$")


def _text_matcher(spelling: str):
    """A whole word for letters, digits, '-' and '_' (a hyphenated compound is one word, as in
    :func:`words`; a lowercase spelling also matches with a capital first letter), a plain
    substring otherwise (CJK has no word boundaries)."""
    if re.fullmatch(r"[A-Za-z0-9_\-]+", spelling):
        first = f"[{spelling[0]}{spelling[0].upper()}]" if spelling[0].islower() else re.escape(spelling[0])
        return re.compile(rf"(?<![A-Za-z0-9_\-]){first}{re.escape(spelling[1:])}(?![A-Za-z0-9_\-])")
    return re.compile(re.escape(spelling))


def _uses(events: list[dict], spellings: tuple[str, ...]):
    """Indices (and links) of the events that use a term."""
    maths = [_tokens(s[1:-1]) for s in spellings if _is_formula(s)]
    texts = [_text_matcher(s) for s in spellings if not _is_formula(s)]
    for i, e in enumerate(events):
        if e["kind"] == "math":
            if any(_in_formula(m, e["alt"]) for m in maths):
                yield i, e.get("href")
        elif e["kind"] in ("text", "htext", "code"):
            if any(p.search(e["text"]) for p in texts):
                yield i, e.get("href")


def _link_target(page: str, href: str | None, term: str) -> tuple[str, str] | None:
    """(page path, id) a link points to when it points to the definition of ``term``."""
    if not href or "#" not in href:
        return None
    path, frag = href.split("#", 1)
    if frag != f"dfn-{term}":
        return None
    target = posixpath.normpath(posixpath.join(posixpath.dirname(page), path)) if path else page
    return target, frag


def terms(page: str, events: list[dict], tracked, lang: str, defined: dict[str, set[str]]) -> dict:
    """The tracked terms whose first use comes before their definition and is not a link to one.
    ``defined``: page path -> the term ids it defines on its main path (links are checked)."""
    with_spellings = [t for t in tracked if t.spellings.get(lang)]
    out = {"checked": len(with_spellings), "unchecked": [t.id for t in tracked if not t.spellings.get(lang)],
           "before_definition": [], "undefined": [], "linked": [], "defined_first": [],
           "first_use_heading": {}}
    dfns = {}
    for i, e in enumerate(events):
        if e["kind"] == "dfn":
            dfns.setdefault(e["id"], i)
    for t in with_spellings:
        first = next(_uses(events, t.spellings[lang]), None)
        if first is None:
            continue
        i, href = first
        out["first_use_heading"][t.id] = next((e["text"] for e in reversed(events[:i]) if e["kind"] == "heading"), None)
        target = _link_target(page, href, t.id)
        if t.id in dfns and dfns[t.id] <= i:
            out["defined_first"].append(t.id)
        elif target and t.id in defined.get(target[0], set()):
            out["linked"].append(t.id)
        elif t.id in dfns:
            out["before_definition"].append(t.id)
        else:
            out["undefined"].append(t.id)
    return out


# ------------------------------------------------------------------------------ the site

def discover(site: Path) -> list[tuple[str, str]]:
    """(lang, page path relative to the site) of every page: each directory holding pages
    (``<main id="main">`` with an ``<article>``) is a language, its pages in its navigation's
    order (the order of its index's nav; pages it does not list after them, by name)."""
    found = []
    for d in sorted(p for p in site.iterdir() if p.is_dir()):
        pages = {p.name: p.read_text(encoding="utf-8") for p in sorted(d.glob("*.html"))}
        pages = {n: h for n, h in pages.items() if '<main id="main">' in h and "<article" in h}
        if not pages:
            continue
        first = pages.get("index.html") or next(iter(pages.values()))
        nav = re.search(r'<nav class="site-nav".*?</nav>', first, re.S)
        order = re.findall(r'href="([^"#?]+\.html)"', nav.group(0)) if nav else []
        names = [n for n in order if n in pages] + [n for n in pages if n not in order]
        found += [(d.name, f"{d.name}/{n}") for n in dict.fromkeys(names)]
    return found


def start_server(site: Path):
    """A threaded 127.0.0.1 server for ``site`` (port chosen by the OS)."""
    import http.server

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def measure_page(ctx, url: str) -> dict:
    """The raw measures of one page: height and events at 1280 × 900, first figure at both sizes."""
    page = ctx.new_page()
    try:
        page.set_viewport_size({"width": WIDE[0], "height": WIDE[1]})
        page.goto(url, wait_until="load")
        raw = page.evaluate(MEASURE_JS)
        raw["figure_wide"] = page.evaluate(FIRST_FIGURE_JS)
        page.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})
        raw["figure_phone"] = page.evaluate(FIRST_FIGURE_JS)
        return raw
    finally:
        page.close()


def evaluate(lang: str, path: str, raw: dict, tracked, defined: dict[str, set[str]]) -> dict:
    """One page's measures and whether each meets its target."""
    m = {"lang": lang, "page": path, "height_px": raw["height"], "screens": raw["height"] / WIDE[1],
         "first_figure_px": raw["figure_wide"], "first_figure_phone_px": raw["figure_phone"],
         "skipped_selectors": raw["skipped"], **prose(raw["events"]),
         "terms": terms(path, raw["events"], tracked, lang, defined)}
    t = m["terms"]
    m["pass"] = {
        "screens": m["screens"] <= MAX_SCREENS,
        "first_figure": m["first_figure_px"] is not None and m["first_figure_px"] < WIDE[1],
        "first_figure_phone": m["first_figure_phone_px"] is not None
                              and m["first_figure_phone_px"] < PHONE_FIGURE_SCREENS * PHONE[1],
        "longest_run": m["longest_run"] <= MAX_RUN_WORDS,
        "terms": not t["unchecked"] and len(t["before_definition"]) + len(t["undefined"]) <= TERMS_ALLOWED,
    }
    return m


def _defined(path: str, events: list[dict]) -> set[str]:
    return {e["id"] for e in events if e["kind"] == "dfn"}


def measure_site(site: Path, tracked=None, browser=None) -> list[dict]:
    """Every page of every language of a built site, measured (see the module's docstring).
    ``browser``: a Playwright Chromium already running (the tests' session browser: a second sync
    Playwright cannot start inside the first's event loop); otherwise one is launched here."""
    if tracked is None:
        from tpsite import glossary
        tracked = glossary.tracked(glossary.load(ROOT / "content" / "i18n"))
    pages = discover(site)
    server, base = start_server(site)
    try:
        if browser is not None:
            raws = _measure_pages(browser, base, pages)
        else:
            from playwright.sync_api import sync_playwright
            with sync_playwright() as pw:
                own = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
                raws = _measure_pages(own, base, pages)
                own.close()
    finally:
        server.shutdown()
    defined = {path: _defined(path, raw["events"]) for path, raw in raws.items()}
    return [evaluate(lang, path, raws[path], tracked, defined) for lang, path in pages]


def _measure_pages(browser, base: str, pages) -> dict:
    # bypass_csp: the pages forbid inline styles, and the style that lays skipped blocks out is one
    ctx = browser.new_context(bypass_csp=True)
    try:
        return {path: measure_page(ctx, base + path) for _, path in pages}
    finally:
        ctx.close()


# ------------------------------------------------------------------------------ output

def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def _px(v) -> str:
    return "none" if v is None else f"{v:,.0f} px".replace(",", " ")


def table(results: list[dict]) -> str:
    """The markdown table: one row per page and language, ✓ / ✗ against each target."""
    head = ["page", "screens (≤ 12)", "prose words", "first figure 1280 × 900 (< 900 px)",
            "first figure 390 × 844 (< 1 688 px)", "longest prose run (≤ 250 words)",
            "terms before definition (0)", "all targets"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for m in results:
        p, t = m["pass"], m["terms"]
        bad = len(t["before_definition"]) + len(t["undefined"])
        term_cell = (f"unchecked ({len(t['unchecked'])} without spellings) {_mark(False)}" if t["unchecked"]
                     else f"{bad} / {t['checked']} {_mark(p['terms'])}")
        run = f"{m['longest_run']:.0f} ({m['longest_run_heading'] or '—'}) {_mark(p['longest_run'])}"
        cells = [m["page"].removesuffix(".html"), f"{m['screens']:.1f} {_mark(p['screens'])}",
                 f"{m['prose_words']:.0f}", f"{_px(m['first_figure_px'])} {_mark(p['first_figure'])}",
                 f"{_px(m['first_figure_phone_px'])} {_mark(p['first_figure_phone'])}", run, term_cell,
                 _mark(all(p.values()))]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def term_lines(results: list[dict]) -> str:
    out = []
    for m in results:
        t = m["terms"]
        where = t["first_use_heading"]
        parts = [f"{k.replace('_', ' ')}: " + ", ".join(f"{i} ({where[i]})" if k in ("before_definition", "undefined")
                                                        else i for i in t[k])
                 for k in ("before_definition", "undefined", "linked", "defined_first") if t[k]]
        out.append(f"- {m['page'].removesuffix('.html')}: " + ("; ".join(parts) or "no tracked term used"))
    return "\n".join(out)


def summary(results: list[dict]) -> str:
    screens = sum(m["screens"] for m in results)
    met = sum(all(m["pass"].values()) for m in results)
    return f"{len(results)} pages, {screens:.0f} screens in all; {met} meet every target"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", type=Path, help="a built site (default: build one with --runtime none)")
    ap.add_argument("--json", action="store_true", help="print the measures as JSON")
    ap.add_argument("--check", action="store_true", help="exit 1 when a page misses a target")
    args = ap.parse_args(argv)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tp-reading-") as tmp:
        site = args.site
        if site is None:
            site = Path(tmp) / "site"
            subprocess.run([sys.executable, str(ROOT / "build.py"), "--runtime", "none", "--out", str(site)],
                           check=True, stdout=subprocess.DEVNULL)
        results = measure_site(site)
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=1))
    else:
        print(table(results))
        print()
        print(term_lines(results))
        print()
        print(f"{summary(results)}; {time.monotonic() - start:.1f} s")
    return 1 if args.check and not all(all(m["pass"].values()) for m in results) else 0


if __name__ == "__main__":
    sys.exit(main())
