"""The drawing kit: every figure module (``views/fig_*.py``) draws with these parts and nothing
else (tests/test_figures_kit.py keeps it so).

Built on :mod:`tpmath.views.tree` (nodes, ``Panel`` / ``Row`` / ``flow``, grids, the wide/narrow
pair).  Everything returns element-tree nodes; nothing knows a language or a colour: text is a
cell (:func:`label`, the one way to write a translated one), shapes carry classes.

Layout needs the width of a number before the browser draws it: numbers are set in the monospace
``num`` class, so their width is a character count times :data:`NUM_CHAR` (a generous estimate
over the fonts of the site's ``--mono`` stack).

The parts, by kind:
* text: :func:`text`, :func:`mid_text`, :func:`label`, :func:`rank_name`;
* shapes: :func:`rect`, :func:`line`, :func:`hline`, :func:`circle`, :func:`path`,
  :func:`polygon`, :func:`group`;
* badge: :func:`badge` (R0 on its tint), :func:`badge_panel` / :func:`lane_badge` (a lane's);
* operator box: :func:`op_box`, :func:`band`, :func:`coll_panel`, :func:`heading`;
* a collective as movement: :func:`collective_flow` (every rank's buffer, an arrow from each in
  its rank's tint into the reduction node, an arrow out to every rank's buffer after it:
  AllReduce, AllGather, ReduceScatter; one panel for the wide and the narrow drawing, built on
  ``Panel.ports``, :func:`connect` and :class:`Link`);
* grids: one numbered-grid drawer, :func:`svg_grid` (a rank's tint, or an owner per entry),
  in :func:`matrix_panel`, :func:`grid_panel` (numbers or a ruled block, rank blocks) and
  :func:`owned_panel` (each entry tinted by its owner); :func:`heat` / :func:`heat_panel`
  (shaded cells only); :func:`sign` (+, ·, = between grids);
* arrows and flow: :func:`arrow`, :func:`curve`, :func:`down_arrow`, :func:`arrow_head`,
  :func:`arrow_panel`, ``Panel``, ``Row`` (a rank's lane), :func:`flow`, :func:`chain` (a row of
  parts joined by arrows, from their widths), :func:`column` (panels stacked);
* text blocks and legends: :func:`words` (a wrapped line as a panel), :func:`key` (a legend key),
  :func:`text_box` (a box with its lines: a call, a node);
* cells: :func:`cell_block` (a buffer's :class:`Cell` s in rows: its elements, its chunks);
* connectors across panels: a panel's ``ports`` are recorded where flow puts it, and
  :func:`connect` draws :class:`Link` s between them (arrows, curves, a bus, an elbow, the way
  round a stack of lanes, a node the ends go through);
* node layouts: :func:`orbit` (panels on a circle), :func:`heap_tree` (panels as a binary tree);
  :func:`step_strip` (numbered steps on a line, a bar over each or none: the one step drawer);
* charts: :func:`axis_chart` (rows of :class:`Mark` on a :class:`LogAxis`, numbers in columns),
  :func:`bar` (time bars of :class:`Seg`), :func:`badge_grid` (ranks in row and column groups);
* the figure: :func:`figure` (panel rows flowed twice), :func:`figure_at` (panel rows built for
  each width, links between their ports), :func:`pair` (any drawing at two widths), :func:`single` (one fixed drawing).
"""

from __future__ import annotations

import functools
import math
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from .. import fmt, i18n
from .cells import label, rank as rank_name
from .tree import (CELL_H, CELL_W, FLOW_GAP, LABEL_H, LANE_INNER, NARROW_W, WIDE_W, Panel, Row,  # noqa: F401
                   TreeError, arrow_head, arrow_panel, el, figure, figure_svg, flow, matrix_panel, n, pair, rank_attrs, scale_of,
                   shades, svg_grid, text)

NUM_CHAR = 6.8          # px per character of an 11 px monospace number
PAD = 8.0               # margin around a drawing
CAP_H = 16.0            # a caption line above a row of the drawing
TEXT_CHAR = 6.6         # px per character of a short verbatim label (symbols, shapes) in the sans font
ROW_H = 20.0            # one buffer element (a cell of a buffer drawing)
BLOCK = 12.0            # one entry of a matrix drawn without its numbers (its shape is the point)
LINE_H = 15.0           # one more line of a wrapped caption
BAR_H = 20.0            # a bar of a time chart
NAME_H = 14.0           # a rank's name above its columns of a grid
NAME_W = 30.0           # a rank's name right of its rows


# ---------------------------------------------------------------- text and measures

def num_w(s: str) -> float:
    """Width of a ``num`` text."""
    return NUM_CHAR * len(s)


def _glyphs(s: str) -> int:
    """The characters of ``s`` that take room (a combining macron sits on the letter before it: f̄)."""
    return sum(not unicodedata.combining(ch) for ch in s)


def widest(strings: Iterable[str]) -> float:
    """Width of the widest of some ``num`` texts."""
    return max((num_w(s) for s in strings), default=0.0)


def cell_w(strings: Iterable[str], least: float = 30.0) -> float:
    """Width of a cell that holds the widest of ``strings`` with a margin either side."""
    return max(least, max((num_w(s) for s in strings), default=0.0) + 10.0)


def cell_width(*mats) -> float:
    """One cell width for every grid of a figure: the widest number of all of them, plus air."""
    strings = [fmt.num(v) for m in mats for v in np.asarray(m, dtype=float).ravel()]
    return max(30.0, widest(strings) + 8)


# A caption's width before the browser draws it, in either language: a conservative estimate at
# its font size (style.css: 12 px, headings 13 px) -- a CJK character is a full em, anything
# else at most 0.6 em, 0.65 em in a bold heading.
FONT_PX = {"stage-name": 13.0}
BOLD = frozenset({"cap", "coll-t", "stage-name", "region-t", "warn-t", "a-warn", "a-ok"})   # style.css


@functools.lru_cache(maxsize=None)
def _langs() -> tuple[str, ...]:
    return i18n.languages()


def _est(s: str, px: float, latin: float) -> float:
    return sum(px if unicodedata.east_asian_width(ch) in "WF" else latin * px for ch in s)


def text_w(cell: Any, cls: str = "lbl") -> float:
    """Estimated width of a text cell in the widest of the site's languages."""
    px = FONT_PX.get(cls, 12.0)
    latin = 0.65 if cls in BOLD else 0.6
    return max((_est(_measured(cell, lang), px, latin) for lang in _langs()), default=0.0)


def _measured(cell: Any, lang: str) -> str:
    """A cell's text from the part of the strings the package ships for measuring (``figwrap``:
    the browser's Python has no other figure text, and it must lay out what the build does)."""
    if not isinstance(cell, dict):
        return "" if cell is None else str(cell)
    template = i18n.part_strings(lang, "figwrap").get(cell["key"])
    if template is None:
        raise TreeError(f"{cell['key']} is measured, so it belongs in content/i18n/{lang}.figwrap.toml")
    args = cell.get("args") or {}
    return i18n.PLACEHOLDER.sub(lambda m: _measured(args[m.group(1)], lang) if m.group(1) in args else m.group(0),
                                template)


def wrapped(x: float, y: float, pieces: list, w: float, cls: str = "lbl", anchor: str = "start",
            line_h: float = 15.0) -> tuple[dict, int]:
    """A caption cut at its natural breaks (``pieces``, i18n cells that read as the whole when
    joined) on as few lines as fit ``w`` in both languages (a text cut off by the drawing's edge
    is worse than a second line).  Returns the text node and its number of lines; one line is
    the plain text of the whole (``fig.cat`` joins the pieces)."""
    lines: list[list] = [[]]
    for p in pieces:
        if lines[-1] and text_w(_cat(lines[-1] + [p]), cls) > w:
            lines.append([])
        lines[-1].append(p)
    if len(lines) == 1:
        return text(x, y, _cat(lines[0]), cls, anchor), 1
    node = text(x, y, None, cls, anchor)
    node["c"] = [el("tspan", {"x": n(x), "y": n(y + i * line_h)}, text=_cat(ln)) for i, ln in enumerate(lines)]
    return node, len(lines)


def _cat(cells: list) -> Any:
    out = cells[-1]
    for c in reversed(cells[:-1]):
        out = label("fig.cat", a=c, b=out)
    return out


def mid_text(x: float, y: float, cell: Any, cls: str, anchor: str = "middle", **attrs: str) -> dict:
    """A text vertically centred on y."""
    return text(x, y, cell, cls, anchor, **{"dominant-baseline": "central", **attrs})


# ---------------------------------------------------------------- shapes

def rect(x: float, y: float, w: float, h: float, attrs: dict, tip: Any = None, **more: str) -> dict:
    """A rectangle; ``tip``: a hover title (a cell) inside it."""
    a = {**attrs, "x": n(x), "y": n(y), "width": n(max(w, 0.0)), "height": n(max(h, 0.0)), **more}
    return el("rect", a, [el("title", None, text=tip)]) if tip is not None else el("rect", a)


def _attrs(cls: str, rank: int | None, owned: bool) -> dict:
    """Class (and data-rank, when the shape belongs to ``rank``) of a connector part."""
    return rank_attrs(rank, cls) if owned else {"class": cls}


def line(x1: float, y1: float, x2: float, y2: float, cls: str, rank: int | None = None) -> dict:
    return el("line", {**(rank_attrs(rank, cls) if rank is not None else {"class": cls}),
                       "x1": n(x1), "y1": n(y1), "x2": n(x2), "y2": n(y2)})


