"""Figures of the backward pass (page 1, sections ``backward``, ``dp-tp`` and ``precision``).

``backward``: where every gradient lives and which collective touches it.  The weight
gradients G_W₁ (D×F) and G_W₂ (F×D) are drawn whole with every entry tinted by the rank that
computes it: each rank's columns of G_W₁ and rows of G_W₂ are complete where they are, so no
collective touches them.  G_X is a sum of one partial term per rank (dashed frames): the
backward AllReduce (operator f) turns them into the final G_X that every rank holds.

``dp-tp``: the dp × tp ranks (a row is a replica's TP group, a column the DP group of one
shard) and, per reduction variant, its gradient's scale against the correct one on a log axis:
the correct variant sits on 1×, the wrong ones are visibly off by tp or dp.

``precision``: per quantity, the largest |sharded − unsharded| against its tolerance on a log
axis (a difference below 1e−15 is drawn at the axis' floor, as the table writes "< 1e−15").
"""

from __future__ import annotations

import math

import numpy as np

from .. import fmt
from ..dp_tp import DpTpResult, Variant
from ..mlp import MlpResult
from .draw import (CELL_H, CELL_W, LABEL_H, PAD, Panel, arrow_panel, badge, circle, figure, group, label, line,
                   mid_text, owned_grid, pair, polygon, rank_attrs, rank_name, rect, text,
                   wrapped)

# ---------------------------------------------------------------- backward


def _shape(a: np.ndarray) -> str:
    return "×".join(fmt.integer(s) for s in np.shape(a))


def _weight_panel(m: np.ndarray, symbol: str, owner, by_cols: bool, note: str, part: str, scale: float) -> Panel:
    """A weight gradient drawn whole, entries tinted by the rank that computes them and every
    rank's block labelled R0, R1, … (above its columns, or right of its rows)."""
    top = LABEL_H + (14 if by_cols else 0)
    rows, cols = m.shape
    nodes = [text(0, LABEL_H - 5, symbol + " · " + _shape(m), "cap"),
             *owned_grid(m, owner, 0, top, part, scale)]
    labels = {}
    for i, j in np.ndindex(rows, cols):
        labels.setdefault(owner(i, j), []).append(j if by_cols else i)
    for r, where in labels.items():
        mid = (min(where) + max(where) + 1) / 2
        if by_cols:
            nodes.append(text(mid * CELL_W, top - 4, rank_name(r), "rk-t", "middle", **rank_attrs(r, "rk-t")))
        else:
            nodes.append(mid_text(cols * CELL_W + 6, top + mid * CELL_H, rank_name(r), "rk-t", "start",
                                  **rank_attrs(r, "rk-t")))
    h = top + rows * CELL_H
    nodes += [text(0, h + 14, label("fig." + note), "dimtext"), text(0, h + 29, label("fig.bw_no_coll"), "ok-t")]
    return Panel(max(cols * CELL_W + (0 if by_cols else 30), 200.0), h + 34, nodes, part=part)


def _partial_panel(m: np.ndarray, r: int, scale: float) -> Panel:
    h = LABEL_H + m.shape[0] * CELL_H
    nodes = [text(0, LABEL_H - 5, label("fig.bw_partial", name="G_X", r=rank_name(r)), "cap"),
             *owned_grid(m, lambda i, j: r, 0, LABEL_H, f"G_X_partial.{r}", scale, "frame part")]
    return Panel(max(m.shape[1] * CELL_W, 86.0), h, nodes, part=f"G_X_partial.{r}")


def _plus(h: float) -> Panel:
    return Panel(16, h, [mid_text(8, LABEL_H + (h - LABEL_H) / 2, "+", "op")], joins=True)


def _allreduce(tp: int, h: float) -> Panel:
    box_h = 2 * CELL_H
    y = LABEL_H + max(0.0, (h - LABEL_H - box_h) / 2)
    return Panel(130, h, [
        rect(0, y, 124, box_h, {"class": "coll"}, rx="6"),
        mid_text(62, y + CELL_H * 0.62, label("fig.bw_allreduce_f"), "coll-t"),
        mid_text(62, y + CELL_H * 1.42, label("fig.sum_ranks", last=rank_name(tp - 1)), "coll-s"),
    ], part="allreduce-f", cls="hl")


def _merged(m: np.ndarray, err: float, scale: float) -> Panel:
    h = LABEL_H + m.shape[0] * CELL_H
    nodes = [text(0, LABEL_H - 5, label("fig.every_rank", name="G_X"), "cap"),
             *owned_grid(m, lambda i, j: None, 0, LABEL_H, "G_X.merged", scale, "frame", "cell fin"),
             text(0, h + 14, label("fig.matches_ref", err=fmt.err(err)), "dimtext")]
    return Panel(max(m.shape[1] * CELL_W, 190.0), h + 18, nodes, part="G_X.merged")


