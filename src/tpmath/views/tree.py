"""Element trees: figures and structured table cells as plain data.

A view returns figures (SVG) and some table cells (matrix grids, rank tags) as
trees of small dicts.  ``tpsite`` serialises a tree to markup at build time and
the page's JavaScript builds the same tree with ``createElementNS`` live, so the
static figure equals the live one element for element (ARCHITECTURE.md,
"Element trees").  Nothing here knows a language: text is a *cell*, either a
verbatim string or ``{"key", "args"}`` translated by the page.

Rules that keep both runtimes identical:
* every attribute value is a string formatted here (:func:`n` rounds
  coordinates), never a float left to JavaScript's number printing;
* no colour, font or style in a tree: shapes carry classes (``rk`` and
  ``data-rank`` for the rank palette, ``v0``…``v4`` for value shading, ``hl`` /
  ``dim`` for the active and inactive stages) that the stylesheet maps to the
  palette in light, dark and print;
* only the tags and attributes below; :func:`check` enforces it.  The builder
  (tpsite) checks every tree it writes and the page's builder (js/tree.js) refuses
  anything else; the views do not check on every control change (it would cost a
  fifth of a render): tests/test_figures.py and tests/test_fuzz.py check every
  section's figures and tree cells (the fuzz test for any input).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from .. import fmt

SVG_TAGS = frozenset({"svg", "g", "rect", "line", "path", "polygon", "circle", "text", "tspan",
                      "title", "desc"})
HTML_TAGS = frozenset({"figure", "figcaption", "span", "table", "tbody", "tr", "td", "sub",
                       "div", "caption", "thead", "tfoot", "th"})   # the last five: views/table.py
ATTRS = frozenset({
    "class", "data-rank", "data-key", "data-part", "role", "aria-hidden", "aria-label", "id",
    "viewBox", "width", "height", "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "rx", "d",
    "points", "transform", "text-anchor", "dominant-baseline", "focusable",
    "scope", "tabindex", "aria-labelledby",     # tables (views/table.py)
})
MAX_RANKS = 8           # the palette has eight rank colours (R0 … R7)
SHADES = 5              # v0 … v4: |value| / max |value| in five steps


class TreeError(ValueError):
    """A tree that breaks the contract: a bug in a view, never a reader's input."""


# ---------------------------------------------------------------- nodes

def n(x: float) -> str:
    """A coordinate: at most one decimal, no trailing zeros, ASCII minus (SVG syntax).

    Called for every coordinate of every figure on every control change: whole numbers (most
    of them) take the short path."""
    text = _N_MEMO.get(x)
    if text is None:
        if len(_N_MEMO) >= 4096:
            _N_MEMO.clear()
        v = round(float(x), 1)
        text = _N_MEMO[x] = "0" if v == 0 else str(int(v)) if v.is_integer() else f"{v:.1f}"
    return text


_N_MEMO: dict = {}


def el(tag: str, attrs: dict | None = None, children: Iterable[dict] | None = None,
       text: Any = None) -> dict:
    """One node: ``tag`` with string ``attrs`` and either child nodes or one text cell."""
    node: dict = {"t": tag}
    if attrs:
        node["a"] = {k: v for k, v in attrs.items() if v is not None}
    if text is not None:
        node["x"] = text
    elif children is not None:
        kids = [c for c in children if c is not None]
        if kids:
            node["c"] = kids
    return node


def check(node: dict, svg: bool = False) -> None:
    """Raise TreeError unless ``node`` keeps to the whitelist and the string-only rule."""
    if not isinstance(node, dict) or not isinstance(node.get("t"), str):
        raise TreeError(f"not a node: {node!r}")
    tag = node["t"]
    svg = svg or tag == "svg"
    if tag not in (SVG_TAGS if svg else HTML_TAGS):
        raise TreeError(f"tag {tag!r} is not allowed here")
    for name, value in node.get("a", {}).items():
        if name not in ATTRS and not name.startswith("data-"):
            raise TreeError(f"attribute {name!r} of <{tag}> is not allowed")
        if not isinstance(value, str):
            raise TreeError(f"attribute {name}={value!r} of <{tag}> is not a string")
    if "x" in node and "c" in node:
        raise TreeError(f"<{tag}> has both text and children")
    if "x" in node:
        _check_cell(node["x"])
    for child in node.get("c", []):
        check(child, svg)


