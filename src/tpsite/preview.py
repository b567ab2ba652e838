"""Link-preview images: the page's main figure as a 1200×630 PNG, rendered at build time.

A figure is an element tree (ARCHITECTURE.md, "Element trees") whose shapes carry classes
only; the page's stylesheet gives them colours through custom properties (``var(--rk)``)
and ``color-mix()``, which no SVG rasterizer implements.  So the stylesheet's own rules are
applied here, in Python: a small cascade (selectors with classes, attributes, descendant,
child and sibling combinators; specificity; inherited custom properties; ``var()`` and
``color-mix(in srgb, …)``) computes each shape's fill, stroke, opacity and font, and writes
them as SVG presentation attributes.  The result is a standalone SVG in the light palette
that any renderer draws the way Chromium draws the page; resvg (``resvg-py``) turns it into
the PNG: a 3 MB self-contained wheel, no system libraries, deterministic output (chosen
over CairoSVG by measurement: see benchmarks/RESULTS.md, "Link-preview rasterizer").
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from .errors import BuildError

WIDTH, HEIGHT = 1200, 630            # Open Graph's recommended 1.91:1 image
MARGIN = 36.0                        # around the figure
FOOTER_H = 56.0                      # band at the bottom with the site's name
SVG_NS = "http://www.w3.org/2000/svg"

# CSS properties that SVG also accepts as presentation attributes (the rest is layout).
PRESENTATION = ("fill", "fill-opacity", "stroke", "stroke-width", "stroke-opacity", "stroke-dasharray",
                "stroke-linecap", "stroke-linejoin", "opacity", "font-family", "font-size", "font-weight",
                "font-style", "text-anchor", "dominant-baseline", "display", "visibility")


# ---------------------------------------------------------------- a small CSS cascade

@dataclass
class Rule:
    selector: list                    # [(compound, combinator-before-it)], left to right
    specificity: tuple
    order: int
    decls: dict[str, str]


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    parent: "Node | None" = None
    children: list = field(default_factory=list)
    text: str | None = None
    style: dict[str, str] = field(default_factory=dict)    # computed presentation values
    custom: dict[str, str] = field(default_factory=dict)   # inherited custom properties

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def previous_sibling(self) -> "Node | None":
        if self.parent is None:
            return None
        i = self.parent.children.index(self)
        return self.parent.children[i - 1] if i else None


_COMPOUND_RE = re.compile(r"([a-zA-Z*][\w-]*)?((?:\.[\w-]+|\[[^\]]+\]|::?[\w-]+(?:\([^)]*\))?)*)")
_PART_RE = re.compile(r"\.([\w-]+)|\[([\w-]+)(?:=\"?([^\"\]]*)\"?)?\]|(::?[\w-]+(?:\([^)]*\))?)")


def _top_level_rules(css: str):
    """(selector text, body) of every rule outside at-rules (@media, @font-face are skipped)."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    i, n = 0, len(css)
    while i < n:
        j = css.find("{", i)
        if j < 0:
            return
        prelude = css[i:j].strip()
        depth, k = 1, j + 1
        while k < n and depth:
            depth += {"{": 1, "}": -1}.get(css[k], 0)
            k += 1
        if not prelude.startswith("@"):
            yield prelude, css[j + 1:k - 1]
        i = k


def _parse_selector(text: str):
    """[(compound, combinator)] or None for selectors this cascade cannot match (pseudo-elements…)."""
    tokens = re.findall(r"\s*([>+~])\s*|\s+|([^\s>+~]+)", text.strip())
    out, comb = [], " "
    for sym, compound in tokens:
        if sym:
            comb = sym
            continue
        if not compound:
            comb = " " if comb == " " else comb
            continue
        m = _COMPOUND_RE.fullmatch(compound)
        if not m:
            return None
        tag = m.group(1) if m.group(1) not in (None, "*") else None
        classes, attrs, pseudo = [], [], []
        for cls, name, value, ps in _PART_RE.findall(m.group(2)):
            if cls:
                classes.append(cls)
            elif name:
                attrs.append((name, value if value != "" else None))
            else:
                pseudo.append(ps)
        if any(p != ":root" for p in pseudo):
            return None
        out.append(((tag, tuple(classes), tuple(attrs), bool(pseudo)), comb))
        comb = " "
    return out or None


def _specificity(selector) -> tuple:
    ids = 0
    cls = sum(len(c[1]) + len(c[2]) + c[3] for c, _ in selector)
    tags = sum(1 for c, _ in selector if c[0])
    return ids, cls, tags