def hline(x1: float, x2: float, y: float, cls: str) -> dict:
    return el("line", {"class": cls, "x1": n(x1), "y1": n(y), "x2": n(x2), "y2": n(y)})


def circle(cx: float, cy: float, r: float, cls: str) -> dict:
    return el("circle", {"class": cls, "cx": n(cx), "cy": n(cy), "r": n(r)})


def path(d: str, cls: str) -> dict:
    """A path; ``d`` written with :func:`n` coordinates."""
    return el("path", {"class": cls, "d": d})


def polygon(points: Iterable[tuple[float, float]], cls: str) -> dict:
    return el("polygon", {"class": cls, "points": " ".join(f"{n(x)},{n(y)}" for x, y in points)})


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


def moved(nodes: list[dict], dx: float, dy: float, **attrs: str) -> dict:
    """``nodes`` shifted by (dx, dy) (the transform first, then ``attrs``)."""
    return el("g", {"transform": f"translate({n(dx)},{n(dy)})", **attrs}, nodes)


# ---------------------------------------------------------------- badges

def badge(r: int, x: float, y: float, w: float = 30.0, h: float = 20.0) -> list[dict]:
    """The rank label R0 on its tint, top left at (x, y) (colour is never the only cue)."""
    return [rect(x, y, w, h, rank_attrs(r, "badge"), rx="4"),
            text(x + w / 2, y + h / 2, rank_name(r), "badge-t", "middle", **{"dominant-baseline": "central"})]


def badge_panel(r: int, h: float, y: float, bh: float = 22.0, bw: float = 34.0, w: float | None = None,
                part: str | None = "") -> Panel:
    """A lane's rank label (``bw`` wide, ``bh`` high, top at ``y``) in a panel as high as the lane
    (``w`` wide: by default 2 px more than the label); ``part``: its data-part ("": rank{r}, None:
    none); its ports ``<part>.top`` and ``<part>.bottom``, the middles of the label's edges."""
    part = f"rank{r}" if part == "" else part
    ports = {f"{part}.top": (bw / 2, y), f"{part}.bottom": (bw / 2, y + bh)} if part else {}
    return Panel(bw + 2 if w is None else w, h, badge(r, 0, y, bw, bh), part=part, ports=ports)


def lane_badge(r: int, h: float, grids: str = "ruled") -> Panel:
    """A lane's rank label, vertically centred on the lane's grids, which are ``h`` high with their
    captions: ``ruled`` (:func:`grid_panel`, a shape line under it), ``numbers``
    (:func:`matrix_panel`) or ``heat`` (:func:`heat_panel`)."""
    if grids == "numbers":
        return badge_panel(r, h, LABEL_H + max(h - LABEL_H, CELL_H) / 2 - 11)
    if grids == "heat":
        return badge_panel(r, h, max(CAP_H, h / 2 - 11))
    return badge_panel(r, h, LABEL_H + max(h - LABEL_H - 16, BLOCK) / 2 - 10, 20)


# ---------------------------------------------------------------- operator boxes

def band(x: float, y: float, w: float, h: float, label: Any, sub: Any = None, part: str | None = None,
         cls: str = "coll") -> dict:
    """A collective drawn as a band across the ranks it joins (``coll``), its name inside."""
    kids = [rect(x, y, w, h, {"class": cls}, rx="5")]
    if sub is None:
        kids.append(mid_text(x + w / 2, y + h / 2, label, "coll-t"))
    else:
        kids.append(mid_text(x + w / 2, y + h * 0.36, label, "coll-t"))
        kids.append(mid_text(x + w / 2, y + h * 0.74, sub, "coll-s"))
    return el("g", {"data-part": part} if part else None, kids)


def op_box(title: Any, sub: Any, w: float, cls: str, part: str | None = None, h: float = 44.0,
           top: float = 6.0, title_y: float = 18.0, sub_y: float = 34.0, lit: str = "") -> Panel:
    """An operator box (a collective, an operator): its name and what it does under it
    (cls: "coll hl", "coll dim", "a-warnbox", …), ``top`` px below the panel's top edge;
    ``lit``: the panel's stage class ("hl")."""
    return Panel(w, h + top, [rect(0, top, w, h, {"class": cls}, rx="6"),
                              text(w / 2, top + title_y, title, "coll-t", "middle"),
                              text(w / 2, top + sub_y, sub, "coll-s", "middle")], part=part, cls=lit)


def down_arrow(x: float, y1: float, y2: float, cls: str = "arrow") -> list[dict]:
    """A short vertical arrow from y1 down to y2 (tip at y2)."""
    return [line(x, y1, x, y2 - 5, cls), arrow_head(x, y2, 90, 7)]


def heading(cell: Any, sub: Any = None, w: float = NARROW_W - 16) -> Panel:
    """The title of a block of the figure, and a line that says what happens in it (``sub``: a
    cell, or a list of its pieces that wraps to ``w``)."""
    nodes = [text(0, 13, cell, "stage-name")]
    if sub is None:
        return Panel(w, 18, nodes)
    node, lines = wrapped(0, 30, sub if isinstance(sub, list) else [sub], w, "dimtext")
    return Panel(w, 34 + (lines - 1) * 15, nodes + [node])


def coll_panel(label: Any, sub: Any, w: float = 340.0, part: str | None = None, cls: str = "coll") -> Panel:
    """A collective as a band across the figure (the operation and what it does) with an arrow
    down to its result; ``cls="coll none"``: where a collective would be, and none is needed."""
    bh = 40.0
    return Panel(w, bh + 16, [band(0, 0, w, bh, label, sub, cls=cls)]
                 + down_arrow(w / 2, bh, bh + 14), part=part)



# ---------------------------------------------------------------- a collective drawn as movement

COLLECTIVES = ("allreduce", "allgather", "reducescatter")
CHIP_W = 52.0           # a rank's buffer in a collective's flow, at most (narrower with many ranks)
CHIP_H = 18.0
CHIP_GAP = 8.0          # between two ranks' buffers
MOVE_H = 16.0           # the arrows into and out of the reduction node


def _blocks_of(kind: str, side: str, r: int, tp: int) -> list:
    """The tp blocks of rank r's buffer before ("in") or after ("out") a collective: the rank
    whose data each block is (an int), "fin" (a reduced block: every rank's sum; with one rank,
    its own data) or None (empty)."""
    if side == "in":
        return [r if kind != "allgather" or k == r else None for k in range(tp)]
    if kind == "allgather":
        return list(range(tp))
    total = "fin" if tp > 1 else r
    return [total if kind == "allreduce" or k == r else None for k in range(tp)]


def _chip(blocks: list, r: int, cw: float, name: str, partial: bool) -> Panel:
    """Rank r's buffer: its blocks, each tinted by the rank whose data it holds, framed in r's
    colour (dashed: a partial term), r's name on it (colour is never the only cue); ports
    ``<name>.top`` / ``<name>.bottom``."""
    bw = cw / len(blocks)
    nodes = [rect(k * bw, 0, bw, CHIP_H, {"class": "cell fin"} if b == "fin" else rank_attrs(b, "cell v2"))
             for k, b in enumerate(blocks) if b is not None]
    nodes += [rect(0, 0, cw, CHIP_H, rank_attrs(r, "frame part" if partial else "frame")),
              mid_text(cw / 2, CHIP_H / 2, rank_name(r), "badge-t")]
    return Panel(cw, CHIP_H, nodes, part=name, ports={name + ".top": (cw / 2, 0.0), name + ".bottom": (cw / 2, CHIP_H)})


def collective_flow(kind: str, tp: int, name: Any, sub: Any = None, part: str = "coll",
                    w: float = NARROW_W - 16, cls: str = "coll") -> Panel:
    """A collective as movement between the ranks: a row of every rank's buffer before it, an
    arrow from each (in the tint of the rank whose data travels on it) into the reduction node (a
    band across the ranks, ``name`` and ``sub`` in it), and an arrow out of the node down to every
    rank's buffer after it.  ``kind``: "allreduce" (full partials in, the sum to every rank),
    "allgather" (each rank's shard in, every shard to every rank) or "reducescatter" (full
    partials in, block r of the sum to rank r).  ``w`` wide, the band too, the buffers centred
    under it (narrower with many ranks): one panel serves the wide and the narrow drawing.

    Parts: ``<part>.src.<r>`` / ``<part>.dst.<r>`` (rank r's buffer before / after),
    ``<part>.send.<r>`` (the arrow from rank r into the node, data-rank r), ``<part>.recv.<r>``
    (the arrow out to rank r); ports ``<part>.in.<r>`` (top of r's buffer before) and
    ``<part>.out.<r>`` (bottom of r's buffer after), for links from the figure's lanes."""
    if kind not in COLLECTIVES:
        raise TreeError(f"collective {kind!r} is not one of {COLLECTIVES}")
    cw = min(CHIP_W, (w - CHIP_GAP * (tp - 1)) / tp)
    reduces = kind != "allgather"

    def chips(side: str) -> Panel:
        return flowed([[_chip(_blocks_of(kind, side, r, tp), r, cw, f"{part}.{'src' if side == 'in' else 'dst'}.{r}",
                              reduces and side == "in") for r in range(tp)]], WIDE_W, gap=CHIP_GAP)
    before, after = chips("in"), chips("out")
    bw = max(before.w, w)
    bh = 40.0 if sub is not None else 24.0
    inset = (bw - before.w) / 2
    mids = [inset + r * (cw + CHIP_GAP) + cw / 2 for r in range(tp)]
    node = Panel(bw, bh, [band(0, 0, bw, bh, name, sub, cls=cls)],
                 ports={**{f"node.{r}.top": (x, 0.0) for r, x in enumerate(mids)},
                        **{f"node.{r}.bottom": (x, bh) for r, x in enumerate(mids)}})
    body = column([before, Panel(bw, MOVE_H), node, Panel(bw, MOVE_H), after], gap=0, centred=True)
    links = [Link("arrow", (f"{part}.src.{r}.bottom", f"node.{r}.top"), "mv", "mvh", rank=r,
                  part=f"{part}.send.{r}", gap=1) for r in range(tp)]
    links += [Link("arrow", (f"node.{r}.bottom", f"{part}.dst.{r}.top"), "mv fin", "mvh fin",
                   part=f"{part}.recv.{r}", gap=1) for r in range(tp)]
    ports = {f"{part}.in.{r}": body.ports[f"{part}.src.{r}.top"] for r in range(tp)}
    ports.update({f"{part}.out.{r}": body.ports[f"{part}.dst.{r}.bottom"] for r in range(tp)})
    return Panel(body.w, body.h, body.nodes + connect(links, body.ports), part=part, ports=ports)

