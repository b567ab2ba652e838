"""Rendering, measured in real Chromium on the built site (issue 25, "Rendering" 1-4).

1. every square root shows its radical, drawn by the site's own maths font;
2. no line of Chinese text starts with closing punctuation (after inline maths or anything else);
3. tables fit a 1280 px window, prose cells are not monospace, inline maths in striped rows has
   no box, and the mismatch demo's calls do not wrap into one-word lines on a phone;
4. Chinese in figures is at least 12 px and upright, curly quotes in Chinese text are full
   width (the CJK font's), and Chinese headings, captions and headers break only between words.

Everything expected is derived from the built HTML and from Unicode, never from the builder's
own lists.  The in-browser Python is not needed here: its downloads are refused, so the pages
stay as the build wrote them (which the live page reproduces at the defaults).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
SLUGS = sorted(p.stem for p in (ROOT / "content" / "zh").glob("*.md"))
WIDTHS = (320, 390, 1280)
CLOSING = "，。、；：）」』】》〉！？"
HAN = r"\u3400-\u4dbf\u4e00-\u9fff"


@pytest.fixture(scope="module")
def open_page(new_context, site_url):
    """open_page(lang, slug, width): the page loaded at that window width, its fonts ready.
    One context (and page) per width, reused."""
    pages = {}

    def get(lang: str, slug: str, width: int):
        if width not in pages:
            ctx = new_context(viewport={"width": width, "height": 900}, device_scale_factor=1)
            ctx.route("**/pyodide/**", lambda route: route.abort())     # no runtime: see the docstring
            pages[width] = ctx.new_page()
        page = pages[width]
        page.goto(f"{site_url}{lang}/{slug}.html", wait_until="load")
        page.evaluate("() => document.fonts.ready.then(() => true)")
        # the demos' folded tables open, as before they were folded: their cells are measured too
        page.evaluate("document.querySelectorAll('details.tables-fold').forEach(d => { d.open = true; })")
        return page

    return get


# ---------------------------------------------------------------- 1. square roots

ROOT_BOXES = """() => [...document.querySelectorAll('main msqrt')].map(s => {
    const box = s.getBoundingClientRect();
    let left = Infinity, right = -Infinity;
    for (const c of s.children) {
        const r = c.getBoundingClientRect();
        left = Math.min(left, r.left); right = Math.max(right, r.right);
    }
    return {radical: box.width - (right - left), em: parseFloat(getComputedStyle(s).fontSize),
            alt: s.closest('math').getAttribute('alttext')};
})"""


def platform_fonts(page, selector: str) -> list[dict]:
    """The fonts Chromium used for the text of every element matching ``selector`` (CDP)."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    doc = cdp.send("DOM.getDocument", {"depth": -1})
    ids = cdp.send("DOM.querySelectorAll", {"nodeId": doc["root"]["nodeId"], "selector": selector})["nodeIds"]
    fonts = []
    for node in ids:
        fonts += cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    cdp.detach()
    return fonts


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_square_root_shows_its_radical_from_the_sites_maths_font(open_page, built_site, lang):
    html = (built_site / lang / "transformer-layer.html").read_text(encoding="utf-8")
    expected = len(re.findall(r"<msqrt\b", html))
    assert expected >= 10                                     # the page's √E, √D, LayerNorm …
    page = open_page(lang, "transformer-layer", 1280)
    status = page.evaluate("""async () => { await document.fonts.load('16px "TP Math"', '\\u221a');
        return [...document.fonts].filter(f => f.family.includes('TP Math')).map(f => f.status); }""")
    assert status == ["loaded"]
    boxes = page.evaluate(ROOT_BOXES)
    assert len(boxes) == expected
    # the radical sign is about 0.8 em wide in STIX Math; without the glyph the box is its contents
    flat = [b["alt"] for b in boxes if b["radical"] < 0.5 * b["em"]]
    assert not flat, f"square roots drawn without a radical: {flat}"
    # The glyphs of every formula with a root come from the web font (a custom font), not from a
    # maths font of this machine's (DejaVu Math TeX Gyre is installed here): the site's font is
    # the first one Chromium has in the math font list, so the radical is drawn from it too.
    fonts = platform_fonts(page, "math:has(msqrt) mi, math:has(msqrt) mo, math:has(msqrt) mn")
    assert fonts and all(f["isCustomFont"] for f in fonts), {f["familyName"] for f in fonts}