def parse_css(css: str) -> list[Rule]:
    """Every top-level rule of a stylesheet, one Rule per selector of a selector list."""
    rules = []
    for order, (prelude, body) in enumerate(_top_level_rules(css)):
        decls = {}
        for decl in body.split(";"):
            if ":" in decl:
                name, value = decl.split(":", 1)
                decls[name.strip()] = value.strip()
        for sel_text in prelude.split(","):
            sel = _parse_selector(sel_text)
            if sel:
                rules.append(Rule(sel, _specificity(sel), order, decls))
    return rules


def _matches_compound(node: Node, compound) -> bool:
    tag, classes, attrs, root = compound
    if tag and node.tag != tag:
        return False
    if root and node.parent is not None:
        return False
    if not set(classes) <= node.classes:
        return False
    return all(name in node.attrs and (value is None or node.attrs[name] == value) for name, value in attrs)


def _matches(node: Node, selector) -> bool:
    """Right-to-left match of a parsed selector (descendant, child, adjacent and general sibling)."""
    (compound, comb), rest = selector[-1], selector[:-1]
    if not _matches_compound(node, compound):
        return False
    if not rest:
        return True
    if comb == " ":
        anc = node.parent
        while anc is not None:
            if _matches(anc, rest):
                return True
            anc = anc.parent
        return False
    if comb == ">":
        return node.parent is not None and _matches(node.parent, rest)
    sib = node.previous_sibling()
    if comb == "+":
        return sib is not None and _matches(sib, rest)
    while sib is not None:                       # "~"
        if _matches(sib, rest):
            return True
        sib = sib.previous_sibling()
    return False


# ---------------------------------------------------------------- values: var() and color-mix()

def _resolve(value: str, custom: dict[str, str], depth: int = 0) -> str:
    if depth > 20:
        raise BuildError(f"CSS custom properties nest too deep: {value!r}")
    value = re.sub(r"var\(\s*(--[\w-]+)\s*(?:,\s*([^()]*))?\)",
                   lambda m: _resolve(custom.get(m.group(1), m.group(2) or ""), custom, depth + 1), value)
    return re.sub(r"color-mix\(\s*in srgb\s*,\s*([^,()]+?)\s+([\d.]+)%\s*,\s*([^,()]+?)\s*\)",
                  lambda m: _mix(m.group(1), float(m.group(2)) / 100, m.group(3)), value)


def _rgb(color: str) -> tuple[float, float, float, float]:
    color = color.strip().lower()
    if color == "transparent":
        return 0.0, 0.0, 0.0, 0.0
    m = re.fullmatch(r"#([0-9a-f]{3}|[0-9a-f]{6})", color)
    if not m:
        raise BuildError(f"color-mix() of {color!r}: only #hex colours and transparent are supported here")
    h = m.group(1)
    if len(h) == 3:
        h = "".join(c * 2 for c in h)
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16), 1.0


def _mix(a: str, p: float, b: str) -> str:
    """CSS ``color-mix(in srgb, a p, b)``: premultiplied interpolation, as the specification says."""
    ca, cb = _rgb(a), _rgb(b)
    alpha = ca[3] * p + cb[3] * (1 - p)
    if alpha == 0:
        return "transparent"
    rgb = [(ca[i] * ca[3] * p + cb[i] * cb[3] * (1 - p)) / alpha for i in range(3)]
    hexrgb = "".join(f"{round(v):02x}" for v in rgb)
    return f"#{hexrgb}" if alpha >= 1 else f"#{hexrgb}{round(alpha * 255):02x}"


def _index(rules: list[Rule]) -> dict[str, list[Rule]]:
    """Rules by the first class (".c") or the tag of their rightmost compound ("*": neither)."""
    index: dict[str, list[Rule]] = {}
    for rule in rules:
        tag, classes, _, _ = rule.selector[-1][0]
        index.setdefault("." + classes[0] if classes else tag or "*", []).append(rule)
    return index


def cascade(root: Node, rules: list[Rule]) -> None:
    """Compute ``style`` (presentation attributes) and ``custom`` for ``root`` and its descendants."""
    index = _index(rules)

    def visit(node: Node, inherited: dict[str, str]) -> None:
        candidates = index.get("*", []) + index.get(node.tag, []) + [
            r for c in sorted(node.classes) for r in index.get("." + c, [])]
        matched = sorted((r for r in candidates if _matches(node, r.selector)),
                         key=lambda r: (r.specificity, r.order))
        declared: dict[str, str] = {}
        for rule in matched:
            declared.update(rule.decls)
        node.custom = dict(inherited)
        for name, value in declared.items():
            if name.startswith("--"):
                node.custom[name] = value
        for name, value in declared.items():
            if name in PRESENTATION:
                node.style[name] = _resolve(value, node.custom)
        for child in node.children:
            visit(child, node.custom)
    visit(root, {})


# ---------------------------------------------------------------- figure -> standalone SVG -> PNG