# ---------------------------------------------------------------- text blocks, nested flows, token maps

NOTE_LINE_H = 15.0      # one more line of a wrapped note


def note_panel(pieces: Any, w: float, cls: str = "dimtext", part: str | None = None) -> Panel:
    """A note (a cell, or the pieces of one) as a panel: on one line when it fits ``w`` in every
    language, else wrapped at its pieces; as wide as its widest line, as high as its lines."""
    pieces = pieces if isinstance(pieces, list) else [pieces]
    node, lines = wrapped(0, 12, pieces, w, cls, line_h=NOTE_LINE_H)
    width = text_w(_cat(pieces), cls) if lines == 1 else w
    return Panel(min(width, w), 16 + (lines - 1) * NOTE_LINE_H, [node], part=part)


def flowed(rows: Any, max_w: float, part: str | None = None, gap: float = 10.0, row_gap: float = 6.0,
           where: dict | None = None, min_w: float = 0.0) -> Panel:
    """Panels flowed into a panel of their own (no margin): a block of the figure whose parts wrap
    within it, placed by the figure's flow as one (a legend's keys, a strip of steps); at least
    ``min_w`` wide (a column of panels side by side on a desktop); its panels' parts and ports
    are its ports (and go into ``where`` too, if given)."""
    inner: dict = {}
    nodes, w, h = flow(rows, max_w, gap=gap, row_gap=row_gap, pad=0.0, where=inner)
    if where is not None:
        where.update(inner)
    return Panel(max(w, min_w), h, nodes, part=part, ports=inner)


def token_map(x: float, y: float, rows: list, cols: int, owner: int | None, cell: float = BLOCK,
              shade: int = 3, labels: list | None = None, crossed: np.ndarray | None = None) -> list[dict]:
    """A matrix drawn without numbers whose every row belongs to one rank (a token map: a row per
    token, tinted by the rank that owns it, ``rows[i]``; None: replicated), top left at (x, y):
    one rect per row and the cell rules as one path (a few nodes per block instead of one per
    entry), the entries ``crossed`` marks (rows × cols, True: zeroed) crossed out, ``owner``'s
    frame; ``labels``: each row's name right-aligned left of it (a token index)."""
    w, h = cols * cell, len(rows) * cell
    kids = []
    for i, r in enumerate(rows):
        kids.append(rect(x, y + i * cell, w, cell, rank_attrs(r, f"cell v{shade}")))
        if labels is not None:
            kids.append(text(x - 3, y + i * cell + cell / 2, labels[i], "tok", "end",
                             **{"dominant-baseline": "central"}))
    if crossed is not None:
        for i, j in zip(*np.nonzero(crossed)):
            cx, cy = x + int(j) * cell, y + int(i) * cell
            kids += [rect(cx, cy, cell, cell, {"class": "cell-off"}),
                     line(cx + 2, cy + cell - 2, cx + cell - 2, cy + 2, "drop")]
    rules = [f"M{n(x + j * cell)} {n(y)}V{n(y + h)}" for j in range(1, cols)]
    rules += [f"M{n(x)} {n(y + i * cell)}H{n(x + w)}" for i in range(1, len(rows))]
    if rules:
        kids.append(path("".join(rules), "rules"))
    kids.append(rect(x, y, w, h, rank_attrs(owner, "frame")))
    return kids


# ---------------------------------------------------------------- arrows

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


def chain(x0: float, parts: Iterable[tuple[str, float, float]]) -> tuple[dict, tuple]:
    """A row of parts laid left to right from ``x0``: ``parts`` are (name, width, gap after it).
    Returns the left edge of every part and the arrows joining each to the next, as
    (start x, name of the part it points at): a flow diagram is its parts' sizes, not coordinates."""
    left, arrows, x, prev_right = {}, [], x0, None
    for name, width, gap in parts:
        if prev_right is not None:
            arrows.append((prev_right, name))
        left[name] = x
        prev_right = x + width
        x = prev_right + gap
    return left, tuple(arrows)


# ---------------------------------------------------------------- grids

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
        return svg_grid(m, x, y, r, k, scale, cell_w=cw) if cell_w else el("g", {"data-part": k}, _block(m, x, y, r))
    if blocks:
        k = a.shape[axis] // blocks
        parts = []
        for r in range(blocks):
            part = a[:, r * k:(r + 1) * k] if axis == 1 else a[r * k:(r + 1) * k, :]
            x, y = (r * k * cw, 0.0) if axis == 1 else (0.0, r * k * ch)
            parts.append(draw(part, x, LABEL_H + y, r, f"{key}.b{r}"))
        g = el("g", {"data-part": key}, parts)
    else:
        g = draw(a, 0, LABEL_H, rank, key)
    nodes = [text(0, LABEL_H - 5, caption, "cap"), g]
    grid_w, h = a.shape[1] * cw, LABEL_H + a.shape[0] * ch
    lines = _shape_lines(shape, grid_w)
    for line_ in lines:
        nodes.append(text(0, h + 13, line_, "dimtext"))
        h += 15
    # min_w: room for a translated caption longer than the grid; verbatim texts are measured.
    w = max(grid_w, min_w, *(TEXT_CHAR * len(t) for t in [caption] + lines if isinstance(t, str)))
    return Panel(w, h, nodes)


def owned_panel(m, owner, caption: Any, key: str, scale: float, names: str = "", notes: Sequence = (),
                frame_cls: str = "frame", cell_cls: str = "cell", num_cls: str = "num", min_w: float = 0.0) -> Panel:
    """A captioned matrix whose entries are tinted by ``owner(i, j)``, the rank that holds entry
    (i, j) (None: every rank), each owner's block framed in its colour; ``names``: each owner's
    name above its columns ("cols") or right of its rows ("rows"); ``notes``: (cell, class) lines
    under it."""
    a = rows2(m)
    rows, cols = a.shape
    top = LABEL_H + (NAME_H if names == "cols" else 0.0)
    nodes = [text(0, LABEL_H - 5, caption, "cap"),
             svg_grid(a, 0, top, None, key, scale, owner=owner, cell_cls=cell_cls, frame_cls=frame_cls,
                      num_cls=num_cls)]
    where: dict = {}
    for i, j in np.ndindex(rows, cols):
        where.setdefault(owner(i, j), []).append(j if names == "cols" else i)
    for r, at in where.items() if names else ():
        mid = (min(at) + max(at) + 1) / 2
        if names == "cols":
            nodes.append(text(mid * CELL_W, top - 4, rank_name(r), "rk-t", "middle", **rank_attrs(r, "rk-t")))
        else:
            nodes.append(mid_text(cols * CELL_W + 6, top + mid * CELL_H, rank_name(r), "rk-t", "start",
                                  **rank_attrs(r, "rk-t")))
    h = top + rows * CELL_H
    for cell, cls in notes:
        nodes.append(text(0, h + 14, cell, cls))
        h += LINE_H
    w = cols * CELL_W + (NAME_W if names == "rows" else 0.0)
    return Panel(max(w, min_w), h + (4.0 if notes else 0.0), nodes, part=key)


def sign(symbol: str, h: float, cls: str = "op", grids: str = "numbers") -> Panel:
    """An operator sign (+, ·, =) between two grids ``h`` high with their captions, centred on
    their cells as :func:`lane_badge` is (``grids``: ``numbers`` or ``ruled``, a shape line under
    them); it stays on the line of the grid after it."""
    w = max(16.0, 9.0 * len(symbol) + 4)
    mid = LABEL_H + (max(h - LABEL_H - 16, BLOCK) if grids == "ruled" else h - LABEL_H) / 2
    return Panel(w, h, [mid_text(w / 2, mid, symbol, cls)], joins=True)


def rows2(a) -> np.ndarray:
    """``a`` as a 2-D array (a vector: one row; more dimensions: rows of the last one)."""
    a = np.asarray(a, dtype=np.float64)
    return a.reshape(-1, a.shape[-1]) if a.ndim > 2 else a.reshape(1, -1) if a.ndim < 2 else a