def _check_cell(cell: Any) -> None:
    if isinstance(cell, str):
        return
    if isinstance(cell, dict) and isinstance(cell.get("key"), str):
        for v in cell.get("args", {}).values():
            _check_cell(v)
        return
    raise TreeError(f"text {cell!r} is neither a string nor a translation cell")


def walk(node: dict):
    """Every node of a tree, depth first (tests and the serialiser use it)."""
    yield node
    for child in node.get("c", []):
        yield from walk(child)


# ---------------------------------------------------------------- shading and ranks

def scale_of(*arrays: Any) -> float:
    """The largest finite |value| over ``arrays``: one shading scale for grids read side by side
    (a column of a table: rank r's block next to rank s's and the merged result).

    Plain Python over the entries: the matrices of a page are tiny, and numpy's per-call
    overhead would cost more than the loop (this runs for every grid on every control change)."""
    top = 0.0
    for m in arrays:
        for v in np.asarray(m, dtype=np.float64).ravel().tolist():
            a = abs(v)
            if top < a < math.inf:          # NaN compares false: skipped like ±∞
                top = a
    return top


def _levels(values: list, top: float) -> list[int]:
    """Bucket 0…4 of |v| / top for each of ``values``; a non-finite entry (a masked logit, −∞)
    gets the lightest shade: it carries no weight."""
    if not 0 < top < math.inf:
        return [0] * len(values)
    last = SHADES - 1
    # Summation noise off first (as fmt.num does): a value sitting on a bucket edge (|v| = 0.8·top)
    # would otherwise get one shade in CPython and the next in Pyodide, whose numpy sums in
    # another order, and the live grid would differ from the built and precomputed one.
    top = _denoised(top)
    return [min(int(min(_denoised(abs(v)) / top, 1.0) * SHADES), last) if abs(v) < math.inf else 0
            for v in values]


def _denoised(x: float) -> float:
    return float(f"{x:.10g}")


def shades(m: np.ndarray, scale: float | None = None) -> np.ndarray:
    """Bucket 0…4 of |value| / scale per entry (scale: the largest finite |value| by default)."""
    a = np.asarray(m, dtype=np.float64)
    top = scale_of(a) if scale is None else float(scale)
    return np.array(_levels(a.ravel().tolist(), top), dtype=int).reshape(a.shape)


def rank_attrs(rank: int | None, cls: str = "") -> dict:
    """Classes and data-rank of a shape owned by ``rank`` (None: replicated / not owned)."""
    if rank is None:
        return {"class": (cls + " rep").strip()}
    if not 0 <= rank < MAX_RANKS:
        raise TreeError(f"rank {rank} outside the palette (0…{MAX_RANKS - 1})")
    return {"class": (cls + " rk").strip(), "data-rank": str(rank)}


# ---------------------------------------------------------------- table cells (HTML)

def rank_tag(r: int) -> dict:
    """Row header of rank ``r``: the label R0 with its palette swatch (never colour alone)."""
    return {"el": el("span", rank_attrs(r, "rank-tag"), text="R" + fmt.integer(r))}


