"""Markdown -> HTML with the site's extensions and shortcodes.

Python-Markdown runs with toc (heading ids + permalinks), tables, fenced_code,
attr_list, md_in_html and codehilite (pygments, CSS classes only: no inline styles, so
the page's Content-Security-Policy can forbid them).

Shortcodes stand alone on a line, separated from text by blank lines::

    {{demo mlp}}             the interactive block of view section "mlp"
    {{demo collectives collective=all-reduce}}
                             the same, opening with other values than the section's defaults
                             (control=value pairs: the page's own starting point for its text)
    {{demo attention tables=folded}}
                             the same, its tables folded in a <details> under its figure (the
                             figure carries the idea; the numbers, still live, one click away)
    {{pydemo row_parallel}}  content/demos/row_parallel.py, highlighted, output, Run button

They are replaced by tokens before Markdown runs and by the rendered blocks after.

A definition of a tracked term (content/i18n/glossary.toml ``[[term.track]]``) is marked
``[text]{dfn=ID}``: ``<dfn id="dfn-ID">text</dfn>``, the place a first use can link to
(``[AllReduce](#dfn-allreduce)``, or ``index.html#dfn-allreduce`` from another page).
A section whose heading has the class ``deep`` (``### Ring steps {#ring .deep}``) is a deep dive:
the heading, the paragraph after it (its one-line gist) and everything up to the next heading of
its level or higher are folded into ``<details class="deep">``, the heading and gist being the
summary -- off the page's main path, still in the page, its contents and its anchors.
Tables get ``<th scope="col">``, a ``<caption>`` from a following paragraph that starts
with ``: `` (Pandoc's syntax), and a scrolling wrapper for narrow screens.
"""

from __future__ import annotations

import html.parser as html_parser
from html import escape as _escape
import re
import xml.etree.ElementTree as etree
from dataclasses import dataclass

import markdown
from markdown.extensions import Extension
from markdown.inlinepatterns import InlineProcessor
from markdown.treeprocessors import Treeprocessor

from .errors import BuildError
from .mathml import CLOSING, _blocks

SHORTCODE_RE = re.compile(r"^\{\{\s*(demo|figure|pydemo)\s+([A-Za-z0-9_-]+)((?:\s+[A-Za-z0-9_-]+=[^\s{}=]+)*)\s*\}\}\s*$")
LOOSE_SHORTCODE_RE = re.compile(r"\{\{\s*(demo|figure|pydemo)\b")
TOKEN = "MXTPSHORT{:04d}Z"
TOKEN_RE = re.compile(r"MXTPSHORT(\d{4})Z")


@dataclass(frozen=True)
class Shortcode:
    kind: str       # "demo" | "pydemo" ("figure": refused by the build, see build.compute_blocks)
    name: str
    line: int
    controls: tuple[tuple[str, str], ...] = ()   # a demo's starting values (control=value), as written
    fold: bool = False                            # a demo's tables folded under its figure (tables=folded)


# The one shortcode option that is not a control: how a demo shows its tables.
FOLD_OPTION, FOLD_VALUE = "tables", "folded"


def _fold_option(kind: str, pairs: list, path, lineno) -> tuple[bool, list]:
    """Split ``tables=folded`` off a shortcode's pairs: (folded?, the control pairs)."""
    fold = [v for k, v in pairs if k == FOLD_OPTION]
    if not fold:
        return False, pairs
    if kind != "demo" or fold != [FOLD_VALUE]:
        raise BuildError(f"{FOLD_OPTION}= takes one value, {FOLD_VALUE}, on a {{{{demo}}}} line", path, lineno)
    return True, [(k, v) for k, v in pairs if k != FOLD_OPTION]