def heat(m, rank: int | None, cell: float, scale: float | None = None, bad=None,
         masked=None) -> tuple[list, float, float]:
    """A matrix as shaded cells without numbers (a heat grid); ``bad`` marks cells off the reference,
    ``masked`` cells a causal mask removed (drawn empty)."""
    a = rows2(m)
    level = shades(a, scale)
    kids = []
    for (i, j), v in np.ndenumerate(level):
        cls = "cell a-masked" if masked is not None and masked[i, j] else f"cell v{int(v)}"
        kids.append(rect(j * cell, i * cell, cell, cell, rank_attrs(rank, cls)))
    if bad is not None:
        for i, j in zip(*np.nonzero(bad)):
            kids.append(rect(j * cell + 1, i * cell + 1, cell - 2, cell - 2, {"class": "a-badcell"}))
    w, h = a.shape[1] * cell, a.shape[0] * cell
    kids.append(rect(0, 0, w, h, rank_attrs(rank, "frame")))
    return [el("g", {"class": "heat"}, kids)], w, h     # heat: numberless cells (style.css)


def heat_panel(m, caption, rank: int | None, key: str, cell: float, scale=None, bad=None, under=None,
               under_cls: str = "dimtext", min_w: float = 0.0, masked=None) -> Panel:
    """A captioned heat grid (caption above, ``under`` below it)."""
    nodes, w, h = heat(m, rank, cell, scale, bad, masked)
    out = [text(0, CAP_H - 5, caption, "cap"), moved(nodes, 0, CAP_H)]
    height = CAP_H + h
    if under is not None:
        out.append(text(0, height + 13, under, under_cls))
        height += 17
    return Panel(max(w, min_w), height, out, part=key)


# ---------------------------------------------------------------- blocks, captions, legend keys

def column(panels: Iterable[Panel | None], gap: float = 4.0, part: str | None = None,
           centred: bool = False, cls: str = "") -> Panel:
    """Panels stacked top to bottom, ``gap`` apart, left-aligned (``centred``: on one upright axis):
    a captioned block (its caption, its drawing, a note under it) that the figure's flow places
    as one; it hands on its panels' ports."""
    shown = [p for p in panels if p is not None]
    w = max((p.w for p in shown), default=0.0)
    nodes, y, ports = [], 0.0, {}
    for p in shown:
        x = (w - p.w) / 2 if centred else 0.0
        nodes.append(p.at(x, y))
        ports.update({k: (x + px, y + py) for k, (px, py) in p.ports.items()})
        y += p.h + gap
    return Panel(w, max(y - gap, 0.0), nodes, part=part, cls=cls, ports=ports)


def words(pieces: Any, w: float, cls: str = "dimtext", anchor: str = "start") -> Panel:
    """A line of text (a cell, or the pieces of one, wrapped to ``w``) as a panel as high as its
    lines; ``anchor``: it starts at the panel's left edge, is centred on it ("middle") or ends at
    its right edge ("end")."""
    x = {"start": 0.0, "middle": w / 2, "end": w}[anchor]
    node, lines = wrapped(x, 12, pieces if isinstance(pieces, list) else [pieces], w, cls, anchor)
    return Panel(w, 16 + (lines - 1) * LINE_H, [node])


# swatch sizes of a legend key: a lane's dashed frame, a bar segment, a column's frame, a band
_SWATCH = {"wide": (22.0, 12.0), "box": (14.0, 12.0), "tall": (14.0, 16.0), "flat": (18.0, 10.0)}
KEY_TEXT_X = 28.0       # the text of a legend key, right of its swatch (stacked keys align)


def key(cls: str, pieces: Any, w: float | None = None, mark: str = "box", swatch: Panel | None = None) -> Panel:
    """A legend key: a swatch of class ``cls`` (``mark``: a box of :data:`_SWATCH`, or "tick", a
    short upright line; or a ``swatch`` panel of its own, such as a cell of the figure) and what it
    stands for, wrapped to ``w`` (by default: as wide as the text, measured, on one line; with a
    ``swatch``, which makes ``cls`` unused: as wide as its widest line)."""
    if swatch is not None:
        text_part = note_panel(pieces if isinstance(pieces, list) else [pieces], (w or WIDE_W) - KEY_TEXT_X)
        return Panel(KEY_TEXT_X + text_part.w, max(swatch.h, text_part.h),
                     [swatch.at((22 - swatch.w) / 2, 0), text_part.at(KEY_TEXT_X, 1)])
    if mark == "tick":
        swatch_node = line(9, 2, 9, 14, cls)
    else:
        sw, sh = _SWATCH[mark]
        swatch_node = rect((22 - sw) / 2, 8 - sh / 2, sw, sh, {"class": cls}, rx="4" if mark in ("wide", "tall") else None)
    if w is None:
        w = KEY_TEXT_X + max(text_w(p, "dimtext") for p in (pieces if isinstance(pieces, list) else [pieces]))
    text_part = words(pieces, w - KEY_TEXT_X)
    return Panel(w, max(16.0, text_part.h), [swatch_node, text_part.at(KEY_TEXT_X, 0)])


# ---------------------------------------------------------------- charts on a log axis

@dataclass(frozen=True)
class LogAxis:
    """A log axis ``w`` px long from base**lo to base**hi (base 2 or 10); a value off the axis
    sits at its nearer end, zero and below at its floor."""

    lo: float
    hi: float
    w: float
    base: int = 10

    def x(self, v: float) -> float:
        e = (math.log2(v) if self.base == 2 else math.log10(v)) if v > 0 else self.lo
        return self.w * (min(max(e, self.lo), self.hi) - self.lo) / (self.hi - self.lo)


@dataclass(frozen=True)
class Mark:
    """Something drawn on a chart row's axis, at values ``a`` (and ``b``): "zone" (a band from a to
    b), "tick" (an upright line at a), "dot" (a dot at a), "floor" (an arrowhead at a pointing to
    the axis' floor: a value below what the axis shows)."""

    kind: str
    a: float
    b: float = 0.0
    cls: str = ""


@dataclass(frozen=True)
class ChartRow:
    """One row of :func:`axis_chart`: its name, its marks, and its numbers ((text, class, suffix),
    one per number column; a suffix such as "×" follows the number in the plain text style)."""

    part: str
    name: Any
    marks: Sequence[Mark]
    nums: Sequence[tuple]


def _mark(m: Mark, axis: LogAxis, x0: float, cy: float) -> dict:
    xa = x0 + axis.x(m.a)
    if m.kind == "zone":
        xb = x0 + axis.x(m.b)
        return rect(min(xa, xb), cy - 6, abs(xb - xa), 12, {"class": m.cls})
    if m.kind == "tick":
        return line(xa, cy - 9, xa, cy + 9, m.cls)
    if m.kind == "dot":
        return circle(xa, cy, 5, m.cls)
    return polygon([(xa, cy - 5), (xa - 9, cy), (xa, cy + 5)], m.cls)       # "floor"


def axis_chart(axis: LogAxis, rows: Sequence[ChartRow], ticks: Sequence[tuple[float, Any]], lead: float,
               col_w: float = 60.0, heads: Sequence = (), names_above: bool = False, grid: bool = False) -> Panel:
    """Rows of marks on one log axis, each row's numbers in columns right of it: the row's name
    left of its axis (``lead`` px) or above it (``names_above``, the axis indented by ``lead``);
    ``heads``: the number columns' captions; ``ticks``: (value, label) under the rows, their lines
    across every row (``grid``) or short."""
    top = 24.0 if heads else 0.0
    row_h, cy0 = (38.0, 25.0) if names_above else (26.0, 12.0)
    x_num = lead + axis.w + 10
    nodes = [text(x_num + c * col_w, 14, h, "cap") for c, h in enumerate(heads)]
    y = top
    for row in rows:
        cy = y + cy0
        parts = [text(lead, y + 11, row.name, "dimtext") if names_above else text(0, cy + 4, row.name, "cap"),
                 line(lead, cy, lead + axis.w, cy, "ax")]
        parts += [_mark(m, axis, lead, cy) for m in row.marks]
        for c, (s, cls, suffix) in enumerate(row.nums):
            parts.append(text(x_num + c * col_w, cy + 4, s, cls))
            if suffix:
                parts.append(text(x_num + c * col_w + num_w(s) + 2, cy + 4, suffix, "dimtext"))
        nodes.append(group(parts, part=row.part))
        y += row_h
    y_ax = y - 4 if names_above else y
    for v, name in ticks:
        xt = lead + axis.x(v)
        nodes.append(line(xt, top - 2, xt, y_ax, "ax tick") if grid else line(xt, y_ax - 4, xt, y_ax + 2, "ax"))
        nodes.append(text(xt, y_ax + (12 if grid else 14), name, "dimtext", "middle"))
    return Panel(x_num + col_w * max((len(r.nums) for r in rows), default=0), y_ax + 18, nodes)


# ---------------------------------------------------------------- rank groups

def badge_grid(rows: int, cols: int, row_name, w: float, lead: float = 74.0, box_w: float = 46.0,
               box_h: float = 24.0, gap: float = 8.0, row_cls: str = "tpg", col_cls: str = "dpg") -> Panel:
    """``rows`` × ``cols`` rank badges (row k, column r: rank r of group k), every row framed in
    ``row_cls`` and every column in ``col_cls``, a row's name (``row_name(k)``) left of it;
    the badges narrower than ``box_w`` where ``w`` would not hold them."""
    bw = min(box_w, (w - lead) / cols - gap)
    pitch_x, pitch_y = bw + gap, box_h + gap
    nodes = [rect(lead + r * pitch_x - gap / 2, 0, pitch_x, rows * pitch_y, {"class": col_cls}, rx="6")
             for r in range(cols)]
    for k in range(rows):
        y = gap / 2 + k * pitch_y
        nodes.append(rect(lead - 6, y - 2, cols * pitch_x + 4, box_h + 4, {"class": row_cls}, rx="5"))
        nodes.append(mid_text(lead - 12, y + box_h / 2, row_name(k), "dimtext", "end"))
        nodes += [group(badge(r, lead + r * pitch_x, y, bw, box_h), part=f"rank.{k}.{r}") for r in range(cols)]
    return Panel(lead + cols * pitch_x, rows * pitch_y, nodes)


