"""Small drawing parts shared by the figures of the vocabulary, row-parallel and cost sections.

Everything here returns element-tree nodes (:mod:`tpmath.views.tree`); nothing knows a
language or a colour.  Layout needs the width of a number before the browser draws it:
numbers are set in the monospace ``num`` class, so their width is a character count times
:data:`NUM_CHAR` (a generous estimate over the fonts of the site's ``--mono`` stack).
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .. import fmt
from .tree import CELL_H, LABEL_H, Panel, arrow_head, el, figure_svg, n, rank_attrs, shades, text

NUM_CHAR = 6.8          # px per character of an 11 px monospace number
PAD = 8.0               # margin around a drawing
CAP_H = 16.0            # a caption line above a row of the drawing
TEXT_CHAR = 6.6         # px per character of a short verbatim label (symbols, shapes) in the sans font


def num_w(s: str) -> float:
    """Width of a ``num`` text."""
    return NUM_CHAR * len(s)


def widest(strings: Iterable[str]) -> float:
    """Width of the widest of some ``num`` texts."""
    return max((num_w(s) for s in strings), default=0.0)


def badge(r: int, cx: float, y: float, w: float = 34.0) -> list[dict]:
    """The rank label R0 on its tint, centred at ``cx`` (colour is never the only cue)."""
    return [el("rect", {**rank_attrs(r, "badge"), "x": n(cx - w / 2), "y": n(y), "width": n(w), "height": "20",
                        "rx": "4"}),
            text(cx, y + 10, "R" + fmt.integer(r), "badge-t", "middle", **{"dominant-baseline": "central"})]


def band(x: float, y: float, w: float, h: float, label: Any, sub: Any = None, part: str | None = None,
         cls: str = "coll") -> dict:
    """A collective drawn as a band across the ranks it joins (``coll``), its name inside."""
    kids = [el("rect", {"class": cls, "x": n(x), "y": n(y), "width": n(w), "height": n(h), "rx": "5"})]
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


def rect(x: float, y: float, w: float, h: float, attrs: dict, **more: str) -> dict:
    return el("rect", {**attrs, "x": n(x), "y": n(y), "width": n(max(w, 0.0)), "height": n(max(h, 0.0)), **more})


def hline(x1: float, x2: float, y: float, cls: str) -> dict:
    return el("line", {"class": cls, "x1": n(x1), "y1": n(y), "x2": n(x2), "y2": n(y)})


def single(name: str, title: Any, nodes: list[dict], w: float, h: float, desc: Any = None) -> dict:
    """A figure of one fixed drawing (a bar chart, an aligned layout): shown at its natural size,
    shrunk to the column on a phone (the stylesheet's ``max-width: 100%``)."""
    svg = figure_svg(title, nodes, w, h, desc, "fig-one")
    return el("figure", {"class": "tp-figure", "data-figure": name}, [svg])   # checked where built (tree.py)


def key(name: str, /, **args: Any) -> dict:
    """A translated cell ``fig.<k>`` (symbols and numbers in ``args`` stay verbatim)."""
    return {"key": f"fig.{name}", "args": args} if args else {"key": f"fig.{name}"}


# ---------------------------------------------------------------- matrices

def cell_width(*mats) -> float:
    """One cell width for every grid of a figure: the widest number of all of them, plus air."""
    strings = [fmt.num(v) for m in mats for v in np.asarray(m, dtype=float).ravel()]
    return max(30.0, widest(strings) + 8)


BLOCK = 12.0            # one entry of a matrix drawn without its numbers (its shape is the point)


def _cells(a: np.ndarray, x: float, y: float, rank: int | None, cw: float, ch: float, scale: float | None,
           key: str | None) -> list[dict]:
    """The shaded cells of a matrix with its numbers (the text attributes that every number
    shares sit once on the group: SVG inherits them), and its frame."""
    level = shades(a, scale)
    kids = [el("rect", {**rank_attrs(rank, f"cell v{int(level[i, j])}"), "x": n(x + j * cw),
                        "y": n(y + i * ch), "width": n(cw), "height": n(ch)}) for (i, j), _ in np.ndenumerate(a)]
    # y: the centre of the cell plus about half the height of an 11 px digit
    kids += [el("text", {"x": n(x + (j + 0.5) * cw), "y": n(y + (i + 0.5) * ch + 4), "class": "num",
                         "data-key": f"{key}.{i}.{j}"}, text=fmt.num(v)) for (i, j), v in np.ndenumerate(a)]
    kids.append(el("rect", {**rank_attrs(rank, "frame"), "x": n(x), "y": n(y), "width": n(a.shape[1] * cw),
                            "height": n(a.shape[0] * ch)}))
    return kids


def _block(a: np.ndarray, x: float, y: float, rank: int | None) -> list[dict]:
    """A matrix whose shape is the point: one tinted rectangle ruled into its entries."""
    rows, cols = a.shape
    w, h = cols * BLOCK, rows * BLOCK
    rules = "".join(f"M{n(x + j * BLOCK)} {n(y)}v{n(h)}" for j in range(1, cols))
    rules += "".join(f"M{n(x)} {n(y + i * BLOCK)}h{n(w)}" for i in range(1, rows))
    kids = [el("rect", {**rank_attrs(rank, "cell v1"), "x": n(x), "y": n(y), "width": n(w), "height": n(h)})]
    if rules:
        kids.append(el("path", {"class": "rules", "d": rules}))
    kids.append(el("rect", {**rank_attrs(rank, "frame"), "x": n(x), "y": n(y), "width": n(w), "height": n(h)}))
    return kids


def _shape_lines(shape: Any, grid_w: float) -> list:
    """The label under a matrix: a cell, or (symbols, numbers) such as ("B×D/p", "2×2") written
    "B×D/p = 2×2" when that fits under the grid, else on two lines."""
    if shape is None:
        return []
    if not isinstance(shape, tuple):
        return [shape]
    one = f"{shape[0]} = {shape[1]}"
    return [one] if TEXT_CHAR * len(one) <= grid_w + 12 else list(shape)


def grid_panel(m, caption: Any, rank: int | None, key: str, cell_w: float | None, scale: float | None = None,
               shape: Any = None, blocks: int = 0, axis: int = 1, min_w: float = 40.0) -> Panel:
    """A captioned matrix (caption above, ``shape`` below): with its numbers in cells of width
    ``cell_w`` shaded by value, or, with ``cell_w=None``, as a small ruled block without numbers.

    ``blocks`` > 0: the matrix is the concatenation of ``blocks`` equal rank blocks along
    ``axis`` (1: columns, 0: rows), each drawn in the tint of the rank it came from."""
    a = np.asarray(m, dtype=float)
    if a.ndim < 2:
        a = a.reshape(1, -1)
    cw, ch = (cell_w, CELL_H) if cell_w else (BLOCK, BLOCK)

    def draw(m, x, y, r, k):
        return _cells(m, x, y, r, cw, ch, scale, k) if cell_w else _block(m, x, y, r)
    parts = []
    if blocks:
        k = a.shape[axis] // blocks
        for r in range(blocks):
            part = a[:, r * k:(r + 1) * k] if axis == 1 else a[r * k:(r + 1) * k, :]
            x, y = (r * k * cw, 0.0) if axis == 1 else (0.0, r * k * ch)
            parts.append(el("g", {"data-part": f"{key}.b{r}"}, draw(part, x, LABEL_H + y, r, f"{key}.b{r}")))
    else:
        parts += draw(a, 0, LABEL_H, rank, key)
    g = el("g", {"data-part": key, "text-anchor": "middle"} if cell_w else {"data-part": key}, parts)
    nodes = [text(0, LABEL_H - 5, caption, "cap"), g]
    grid_w, h = a.shape[1] * cw, LABEL_H + a.shape[0] * ch
    lines = _shape_lines(shape, grid_w)
    for line in lines:
        nodes.append(text(0, h + 13, line, "dimtext"))
        h += 15
    # min_w: room for a translated caption longer than the grid; verbatim texts are measured.
    w = max(grid_w, min_w, *(TEXT_CHAR * len(t) for t in [caption] + lines if isinstance(t, str)))
    return Panel(w, h, nodes)


def lane_badge(r: int, h: float) -> Panel:
    """A lane's rank label, vertically centred on the lane's matrices."""
    y = LABEL_H + max(h - LABEL_H - 16, BLOCK) / 2 - 10
    return Panel(36, h, badge(r, 17, y), part=f"rank{r}")


def heading(cell: Any, sub: Any = None, w: float = 340.0) -> Panel:
    """The title of a block of the figure, and a line that says what happens in it."""
    nodes = [text(0, 13, cell, "stage-name")]
    if sub is not None:
        nodes.append(text(0, 30, sub, "dimtext"))
    return Panel(w, 34 if sub is not None else 18, nodes)


def coll_panel(label: Any, sub: Any, w: float = 340.0, part: str | None = None, cls: str = "coll") -> Panel:
    """A collective as a band across the figure (the operation and what it does) with an arrow
    down to its result; ``cls="coll none"``: where a collective would be, and none is needed."""
    bh = 40.0
    return Panel(w, bh + 16, [band(0, 0, w, bh, label, sub, cls=cls)]
                 + down_arrow(w / 2, bh, bh + 14), part=part)