def extract_shortcodes(text: str, path, first_line: int = 1) -> tuple[str, list[Shortcode]]:
    """Replace shortcode lines (outside fenced code) by one-line tokens."""
    if TOKEN_RE.search(text):
        raise BuildError("text contains the reserved placeholder 'MXTPSHORT…Z'", path)
    found: list[Shortcode] = []
    out: list[str] = []
    for is_code, chunk, start in _blocks(text):
        if is_code:
            out.append(chunk)
            continue
        for offset, line in enumerate(chunk.splitlines(keepends=True)):
            lineno = first_line + start - 1 + offset
            m = SHORTCODE_RE.match(line)
            if m:
                fold, pairs = _fold_option(m.group(1), [tuple(p.split("=", 1)) for p in m.group(3).split()],
                                           path, lineno)
                controls = tuple(pairs)
                if controls and m.group(1) != "demo":
                    raise BuildError("only {{demo NAME control=value …}} takes values", path, lineno)
                names = [k for k, _ in controls]
                if len(set(names)) != len(names):
                    raise BuildError(f"a control is given twice: {' '.join(names)}", path, lineno)
                found.append(Shortcode(m.group(1), m.group(2), lineno, controls, fold))
                out.append(TOKEN.format(len(found) - 1) + ("\n" if line.endswith("\n") else ""))
            elif LOOSE_SHORTCODE_RE.search(line):
                raise BuildError("a shortcode must stand alone on its line: "
                                 "{{demo NAME}}, {{demo NAME control=value}} or {{pydemo NAME}}",
                                 path, lineno)
            else:
                out.append(line)
    return "".join(out), found


def restore_shortcodes(html: str, blocks: list[str], shortcodes: list[Shortcode], path) -> str:
    """Swap ``<p>TOKEN</p>`` for the rendered blocks; a token inside text is an error."""
    html = re.sub(r"<p>\s*MXTPSHORT(\d{4})Z\s*</p>", lambda m: blocks[int(m.group(1))], html)
    m = TOKEN_RE.search(html)
    if m:
        sc = shortcodes[int(m.group(1))]
        raise BuildError(f"{{{{{sc.kind} {sc.name}}}}} must be separated from text by blank lines",
                         path, sc.line)
    return html


class _TableProcessor(Treeprocessor):
    """Semantic tables: header scope, caption, horizontal-scroll wrapper."""

    def run(self, root: etree.Element) -> None:
        n = 0
        for parent in list(root.iter()):
            children = list(parent)
            for idx, child in enumerate(children):
                if child.tag != "table" or child.get("data-table"):
                    continue
                for th in child.iter("th"):
                    th.set("scope", "col")
                nxt = children[idx + 1] if idx + 1 < len(children) else None
                if nxt is not None and nxt.tag == "p" and (nxt.text or "").startswith(": "):
                    caption = etree.Element("caption")
                    caption.text = nxt.text[2:]
                    for sub in list(nxt):
                        caption.append(sub)
                    child.insert(0, caption)
                    parent.remove(nxt)
                # A wide table scrolls inside its wrapper: keyboard users must be able to focus
                # and scroll it (WCAG 2.1.1), so the wrapper is a named, focusable region.
                n += 1
                wrap = etree.Element("div", {"class": "table-wrap", "role": "region", "tabindex": "0"})
                cap = child.find("caption")
                if cap is not None:
                    cap.set("id", f"table-caption-{n}")
                    wrap.set("aria-labelledby", f"table-caption-{n}")
                pos = list(parent).index(child)
                parent.remove(child)
                wrap.append(child)
                parent.insert(pos, wrap)


# Where a long inline code name may break: after "/", before "_" or "." inside a name, and at a
# camelCase step ("tensor_parallel/<wbr>cross<wbr>_entropy<wbr>.py").  Without these a path longer
# than the rest of the line is cut by overflow-wrap at any character -- often right before the
# "，" or "）" that follows it, which then starts the next line.
CODE_BREAK_RE = re.compile(r"(?<=/)(?=.)|(?<=[A-Za-z0-9])(?=[_.][A-Za-z0-9])|(?<=[a-z])(?=[A-Z])")
CODE_BREAK_MIN = 12        # shorter names always fit a line


