"""Drawing parts of the collective, ring, mismatch, backward, dp-tp and precision figures.

Everything returns element-tree nodes (:mod:`tpmath.views.tree`); nothing knows a language
or a colour.  The parts every figure shares (``key``, ``single``, ``rect``, number widths) live in
:mod:`tpmath.views.fig_parts`; this module adds what these six figures need besides.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from .. import fmt
from .fig_parts import PAD, key, num_w, rect, single  # noqa: F401  (shared with the other figures)
from .tree import NARROW_W, WIDE_W, arrow_head, el, figure_svg, n, rank_attrs, text

ROW_H = 20.0            # one buffer element (a cell of a buffer drawing)


def rank_name(r: int) -> str:
    return "R" + fmt.integer(r)


def cell_w(strings: Iterable[str], least: float = 30.0) -> float:
    """Width of a cell that holds the widest of ``strings`` with a margin either side."""
    return max(least, max((num_w(s) for s in strings), default=0.0) + 10.0)


def line(x1: float, y1: float, x2: float, y2: float, cls: str, rank: int | None = None) -> dict:
    return el("line", {**(rank_attrs(rank, cls) if rank is not None else {"class": cls}),
                       "x1": n(x1), "y1": n(y1), "x2": n(x2), "y2": n(y2)})


def badge(r: int, x: float, y: float, w: float = 30.0, h: float = 20.0) -> list[dict]:
    """The rank label R0 on its tint, top left at (x, y) (colour is never the only cue)."""
    return [rect(x, y, w, h, rank_attrs(r, "badge"), rx="4"),
            text(x + w / 2, y + h / 2, rank_name(r), "badge-t", "middle", **{"dominant-baseline": "central"})]


def mid_text(x: float, y: float, cell: Any, cls: str, anchor: str = "middle", **attrs: str) -> dict:
    """A text vertically centred on y."""
    return text(x, y, cell, cls, anchor, **{"dominant-baseline": "central", **attrs})


def _attrs(cls: str, rank: int | None, owned: bool) -> dict:
    """Class (and data-rank, when the shape belongs to ``rank``) of a connector part."""
    return rank_attrs(rank, cls) if owned else {"class": cls}


def arrow(x1: float, y1: float, x2: float, y2: float, cls: str = "arrow", head_cls: str = "arrowhead",
          rank: int | None = None, gap: float = 0.0, size: float = 7.0) -> list[dict]:
    """A straight arrow from (x1, y1) to (x2, y2), shortened by ``gap`` at both ends; ``rank``:
    the rank whose data travels on it (its tint)."""
    dx, dy = x2 - x1, y2 - y1
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    sx, sy = x1 + ux * gap, y1 + uy * gap
    tx, ty = x2 - ux * gap, y2 - uy * gap
    owned = rank is not None
    head = arrow_head(tx, ty, math.degrees(math.atan2(uy, ux)), size, head_cls)
    head["a"].update(_attrs(head_cls, rank, owned))
    return [el("line", {**_attrs(cls, rank, owned), "x1": n(sx), "y1": n(sy),
                        "x2": n(tx - ux * (size - 1)), "y2": n(ty - uy * (size - 1))}), head]


def curve(x1: float, y1: float, x2: float, y2: float, cls: str, head_cls: str | None = None,
          rank: int | None = None, size: float = 7.0) -> list[dict]:
    """A left-to-right S-curve (horizontal at both ends), with an arrowhead at (x2, y2)."""
    end = x2 - (size - 1) if head_cls else x2
    xm = (x1 + end) / 2
    owned = rank is not None
    nodes = [el("path", {**_attrs(cls, rank, owned),
                         "d": f"M{n(x1)},{n(y1)} C{n(xm)},{n(y1)} {n(xm)},{n(y2)} {n(end)},{n(y2)}"})]
    if head_cls:
        head = arrow_head(x2, y2, 0, size, head_cls)
        head["a"].update(_attrs(head_cls, rank, owned))
        nodes.append(head)
    return nodes


def two_widths(name: str, title: Any, draw: Callable[[float], tuple[list[dict], float, float]],
               desc: Any = None) -> dict:
    """A figure drawn by ``draw(max_w)`` for a desktop column and, when that is wider than a phone
    column, again for a phone (``fig-wide`` / ``fig-narrow``, as :func:`tree.figure` does)."""
    nodes, w, h = draw(WIDE_W)
    if w <= NARROW_W:
        return single(name, title, nodes, w, h, desc)
    svgs = [figure_svg(title, nodes, w, h, desc, "fig-wide")]
    nodes, w, h = draw(NARROW_W)
    svgs.append(figure_svg(title, nodes, w, h, desc, "fig-narrow"))
    return el("figure", {"class": "tp-figure", "data-figure": name}, svgs)   # checked where built (tree.py)


def group(nodes: list[dict], part: str | None = None, cls: str | None = None, dx: float = 0.0,
          dy: float = 0.0, **attrs: str) -> dict:
    a = dict(attrs)
    if part:
        a["data-part"] = part
    if cls:
        a["class"] = cls
    if dx or dy:
        a["transform"] = f"translate({n(dx)},{n(dy)})"
    return el("g", a or None, nodes)