# ---------------------------------------------------------------- 2. punctuation at line starts

LINE_STARTS = r"""([closing]) => {
    // Closing punctuation that begins a line: its box starts below and left of what is drawn just
    // before it in the same block (the previous character, or an atomic inline such as <math>).
    const BLOCK = 'p, li, td, th, dd, dt, caption, h1, h2, h3, h4, figcaption, summary, label, pre, div';
    const root = document.querySelector('main');
    const atoms = [], found = [];
    let after = 0;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT, {
        acceptNode(n) {
            if (n.nodeType === 3) return NodeFilter.FILTER_ACCEPT;
            if (['math', 'svg', 'img', 'script', 'style', 'template'].includes(n.localName)) {
                atoms.push(n);               // reached in document order, before the text after it
                return NodeFilter.FILTER_REJECT;
            }
            return NodeFilter.FILTER_SKIP;
        }});
    const range = document.createRange();
    let prev = null, n;
    while ((n = walker.nextNode())) {
        for (const a of atoms.splice(0)) {
            const r = a.getBoundingClientRect();
            if (a.localName === 'math' && r.width > 0) prev = {rect: r, text: '<math>', block: a.parentElement.closest(BLOCK)};
        }
        const block = n.parentElement.closest(BLOCK);
        const s = n.data;
        for (let i = 0; i < s.length; i++) {
            const ch = s[i];
            if (/\s/.test(ch) || ch === '\u2060' || ch === '\u200b') continue;
            const needed = closing.includes(ch) || i + 1 >= s.length || closing.includes(s[i + 1]);
            if (!needed) continue;                    // only punctuation and what precedes it
            range.setStart(n, i); range.setEnd(n, i + 1);
            const rects = range.getClientRects();
            if (!rects.length || (!rects[0].width && !rects[0].height)) continue;
            const r = rects[0];
            if (closing.includes(ch) && prev && prev.block === block) {
                if (prev.text === '<math>') after++;
                if (r.top >= prev.rect.top + r.height / 2 && r.left < prev.rect.left)
                    found.push(prev.text + '⏎' + s.slice(i, i + 12));
            }
            prev = {rect: rects[rects.length - 1], text: ch, block};
        }
    }
    return {found, after};
}"""


@pytest.mark.parametrize("width", WIDTHS)
def test_no_chinese_line_starts_with_closing_punctuation(open_page, width):
    after_maths = 0
    for slug in SLUGS:
        page = open_page("zh", slug, width)
        res = page.evaluate(LINE_STARTS, [CLOSING])
        assert not res["found"], f"zh/{slug} at {width} px: {res['found']}"
        after_maths += res["after"]
    assert after_maths > 100          # the pages do put "，" "。" "）" right after formulas


# ---------------------------------------------------------------- 3. tables

@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_table_is_wider_than_its_box_at_1280px(open_page, lang):
    for slug in SLUGS:
        page = open_page(lang, slug, 1280)
        wide = page.evaluate("""() => [...document.querySelectorAll('main .table-wrap')]
            .filter(w => w.offsetParent && w.scrollWidth > w.clientWidth)
            .map(w => [w.querySelector('table').dataset.table || w.querySelector('caption')?.textContent,
                       w.scrollWidth, w.clientWidth])""")
        assert not wide, f"{lang}/{slug}: {wide}"