def figure_backward(res: MlpResult) -> dict:
    """The ``backward`` figure of one ``mlp.run_mlp`` result."""
    tp = res.tp
    ranks = res.ranks
    sharded = res.sharded
    width = ranks[0].G_W1.shape[1]              # F/tp columns of G_W₁ (rows of G_W₂) per rank

    def rows():
        w1 = _weight_panel(sharded.G_W1, "G_W₁", lambda i, j: j // width, True, "bw_w1_where", "G_W1",
                           float(np.max(np.abs(sharded.G_W1))))
        w2 = _weight_panel(sharded.G_W2, "G_W₂", lambda i, j: i // width, False, "bw_w2_where", "G_W2",
                           float(np.max(np.abs(sharded.G_W2))))
        scale = float(np.max(np.abs([rk.G_X_partial for rk in ranks])))
        parts = []
        for rk in ranks:
            if parts:
                parts.append(_plus(parts[-1].h))
            parts.append(_partial_panel(rk.G_X_partial, rk.rank, scale))
        h = parts[-1].h
        merged = _merged(sharded.G_X, res.max_abs_err["G_X"], float(np.max(np.abs(sharded.G_X))))
        return [[w1, w2], parts + [arrow_panel(None, w=30, h=h), _allreduce(tp, h), arrow_panel(None, w=30, h=h),
                                   merged]]

    title = label("fig.bw_title", tp=fmt.integer(tp))
    return figure("backward", title, rows)


# ---------------------------------------------------------------- dp-tp

W = 380.0
BOX_W, BOX_H = 46.0, 24.0


def _layout(tp: int, dp: int, width: float) -> tuple[list[dict], float]:
    """dp rows (replicas) × tp columns (ranks of a TP group), tinted by the shard they hold;
    the boxes narrower than :data:`BOX_W` where ``width`` would not hold them."""
    x0, y0 = PAD + 74, 30.0
    box_w = min(BOX_W, (width - PAD - x0) / tp - 8)
    nodes = [text(PAD, 14, label("fig.dt_grid", dp=fmt.integer(dp), tp=fmt.integer(tp)), "cap")]
    for r in range(tp):                                       # a DP group: shard r on every replica
        nodes.append(rect(x0 + r * (box_w + 8) - 4, y0 - 4, box_w + 8, dp * (BOX_H + 8) + 0, {"class": "dpg"},
                          rx="6"))
    for k in range(dp):                                       # a TP group: one replica
        y = y0 + k * (BOX_H + 8)
        nodes.append(rect(x0 - 6, y - 2, tp * (box_w + 8) + 4, BOX_H + 4, {"class": "tpg"}, rx="5"))
        nodes.append(mid_text(x0 - 12, y + BOX_H / 2, label("fig.dt_replica", k=fmt.integer(k)), "dimtext", "end"))
        for r in range(tp):
            x = x0 + r * (box_w + 8)
            nodes.append(group(badge(r, x, y, box_w, BOX_H), part=f"rank.{k}.{r}"))
    y = y0 + dp * (BOX_H + 8) + 10
    room = width - PAD - 30 - PAD                             # the legend's text, beside its key
    tp_key, tp_lines = wrapped(PAD + 30, y + 10, [label("fig.dt_tp_group_1"), label("fig.dt_tp_group_2")], room,
                               "dimtext")
    y2 = y + (tp_lines - 1) * 15
    dp_key, dp_lines = wrapped(PAD + 30, y2 + 30, [label("fig.dt_dp_group_1"), label("fig.dt_dp_group_2")], room,
                               "dimtext")
    nodes += [rect(PAD, y, 22, 12, {"class": "tpg"}, rx="4"), tp_key,
              rect(PAD + 4, y2 + 18, 14, 16, {"class": "dpg"}, rx="4"), dp_key]
    return nodes, y2 + 40 + (dp_lines - 1) * 15


LOG2_LO, LOG2_HI = -3.0, 3.0          # the scale axis: ⅛× … 8× (tp, dp ≤ 4 give ¼ … 4)


def _scale_x(s: float, x0: float, w: float) -> float:
    v = min(max(math.log2(s) if s > 0 else LOG2_LO, LOG2_LO), LOG2_HI)
    return x0 + w * (v - LOG2_LO) / (LOG2_HI - LOG2_LO)


def _scales(variants: list[Variant], top: float, width: float) -> tuple[list[dict], float]:
    """Each variant's scale against the correct gradient on a log axis; 1× is the correct one."""
    x0, w = PAD + 10, width - 2 * PAD - 70
    head, lines = wrapped(PAD, top + 18, [label("fig.dt_scale_head_1"), label("fig.dt_scale_head_2")],
                          width - 2 * PAD, "cap")
    nodes = [head]
    y = top + 30 + (lines - 1) * 15
    row_h = 38.0
    one = _scale_x(1.0, x0, w)
    for v in variants:
        s = float(v.scale)
        xs = _scale_x(s, x0, w)
        right = abs(math.log2(s)) < 1e-9 if s > 0 else False
        parts = [text(x0, y + 11, label(f"label.variant_{v.name}"), "dimtext"),
                 line(x0, y + 25, x0 + w, y + 25, "ax"), line(one, y + 16, one, y + 34, "ax one")]
        if right:
            parts.append(circle(xs, y + 25, 5, "dev ok"))
        else:
            parts.append(rect(min(one, xs), y + 19, abs(xs - one), 12, {"class": "dev bad"}))
        parts.append(text(x0 + w + 8, y + 29, fmt.num(s), "num em" if not right else "num"))
        parts.append(text(x0 + w + 8 + 7 * len(fmt.num(s)) + 2, y + 29, "×", "dimtext"))
        nodes.append(group(parts, part=f"variant.{v.name}"))
        y += row_h
    # axis ticks and the 1× line across all rows
    for e in range(int(LOG2_LO) + 1, int(LOG2_HI)):
        xt = _scale_x(2.0 ** e, x0, w)
        tick = {-2: "¼", -1: "½"}.get(e, fmt.integer(2 ** e) if e >= 0 else None)
        nodes.append(line(xt, y - 4, xt, y + 2, "ax"))
        nodes.append(text(xt, y + 14, tick + "×", "dimtext", "middle"))
    return nodes, y + 20


