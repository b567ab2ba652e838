"""Deep dives (issue 27 item 2): a ``.deep`` section is folded off the main path into
``<details class="deep">`` -- its heading and one-line gist the summary, the rest inside -- and
stays in the page, its contents and its anchors; a link into it opens it (lang.js)."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as etree
from pathlib import Path

import pytest

from tpsite import markdown_ext
from tpsite.build import build
from tpsite.errors import BuildError

ROOT = Path(__file__).resolve().parents[1]
CONTENT = ROOT / "content"

PAGE = """## Main {#main}

Main text.

### Aside {#aside .deep}

The gist, with $x$ and [a link](#main).

Body one.

| a |
| --- |
| 1 |

### Next {#next}

Back on the path.

## Reference {#reference .deep}

All of it folded.

### Inside {#inside}

Folded with its parent.
"""


def _tree(html: str) -> etree.Element:
    return etree.fromstring(f"<root>{html}</root>")


def test_a_deep_section_is_folded_with_its_heading_and_gist_as_summary():
    html, toc = markdown_ext.to_html(PAGE, "#", {**markdown_ext.DEFAULT_LABELS, "deep": "DEEP"})
    root = _tree(html)
    folds = root.findall("details")
    assert [d.get("class") for d in folds] == ["deep", "deep"]
    aside, reference = folds
    summary = aside.find("summary")
    assert [el.tag for el in summary] == ["span", "h3", "span"]
    assert summary[0].text == "DEEP" and summary[1].get("id") == "aside"
    assert "class" not in summary[1].attrib, "the .deep class is the details', not the heading's"
    assert "".join(summary[2].itertext()).startswith("The gist, with")
    body = aside.find("div[@class='deep-body']")
    assert [el.tag for el in body] == ["a", "p", "div"], "the body runs to the next heading of its level"
    # nothing focusable in the summary (it is the control): the permalink opens the body
    assert not summary.findall(".//a") and body[0].get("class") == "headerlink" and body[0].get("href") == "#aside"
    # the next heading of the same level is back on the main path, outside the fold
    assert [el.tag for el in root][:4] == ["h2", "p", "details", "h3"] and root[3].get("id") == "next"
    # an h2 deep dive folds its h3 subsections too
    assert reference.find("summary/h2").get("id") == "reference"
    assert reference.find("div/h3").get("id") == "inside"
    # every heading keeps its id and its contents entry; the entries say which are deep dives
    flat = {}

    def walk(tokens):
        for tok in tokens:
            flat[tok["id"]] = tok["deep"]
            walk(tok["children"])
    walk(toc)
    assert flat == {"main": False, "aside": True, "next": False, "reference": True, "inside": False}


@pytest.mark.parametrize("text, message", [
    ("## A {#a .deep}\n\n- a list, not a gist\n", "must be followed by a one-line paragraph"),
    ("## A {#a .deep}\n", "must be followed by a one-line paragraph"),
    ("## A {#a .deep}\n\nGist.\n\n### B {#b .deep}\n\nGist.\n", "#b is inside deep dive #a"),
])
def test_a_deep_dive_that_cannot_be_folded_is_refused(text, message):
    with pytest.raises(markdown_ext.DeepError, match=message):
        markdown_ext.to_html(text, "#")


def test_the_build_names_the_file_and_line_of_a_bad_deep_dive(tmp_path):
    content = tmp_path / "content"
    shutil.copytree(CONTENT, content)
    page = content / "en" / "index.md"
    text = page.read_text(encoding="utf-8") + "\n## Broken {#broken-deep .deep}\n\n- no gist\n"
    page.write_text(text, encoding="utf-8")
    line = text.splitlines().index("## Broken {#broken-deep .deep}") + 1
    with pytest.raises(BuildError) as err:
        build(tmp_path / "site", content_dir=content, runtime="none", quiet=True)
    assert err.value.path.endswith("index.md") and err.value.line == line
    assert str(err.value).startswith(f"{err.value.path}:{line}: deep dive #broken-deep")


def _deep_ids(html: str) -> list[str]:
    return re.findall(r'<details class="deep"><summary><span class="deep-tag">[^<]*</span><h[234] id="([^"]+)"', html)


def test_the_site_folds_the_same_deep_dives_in_every_language(static_site):
    out = static_site
    langs = sorted(p.name for p in out.iterdir() if p.is_dir() and (p / "index.html").exists())
    pages = sorted(p.name for p in (out / langs[0]).glob("*.html") if p.name != "404.html")
    assert any(_deep_ids((out / langs[0] / name).read_text(encoding="utf-8")) for name in pages)
    for name in pages:
        first = _deep_ids((out / langs[0] / name).read_text(encoding="utf-8"))
        for lang in langs[1:]:
            html = (out / lang / name).read_text(encoding="utf-8")
            assert _deep_ids(html) == first, (lang, name)
            for hid in first:      # its contents entry carries the mark
                assert re.search(rf'<li class="toc-deep"><a href="#{hid}">', html), (lang, name, hid)


OPEN_JS = "id => { const el = document.getElementById(id); const d = el.closest('details.deep'); return d.open; }"


def test_a_link_into_a_deep_dive_opens_it_and_printing_opens_all(new_context, site_url, built_site):
    html = (built_site / "en" / "index.html").read_text(encoding="utf-8")
    ids = _deep_ids(html)
    assert ids, "page 1 has deep dives"
    # something inside the fold (not its heading): the first id in its body
    body = html.split(f'id="{ids[0]}"', 1)[1].split("</details>", 1)[0]
    inner = re.search(r'<div class="deep-body">.*?\bid="([^"]+)"', body, re.S).group(1)
    ctx = new_context()
    page = ctx.new_page()
    page.goto(f"{site_url}en/index.html#{inner}")
    page.wait_for_function(f"() => document.getElementById({inner!r}).closest('details.deep').open")
    top = page.evaluate(f"document.getElementById({inner!r}).getBoundingClientRect().top")
    assert 0 <= top < page.viewport_size["height"], "the target is scrolled into view"
    # another deep dive is still folded; following a link to its heading opens it
    assert page.evaluate(OPEN_JS, ids[1]) is False
    page.evaluate(f"location.hash = {ids[1]!r}")
    page.wait_for_function(f"() => document.getElementById({ids[1]!r}).closest('details.deep').open")
    closed = page.evaluate("document.querySelectorAll('details.deep:not([open])').length")
    assert closed >= 1 or len(ids) == 2
    page.evaluate("dispatchEvent(new Event('beforeprint'))")
    assert page.evaluate("document.querySelectorAll('details.deep:not([open])').length") == 0
    page.evaluate("dispatchEvent(new Event('afterprint'))")
    assert page.evaluate("document.querySelectorAll('details.deep:not([open])').length") == closed
    page.close()
    ctx.close()


# ---------------------------------------------------------------- links into folds say so (issue 27, newcomer read)

PAGES_WITH_LINKS = {
    "a.html": '<p><a href="#main">up</a> <a href="#aside">aside</a> <a href="b.html#far">far</a> '
              '<a href="b.html#near">near</a> <a class="cite" href="#ref-1">[1]</a> '
              '<a href="https://example.org/#aside">out</a></p>'
              '<h2 id="main">Main</h2><details class="deep"><summary><h3 id="aside">Aside</h3></summary>'
              '<div class="deep-body"><a class="headerlink" href="#aside">#</a><p id="inner">'
              '<a href="#inner">same fold</a></p><ol><li id="ref-1">r</li></ol></div></details>',
    "b.html": '<p id="near">near</p><details class="deep"><summary><h2 id="far">Far</h2></summary>'
              '<div class="deep-body"><details class="real-ranks"><summary>x</summary><p id="nested">n</p>'
              '</details></div></details>',
}


def test_only_links_into_another_fold_get_the_mark():
    folds = {name: markdown_ext.folded_ids(html) for name, html in PAGES_WITH_LINKS.items()}
    assert folds == {"a.html": {"aside": 0, "inner": 0, "ref-1": 0}, "b.html": {"far": 0, "nested": 0}}
    out = markdown_ext.mark_deep_links(PAGES_WITH_LINKS["a.html"], "a.html", folds, " (deep <dive>)")
    tag = '<span class="deep-link-tag"> (deep &lt;dive&gt;)</span>'
    marked = re.findall(r'<a [^>]*>([^<]*)' + re.escape(tag) + "</a>", out)
    assert marked == ["aside", "far"]      # not: the open path, another page's main path, a citation,
    assert out.count(tag) == 2             # another site, the permalink, a link inside its own fold


def _links_into_folds(site: Path, lang: str) -> tuple[list, list]:
    """(links whose target is inside a details.deep other than their own, links carrying the
    mark), each as (page, href), from the html_tree of every page of the language."""
    from html_tree import parse
    docs = {p.name: parse(p.read_text(encoding="utf-8")) for p in sorted((site / lang).glob("*.html"))}

    def fold_of(node):
        while node is not None and not (node.tag == "details" and "deep" in node.classes()):
            node = node.parent
        return node

    where = {(name, n.attrs["id"]): fold_of(n) for name, doc in docs.items() for n in doc.iter() if "id" in n.attrs}
    into, marked = [], []
    for name, doc in docs.items():
        for a in doc.find("main").iter("a"):
            href = a.attrs.get("href", "")
            page, _, target = href.rpartition("#")
            fold = where.get((page or name, target))
            if fold is not None and not {"cite", "headerlink"} & set(a.classes()) and fold is not fold_of(a):
                into.append((name, href))
            if a.find("span", class_="deep-link-tag") is not None:
                marked.append((name, href))
    return into, marked


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_link_into_a_deep_dive_says_so_on_the_built_site(tmp_path, lang):
    out = tmp_path / "site"
    build(out, content_dir=CONTENT, runtime="none", quiet=True)
    into, marked = _links_into_folds(out, lang)
    assert len(into) >= 10 and any("#" in h and not h.startswith("#") for _, h in into)   # cross-page ones too
    assert marked == into
    mark = {"en": " (deep dive)", "zh": "（深入解析）"}[lang]
    assert (out / lang / "row-parallel.html").read_text(encoding="utf-8").count(
        f'<span class="deep-link-tag">{mark}</span></a>') == sum(1 for n, _ in into if n == "row-parallel.html")