MONO_OF = """() => {
    const mono = getComputedStyle(document.querySelector('main code')).fontFamily.split(',')[0];
    const cells = [...document.querySelectorAll('main table:not([data-table]):not(.grid) td, main td.prose')]
        .filter(td => td.textContent.trim() && !td.querySelector('table'));
    return {mono, cells: cells.length,
            wrong: cells.filter(td => getComputedStyle(td).fontFamily.split(',')[0] === mono)
                        .map(td => td.textContent.trim().slice(0, 40))};
}"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_prose_in_tables_is_not_monospace(open_page, lang):
    checked = 0
    for slug in SLUGS:
        res = open_page(lang, slug, 1280).evaluate(MONO_OF)
        assert not res["wrong"], f"{lang}/{slug}: monospace prose cells {res['wrong'][:5]}"
        checked += res["cells"]
    assert checked > 100


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_inline_maths_in_striped_rows_has_no_box(open_page, lang):
    checked = 0
    for slug in SLUGS:
        res = open_page(lang, slug, 1280).evaluate("""() => {
            const maths = [...document.querySelectorAll('main tbody tr:nth-child(even) math')];
            return {n: maths.length, boxed: maths.filter(m => {
                const cs = getComputedStyle(m);
                return cs.backgroundImage !== 'none' || cs.backgroundColor !== 'rgba(0, 0, 0, 0)';
            }).map(m => m.getAttribute('alttext'))};
        }""")
        assert not res["boxed"], f"{lang}/{slug}: {res['boxed'][:5]}"
        checked += res["n"]
    assert checked > 10


CALL_LINES = """() => {
    const td = document.querySelector('[data-table="mismatch-calls"] tbody tr td');
    const text = td.firstChild;
    const range = document.createRange();
    const out = [];
    let start = 0;
    for (const call of text.data.split('\\n')) {
        const tops = new Set();
        for (let i = start; i < start + call.length; i++) {
            if (text.data[i] === ' ') continue;
            range.setStart(text, i); range.setEnd(text, i + 1);
            tops.add(Math.round(range.getBoundingClientRect().top));
        }
        out.push([call, tops.size]);
        start += call.length + 1;
    }
    return out;
}"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_mismatch_calls_wrap_at_most_once_on_a_phone(open_page, lang):
    """One call a line; at 390 px a call ("#0 AllReduce [4] float32 {0,1}") takes two lines at
    most (it took 8-10 one-word lines)."""
    page = open_page(lang, "index", 390)
    calls = page.evaluate(CALL_LINES)
    assert len(calls) >= 2 and all(c.startswith("#") for c, _ in calls)
    assert all(lines <= 2 for _, lines in calls), calls


# ---------------------------------------------------------------- 4. CJK in figures and headers

FIGURE_TEXT = """([han]) => [...document.querySelectorAll('svg.fig text')]
    .filter(t => t.closest('svg.fig').getClientRects().length && new RegExp('[' + han + ']').test(t.textContent))
    .map(t => {
        const m = t.getScreenCTM();
        const cs = getComputedStyle(t);
        return {text: t.textContent.slice(0, 24), fig: t.closest('figure').dataset.figure,
                px: parseFloat(cs.fontSize) * Math.hypot(m.a, m.b), style: cs.fontStyle};
    })"""


# A phone drawing is at most a 320 px screen's column wide (tree.NARROW_W = 280), so a phone shows
# it at its natural size and its 12 px text stays 12 px: no figure is shrunk at any of the widths.
@pytest.mark.parametrize("width", WIDTHS)
def test_chinese_in_figures_is_at_least_12px_and_upright(open_page, width):
    seen, figures = 0, set()
    for slug in SLUGS:
        texts = open_page("zh", slug, width).evaluate(FIGURE_TEXT, [HAN])
        small = [(t["fig"], t["text"], round(t["px"], 1)) for t in texts if t["px"] < 11.95]
        assert not small, f"zh/{slug} at {width} px: {small[:6]}"
        slanted = [(t["fig"], t["text"]) for t in texts if t["style"] != "normal"]
        assert not slanted, f"zh/{slug}: synthetic italics on {slanted[:6]}"
        seen += len(texts)
        figures |= {t["fig"] for t in texts}
    assert seen > 100
    # the figures that were drawn at a fixed geometry and shrunk on a phone are among those measured
    assert {"ring", "mismatch", "vocab-ce", "vocab-extras", "sp-ln"} <= figures