def _to_nodes(tree: dict, translate, parent: Node | None = None) -> Node:
    node = Node(tree["t"], dict(tree.get("a", {})), parent)
    if "x" in tree:
        node.text = translate(tree["x"])
    node.children = [_to_nodes(c, translate, node) for c in tree.get("c", [])]
    return node


def _to_xml(node: Node) -> ET.Element:
    attrs = {k: v for k, v in node.attrs.items() if k not in ("class", "role", "focusable")
             and not k.startswith("data-") and not k.startswith("aria-")}
    attrs.update(node.style)
    el = ET.Element(node.tag, attrs)
    if node.text is not None:
        el.text = node.text
    for child in node.children:
        el.append(_to_xml(child))
    return el


def main_svg(figure: dict) -> dict:
    """The drawing of a figure node to preview: the desktop one (``fig-wide``) or the only one."""
    svgs = [c for c in figure.get("c", []) if c["t"] == "svg"]
    if not svgs:
        raise BuildError(f"figure {figure.get('a', {}).get('data-figure')!r} has no <svg>")
    wide = [s for s in svgs if "fig-wide" in s.get("a", {}).get("class", "").split()]
    return (wide or svgs)[0]


def standalone_svg(figure: dict, translate, css: str, footer: str) -> str:
    """A 1200×630 SVG: the figure's drawing (styles applied) centred on the page background,
    ``footer`` (the site's name) in the bottom band."""
    drawing = main_svg(figure)
    page = Node("svg", {"class": "og"})                   # stands for :root (the page's custom properties)
    fig = _to_nodes(drawing, translate, page)
    page.children = [fig]
    cascade(page, parse_css(css))
    w, h = (float(v) for v in drawing["a"]["viewBox"].split()[2:])
    scale = min((WIDTH - 2 * MARGIN) / w, (HEIGHT - FOOTER_H - 2 * MARGIN) / h)
    fw, fh = w * scale, h * scale
    fig.attrs.update({"x": f"{(WIDTH - fw) / 2:.1f}", "y": f"{MARGIN + (HEIGHT - FOOTER_H - 2 * MARGIN - fh) / 2:.1f}",
                      "width": f"{fw:.1f}", "height": f"{fh:.1f}"})
    root_vars = page.custom
    bg, accent = (_resolve(f"var(--{k})", root_vars) for k in ("bg", "accent"))
    sans = _resolve("var(--sans)", root_vars)
    out = ET.Element("svg", {"xmlns": SVG_NS, "width": str(WIDTH), "height": str(HEIGHT),
                                          "viewBox": f"0 0 {WIDTH} {HEIGHT}"})
    ET.SubElement(out, "rect", {"width": str(WIDTH), "height": str(HEIGHT), "fill": bg})
    ET.SubElement(out, "rect", {"y": str(HEIGHT - FOOTER_H), "width": str(WIDTH),
                                             "height": str(FOOTER_H), "fill": accent})
    label = ET.SubElement(out, "text", {
        "x": str(MARGIN), "y": f"{HEIGHT - FOOTER_H / 2:.1f}", "dominant-baseline": "central",
        "fill": bg, "font-family": sans, "font-size": "26px", "font-weight": "600"})
    label.text = footer
    out.append(_to_xml(fig))
    # Plain tags and an xmlns attribute: ET.register_namespace is global, and mathml.py owns the default.
    return ET.tostring(out, encoding="unicode")


# The fonts the images are drawn with, when the machine has them (Debian/Ubuntu packages
# fonts-dejavu-core and fonts-noto-cjk): the same files give the same PNG bytes anywhere.
FONT_FILES = ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf",
              "NotoSansCJK-Regular.ttc", "NotoSansCJK-Bold.ttc")
FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts", "~/.local/share/fonts", "~/.fonts")


def font_files() -> list[Path] | None:
    """The FONT_FILES found under FONT_DIRS, or None if one is missing (then: the system's fonts)."""
    found: dict[str, Path] = {}
    for folder in FONT_DIRS:
        root = Path(folder).expanduser()
        if root.is_dir():
            for path in sorted(root.rglob("*")):
                if path.name in FONT_FILES and path.name not in found:
                    found[path.name] = path
    return [found[name] for name in FONT_FILES] if len(found) == len(FONT_FILES) else None


def rasterize(svg: str, fonts: list[Path] | None = None, width: int = WIDTH, height: int = HEIGHT) -> bytes:
    """PNG bytes of a standalone SVG, drawn by resvg with ``fonts`` (None: the system's fonts)."""
    import resvg_py

    options = {"skip_system_fonts": True, "font_files": [str(f) for f in fonts]} if fonts else {}
    try:
        return bytes(resvg_py.svg_to_bytes(svg_string=svg, width=width, height=height, **options))
    except ValueError as err:
        raise BuildError(f"image could not be rendered: {err}") from None


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