# ---------------------------------------------------------------- time bars

@dataclass(frozen=True)
class Seg:
    """A segment of a bar: ``w`` px long, of class ``cls`` (``key``: its data-key), with ``text``
    (of class ``text_cls``) inside it where it fits."""

    w: float
    cls: str
    key: str
    text: str | None = None
    text_cls: str = "num"


def bar(segs: Sequence[Seg], outside: str | None = "below", end: tuple | None = None,
        bar_w: float | None = None) -> Panel:
    """Segments end to end; a segment's text inside it, or, where it does not fit, ``outside``:
    "below" it (from its left end, unless that runs past ``bar_w``: then ending at its right),
    "right" of it, or (None) not at all; ``end``: (text, class) right of the whole bar."""
    nodes, x, below = [], 0.0, False
    reach = bar_w if bar_w is not None else sum(s.w for s in segs)
    for s in segs:
        nodes.append(rect(x, 0, s.w, BAR_H, {"class": s.cls}, **{"data-key": s.key}))
        if s.text is None:
            pass
        elif NUM_CHAR * _glyphs(s.text) + 6 <= s.w:
            nodes.append(text(x + s.w / 2, BAR_H / 2 + 4, s.text, s.text_cls, "middle"))
        elif outside == "below":
            below = True
            nodes.append(text(x, BAR_H + 13, s.text, s.text_cls) if x + num_w(s.text) <= reach
                         else text(x + s.w, BAR_H + 13, s.text, s.text_cls, "end"))
        elif outside == "right":
            nodes.append(text(x + s.w + 6, BAR_H / 2 + 4, s.text, s.text_cls))
        x += s.w
    w = x
    if end is not None:
        nodes.append(text(x + 6, BAR_H / 2 + 4, end[0], end[1]))
        w = x + 6 + num_w(end[0])
    return Panel(max(w, reach), BAR_H + (16.0 if below else 0.0), nodes)


# ---------------------------------------------------------------- cells, connectors, node layouts

@dataclass(frozen=True)
class Cell:
    """One cell of a :func:`cell_block`: its box's class (None: no box, only its text), the rank
    that tints it (None: its class alone), its text (of ``text_cls``, ``key`` its data-key), a hover
    ``tip``, its ``name`` (the box's data-part, and the ports <name>.top / <name>.bottom at the
    middles of its edges) and ``mark``: the class of a ring drawn round it on top (just received)."""

    cls: str | None
    text: Any = None
    rank: int | None = None
    text_cls: str = "num"
    key: str | None = None
    tip: Any = None
    name: str | None = None
    mark: str | None = None