FIGURE_SCALE = """() => [...document.querySelectorAll('svg.fig text')]
    .filter(t => t.closest('svg.fig').getClientRects().length)
    .map(t => {
        const m = t.getScreenCTM();
        return {fig: t.closest('figure').dataset.figure, scale: Math.hypot(m.a, m.b), text: t.textContent.slice(0, 24)};
    })"""


@pytest.mark.parametrize("width", WIDTHS)
def test_english_figure_text_is_drawn_at_its_natural_size(open_page, width):
    """The same bar for every language: a figure's text is not shrunk with its drawing (English
    figure text has the Chinese's sizes, so at its natural size it is at least as large)."""
    shrunk, seen = [], 0
    for slug in SLUGS:
        texts = open_page("en", slug, width).evaluate(FIGURE_SCALE)
        shrunk += [(slug, t["fig"], t["text"], round(t["scale"], 3)) for t in texts if t["scale"] < 0.995]
        seen += len(texts)
    assert seen > 100
    assert not shrunk, f"at {width} px: {shrunk[:6]}"


QUOTES = """() => {
    // every curly quote in Chinese prose (not code) that no other punctuation touches (Chromium
    // trims the spacing of adjacent CJK punctuation): its width in ems of its font size
    const out = [];
    const range = document.createRange();
    const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
    const punct = /[“”‘’，。、；：！？（）「」《》—…\\s]/;
    let n;
    while ((n = walker.nextNode())) {
        const el = n.parentElement;
        if (el.closest('code, pre, math, svg, textarea, [hidden]') || !/[\\u4e00-\\u9fff]/.test(el.textContent)) continue;
        const s = n.data;
        for (let i = 0; i < s.length; i++) {
            if (!'“”‘’'.includes(s[i]) || punct.test(s[i - 1] || ' ') || punct.test(s[i + 1] || ' ')) continue;
            range.setStart(n, i); range.setEnd(n, i + 1);
            const w = range.getBoundingClientRect().width;
            if (w) out.push({em: w / parseFloat(getComputedStyle(el).fontSize), text: s.slice(Math.max(0, i - 5), i + 6)});
        }
    }
    return out;
}"""


def test_curly_quotes_in_chinese_text_are_full_width(open_page):
    """The Latin font draws “ ” half a character wide; the CJK font's are one character wide."""
    quotes = []
    for slug in SLUGS:
        quotes += open_page("zh", slug, 1280).evaluate(QUOTES)
    assert len(quotes) > 20
    narrow = [q["text"] for q in quotes if q["em"] < 0.9]
    assert not narrow, narrow[:8]


HEADER_BREAKS = r"""([han]) => {
    // pairs that must stay on one line: two Han characters (a Chinese word is split by no break
    // but the zero-width space the build puts after 的 in the h1), and, in the h1, a Latin word
    // with the full-width bracket right after it
    const pairs = {h: new RegExp('[' + han + '][' + han + ']|[A-Za-z0-9][（【「《]'),
                   other: new RegExp('[' + han + '][' + han + ']')};
    const out = [];
    let checked = 0;
    const range = document.createRange();
    for (const el of document.querySelectorAll('main :is(h1, h2, h3, th, caption)')) {
        const pair = el.localName === 'h1' ? pairs.h : pairs.other;
        if (!el.getClientRects().length) continue;
        const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        let n;
        while ((n = walker.nextNode())) {
            if (n.parentElement.closest('math, svg, table table')) continue;
            const s = n.data;
            for (let i = 0; i + 1 < s.length; i++) {
                if (!pair.test(s[i] + s[i + 1])) continue;
                range.setStart(n, i); range.setEnd(n, i + 1);
                const a = range.getBoundingClientRect();
                range.setStart(n, i + 1); range.setEnd(n, i + 2);
                const b = range.getBoundingClientRect();
                checked++;
                if (b.top > a.top + a.height / 2) out.push(s.slice(Math.max(0, i - 6), i + 1) + '/' + s.slice(i + 1, i + 7));
            }
        }
    }
    return {out, checked};
}"""


