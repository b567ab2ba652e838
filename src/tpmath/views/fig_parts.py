"""Small drawing parts shared by the figures of the vocabulary, row-parallel and cost sections.

Everything here returns element-tree nodes (:mod:`tpmath.views.tree`); nothing knows a
language or a colour.  Layout needs the width of a number before the browser draws it:
numbers are set in the monospace ``num`` class, so their width is a character count times
:data:`NUM_CHAR` (a generous estimate over the fonts of the site's ``--mono`` stack).
"""

from __future__ import annotations

from typing import Any, Iterable

from . import fmt
from .tree import arrow_head, check, el, figure_svg, n, rank_attrs, text

NUM_CHAR = 6.8          # px per character of an 11 px monospace number
PAD = 8.0               # margin around a drawing
CAP_H = 16.0            # a caption line above a row of the drawing


def num_w(s: str) -> float:
    """Width of a ``num`` text."""
    return NUM_CHAR * len(s)


def widest(strings: Iterable[str]) -> float:
    return max((num_w(s) for s in strings), default=0.0)


def badge(r: int, cx: float, y: float, w: float = 34.0) -> list[dict]:
    """The rank label R0 on its tint, centred at ``cx`` (colour is never the only cue)."""
    return [el("rect", {**rank_attrs(r, "badge"), "x": n(cx - w / 2), "y": n(y), "width": n(w), "height": "20",
                        "rx": "4"}),
            text(cx, y + 10, "R" + fmt.integer(r), "badge-t", "middle", **{"dominant-baseline": "central"})]


def band(x: float, y: float, w: float, h: float, label: Any, sub: Any = None, part: str | None = None) -> dict:
    """A collective drawn as a band across the ranks it joins (``coll``), its name inside."""
    kids = [el("rect", {"class": "coll", "x": n(x), "y": n(y), "width": n(w), "height": n(h), "rx": "5"})]
    if sub is None:
        kids.append(text(x + w / 2, y + h / 2, label, "coll-t", "middle", **{"dominant-baseline": "central"}))
    else:
        kids.append(text(x + w / 2, y + h * 0.36, label, "coll-t", "middle", **{"dominant-baseline": "central"}))
        kids.append(text(x + w / 2, y + h * 0.74, sub, "coll-s", "middle", **{"dominant-baseline": "central"}))
    return el("g", {"data-part": part} if part else None, kids)


def down_arrow(x: float, y1: float, y2: float, cls: str = "arrow") -> list[dict]:
    """A short vertical arrow from y1 down to y2 (tip at y2)."""
    return [el("line", {"class": cls, "x1": n(x), "y1": n(y1), "x2": n(x), "y2": n(y2 - 5)}),
            arrow_head(x, y2, 90, 7)]


def right_arrow(x1: float, x2: float, y: float) -> list[dict]:
    return [el("line", {"class": "arrow", "x1": n(x1), "y1": n(y), "x2": n(x2 - 5), "y2": n(y)}),
            arrow_head(x2, y, 0, 7)]


def rect(x: float, y: float, w: float, h: float, attrs: dict, **more: str) -> dict:
    return el("rect", {**attrs, "x": n(x), "y": n(y), "width": n(max(w, 0.0)), "height": n(max(h, 0.0)), **more})


def hline(x1: float, x2: float, y: float, cls: str) -> dict:
    return el("line", {"class": cls, "x1": n(x1), "y1": n(y), "x2": n(x2), "y2": n(y)})


def single(name: str, title: Any, nodes: list[dict], w: float, h: float, desc: Any = None) -> dict:
    """A figure of one fixed drawing (a bar chart, an aligned layout): shown at its natural size,
    shrunk to the column on a phone (the stylesheet's ``max-width: 100%``)."""
    svg = figure_svg(title, nodes, w, h, desc, "fig-one")
    node = el("figure", {"class": "tp-figure", "data-figure": name}, [svg])
    check(node)
    return node


def key(name: str, **args: Any) -> dict:
    """A translated cell ``fig.<k>`` (symbols and numbers in ``args`` stay verbatim)."""
    return {"key": f"fig.{name}", "args": args} if args else {"key": f"fig.{name}"}