def grid(m: Any, rank: int | None = None, decimals: int = 4, scale: float | None = None,
         cols: Sequence[int | None] | None = None, rows: Sequence[int | None] | None = None) -> dict:
    """A matrix (or vector) as a grid cell: numbers in rows, shaded by value, tinted by rank.

    The numbers are :func:`fmt.num` strings, so the grid reads exactly like the old text.
    ``rank`` tints the grid: its frame always (the rank that holds it, or none), its cells unless
    ``cols`` / ``rows`` say whose each column / row is (W₁'s column blocks, an AllGather's
    output: the rank it came from; None: a reduction's result or a replicated value, grey), so
    a table's grid tells the story its section's figure draws (:func:`block_ranks`).
    """
    a = np.asarray(m, dtype=np.float64)
    if a.ndim < 2:
        a = a.reshape(1, -1)
    top = scale_of(a) if scale is None else float(scale)
    tints = _cell_tints(a.shape, rank, cols, rows)
    body = [{"t": "tr", "c": _entries(row, _levels(row, top), decimals, tints and tints[i])}
            for i, row in enumerate(a.tolist())]
    attrs = rank_attrs(rank, "grid")
    attrs["role"] = "presentation"
    return {"el": el("table", attrs, [el("tbody", None, body)])}


def block_ranks(length: int, parts: int) -> list[int]:
    """The rank of each of ``length`` indices split into ``parts`` equal blocks (0,0,1,1 for 4/2)."""
    width = length // parts
    return [i // width for i in range(length)]


_REP_CELL = {"class": "rep"}


def _cell_tints(shape: tuple, rank: int | None, cols, rows) -> list | None:
    """Per cell, the attributes that tint it unlike the grid (None where it keeps the grid's)."""
    if cols is None and rows is None:
        return None
    own = rank_attrs(rank)
    pick = (lambda i, j: cols[j]) if cols is not None else (lambda i, j: rows[i])
    out = []
    for i in range(shape[0]):
        line = []
        for j in range(shape[1]):
            who = pick(i, j)
            attrs = _REP_CELL if who is None else rank_attrs(who)
            line.append(None if attrs == own else attrs)
        out.append(line)
    return out


def rank_stack(buffers: Sequence[Any], scale: float | None = None, decimals: int = 4) -> dict:
    """One buffer per rank in one cell (e.g. every rank's buffer after a ring step): a grid
    whose row r starts with rank r's tag and is tinted by rank r."""
    vecs = [np.asarray(b, dtype=np.float64).ravel().tolist() for b in buffers]
    top = scale_of(*vecs) if scale is None else float(scale)
    rows = [{"t": "tr", "a": rank_attrs(r), "c": [el("td", {"class": "who"}, [rank_tag(r)["el"]])]
             + _entries(v, _levels(v, top), decimals)} for r, v in enumerate(vecs)]
    attrs = rank_attrs(None, "grid stack")
    attrs["role"] = "presentation"
    return {"el": el("table", attrs, [el("tbody", None, rows)])}


def _entries(values: list, level: list, decimals: int, tints: list | None = None) -> list[dict]:
    """The <td>s of one grid row (built as literals: a table of a few hundred numbers is
    rebuilt on every control change); ``tints``: per cell, the rank attributes of a cell that
    is not tinted like its grid."""
    if not tints:
        return [{"t": "td", "a": {"class": _SHADE_CLASS[lv]}, "x": fmt.num(x, decimals)}
                for x, lv in zip(values, level)]
    return [{"t": "td", "a": {"class": _SHADE_CLASS[lv]} if t is None else
             {**t, "class": f"{_SHADE_CLASS[lv]} {t['class']}"}, "x": fmt.num(x, decimals)}
            for x, lv, t in zip(values, level, tints)]


_SHADE_CLASS = tuple(f"v{i}" for i in range(SHADES))


# ---------------------------------------------------------------- SVG building blocks

CELL_W = 54.0            # one matrix entry: wide enough for "−0.9866" at the number size
CELL_H = 22.0
LABEL_H = 18.0           # a caption line above a grid


def text(x: float, y: float, cell: Any, cls: str = "lbl", anchor: str = "start", **attrs: str) -> dict:
    a = {"x": n(x), "y": n(y), "class": cls}
    if anchor != "start":
        a["text-anchor"] = anchor
    a.update(attrs)
    return el("text", a, text=cell)


def svg_grid(m: Any, x: float, y: float, rank: int | None, key: str, scale: float | None = None,
             decimals: int = 4, cell_w: float = CELL_W, owner: Any = None, cell_cls: str = "cell",
             frame_cls: str = "frame", num_cls: str = "num") -> dict:
    """A matrix drawn as cells with their numbers (the one numbered-grid drawer of the figures):
    the cells carry the owner's rank tint, ``rank``'s for all of them, or, given ``owner(i, j)``,
    the rank that holds entry (i, j) (None: every rank), each owner's block framed in its colour."""
    a = np.asarray(m, dtype=np.float64)
    if a.ndim < 2:
        a = a.reshape(1, -1)
    rows = a.tolist()
    top = scale_of(a) if scale is None else float(scale)
    tint = rank_attrs(rank)
    # Literal nodes (the shape el() and text() would build): this loop draws every matrix entry
    # of every figure on every control change.  Columns and rows share their coordinate strings.
    xs = [n(x + j * cell_w) for j in range(a.shape[1])]
    mids = [n(x + j * cell_w + cell_w / 2) for j in range(a.shape[1])]
    w, h = n(cell_w), n(CELL_H)
    kids, spans = [], {}
    for i, row in enumerate(rows):
        y_i, ymid = n(y + i * CELL_H), n(y + i * CELL_H + CELL_H / 2)
        for j, (v, lv) in enumerate(zip(row, _levels(row, top))):
            if owner is not None:
                r = owner(i, j)
                tint = rank_attrs(r)
                lo = spans.setdefault(r, [i, j, i, j])
                spans[r] = [min(lo[0], i), min(lo[1], j), max(lo[2], i), max(lo[3], j)]
            kids.append({"t": "rect", "a": {**tint, "class": f"{cell_cls} v{lv} {tint['class']}", "x": xs[j],
                                            "y": y_i, "width": w, "height": h}})
            kids.append({"t": "text", "a": {"x": mids[j], "y": ymid, "class": num_cls, "text-anchor": "middle",
                                            "dominant-baseline": "central", "data-key": f"{key}.{i}.{j}"},
                         "x": fmt.num(v, decimals)})
    if owner is None:
        spans = {rank: [0, 0, a.shape[0] - 1, a.shape[1] - 1]}
    for r, (i0, j0, i1, j1) in spans.items():     # an owner's entries form one block (columns or rows)
        kids.append(el("rect", {**rank_attrs(r, frame_cls), "x": n(x + j0 * cell_w), "y": n(y + i0 * CELL_H),
                                "width": n((j1 - j0 + 1) * cell_w), "height": n((i1 - i0 + 1) * CELL_H)}))
    return el("g", {"data-part": key}, kids)


@dataclass
class Panel:
    """A box of the figure: its size and its shapes, drawn with (0, 0) at its top left."""

    w: float
    h: float
    nodes: list = field(default_factory=list)
    part: str | None = None          # data-part of the group (stage lighting, tests)
    cls: str = ""                    # e.g. "hl" (active stage) or "dim"
    joins: bool = False              # an arrow or operator: stays on the line of the panel after it
    # named points of the panel (name -> (x, y) from its top left): where a connector drawn across
    # panels starts or ends (flow hands them on, moved to where the panel went)
    ports: dict = field(default_factory=dict)

    def at(self, x: float, y: float) -> dict:
        attrs = {"transform": f"translate({n(x)},{n(y)})"}
        if self.part:
            attrs["data-part"] = self.part
        if self.cls:
            attrs["class"] = self.cls
        return el("g", attrs, self.nodes)


def matrix_panel(m: Any, caption: Any, rank: int | None, key: str, scale: float | None = None,
                 cls: str = "", shape: Any = None) -> Panel:
    """A captioned grid (caption above, e.g. "W₁ · R0"; ``shape`` below, e.g. "2×2")."""
    a = np.asarray(m)
    if a.ndim < 2:
        a = a.reshape(1, -1)
    w = max(a.shape[1] * CELL_W, 40.0)
    nodes = [text(0, LABEL_H - 5, caption, "cap"), svg_grid(a, 0, LABEL_H, rank, key, scale)]
    h = LABEL_H + a.shape[0] * CELL_H
    if shape is not None:
        nodes.append(text(0, h + 13, shape, "dimtext"))
        h += 16
    return Panel(w, h, nodes, part=key, cls=cls)


def arrow_panel(label: Any = None, w: float = 40.0, h: float = 40.0, cls: str = "", part: str | None = None) -> Panel:
    """A right-pointing arrow with an optional label above it (an operation between panels)."""
    mid = h / 2 + 6
    nodes = [el("line", {"class": "arrow", "x1": "2", "y1": n(mid), "x2": n(w - 8), "y2": n(mid)}),
             arrow_head(w - 2, mid, 0)]
    if label is not None:
        nodes.append(text(w / 2, mid - 6, label, "op", "middle"))
    return Panel(w, h, nodes, part=part, cls=cls, joins=True)


@dataclass
class Row:
    """A row of panels; ``rank`` draws a lane behind it (tinted by the rank that owns it) and
    ``hang`` indents the lines a narrow layout wraps onto past the first panel (a rank badge)."""

    panels: list
    rank: int | None = None
    hang: bool = False


FLOW_GAP = 10.0         # flow: between two panels of a line
LANE_INNER = 6.0        # flow: from a lane's edge to its panels


def flow(rows: Sequence[Sequence[Panel] | Row], max_w: float, gap: float = FLOW_GAP, row_gap: float = 14.0,
         pad: float = 8.0, where: dict | None = None) -> tuple[list[dict], float, float]:
    """Place panels left to right, row after row, wrapping a row that is wider than ``max_w``.

    Panels of one line share a top edge.  Returns (nodes, width, height) of the whole.
    ``where``, if given, receives the top left corner of every panel that has a ``part``
    (part -> (x, y)) and every panel's ``ports`` where they landed: what a connector drawn across
    panels (an arrow from one lane to another, :func:`draw.connect`) needs to know of the layout.
    """
    placed, y, width = [], pad, 0.0
    lanes = []
    for row in rows:
        row = row if isinstance(row, Row) else Row(list(row))
        inner = LANE_INNER if row.rank is not None else 0.0      # room between a lane's edge and its panels
        top = y
        y += inner
        start = pad + inner
        x, line_h = start, 0.0
        for i, p in enumerate(row.panels):
            # an arrow never ends a line: it wraps together with the panel it points at
            need = p.w + (gap + row.panels[i + 1].w if p.joins and i + 1 < len(row.panels) else 0.0)
            # (a hair of slack: a panel sized to fill the line exactly must not wrap on a rounding error)
            if x > start and x + need > max_w - pad - inner + 1e-6:
                y += line_h + row_gap / 2
                # a hanging lane goes on under its first panel (the badge), unless the panel would
                # then stick out of max_w (a whole matrix on a phone at tp = 1)
                indent = row.panels[0].w + gap if row.hang and i > 1 else 0.0
                x = start + (indent if start + indent + p.w <= max_w - pad - inner else 0.0)
                line_h = 0.0
            placed.append(p.at(x, y))
            if where is not None:
                if p.part:
                    where[p.part] = (x, y)
                for name, (px, py) in p.ports.items():
                    where[name] = (x + px, y + py)
            x += p.w + gap
            line_h = max(line_h, p.h)
            width = max(width, x - gap + pad + inner)
        y += line_h + inner
        if row.rank is not None or inner:
            lanes.append((row.rank, top, y - top))
        y += row_gap
    back = [el("rect", {**rank_attrs(r, "lane"), "x": n(pad / 2), "y": n(top), "width": n(width - pad),
                        "height": n(h), "rx": "6"}) for r, top, h in lanes]
    return back + placed, width, y - row_gap + pad


def arrow_head(x: float, y: float, angle: float, size: float = 8.0, cls: str = "arrowhead") -> dict:
    """A filled arrowhead whose tip is at (x, y), pointing at ``angle`` degrees (0 = right).

    Drawn as a polygon rather than an SVG marker: markers need ids, and ids would repeat
    when a page shows several figures."""
    a = math.radians(angle)
    back = (x - size * math.cos(a), y - size * math.sin(a))
    side = (-math.sin(a) * size * 0.45, math.cos(a) * size * 0.45)
    pts = [(x, y), (back[0] + side[0], back[1] + side[1]), (back[0] - side[0], back[1] - side[1])]
    return el("polygon", {"class": cls, "points": " ".join(f"{n(px)},{n(py)}" for px, py in pts)})


def figure_svg(title: Any, body: list[dict], width: float, height: float, desc: Any = None,
               cls: str = "") -> dict:
    """One ``<svg role="img">`` of a figure: title (and desc) first, then the shapes."""
    head = [el("title", None, text=title)]
    if desc is not None:
        head.append(el("desc", None, text=desc))
    # width/height: the natural size in CSS px (the stylesheet lets it shrink to the column).
    return el("svg", {"viewBox": f"0 0 {n(width)} {n(height)}", "width": n(width), "height": n(height),
                      "role": "img", "class": ("fig " + cls).strip(), "focusable": "false"}, head + body)


# The widest phone drawing: the column of a 320 px screen (280 px), so a phone shows it at its
# natural size and its 12 px Chinese text stays 12 px (issue 25 item 4);
# and the widest one a desktop column holds at its natural size.
NARROW_W = 280.0
WIDE_W = 720.0


def figure(name: str, title: Any, rows_of: Any, desc: Any = None, caption: Any = None,
           head: Any = None) -> dict:
    """The ``<figure class="tp-figure">`` of a section: its panels flowed for a desktop column and,
    when that drawing is wider than a phone column, flowed again for a phone (:func:`pair`).

    ``rows_of()`` returns the panel rows, built once: ``flow`` only places panels (each placement
    is a new ``<g transform>`` around the panel's nodes), so both layouts share the panels' shapes
    -- half the work of a figure on every control change.
    ``head(width)``, if given, returns (nodes, height, its own width) drawn above the panels at
    that width (the drawing is at least as wide as the head).
    """
    rows = rows_of()
    return pair(name, title, lambda max_w: _layout(rows, max_w, head), desc, caption)


def pair(name: str, title: Any, draw: Any, desc: Any = None, caption: Any = None,
         wide: float = WIDE_W, narrow: float = NARROW_W) -> dict:
    """The wide/narrow pair: ``draw(max_w)`` -> (nodes, width, height) drawn for a desktop column
    (``wide``) and, when that is wider than ``narrow``, again for a phone.  One drawing is
    ``fig-one``; two are ``fig-wide`` and ``fig-narrow`` and CSS shows one of them (``fig-wide``
    above the phone breakpoint, ``fig-narrow`` below it)."""
    nodes, w, h = draw(wide)
    if w <= narrow:
        svgs = [figure_svg(title, nodes, w, h, desc, "fig-one")]
    else:
        svgs = [figure_svg(title, nodes, w, h, desc, "fig-wide")]
        nodes, w, h = draw(narrow)
        svgs.append(figure_svg(title, nodes, w, h, desc, "fig-narrow"))
    kids = svgs + ([el("figcaption", None, text=caption)] if caption is not None else [])
    return el("figure", {"class": "tp-figure", "data-figure": name}, kids)   # checked where it is built (see top)


def _layout(rows, max_w: float, head) -> tuple[list[dict], float, float]:
    nodes, w, h = flow(rows, max_w)
    if head is None:
        return nodes, w, h
    head_nodes, head_h, head_w = head(w)
    return head_nodes + [el("g", {"transform": f"translate(0,{n(head_h)})"}, nodes)], max(w, head_w), h + head_h