@pytest.mark.parametrize("width", WIDTHS)
def test_chinese_headers_and_titles_break_only_between_words(open_page, width):
    checked = 0
    for slug in SLUGS:
        res = open_page("zh", slug, width).evaluate(HEADER_BREAKS, [HAN])
        assert not res["out"], f"zh/{slug} at {width} px: {res['out'][:8]}"
        checked += res["checked"]
    assert checked > 1000


WORD_BREAKS = r"""() => {
    // Table headers (th) and captions: a line may not start inside a word.  A "word" here: two
    // Latin letters or digits in a row ("Lo/gits"), or a Latin term and the full-width bracket of
    // its gloss right after it ("rank/（卡）", "P/（每行…）").  Breaks at spaces, punctuation or
    // between two Chinese words stay allowed (Chinese ones: the test above).
    const pair = /[A-Za-z0-9_][A-Za-z0-9_]|[A-Za-z0-9_)\]][（【「《]/;
    const out = [];
    let checked = 0;
    const range = document.createRange();
    for (const el of document.querySelectorAll('main :is(th, caption)')) {
        if (!el.getClientRects().length) continue;
        const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        let n;
        while ((n = walker.nextNode())) {
            if (n.parentElement.closest('math, svg, table table')) continue;
            const s = n.data;
            for (let i = 0; i + 1 < s.length; i++) {
                let j = i + 1;
                while (j < s.length && s[j] === '\u2060') j++;      // the joiner itself is invisible
                if (j >= s.length || !pair.test(s[i] + s[j])) continue;
                range.setStart(n, i); range.setEnd(n, i + 1);
                const a = range.getBoundingClientRect();
                range.setStart(n, j); range.setEnd(n, j + 1);
                const b = range.getBoundingClientRect();
                if (!a.height || !b.height) continue;
                checked++;
                if (b.top > a.top + a.height / 2) out.push(s.slice(Math.max(0, i - 8), i + 1) + '/' + s.slice(j, j + 8));
            }
        }
    }
    return {out, checked};
}"""


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("width", WIDTHS)
def test_table_headers_and_captions_keep_words_whole(open_page, lang, width):
    """Issue 25 item 4: a Latin word followed by a full-width bracket broke in headers and captions
    («rank/（卡）»); no header or caption line starts inside a word, in either language."""
    checked = 0
    for slug in SLUGS:
        res = open_page(lang, slug, width).evaluate(WORD_BREAKS)
        assert not res["out"], f"{lang}/{slug} at {width} px: {res['out'][:8]}"
        checked += res["checked"]
    assert checked > 1000


# ---------------------------------------------------------------- the operators' bars

BAR_BOXES = """() => [...document.querySelectorAll('main mover')].filter(m =>
        m.children.length === 2 && m.children[0].localName === 'mi' &&
        m.children[1].localName === 'mo').map(m => {
    const b = m.children[0].getBoundingClientRect(), o = m.children[1].getBoundingClientRect();
    return {base: [b.left, b.right, b.top], bar: [o.left, o.right, o.bottom, o.width],
            letter: m.children[0].textContent, alt: m.closest('math').getAttribute('alttext')};
})"""


@pytest.mark.parametrize("slug", ["index", "row-parallel", "sequence-parallel"])
def test_the_bar_of_f_bar_and_g_bar_sits_over_its_letter(open_page, slug):
    """f̄ and ḡ name the site's operators: the bar must be over the letter, not a dash beside
    its top-left corner (latex2mathml's stretchy non-accent over-script, as Chromium draws it)."""
    for lang in ("en", "zh"):
        bars = open_page(lang, slug, 1280).evaluate(BAR_BOXES)
        assert bars, (lang, slug)
        for b in bars:
            (bl, br, btop), (ol, orr, obottom, width) = b["base"], b["bar"]
            centre = (ol + orr) / 2
            assert bl <= centre <= br, b                        # over the letter, not beside it
            assert width >= 0.5 * (br - bl), b                  # as wide as a bar, not a dot
            assert obottom <= btop + 0.5 * (br - bl) + 2, b     # above the letter