# A citation link ("[6]") is an atomic inline like a formula: Chromium may break between it and
# the "。" or "）" after it, which then starts a line.  The link and the closing punctuation right
# after it are one no-wrap span (style.css .nobr), as mathml.restore does for formulas.
_CITE_GLUE_RE = re.compile(r'(<a\b[^>]*\bclass="[^"]*\bcite\b[^"]*"[^>]*>[^<]*</a>)([%s]+)' % re.escape(CLOSING))


def cite_glue(html: str) -> str:
    """Each citation link and the closing punctuation that follows it in one no-wrap span."""
    return _CITE_GLUE_RE.sub(r'<span class="nobr">\1\2</span>', html)


_PRE_RE = re.compile(r"(<pre\b.*?</pre>)", re.S)
_CODE_RE = re.compile(r"<code>([^<]{%d,})</code>" % CODE_BREAK_MIN)


def code_breaks(html: str) -> str:
    """``<wbr>`` at the break points of long inline ``<code>``, Markdown's and the raw HTML's
    (the reference lists); code blocks (``<pre>``) are left as they are."""
    def breaks(m: re.Match) -> str:
        return "<code>" + CODE_BREAK_RE.sub("<wbr>", m.group(1)) + "</code>"

    parts = _PRE_RE.split(html)
    return "".join(part if i % 2 else _CODE_RE.sub(breaks, part) for i, part in enumerate(parts))


MATH_TOKEN_RE = re.compile(r"MXTPMATH\d{5}Z")     # mathml.TOKEN: a formula, restored after Markdown
CITE_RE = re.compile(r"^#ref-(\d+)$")


class _LinkProcessor(Treeprocessor):
    """Names in the page language for the small links a reader aims at (WCAG 2.5.8, 4.1.2): a
    heading's permalink ("#") is "Link to this section: HEADING", a citation ("[6]", to #ref-6)
    "Reference 6"; style.css gives both a 24 × 24 px target."""

    def __init__(self, md, labels: dict[str, str]):
        super().__init__(md)
        self.labels = labels

    def run(self, root: etree.Element) -> None:
        for h in root.iter():
            if h.tag not in ("h2", "h3", "h4"):
                continue
            for a in h.iter("a"):
                if "headerlink" in (a.get("class") or "").split():
                    full, own = "".join(h.itertext()), "".join(a.itertext())
                    heading = full[: len(full) - len(own)] if full.endswith(own) else full
                    heading = " ".join(MATH_TOKEN_RE.sub("", heading).split())
                    a.set("aria-label", self.labels["permalink"].replace("{heading}", heading))
        for a in root.iter("a"):
            # (the link text "[6]" is still Markdown's stash of escaped brackets here: match the target)
            m = CITE_RE.match(a.get("href") or "")
            if m and len(a) == 0:
                a.set("class", ((a.get("class") or "") + " cite").strip())
                a.set("aria-label", self.labels["cite"].replace("{n}", m.group(1)))


DFN_PATTERN = r"\[([^\]\n]+)\]\{dfn=([a-z0-9][a-z0-9-]*)\}"      # glossary.TRACK_ID
DFN_ID_RE = re.compile(r'<dfn id="dfn-([a-z0-9-]+)"')


class _DfnProcessor(InlineProcessor):
    """``[text]{dfn=ID}`` -> ``<dfn id="dfn-ID">text</dfn>`` (the text keeps its inline Markdown)."""

    def handleMatch(self, m, data):
        el = etree.Element("dfn", {"id": f"dfn-{m.group(2)}"})
        el.text = m.group(1)
        return el, m.start(0), m.end(0)


def dfn_ids(html: str) -> list[str]:
    """The tracked terms a page's HTML defines (``<dfn id="dfn-ID">``), in order."""
    return DFN_ID_RE.findall(html)


HEADINGS = ("h2", "h3", "h4")