def figure_dp_tp(res: DpTpResult) -> dict:
    """The ``dp-tp`` figure of one ``dp_tp.run_dp_tp`` result."""
    def draw(max_w: float):
        width = min(W, max_w)
        layout, h = _layout(res.tp, res.dp, width)
        scales, h = _scales(res.variants, h, width)
        return layout + scales, width, h + PAD
    title = label("fig.dt_title", dp=fmt.integer(res.dp), tp=fmt.integer(res.tp))
    return pair("dp-tp", title, draw)


# ---------------------------------------------------------------- precision

LOG10_LO, LOG10_HI = -17.0, 2.0       # the error axis: 1e−17 … 100 (float16 and bfloat16 tolerances pass 1)


def _err_x(e: float, x0: float, w: float) -> float:
    v = math.log10(e) if e > 0 else LOG10_LO
    v = min(max(v, LOG10_LO), LOG10_HI)
    return x0 + w * (v - LOG10_LO) / (LOG10_HI - LOG10_LO)


_SYMBOLS = {"Y": "Y", "loss": "L", "G_X": "G_X", "G_W1": "G_W₁", "G_W2": "G_W₂", "ce": label("fig.pr_ce")}


def figure_precision(dtype: str, rows: list[tuple[str, float, float]]) -> dict:
    """The ``precision`` figure: ``rows`` of (quantity, max abs error, tolerance) for ``dtype``
    (quantities: the keys of ``mlp``'s errors and "ce"); a shorter axis in a phone drawing."""
    title = label("fig.pr_title", dtype=dtype)
    return pair("precision", title, lambda max_w: _precision(rows, min(W, max_w)))


def _precision(rows: list[tuple[str, float, float]], width: float) -> tuple[list[dict], float, float]:
    x0, w = PAD + 44, 186.0 - (W - width)
    xe, xt = x0 + w + 12, x0 + w + 12 + 60
    nodes = [text(xe, 14, label("fig.pr_err"), "cap"), text(xt, 14, label("fig.pr_tol"), "cap")]
    y = 24.0
    floor = fmt.err(0.0)
    for name, err, tol in rows:
        ok = err <= tol
        cy = y + 12
        parts = [text(PAD, cy + 4, _SYMBOLS[name], "cap"),
                 line(x0, cy, x0 + w, cy, "ax"),
                 rect(x0, cy - 6, _err_x(tol, x0, w) - x0, 12, {"class": "okzone"}),
                 line(_err_x(tol, x0, w), cy - 9, _err_x(tol, x0, w), cy + 9, "tolmark")]
        ex = _err_x(err, x0, w)
        shown = fmt.diff(err)                  # as the table writes it
        if shown in (floor, "0"):              # "< 1e−15" or 0: an arrowhead pointing left from 1e−15
            xf = _err_x(fmt.TINY, x0, w)
            parts.append(polygon([(xf, cy - 5), (xf - 9, cy), (xf, cy + 5)], "errdot floor"))
        else:
            parts.append(circle(ex, cy, 5, "errdot" + ("" if ok else " bad")))
        parts += [text(xe, cy + 4, shown, "num" if ok else "num em"), text(xt, cy + 4, fmt.err(tol), "num")]
        nodes.append(group(parts, part=f"q.{name}"))
        y += 26
    for e in range(int(LOG10_HI), int(LOG10_LO), -5 if w >= 150 else -10):    # labels 40 px apart at least
        xtk = _err_x(10.0 ** e, x0, w)
        nodes.append(line(xtk, 22, xtk, y, "ax tick"))
        nodes.append(text(xtk, y + 12, "1e" + fmt.integer(e), "dimtext", "middle"))
    # the legend: both keys on one line, or (a phone drawing) one under the other
    kx, ky = (PAD + 190, y) if width >= W else (PAD, y + 16)
    nodes += [rect(PAD, y + 22, 18, 10, {"class": "okzone"}),
              text(PAD + 24, y + 31, label("fig.pr_zone"), "dimtext"),
              line(kx + 9, ky + 21, kx + 9, ky + 33, "tolmark"),
              text(kx + 18, ky + 31, label("fig.pr_tolmark"), "dimtext")]
    return nodes, width, ky + 40 + PAD
