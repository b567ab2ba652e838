"""Publishing, checked in real Chromium: the link-preview cascade against Chromium's own computed
styles, and the math-font subset against the full font (formulas render pixel for pixel the same)."""

from __future__ import annotations

import re

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from site_fixture import ROOT

pytestmark = pytest.mark.browser

SVG_NS = "{http://www.w3.org/2000/svg}"
SHAPES = {"rect", "line", "path", "polygon", "circle", "text", "tspan"}
INHERITED = {"fill": "#000000", "stroke": "none", "fill-opacity": "1", "stroke-opacity": "1",
             "stroke-width": "1", "font-size": "16px", "font-weight": "400"}
FULL_FONT = ROOT / "templates" / "fonts" / "STIXMath-Regular.otf"


@pytest.fixture(scope="module")
def static_url(static_site, serve_dir) -> str:
    """A --runtime none build (conftest.py's): the figures and formulas stay as the build wrote them."""
    return serve_dir(static_site)


def rgba(value: str) -> tuple:
    """'#rrggbb', '#rrggbbaa', 'rgb(r, g, b)', 'rgba(…)' or 'none' as comparable numbers."""
    value = value.strip()
    if value in ("none", "transparent", "rgba(0, 0, 0, 0)"):
        return ("none",)
    if value.startswith("#"):
        h = value[1:]
        a = int(h[6:8], 16) / 255 if len(h) == 8 else 1.0
        return (int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16), round(a, 2))
    if value.startswith("color(srgb"):                     # Chromium's form of a color-mix() result
        parts = value[len("color(srgb"):-1].replace("/", " ").split()
        nums = [float(x) * 255 for x in parts[:3]] + [float(parts[3]) if len(parts) > 3 else 1.0]
        return (round(nums[0]), round(nums[1]), round(nums[2]), round(nums[3], 2))
    nums = [float(x) for x in value[value.index("(") + 1:-1].replace("/", ",").split(",")]
    return (round(nums[0]), round(nums[1]), round(nums[2]), round(nums[3] if len(nums) > 3 else 1.0, 2))


def number(value: str) -> float:
    value = value.strip()
    return {"bold": 700.0, "normal": 400.0}.get(value, None) or float(value.rstrip("px"))


def ours(svg: str, lang: str) -> list[tuple[str, dict]]:
    """Tag and effective style of every shape of the figure drawing in the preview SVG."""
    root = ET.fromstring(svg)
    drawing = root.find(f"{SVG_NS}svg")
    out = []

    def walk(el, inherited):
        tag = el.tag.replace(SVG_NS, "")
        here = {k: el.get(k, inherited[k]) for k in INHERITED}
        if tag in SHAPES:
            out.append((tag, {**here, "opacity": el.get("opacity", "1")}))
        for child in el:
            if child.tag.replace(SVG_NS, "") not in ("title", "desc"):
                walk(child, here)
    walk(drawing, INHERITED)
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_preview_styles_equal_chromiums_computed_styles(static_url, new_context, lang):
    """Every shape of the preview image gets the fill, stroke, opacities and font Chromium computes
    for the same shape on the page from style.css (light scheme): the Python cascade is the browser's."""
    from tpmath import views
    from tpsite import content as content_mod, preview, render

    content = content_mod.load_content(ROOT / "content")
    t = render.Translator(content.strings[lang], lang, "test")
    # the page's opening values ({{demo mlp stage=…}}): the figure the page shows and the preview draws
    md = (ROOT / "content" / lang / "index.md").read_text(encoding="utf-8")
    start = re.search(r"^\{\{demo mlp((?: [a-z_-]+=\S+)*)\}\}$", md, re.M).group(1).split()
    figure = views.render("mlp", dict(kv.split("=", 1) for kv in start) or None, lang)["figures"]["mlp"]
    css = (ROOT / "templates" / "static" / "style.css").read_text(encoding="utf-8")
    mine = ours(preview.standalone_svg(figure, t.cell, css, "x"), lang)

    page = new_context(viewport={"width": 1280, "height": 900}, color_scheme="light").new_page()
    page.goto(static_url + f"{lang}/index.html")
    theirs = page.evaluate("""(props) => {
        const svg = document.querySelector('figure[data-figure="mlp"] svg.fig-wide, figure[data-figure="mlp"] svg.fig-one');
        svg.scrollIntoView();
        const out = [];
        for (const el of svg.querySelectorAll('rect, line, path, polygon, circle, text, tspan')) {
            const cs = getComputedStyle(el);
            out.push([el.tagName, Object.fromEntries(props.map(p => [p, cs.getPropertyValue(p)]))]);
        }
        return out;
    }""", list(INHERITED) + ["opacity"])
    assert len(mine) == len(theirs) > 50
    for i, ((tag, a), (ttag, b)) in enumerate(zip(mine, theirs)):
        assert tag == ttag, i
        for prop in ("fill", "stroke"):     # 8-bit channels: Chromium keeps color-mix() in floats
            ca, cb = rgba(a[prop]), rgba(b[prop])
            same = ca == cb if "none" in (ca[0], cb[0]) else all(abs(x - y) <= 1 for x, y in zip(ca, cb))
            assert same, (i, tag, prop, a[prop], b[prop])
        for prop in ("fill-opacity", "stroke-opacity", "opacity", "stroke-width") + (
                ("font-size", "font-weight") if tag in ("text", "tspan") else ()):
            assert number(a[prop]) == pytest.approx(number(b[prop]), abs=0.01), (i, tag, prop, a[prop], b[prop])