def _is_deep(el: etree.Element) -> bool:
    return el.tag in HEADINGS and "deep" in (el.get("class") or "").split()


class DeepError(BuildError):
    """A deep dive that cannot be folded; ``heading_id`` names it (the build finds its line)."""

    def __init__(self, message: str, heading_id: str):
        super().__init__(message)
        self.heading_id = heading_id


class _DeepProcessor(Treeprocessor):
    """Fold each ``.deep`` section (see the module's docstring) into a details element whose
    summary is its heading (a summary may hold one heading) and its gist."""

    def __init__(self, md, labels: dict[str, str]):
        super().__init__(md)
        self.labels = labels

    def run(self, root: etree.Element) -> None:
        self.md.tp_deep = []
        kids = list(root)
        for i, h in enumerate(kids):
            if not _is_deep(h):
                continue
            hid = h.get("id") or ""
            gist = kids[i + 1] if i + 1 < len(kids) else None
            if gist is None or gist.tag != "p":
                raise DeepError(f"deep dive #{hid}: its heading must be followed by a one-line paragraph "
                                "(the gist, shown while it is folded)", hid)
            end = i + 2
            while end < len(kids) and not (kids[end].tag in HEADINGS and kids[end].tag <= h.tag):
                if _is_deep(kids[end]):
                    raise DeepError(f"deep dive #{kids[end].get('id')} is inside deep dive #{hid}", hid)
                end += 1
            self.md.tp_deep.append(hid)
            rest = [c for c in h.get("class").split() if c != "deep"]
            if rest:
                h.set("class", " ".join(rest))
            else:
                del h.attrib["class"]
            details = etree.Element("details", {"class": "deep"})
            summary = etree.SubElement(details, "summary")
            tag = etree.SubElement(summary, "span", {"class": "deep-tag"})
            tag.text = self.labels["deep"]
            summary.append(h)
            line = etree.SubElement(summary, "span", {"class": "deep-gist"})
            line.text, line.tail = gist.text, None
            for sub in list(gist):
                line.append(sub)
            # A summary is itself the control: nothing in it may be focusable (WCAG 4.1.2, axe
            # nested-interactive).  The permalink moves into the body (style.css puts it at the
            # summary's end, shown while open); a link in the gist stays as its text.
            body = etree.SubElement(details, "div", {"class": "deep-body"})
            for a in [a for a in h if a.tag == "a" and "headerlink" in (a.get("class") or "").split()]:
                h.remove(a)         # (toc appends it to the heading, last, with no tail)
                body.append(a)
            for a in list(line.iter("a")):
                a.tag = "span"
                a.attrib.clear()
            for el in kids[i + 2:end]:
                body.append(el)
            pos = list(root).index(h)
            for el in kids[i:end]:      # (ElementTree's append does not take them out of root)
                root.remove(el)
            root.insert(pos, details)


class _SiteExtension(Extension):
    def __init__(self, labels: dict[str, str]):
        super().__init__()
        self.labels = labels

    def extendMarkdown(self, md: markdown.Markdown) -> None:
        md.inlinePatterns.register(_DfnProcessor(DFN_PATTERN, md), "tp_dfn", 175)   # before links (160, 170)
        md.treeprocessors.register(_TableProcessor(md), "tp_tables", 4)
        md.treeprocessors.register(_LinkProcessor(md, self.labels), "tp_links", 3)   # after toc's permalinks
        md.treeprocessors.register(_DeepProcessor(md, self.labels), "tp_deep", 2)   # after the links: ids are final


DEFAULT_LABELS = {"permalink": "{heading}", "cite": "[{n}]", "deep": "Deep dive"}


def make_markdown(permalink_title: str, labels: dict[str, str] | None = None) -> markdown.Markdown:
    """A fresh Markdown converter (one per page: the toc state is per document)."""
    return markdown.Markdown(
        extensions=["toc", "tables", "fenced_code", "attr_list", "md_in_html", "codehilite",
                    _SiteExtension(labels or DEFAULT_LABELS)],
        extension_configs={
            "toc": {"permalink": "#", "permalink_title": permalink_title, "toc_depth": "2-3",
                    "permalink_class": "headerlink"},
            "codehilite": {"css_class": "highlight", "noclasses": False, "guess_lang": False},
        },
        output_format="html",
    )


