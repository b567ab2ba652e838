"""The site as a path (issue 27 item 7): each language's contents page (``<lang>/contents.html``)
lists every page in reading order (front matter ``order``), numbered, with its title, its one
sentence (front matter ``summary``) and, as its thumbnail, the figure the page opens with: the same
element tree, so the same markup as on the page.  Every page's header and the language choice link
to it.  Expected values come from the Markdown files' front matter and the pages themselves, not
from the builder."""

from __future__ import annotations

import html
import re
import tomllib
from pathlib import Path

import pytest

from tpsite.build import CONTENTS, build

ROOT = Path(__file__).resolve().parents[1]
CONTENT = ROOT / "content"
LANGS = sorted(p.name for p in CONTENT.iterdir() if p.is_dir() and (p / "index.md").is_file())
FIGURE_RE = re.compile(r'<figure class="tp-figure"[^>]*>.*?</figure>', re.S)


def front_matter(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    return tomllib.loads(text.split("+++")[1])


def reading_order(lang: str) -> list[tuple[str, dict]]:
    """(file name, front matter) of the language's pages, by front matter ``order``."""
    pages = [(p.stem + ".html", front_matter(p)) for p in (CONTENT / lang).glob("*.md")]
    return sorted(pages, key=lambda item: (item[1]["order"], item[0]))


def entries(doc: str) -> list[dict]:
    """The contents page's entries: link, number, title, sentence, thumbnail markup."""
    found = []
    for li in re.findall(r'<li class="path-entry">(.*?)</li>', doc, re.S):
        link = re.search(r'<a class="path-link" href="([^"]+)"><span class="path-num">([^<]*)</span> ([^<]*)</a>', li)
        summary = re.search(r'<p class="path-summary">([^<]*)</p>', li)
        thumb = re.search(r'<div class="path-thumb" aria-hidden="true">(.*?)</div>\s*$', li, re.S)
        found.append({"href": link[1], "number": link[2], "title": html.unescape(link[3]),
                      "summary": html.unescape(summary[1]), "thumb": thumb[1].strip() if thumb else None})
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("contents") / "site"
    build(out, content_dir=CONTENT, runtime="none", quiet=True)
    return out


@pytest.mark.parametrize("lang", LANGS)
def test_contents_lists_every_page_in_reading_order(site, lang):
    doc = (site / lang / CONTENTS).read_text(encoding="utf-8")
    got = entries(doc)
    want = reading_order(lang)
    assert [e["href"] for e in got] == [name for name, _ in want]
    assert [e["number"] for e in got] == [f"{n}." for n in range(1, len(want) + 1)]
    assert [e["title"] for e in got] == [meta["title"] for _, meta in want]
    assert [e["summary"] for e in got] == [meta["summary"] for _, meta in want]
    for _, meta in want:     # one sentence: a single full stop, at the end
        ends = meta["summary"].count(".") if lang == "en" else meta["summary"].count("。")
        assert ends <= 1 and not meta["summary"].rstrip("。.").count("。"), meta["summary"]


@pytest.mark.parametrize("lang", LANGS)
def test_each_thumbnail_is_the_figure_its_page_opens_with(site, lang):
    for e in entries((site / lang / CONTENTS).read_text(encoding="utf-8")):
        page = (site / lang / e["href"]).read_text(encoding="utf-8")
        first = FIGURE_RE.search(page)
        assert first and e["thumb"] == first.group(0), f"{lang}/{e['href']}: the thumbnail is not its first figure"
        assert "<script" not in e["thumb"] and "http" not in e["thumb"].replace("http://www.w3.org", "")


@pytest.mark.parametrize("lang", LANGS)
def test_every_page_and_the_language_choice_link_to_the_contents(site, lang):
    for name, _ in reading_order(lang) + [(CONTENTS, {})]:
        doc = (site / lang / name).read_text(encoding="utf-8")
        nav = re.search(r'<nav class="site-nav".*?</nav>', doc, re.S).group(0)
        hrefs = re.findall(r'href="([^"]+)"', nav)
        assert hrefs[0] == CONTENTS, (lang, name, hrefs)
        assert all((site / lang / h).is_file() for h in hrefs), (lang, name, hrefs)
        current = re.findall(r'href="([^"]+)" aria-current="page"', nav)
        assert current == [name], (lang, name, current)
    choice = (site / "index.html").read_text(encoding="utf-8")
    assert f'href="{lang}/{CONTENTS}"' in choice
    contents = (site / lang / CONTENTS).read_text(encoding="utf-8")
    for other in LANGS:     # the language switch and hreflang alternates: the other contents page
        assert f'hreflang="{"zh-CN" if other == "zh" else other}" href="../{other}/{CONTENTS}"' in contents


@pytest.mark.browser
@pytest.mark.parametrize("width,scheme", [(320, "dark"), (1280, "light")])
def test_contents_fits_and_a_thumbnail_opens_its_page(new_context, site_url, width, scheme):
    """No sideways scroll at 320 px; the card (its thumbnail included) is the link's target area;
    the thumbnail shows the wide drawing, in the dark scheme too, with no script on the page."""
    ctx = new_context(viewport={"width": width, "height": 800}, color_scheme=scheme, java_script_enabled=False)
    page = ctx.new_page()
    page.goto(f"{site_url}zh/{CONTENTS}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    shown = page.eval_on_selector_all(".path-thumb svg", "els => els.map(e => getComputedStyle(e).display)")
    assert shown.count("block") == len(reading_order("zh"))
    thumb = page.locator(".path-entry").nth(1).locator(".path-thumb")
    thumb.scroll_into_view_if_needed()
    box = thumb.bounding_box()
    assert box and box["height"] > 40
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_url(f"**/zh/{reading_order('zh')[1][0]}")
    ctx.close()