def _settled_shot(locator, tries: int = 4) -> bytes:
    """A formula's screenshot once two in a row agree: under load the page around it may still be
    laying out (skipped blocks coming into view) while the first one is taken."""
    shot = locator.screenshot(animations="disabled")
    for _ in range(tries):
        again = locator.screenshot(animations="disabled")
        if again == shot:
            break
        shot = again
    return shot


def test_formulas_render_the_same_with_the_subset_as_with_the_full_font(static_url, new_context):
    """Screenshots of formulas with the subset WOFF2 and with the full 477 KB font are identical."""
    import io

    from fontTools.ttLib import TTFont

    font = TTFont(FULL_FONT)                 # the whole font, only re-wrapped as WOFF2
    font.flavor = "woff2"
    buf = io.BytesIO()
    font.save(buf)
    full = buf.getvalue()
    shots = {}
    for variant in ("subset", "full"):
        ctx = new_context(viewport={"width": 900, "height": 900}, device_scale_factor=1, color_scheme="light")
        fetched = []
        if variant == "full":
            ctx.route("**/static/fonts/tp-math.woff2",
                      lambda route: (fetched.append(route.request.url),
                                     route.fulfill(status=200, body=full, content_type="font/woff2")))
        else:
            ctx.on("requestfinished", lambda req: fetched.append(req.url) if req.url.endswith(".woff2") else None)
        page = ctx.new_page()
        images = []
        for rel in ("en/index.html", "zh/row-parallel.html"):
            page.goto(static_url + rel)
            status = page.evaluate("""async () => { await document.fonts.load('16px "TP Math"', '∑');
                                       await document.fonts.ready;
                                       return [...document.fonts].filter(f => f.family.includes('TP Math'))
                                              .map(f => f.status); }""")
            assert status == ["loaded"], (variant, status)
            formulas = page.locator(".math-display, p math").filter(visible=True)
            n = formulas.count()
            assert n > 20
            for i in range(0, n, max(1, n // 30)):          # about 30 formulas per page
                images.append(_settled_shot(formulas.nth(i)))
        assert fetched, f"{variant}: the page did not fetch the web font (a local math font took over?)"
        shots[variant] = images
    assert len(shots["subset"]) == len(shots["full"])
    different = [i for i, (a, b) in enumerate(zip(shots["subset"], shots["full"])) if a != b]
    assert not different, f"formulas {different} render differently with the subset"


@pytest.mark.parametrize("locale, remembered, query, lands", [
    ("zh-CN", None, "", "zh/index.html"),           # navigator.languages zh-* -> Chinese
    ("en-US", None, "", "en/index.html"),
    ("fr-FR", None, "", "index.html"),              # no language of ours: the choice stays
    ("en-US", "zh", "", "zh/index.html"),           # a remembered choice beats the browser's
    ("zh-CN", None, "?choose", "index.html"),       # the reader asked to choose
])
def test_language_choice_sends_the_reader_on(static_url, new_context, locale, remembered, query, lands):
    ctx = new_context(locale=locale)
    page = ctx.new_page()
    if remembered:
        page.goto(static_url + "index.html?choose")
        page.evaluate("(v) => localStorage.setItem('tp-lang', v)", remembered)
    page.goto(static_url + "index.html" + query + "#mlp")
    page.wait_for_load_state("load")
    url = page.url.split("#")[0].split("?")[0]
    assert url == static_url + lands, (locale, remembered, query, page.url)
    if lands != "index.html":
        assert page.url.endswith("#mlp")                          # the reader's place goes along
    else:
        assert page.locator("a.lang-choose").count() == 2
        # a click remembers the choice
        page.locator('a.lang-choose[data-lang="zh"]').click()
        page.wait_for_url("**/zh/index.html")
        assert page.evaluate("() => localStorage.getItem('tp-lang')") == "zh"