def to_html(text: str, permalink_title: str, labels: dict[str, str] | None = None) -> tuple[str, list[dict]]:
    """Convert Markdown; return the HTML and the toc tokens (level, id, html, children, and
    ``deep``: whether the heading opens a deep dive).  ``labels``: the names of permalinks
    ({heading}) and citations ({n}), see _LinkProcessor, and the deep-dive tag (deep)."""
    md = make_markdown(permalink_title, labels)
    html = cite_glue(code_breaks(md.convert(text)))
    deep = set(md.tp_deep)

    def mark(tokens):
        for tok in tokens:
            tok["deep"] = tok["id"] in deep
            mark(tok["children"])
    mark(md.toc_tokens)
    return html, md.toc_tokens


def heading_ids(tokens: list[dict]) -> list[str]:
    """All heading ids of a toc, in document order."""
    out: list[str] = []
    for tok in tokens:
        out.append(tok["id"])
        out.extend(heading_ids(tok["children"]))
    return out


# ---------------------------------------------------------------- links into folds

class _Folds(html_parser.HTMLParser):
    """One pass over a page's HTML: which fold (``details.deep``, numbered in order) holds each id,
    and every link with its start tag's offset, its href, its classes and the fold it sits in."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.ids: dict[str, int] = {}
        self.links: list[tuple[int, str, list[str], int | None]] = []
        self._starts = [0] + [m.end() for m in re.finditer("\n", html)]
        self._details: list[int | None] = []      # open details: its fold number, None if not deep
        self._folds = 0
        self.feed(html)
        self.close()

    def _fold(self) -> int | None:
        return next((f for f in reversed(self._details) if f is not None), None)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "details":
            deep = "deep" in (a.get("class") or "").split()
            self._details.append(self._folds if deep else None)
            self._folds += deep
        if a.get("id") and self._fold() is not None:
            self.ids[a["id"]] = self._fold()
        if tag == "a" and a.get("href"):
            line, col = self.getpos()
            self.links.append((self._starts[line - 1] + col, a["href"], (a.get("class") or "").split(), self._fold()))

    def handle_endtag(self, tag):
        if tag == "details" and self._details:
            self._details.pop()


def folded_ids(html: str) -> dict[str, int]:
    """The ids inside a page's deep dives: {id: the fold holding it (its number on the page)}."""
    return _Folds(html).ids


# Links that keep their own accessible name or point at where they are: a heading's permalink,
# a citation (its references are a deep dive: every "[6]" would carry the mark).
_UNMARKED_LINKS = {"headerlink", "cite"}


def mark_deep_links(html: str, name: str, folds: dict[str, dict[str, int]], mark: str) -> str:
    """Tell the reader which links open a folded deep dive: a link whose target (``#id`` on this
    page, ``page.html#id`` on another page of the language) is inside a ``details.deep`` gets
    ``mark`` (e.g. " (deep dive)") as a span at the end of its text, part of its accessible name.
    ``name``: this page's file; ``folds``: {file: folded_ids(its html)} of the language's pages.
    A link inside the very fold it points into is left alone (that fold is open already)."""
    out, last = [], 0
    for start, href, classes, own in _Folds(html).links:
        page, _, target = href.rpartition("#")
        fold = folds.get(page or name, {}).get(target) if target and "/" not in page and ":" not in page else None
        if fold is None or _UNMARKED_LINKS & set(classes) or (not page or page == name) and fold == own:
            continue
        end = html.index("</a>", start)
        out += [html[last:end], f'<span class="deep-link-tag">{_escape(mark)}</span>']
        last = end
    return "".join(out) + html[last:]