def cell_block(cells: Sequence[Cell], per_row: int, cw: float, ch: float, frame: tuple | None = None,
               part: str | None = None, cls: str | None = None) -> Panel:
    """Cells ``per_row`` a row, each ``cw`` × ``ch`` with its text centred in it (a buffer's
    elements, a rank's chunks); ``frame``: (rank, class) of a frame round them all; ``part``: the
    panel's data-part and the ports <part>.left / .right (the middles of its sides) and
    <part>.tr / .br (its right corners)."""
    nodes, marks, ports = [], [], {}
    for k, c in enumerate(cells):
        x, y = (k % per_row) * cw, (k // per_row) * ch
        if c.cls is not None:
            attrs = rank_attrs(c.rank, c.cls) if c.rank is not None else {"class": c.cls}
            nodes.append(rect(x, y, cw, ch, attrs, tip=c.tip, **({"data-part": c.name} if c.name else {})))
        if c.text is not None:
            nodes.append(mid_text(x + cw / 2, y + ch / 2, c.text, c.text_cls, **({"data-key": c.key} if c.key else {})))
        if c.mark:
            marks.append(rect(x - 1.5, y - 1.5, cw + 3, ch + 3, {"class": c.mark}, rx="2"))
        if c.name:
            ports[c.name + ".top"], ports[c.name + ".bottom"] = (x + cw / 2, y), (x + cw / 2, y + ch)
    w, h = min(len(cells), per_row) * cw, -(-len(cells) // per_row) * ch
    if frame is not None:
        nodes.append(rect(0, 0, w, h, rank_attrs(frame[0], frame[1])))
    if part:
        ports.update({part + ".left": (0.0, h / 2), part + ".right": (w, h / 2), part + ".tr": (w, 0.0),
                      part + ".br": (w, h)})
    return Panel(w, h, nodes + marks, part=part, cls=cls or "", ports=ports)


def text_box(lines: Sequence[tuple], bw: float, bh: float, cls: str, rank: int | None = None, rx: float = 5.0,
             top: float = 0.0, w: float | None = None, h: float | None = None, part: str | None = None,
             head: Any = None, under: tuple | None = None, faded: bool = False) -> Panel:
    """A box ``bw`` × ``bh`` (``cls``, tinted by ``rank`` if given), ``top`` px below the panel's
    top (:data:`CAP_H` more under a ``head``, a caption above it), with lines of text in it: one
    (cell, class) line centred, or several from its left, :data:`BOX_LINE_H` apart; ``faded``: the
    box and its lines dimmed; ``under``: (cell, class), a line under it (read, so never dimmed);
    the panel ``w`` wide and ``h`` high (by default: the box's, and the line under it); ports
    <part>.left / .right at the middles of the box's sides."""
    top += CAP_H if head is not None else 0.0
    attrs = rank_attrs(rank, cls) if rank is not None else {"class": cls}
    nodes = [rect(0, top, bw, bh, attrs, rx=n(rx))]
    if len(lines) == 1:
        nodes.append(mid_text(bw / 2, top + bh / 2, *lines[0]))
    else:
        nodes += [text(BOX_INSET, top + BOX_LINE_Y + i * BOX_LINE_H, cell, c) for i, (cell, c) in enumerate(lines)]
    if faded:
        nodes = [group(nodes, cls="dim")]
    if under is not None:
        nodes.append(text(2, top + bh + UNDER_H - 4, *under))
    if head is not None:
        nodes.append(text(0, 12, head, "cap"))
    ports = {part + ".left": (0.0, top + bh / 2), part + ".right": (bw, top + bh / 2)} if part else {}
    height = h if h is not None else top + bh + (UNDER_H if under is not None else 0.0)
    return Panel(bw if w is None else w, height, nodes, part=part, ports=ports)


UNDER_H = 16.0          # the line under a text box
BOX_INSET = 8.0         # a text box's lines from its left edge
BOX_LINE_Y, BOX_LINE_H = 15.0, 13.0     # its first baseline below its top; from one line to the next


@dataclass(frozen=True)
class Link:
    """A connector between ports of panels the figure's flow placed (:func:`connect`):

    * "arrow": straight from ``ends[0]`` to ``ends[1]``, ``gap`` (one number, or (start, end))
      short of them, ``label`` beside its middle (``head=None``: an edge, a plain line between them);
    * "curve": a left-to-right S-curve between them;
    * "bus": every end joined to one upright ``track`` px right of the farthest of ``via``
      (default: the ends), ``label`` over it (a met collective);
    * "elbow": out of ``ends[0]`` to such an upright, along it, and back into ``ends[1]`` (a wait);
    * "around": down out of ``ends[0]``, right to ``track`` px right of ``via``, up past
      ``ends[1]`` and down into it (the way back of a ring drawn as stacked lanes); without a head
      the way itself, from beside ``ends[0]`` to beside ``ends[1]``;
    * "over": up out of ``ends[0]`` to ``track`` px above the higher end, across, and down into
      ``ends[1]`` (a residual connection skipping a block);
    * "node": a box ``w`` wide on the upright through the farthest of ``via`` (default: the ends),
      from the highest end to the lowest (``gap`` more each way), or ``h`` high round a single
      end, ``label`` in it (an operation the ends go through).

    ``level``: an arrow or curve runs level, at the height of that end."""

    kind: str
    ends: tuple
    cls: str = "arrow"
    head: str | None = "arrowhead"
    rank: int | None = None
    part: str | None = None
    label: Any = None
    label_cls: str = "send-t"
    gap: Any = 0.0
    track: float = 0.0
    via: tuple = ()
    w: float = 0.0
    h: float = 0.0
    level: int | None = None


ELBOW_OFF = 6.0         # an "elbow" link: above / below the middles of its ends
AROUND_DROP = 8.0       # an "around" link: how far it runs below its start and above its end


def connect(links: Iterable[Link], where: dict) -> list[dict]:
    """The links drawn where ``where`` (flow's record of the placed ports) says their ends are."""
    out = []
    for k in links:
        pts = [where[e] for e in k.ends]
        g0, g1 = k.gap if isinstance(k.gap, tuple) else (k.gap, k.gap)
        tx = max(where[v][0] for v in (k.via or k.ends)) + k.track
        if k.kind in ("arrow", "curve"):
            (x1, y1), (x2, y2) = pts
            if k.level is not None:         # level: both ends at that end's height
                y1 = y2 = pts[k.level][1]
            if k.kind == "curve":
                parts = curve(x1 + g0, y1, x2 - g1, y2, k.cls, k.head, rank=k.rank)
            elif k.head is None:            # an edge: a line between the ports, no direction
                parts = [line(x1, y1, x2, y2, k.cls, k.rank)]
            elif g0 == g1:
                parts = arrow(x1, y1, x2, y2, k.cls, k.head, rank=k.rank, gap=g0)
            else:
                parts = arrow(x1 + g0, y1, x2 - g1, y2, k.cls, k.head, rank=k.rank)
            if k.label is not None:
                parts.append(mid_text((x1 + x2) / 2 + 4, (y1 + y2) / 2, k.label, k.label_cls, "start"))
        elif k.kind == "bus":
            ys = [y for _, y in pts]
            parts = [line(x, y, tx, y, k.cls) for x, y in pts] + [line(tx, min(ys), tx, max(ys), k.cls),
                                                                  mid_text(tx, min(ys) - 9, k.label, k.label_cls)]
        elif k.kind == "elbow":        # out above the middle, back in below it (a bond may join there too)
            (x1, y1), (x2, y2) = pts
            y1, y2, x2 = y1 - ELBOW_OFF, y2 + ELBOW_OFF, x2 + 1
            parts = [line(x1, y1, tx, y1, k.cls), line(tx, y1, tx, y2, k.cls), *arrow(tx, y2, x2, y2, k.cls, k.head)]
        elif k.kind == "around":
            (x1, y1), (x2, y2) = pts
            down, up = y1 + AROUND_DROP, y2 - AROUND_DROP
            if k.head is None:
                parts = [path(f"M{n(x1)},{n(y1 + AROUND_DROP / 2)} H{n(tx)} V{n(up)} H{n(x2)}", k.cls)]
            else:
                parts = [path(f"M{n(x1)},{n(y1 + 1)} V{n(down)} H{n(tx)} V{n(up)} H{n(x2)} V{n(y2 - 7)}", k.cls),
                         arrow_head(x2, y2 - 1, 90, 7, k.head)]
            if k.label is not None:
                parts.append(mid_text(tx + 3, (up + down) / 2, k.label, k.label_cls, "start"))
        elif k.kind == "over":         # up out of the first end, across above both, down into the other
            (x1, y1), (x2, y2) = pts
            top = min(y1, y2) - k.track
            parts = [path(f"M{n(x1)},{n(y1)} V{n(top)} H{n(x2)} V{n(y2 - 7)}", k.cls), arrow_head(x2, y2 - 1, 90, 7, k.head)]
        else:                                                                        # "node"
            x, ys = tx, [y for _, y in pts]
            top, h = (min(ys) - g0, max(ys) - min(ys) + 2 * g0) if len(pts) > 1 else (ys[0] - k.h / 2, k.h)
            parts = [rect(x - k.w / 2, top, k.w, h, {"class": k.cls}, rx="6" if len(pts) > 1 else "5"),
                     mid_text(x, top + h / 2, k.label, k.label_cls)]
        out.append(group(parts, part=k.part))
    return out


def orbit(nodes: Sequence[Panel], radius: float, size: float, sends: Iterable[tuple] = (), hub: Sequence = (),
          track: float = 160.0, label_out: float = 13.0) -> Panel:
    """``nodes`` centred on a circle of ``radius`` in a ``size`` square, the first at the top, the
    rest clockwise (a ring's order), a circle of ``track`` through their outside; ``sends``:
    (from, to, label, part) arcs along it, clockwise, their label ``label_out`` px outside;
    ``hub``: (cell, class) lines at the centre."""
    c, count = size / 2, len(nodes)
    angles = [-math.pi / 2 + 2 * math.pi * r / count for r in range(count)]
    out = [circle(c, c, track, "strip")]
    gap = math.radians(9 if count > 2 else 14)
    for src, dst, cell, part in sends:
        a1, a2 = angles[src] + gap, angles[dst] - gap + (2 * math.pi if angles[dst] <= angles[src] else 0.0)
        p1, p2 = [(c + track * math.cos(a), c + track * math.sin(a)) for a in (a1, a2)]
        large = 1 if (a2 - a1) % (2 * math.pi) > math.pi else 0
        am = a1 + ((a2 - a1) % (2 * math.pi)) / 2
        out.append(group([path(f"M{n(p1[0])},{n(p1[1])} A{n(track)},{n(track)} 0 {large} 1 {n(p2[0])},{n(p2[1])}",
                               "arrow go"), arrow_head(*p2, math.degrees(a2) + 90, 8, "arrowhead go"),
                          mid_text(c + (track + label_out) * math.cos(am), c + (track + label_out) * math.sin(am), cell,
                                   "send-t")], part=part))
    out += [p.at(c + radius * math.cos(a) - p.w / 2, c + radius * math.sin(a) - p.h / 2) for p, a in zip(nodes, angles)]
    out.append(group([mid_text(c, c + (i - (len(hub) - 1) / 2) * 16, cell, cls) for i, (cell, cls) in enumerate(hub)],
                     part="now"))
    return Panel(size, size, out)


def heap_tree(nodes: Sequence[Panel], w: float, level: float, top: float, cls: str = "strip") -> Panel:
    """``nodes`` as a binary tree in heap order (node r's parent is (r − 1) // 2), ``w`` wide:
    node r at depth ⌊log2(r + 1)⌋ centred in its slot of a full level, ``level`` px below the level
    above, the root's centre ``top`` px down; lines of ``cls`` from parent to child; ports
    node<r>: the centres."""
    def depth(r: int) -> int:
        return (r + 1).bit_length() - 1
    pos = [(w * (r - (2 ** depth(r) - 1) + 0.5) / 2 ** depth(r), top + level * depth(r)) for r in range(len(nodes))]
    out = [line(*pos[(r - 1) // 2], *pos[r], cls) for r in range(1, len(nodes))]
    out += [p.at(x - p.w / 2, y - p.h / 2) for p, (x, y) in zip(nodes, pos)]
    return Panel(w, 2 * top + level * depth(len(nodes) - 1), out,
                 ports={f"node{r}": xy for r, xy in enumerate(pos)})


STEP_R = 9.0            # a step's circle
STEP_BAR_H = 26.0       # the bar of the busiest step
STEP_DROP = 14.0        # from the bars' feet down to the steps' centres
BRACKET_GAP, BRACKET_H = 6.0, 3.0


def step_strip(steps: Sequence[int], current: int, step_w: float, bars: Sequence[float | None] | None = None,
               ends: tuple[bool, bool] = (True, True), note: Any = None, note_w: float = 380.0) -> Panel:
    """Numbered steps as circles on a line, ``step_w`` apart, ``current`` lit (the one step drawer:
    the ring's phases, sp-layer's passes, each a strip; strips side by side make the whole line);
    ``bars``: a bar over each step (its share of the busiest one's; None: no bar), or no bars and
    no room for them; ``ends``: whether the line stops at the first / last step (else it runs to
    the panel's edge, on into the next strip); ``note``: a bracket under them and the note under
    it, else the strip stays with the next."""
    top = STEP_BAR_H if bars is not None else 0.0
    cy = top + (STEP_DROP if bars is not None else STEP_R + 2)
    centres = [(i + 0.5) * step_w for i in range(len(steps))]
    nodes = [line(centres[0] if ends[0] else 0.0, cy, centres[-1] if ends[1] else len(centres) * step_w, cy, "strip")]
    for i, cx, share in zip(steps, centres, bars if bars is not None else [None] * len(steps)):
        lit = " hl" if i == current else ""
        if share is not None:
            h = max(2.0, STEP_BAR_H * share)
            nodes.append(rect(cx - 5, STEP_BAR_H - h, 10, h, {"class": "sbar" + lit}, **{"data-part": f"bytes.{i}"}))
        nodes.append(circle(cx, cy, STEP_R, "step" + lit))       # the number right after it (style.css: .step.hl + text)
        nodes.append(mid_text(cx, cy, fmt.integer(i), "step-t"))
    if note is None:
        return Panel(len(centres) * step_w, cy + STEP_R + (0.0 if bars is not None else 2.0), nodes, joins=True)
    xa, xb, yb = centres[0] - STEP_R, centres[-1] + STEP_R, cy + STEP_R + BRACKET_GAP
    words_ = note_panel(note, note_w)
    nodes += [path(f"M{n(xa)},{n(yb - BRACKET_H)} V{n(yb)} H{n(xb)} V{n(yb - BRACKET_H)}", "strip"),
              moved(words_.nodes, xa, yb)]
    return Panel(max(len(centres) * step_w, xa + words_.w), yb + words_.h, nodes)


STEP_W = 28.0          # from one step of a strip to the next
PASS_GAP = 12.0        # between a forward pass's steps and the backward's


def pass_strips(count: int, split: int, current: int, width: float, part: str) -> Panel:
    """Steps 1..``count`` as two strips side by side (forward: 1..``split`` | backward), ``current``
    lit: the mlp's stages and sp-layer's steps."""
    passes = [step_strip(range(1, split + 1), current, STEP_W), step_strip(range(split + 1, count + 1), current, STEP_W)]
    return flowed([passes], width, gap=PASS_GAP, part=part)


# ---------------------------------------------------------------- the figure

def single(name: str, title: Any, nodes: list[dict], w: float, h: float, desc: Any = None,
           caption: Any = None) -> dict:
    """A figure of one fixed drawing (a bar chart, an aligned layout): shown at its natural size,
    shrunk to the column on a phone (the stylesheet's ``max-width: 100%``)."""
    svg = figure_svg(title, nodes, w, h, desc, "fig-one")
    kids = [svg] + ([el("figcaption", None, text=caption)] if caption is not None else [])
    return el("figure", {"class": "tp-figure", "data-figure": name}, kids)   # checked where built (tree.py)


def figure_at(name: str, title: Any, rows_at: Any, desc: Any = None, caption: Any = None, links: Any = None,
              row_gap: float = 14.0, gap: float = FLOW_GAP) -> dict:
    """A figure whose panels depend on the width they are drawn at (a chart's axis, a bar's
    length): ``rows_at(max_w)`` -> panel rows, built and flowed for each drawing of the pair;
    ``links(max_w, where)`` -> the :class:`Link` s drawn over them between their ports."""
    def draw(max_w: float):
        where: dict = {}
        nodes, w, h = flow(rows_at(max_w), max_w, gap=gap, row_gap=row_gap, where=where)
        return (nodes + connect(links(max_w, where), where) if links else nodes), w, h
    return pair(name, title, draw, desc, caption)


# ---------------------------------------------------------------- columns: one quantity per id or rank
# A drawing read down the page column by column (vocabulary ids grouped by the rank that owns
# them): every row of it is a panel of the same columns, stacked by :func:`column`, so a column
# keeps its x from row to row.

BOX_H = 20.0            # a box of a column (an id, a rank's value)
NUM_LINE = 14.0         # one line of numbers (a second one where neighbours' numbers would touch)
ARROW_H = 12.0          # an arrow from a column's box down to what comes under it


@dataclass(frozen=True)
class Col:
    """A column: its left edge and width in the rows' frame, the rank whose tint it takes."""

    x: float
    w: float
    rank: int | None = None

    @property
    def mid(self) -> float:
        return self.x + self.w / 2


def span(cols: Sequence[Col], rank: int | None = None) -> Col:
    """One column over ``cols`` (a rank's padding ids, the whole width)."""
    x = min(c.x for c in cols)
    return Col(x, max(c.x + c.w for c in cols) - x, rank)


def col_groups(groups: Sequence[Sequence[float]], ranks: Sequence[int | None], gap: float,
               least: float = 0.0) -> tuple[list[list[Col]], list[Col]]:
    """Groups of columns side by side, ``gap`` apart (group k: the widths of its columns, in
    ``ranks[k]``'s tint), each group at least ``least`` wide with its columns centred in it.
    Returns every group's columns and the groups themselves as columns."""
    cols, spans, x = [], [], 0.0
    for widths, r in zip(groups, ranks):
        inner = sum(widths)
        gw = max(inner, least)
        at = x + (gw - inner) / 2
        run = []
        for w in widths:
            run.append(Col(at, w, r))
            at += w
        cols.append(run)
        spans.append(Col(x, gw, r))
        x += gw + gap
    return cols, spans


def _cell_w(cell: Any, cls: str) -> float:
    return num_w(cell) if isinstance(cell, str) and cls.startswith("num") else text_w(cell, cls)


def _kept(mid: float, cell: Any, cls: str, room: tuple[float, float] | None) -> float:
    """The centre of a text at ``mid``, moved in where it would stick out of ``room`` (lo, hi)."""
    if room is None:
        return mid
    half = _cell_w(cell, cls) / 2
    return min(max(mid, room[0] + half), room[1] - half)


def alternate(count: int, on: bool = True) -> list[int]:
    """The line of each of ``count`` texts side by side: 0, 1, 0, 1 … (``on``), else all 0."""
    return [i % 2 if on else 0 for i in range(count)]


def col_texts(cols: Sequence[Col], cells: Sequence[tuple], room: tuple[float, float] | None = None,
              lines: Sequence[int] | None = None) -> Panel:
    """A line of texts, one centred on each column (``cells``: (cell, class, data-key or None));
    ``lines``: the line of each (0 or 1: a second line where neighbours' numbers are wider than
    their columns, :func:`alternate`); kept inside ``room``, (lo, hi) in the columns' frame."""
    nodes = []
    lines = lines or [0] * len(cols)
    for c, (cell, cls, k), ln in zip(cols, cells, lines):
        nodes.append(text(_kept(c.mid, cell, cls, room), 11 + NUM_LINE * ln, cell, cls, "middle",
                          **({"data-key": k} if k else {})))
    return Panel(max((c.x + c.w for c in cols), default=0.0), NUM_LINE * (1 + max(lines, default=0)), nodes)


def col_boxes(cols: Sequence[Col], cells: Sequence[tuple], cls: Any = "box", w: float | None = None,
              inset: float = 0.0, stagger: bool = False, arrow: bool = False, keys: Sequence | None = None,
              rx: str | None = None, h: float = BOX_H) -> Panel:
    """A box on each column, in its rank's tint, its text inside (``cells``: (cell, class, data-key
    or None)): as wide as the column less ``inset`` (at most ``w``); ``stagger``: every other box
    on a second line, where it may be ``w`` wide, into its neighbours' columns; ``arrow``: an
    arrow under every box down to one line (what the boxes feed, drawn under the panel);
    ``cls``: the boxes' class, or one per column; ``keys``: the boxes' data-keys."""
    nodes = []
    lines = 2 if stagger and len(cols) > 1 else 1
    bottom = lines * (h + 4) - 4
    for i, (c, (cell, tcls, k)) in enumerate(zip(cols, cells)):
        bw = w if stagger and w else min(w or c.w, c.w - inset)
        y = (h + 4) * (i % lines)
        box_cls = cls if isinstance(cls, str) else cls[i]
        nodes.append(rect(c.x + (c.w - bw) / 2, y, bw, h, rank_attrs(c.rank, box_cls), rx=rx,
                          **({"data-key": keys[i]} if keys and keys[i] else {})))
        nodes.append(mid_text(c.mid, y + h / 2, cell, tcls, **({"data-key": k} if k else {})))
        if arrow:
            nodes += down_arrow(c.mid, y + h, bottom + ARROW_H)
    return Panel(max((c.x + c.w for c in cols), default=0.0), bottom + (ARROW_H if arrow else 0.0), nodes)


def col_bars(cols: Sequence[Col], values: Sequence[float], unit: float, keys: Sequence[str],
             ends: Sequence[tuple] | None = None, axis_name: Any = None, inset: float = 6.0,
             room: tuple[float, float] | None = None, extent: tuple[float, float] | None = None,
             width: float | None = None) -> Panel:
    """A bar on each column from one axis, ``unit`` px per unit of value: up for a positive value,
    down for a negative one (a logit hanging from the maximum); ``ends``: (cell, class, data-key)
    at each bar's end, kept inside ``room``; ``axis_name``: a name right of the axis; ``extent``:
    the values (lowest, highest) the panel holds room for (by default the bars'); ``width``: the
    axis' length (by default to the last column's end)."""
    lo, hi = extent if extent is not None else (min(0.0, *values), max(0.0, *values))
    up = hi * unit + (NUM_LINE if ends else 0.0)
    down = -lo * unit + (NUM_LINE if ends and lo < 0 else 0.0)
    w = max((c.x + c.w for c in cols), default=0.0) if width is None else width
    nodes = [hline(0, w, up, "axis")]
    if axis_name is not None:
        nodes.append(mid_text(w + 4, up, axis_name, "op", "start"))
    for i, (c, v, k) in enumerate(zip(cols, values, keys)):
        bh = abs(v) * unit
        nodes.append(rect(c.x + inset, up - bh if v >= 0 else up, c.w - 2 * inset, bh,
                          rank_attrs(c.rank, "bar"), **{"data-key": k}))
        if ends:
            cell, cls, key_ = ends[i]
            nodes.append(text(_kept(c.mid, cell, cls, room), up - bh - 4 if v >= 0 else up + bh + 12, cell, cls,
                              "middle", **{"data-key": key_}))
    return Panel(w + (text_w(axis_name, "op") + 4 if axis_name is not None else 0.0), up + down, nodes)


def band_panel(cell: Any, w: float, part: str | None = None, h: float = 24.0, sub: Any = None,
               cls: str = "coll") -> Panel:
    """A collective as a band across the columns it joins, its result inside (:func:`band`); with
    ``sub`` (what it does, under its name) its name is a cell or its pieces, wrapped to the band."""
    if sub is None:
        return Panel(w, h, [band(0, 0, w, h, cell, part=part, cls=cls)])
    name, lines = wrapped(w / 2, 15, cell if isinstance(cell, list) else [cell], w - 8, "coll-t", "middle")
    more = (lines - 1) * LINE_H
    return Panel(w, h + more, [rect(0, 0, w, h + more, {"class": cls}, rx="6"), name,
                               text(w / 2, 30 + more, sub, "coll-s", "middle")], part=part)


def col_arrows(cols: Sequence[Col], h: float = 16.0) -> Panel:
    """A down arrow at the middle of every column, ``h`` long (into and out of a band across them)."""
    return Panel(span(cols).x + span(cols).w, h, [a for c in cols for a in down_arrow(c.mid, 1, h - 1)])


def col_panels(cols: Sequence[Col], panels: Sequence[Panel], part: str | None = None) -> Panel:
    """Each panel centred in its column, tops aligned (a rank's blocks in the rank's column); it
    hands on its panels' ports."""
    xs = [c.x + (c.w - p.w) / 2 for c, p in zip(cols, panels)]
    ports = {k: (x + px, py) for x, p in zip(xs, panels) for k, (px, py) in p.ports.items()}
    return Panel(span(cols).x + span(cols).w, max((p.h for p in panels), default=0.0),
                 [p.at(x, 0) for x, p in zip(xs, panels)], part=part, ports=ports)


def region(pieces: list, body: Panel, cls: str = "region", part: str | None = None) -> Panel:
    """A region of the drawing: ``body`` framed (``cls``), reaching into the figure's margin, under
    its title (pieces wrapped to the body's width)."""
    title, lines = wrapped(0, 13, pieces, body.w, "region-t")
    top = 22 + (lines - 1) * LINE_H
    h = top + body.h + 6
    return Panel(body.w, h, [rect(-PAD / 2, 0, body.w + PAD, h, {"class": cls}, rx="6"), title,
                             body.at(0, top)], part=part)


@dataclass
class Anchored(Panel):
    """A panel with the point arrows meet it at (its grid's middle): see :func:`snake`."""

    ax: float = 0.0
    ay: float = 0.0


TOKEN_LABEL_W = 14.0    # the token indices left of a token map


def token_panel(caption: Any, rows: list, cols: int, owner: int | None, shade: int = 3, labels: list | None = None,
                crossed: np.ndarray | None = None, sub: Any = None, part: str | None = None, cell: float = BLOCK,
                min_w: float = 0.0) -> Anchored:
    """A captioned token map (:func:`token_map`), its token indices left of it, ``sub`` under it;
    at least ``min_w`` wide (its translated caption's room)."""
    gx = TOKEN_LABEL_W if labels is not None else 0.0
    gh = len(rows) * cell
    nodes = [text(gx, CAP_H - 4, caption, "cap")]
    nodes += token_map(gx, CAP_H, rows, cols, owner, cell, shade, labels, crossed)
    if sub is not None:
        nodes.append(text(gx, CAP_H + gh + 11, sub, "dimtext"))
    return Anchored(max(gx + cols * cell, min_w), CAP_H + gh + (NAME_H if sub is not None else 0.0), nodes,
                    part=part, ax=gx + cols * cell / 2, ay=CAP_H + gh / 2)


SNAKE_ARROW = 14.0      # an arrow between two panels of a snake
SNAKE_DROP = 16.0       # the arrow down to its next line


def snake(panels: Sequence[Panel], width: float) -> Panel:
    """Panels left to right joined by arrows, turning under the last one onto a new line where the
    next would not fit ``width`` (a chain of steps in a narrow column), centred in ``width``.
    Arrows meet an :class:`Anchored` panel at its anchor, any other at its middle."""
    lines, run, x, at = [], [], 0.0, {}
    for p in panels:
        if run and x + SNAKE_ARROW + p.w > width:
            lines.append(run)
            run, x = [], at[id(run[-1])]                 # under the panel it continues from
        x = x + SNAKE_ARROW if run else x
        at[id(p)] = x if run or not lines else min(x, max(0.0, width - p.w))
        run.append(p)
        x = at[id(p)] + p.w
    lines.append(run)
    dx = (width - max(at[id(p)] + p.w for p in panels)) / 2
    nodes, y = [], 0.0
    for k, run in enumerate(lines):
        for i, p in enumerate(run):
            nodes.append(p.at(dx + at[id(p)], y))
            if i + 1 < len(run):
                ax = dx + at[id(p)] + p.w
                ay = y + min(getattr(p, "ay", p.h / 2), getattr(run[i + 1], "ay", run[i + 1].h / 2))
                nodes += [line(ax + 2, ay, ax + SNAKE_ARROW - 6, ay, "arrow"), arrow_head(ax + SNAKE_ARROW - 1, ay, 0)]
        y += max(p.h for p in run)
        if k + 1 < len(lines):
            last = run[-1]
            nodes += down_arrow(dx + at[id(last)] + getattr(last, "ax", last.w / 2), y + 1, y + SNAKE_DROP - 1)
            y += SNAKE_DROP
    return Panel(width, y, nodes)


def lit_column(panel: Panel, col: Col, part: str, cls: str = "tgt") -> Panel:
    """``panel`` with one of its columns lit from its top to its bottom (drawn behind it)."""
    return Panel(panel.w, panel.h, [rect(col.x, 0, col.w, panel.h, {"class": cls}, **{"data-part": part})]
                 + [panel.at(0, 0)])


def col_badges(groups: Sequence[Col], w: float = 34.0, h: float = BOX_H) -> Panel:
    """Each group's rank badge centred over it, narrower where the group is."""
    return col_boxes(groups, [(rank_name(g.rank), "badge-t", None) for g in groups], "badge", w=w, rx="4", h=h)


def centred(cell: Any, h: float, cls: str = "lbl", key: str | None = None, w: float | None = None) -> Panel:
    """A line of text centred on the middle of a panel ``h`` high (a row's name beside its bars),
    as wide as the text (or ``w``)."""
    return Panel(text_w(cell, cls) if w is None else w, h,
                 [mid_text(0, h / 2, cell, cls, "start", **({"data-key": key} if key else {}))])


# ---------------------------------------------------------------- bars from zero on a linear scale

HBAR_H = 11.0           # a bar of :func:`hbars`


@dataclass(frozen=True)
class HBar:
    """A bar of :func:`hbars`: its value (None: ``none`` is written where it would be), the rank
    whose tint it takes, its class, its key (the bar's is ``<key>bar.<tag>``, its number's
    ``<key>.<tag>``) and the words left of it."""

    who: Any
    value: float | None
    rank: int | None
    cls: str
    key: str
    tag: str
    none: Any = None


def hbars(rows: Sequence[tuple[Any, Sequence[HBar]]], w: float, longest: float, ref: tuple | None = None) -> Panel:
    """Rows of bars from one zero line, each row headed by a rank's badge (an int) or words, each
    bar by its ``who`` and its number at its end, at most ``longest`` px long and within ``w``;
    ``ref``: (value, cell), a dashed line at that value across every row, its cell above it."""
    values = [b.value for _, bars in rows for b in bars if b.value is not None] + ([ref[0]] if ref else [])
    head_w = max([34.0] + [text_w(h) for h, _ in rows if not isinstance(h, int)])
    who_w = max(text_w(b.who, "op") for _, bars in rows for b in bars)
    lead = head_w + 6 + who_w + 8
    num_room = widest(fmt.num(v) for v in values) + 8
    lo, hi = min(0.0, *values), max(0.0, *values)
    unit = min(longest, w - lead - num_room) / ((hi - lo) or 1.0)
    x0 = lead - lo * unit                                     # where the value 0 sits
    top = 30.0 if ref else 0.0
    y, nodes = top, []
    for head, bars in rows:
        if isinstance(head, int):
            nodes += badge(head, 0, y + 1, 34.0)
        else:
            nodes.append(mid_text(0, y + HBAR_H + 1, head, "dimtext", "start"))
        for k, b in enumerate(bars):
            by = y + k * (HBAR_H + 3) if len(bars) > 1 else y + HBAR_H / 2 + 1
            nodes.append(mid_text(lead - who_w - 8, by + HBAR_H / 2, b.who, "op", "start"))
            if b.value is None:
                nodes.append(mid_text(x0 + 4, by + HBAR_H / 2, b.none, "dimtext", "start"))
                continue
            left, bw = (x0, b.value * unit) if b.value >= 0 else (x0 + b.value * unit, -b.value * unit)
            nodes.append(rect(left, by, bw, HBAR_H, rank_attrs(b.rank, b.cls), **{"data-key": f"{b.key}bar.{b.tag}"}))
            nodes.append(mid_text(max(x0 + b.value * unit, x0) + 4, by + HBAR_H / 2, fmt.num(b.value), "num", "start",
                                  **{"data-key": f"{b.key}.{b.tag}"}))
        y += 2 * HBAR_H + 12
    if ref:
        rx_ = x0 + ref[0] * unit
        nodes += [line(rx_, top - 8, rx_, y - 6, "axis ref"), text(rx_, top - 12, ref[1], "op", "middle")]
    nodes.append(line(x0, top - 6, x0, y - 6, "axis"))
    return Panel(min(w, x0 + max(hi, 0.0) * unit + num_room), y, nodes)


# ---------------------------------------------------------------- named bars, one under another

BAR_ROW_GAP = 8.0       # between two bars of :func:`bar_rows`


def bar_rows(rows: Sequence[tuple], name_w: float, ref: tuple | None = None, min_w: float = 0.0) -> Panel:
    """Bars (:func:`bar`) one under another, each named right-aligned left of it: ``rows`` are
    (part, name, bar panel, lit, length of its segments), the lit one named in bold and framed;
    ``ref``: (x, cell), a line ``x`` px from the bars' start across all of them, its cell under it
    (``min_w``: the chart's width, room for that cell beside the longest bar).
    A bar's shapes are its group's own children (its part), so its segments read as one bar."""
    nodes, y = [], 0.0
    if ref is not None:             # behind the bars and their numbers
        nodes.append(line(name_w + ref[0], -4, name_w + ref[0], len(rows) * (BAR_H + BAR_ROW_GAP), "mem-line"))
    for part, name, b, lit, length in rows:
        kids = [mid_text(-6, BAR_H / 2, name, "cap" if lit else "lbl", "end")]
        if lit:
            kids.append(rect(-2, -2, length + 4, BAR_H + 4, {"class": "frame-hl"}, rx="2"))
        nodes.append(Panel(b.w, b.h, kids + b.nodes, part=part, cls="hl" if lit else "").at(name_w, y))
        y += BAR_H + BAR_ROW_GAP
    w = max(min_w, name_w + max((b.w for _, _, b, _, _ in rows), default=0.0))
    if ref is not None:
        nodes.append(text(name_w + ref[0], y + 10, ref[1], "dimtext", "middle"))
        y += NAME_H + 2
    return Panel(w, y - BAR_ROW_GAP + (BAR_ROW_GAP if ref is not None else 0.0), nodes)