# ---------------------------------------------------------------- 5. figure text inside its drawing

# Every drawn text's box against its drawing's viewBox, in the viewBox's units (1 px tolerance):
# text past the edge is cut off (an <svg> clips to its viewBox).  Drawings the window does not
# show (fig-wide on a phone, fig-narrow on a desktop) have no box and are measured at the other
# widths.
TEXT_OUTSIDE = """(root) => {
    const out = [];
    for (const svg of root.querySelectorAll('svg.fig')) {
        const box = svg.getBoundingClientRect(), vb = svg.viewBox.baseVal;
        if (!box.width || !vb.width) continue;
        const k = box.width / vb.width;
        for (const t of svg.querySelectorAll('text')) {
            const r = t.getBoundingClientRect();
            if (!r.width) continue;
            const over = Math.max(box.left - r.left, r.right - box.right, box.top - r.top, r.bottom - box.bottom) / k;
            if (over > 1) out.push({fig: svg.closest('[data-figure]').dataset.figure, drawing: svg.getAttribute('class'),
                                    text: t.textContent, over: Math.round(over)});
        }
    }
    return out;
}"""

# The precomputed answers of every demo on the page (the states a reader reaches by changing a
# select or a small number: src/tpsite/precompute.py), each figure built with the page's own
# tree.js into a figure box in <main> and measured like the page's own; returns what sticks out.
PRECOMPUTED_OUTSIDE = """async () => {
    const tree = await import(new URL('../static/js/tree.js', location.href).href);
    const i18n = await import(new URL('../static/js/i18n.js', location.href).href);
    await i18n.whenStrings();
    const check = MEASURE;
    const resolve = (x, data) => {
        if (x === null || typeof x !== 'object') return x;
        if (Array.isArray(x)) return x.map((v) => resolve(v, data));
        const keys = Object.keys(x);
        if (keys.length === 1 && keys[0] === '@') return resolve(data.pool[x['@']], data);
        return Object.fromEntries(keys.map((k) => [k, resolve(x[k], data)]));
    };
    const out = [], seen = new Set();
    let figures = 0;
    const host = document.createElement('div');
    document.querySelector('main').appendChild(host);
    for (const url of new Set([...document.querySelectorAll('[data-results]')].map((d) => d.dataset.results))) {
        const data = await (await fetch(url)).json();
        const stateOf = new Map(Object.entries(data.states).map(([k, i]) => [i, k]));
        for (const [index, payload] of data.results.entries()) {
            const result = resolve(payload, data);
            for (const node of Object.values((result.ok && result.result.figures) || {})) {
                const json = JSON.stringify(node);
                if (seen.has(json)) continue;
                seen.add(json);
                host.replaceChildren(tree.build(node));
                figures += 1;
                out.push(...check(host).map((o) => ({...o, state: data.section + ' ' + stateOf.get(index)})));
            }
        }
    }
    host.remove();
    return {figures, out};
}""".replace("MEASURE", TEXT_OUTSIDE)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_figure_text_stays_inside_its_drawing(open_page, lang, width):
    """Regression: the 280 px phone drawings cut off long captions by up to 100 px (qkv-layout's
    Megatron line, row-linear's sub-headings, comm-cost's bytes line, sp-layer's region titles)."""
    measured = 0
    for slug in SLUGS:
        page = open_page(lang, slug, width)
        outside = page.evaluate(f"() => ({TEXT_OUTSIDE})(document.querySelector('main'))")
        assert not outside, f"{lang}/{slug} at {width} px, as built: {outside[:6]}"
        states = page.evaluate(PRECOMPUTED_OUTSIDE)
        assert not states["out"], f"{lang}/{slug} at {width} px, precomputed states: {states['out'][:6]}"
        measured += states["figures"]
    assert measured > 50
