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
from .draw import (CELL_H, LABEL_H, PAD, ChartRow, LogAxis, Mark, Panel, arrow_panel, axis_chart, badge_grid, column, figure,
                   figure_at, key, label, op_box, owned_panel, rank_name, sign, words)

# ---------------------------------------------------------------- backward


def _shape(a: np.ndarray) -> str:
    return "×".join(fmt.integer(s) for s in np.shape(a))


def _weight_panel(m: np.ndarray, symbol: str, owner, names: str, note: str, part: str) -> Panel:
    """A weight gradient drawn whole, entries tinted by the rank that computes them and every
    rank's block named R0, R1, … (above its columns, or right of its rows)."""
    return owned_panel(m, owner, symbol + " · " + _shape(m), part, float(np.max(np.abs(m))), names,
                       [(label("fig." + note), "dimtext"), (label("fig.bw_no_coll"), "ok-t")], min_w=200)


def _partial_panel(m: np.ndarray, r: int, scale: float) -> Panel:
    return owned_panel(m, lambda i, j: r, label("fig.bw_partial", name="G_X", r=rank_name(r)), f"G_X_partial.{r}",
                       scale, frame_cls="frame part", min_w=86)


def _allreduce(tp: int, h: float) -> Panel:
    """The backward AllReduce (operator f) beside the partial sums, centred on their grids."""
    box_h = 2 * CELL_H
    return op_box(label("fig.bw_allreduce_f"), label("fig.sum_ranks", last=rank_name(tp - 1)), 124, "coll",
                  "allreduce-f", box_h, top=LABEL_H + max(0.0, h - LABEL_H - box_h) / 2, lit="hl")


def _merged(m: np.ndarray, err: float) -> Panel:
    return owned_panel(m, lambda i, j: None, label("fig.every_rank", name="G_X"), "G_X.merged",
                       float(np.max(np.abs(m))), notes=[(label("fig.matches_ref", err=fmt.err(err)), "dimtext")],
                       cell_cls="cell fin", num_cls="num fin", min_w=190)


def figure_backward(res: MlpResult) -> dict:
    """The ``backward`` figure of one ``mlp.run_mlp`` result."""
    tp = res.tp
    ranks = res.ranks
    sharded = res.sharded
    width = ranks[0].G_W1.shape[1]              # F/tp columns of G_W₁ (rows of G_W₂) per rank

    def rows():
        w1 = _weight_panel(sharded.G_W1, "G_W₁", lambda i, j: j // width, "cols", "bw_w1_where", "G_W1")
        w2 = _weight_panel(sharded.G_W2, "G_W₂", lambda i, j: i // width, "rows", "bw_w2_where", "G_W2")
        scale = float(np.max(np.abs([rk.G_X_partial for rk in ranks])))
        parts = []
        for rk in ranks:
            if parts:
                parts.append(sign("+", parts[-1].h))
            parts.append(_partial_panel(rk.G_X_partial, rk.rank, scale))
        h = parts[-1].h
        merged = _merged(sharded.G_X, res.max_abs_err["G_X"])
        return [[w1, w2], parts + [arrow_panel(None, w=30, h=h), _allreduce(tp, h), arrow_panel(None, w=30, h=h),
                                   merged]]

    title = label("fig.bw_title", tp=fmt.integer(tp))
    return figure("backward", title, rows)


# ---------------------------------------------------------------- dp-tp

W = 380.0               # the widest drawing of a chart figure (a phone's is its column)


def _groups(tp: int, dp: int, width: float) -> list:
    """dp rows (replicas) × tp columns (ranks of a TP group), tinted by the shard they hold, and
    the legend of the two kinds of group."""
    room = width - 2 * PAD
    grid = column([words(label("fig.dt_grid", dp=fmt.integer(dp), tp=fmt.integer(tp)), room, "cap"),
                   badge_grid(dp, tp, lambda k: label("fig.dt_replica", k=fmt.integer(k)), room)], gap=10)
    keys = column([key("tpg", [label("fig.dt_tp_group_1"), label("fig.dt_tp_group_2")], room, "wide"),
                   key("dpg", [label("fig.dt_dp_group_1"), label("fig.dt_dp_group_2")], room, "tall")])
    return [[grid], [keys]]


SCALE_AXIS = (-3.0, 3.0)      # the scale axis: ⅛× … 8× in powers of 2 (tp, dp ≤ 4 give ¼ … 4)
_TICKS = {-2: "¼", -1: "½"}


def _scales(variants: list[Variant], width: float) -> list:
    """Each variant's scale against the correct gradient on a log axis; 1× is the correct one."""
    axis = LogAxis(*SCALE_AXIS, w=width - 2 * PAD - 80, base=2)
    rows = []
    for v in variants:
        s = float(v.scale)
        right = s > 0 and abs(math.log2(s)) < 1e-9
        marks = [Mark("tick", 1.0, cls="ax one"), Mark("dot", s, cls="dev ok") if right else
                 Mark("zone", 1.0, s, cls="dev bad")]
        rows.append(ChartRow(f"variant.{v.name}", label(f"label.variant_{v.name}"), marks,
                             [(fmt.num(s), "num" if right else "num em", "×")]))
    ticks = [(2.0 ** e, _TICKS.get(e, fmt.integer(2 ** e) if e >= 0 else "") + "×") for e in range(-2, 3)]
    head = words([label("fig.dt_scale_head_1"), label("fig.dt_scale_head_2")], width - 2 * PAD, "cap")
    return [[column([head, axis_chart(axis, rows, ticks, lead=10, names_above=True)])]]


def figure_dp_tp(res: DpTpResult) -> dict:
    """The ``dp-tp`` figure of one ``dp_tp.run_dp_tp`` result."""
    def rows(max_w: float) -> list:
        width = min(W, max_w)
        return _groups(res.tp, res.dp, width) + _scales(res.variants, width)
    title = label("fig.dt_title", dp=fmt.integer(res.dp), tp=fmt.integer(res.tp))
    return figure_at("dp-tp", title, rows)


# ---------------------------------------------------------------- precision

ERR_AXIS = (-17.0, 2.0)       # the error axis: 1e−17 … 100 (float16 and bfloat16 tolerances pass 1)
_SYMBOLS = {"Y": "Y", "loss": "L", "G_X": "G_X", "G_W1": "G_W₁", "G_W2": "G_W₂", "ce": label("fig.pr_ce")}


def figure_precision(dtype: str, rows: list[tuple[str, float, float]]) -> dict:
    """The ``precision`` figure: ``rows`` of (quantity, max abs error, tolerance) for ``dtype``
    (quantities: the keys of ``mlp``'s errors and "ce"); a shorter axis in a phone drawing."""
    title = label("fig.pr_title", dtype=dtype)
    return figure_at("precision", title, lambda max_w: _precision(rows, min(W, max_w)))


def _precision(rows: list[tuple[str, float, float]], width: float) -> list:
    axis = LogAxis(*ERR_AXIS, w=width - 2 * PAD - 180)
    floor = fmt.err(0.0)
    chart = []
    for name, err, tol in rows:
        ok = err <= tol
        shown = fmt.diff(err)                  # as the table writes it
        # "< 1e−15" or 0: an arrowhead pointing left from 1e−15
        at = Mark("floor", fmt.TINY, cls="errdot floor") if shown in (floor, "0") else \
            Mark("dot", err, cls="errdot" + ("" if ok else " bad"))
        marks = [Mark("zone", 0.0, tol, cls="okzone"), Mark("tick", tol, cls="tolmark"), at]
        chart.append(ChartRow(f"q.{name}", _SYMBOLS[name], marks,
                              [(shown, "num" if ok else "num em", None), (fmt.err(tol), "num", None)]))
    step = 5 if axis.w >= 150 else 10                   # tick labels 40 px apart at least
    ticks = [(10.0 ** e, "1e" + fmt.integer(e)) for e in range(int(ERR_AXIS[1]), int(ERR_AXIS[0]), -step)]
    heads = [label("fig.pr_err"), label("fig.pr_tol")]
    return [[axis_chart(axis, chart, ticks, lead=44, heads=heads, grid=True)],
            [key("okzone", label("fig.pr_zone"), mark="flat"), key("tolmark", label("fig.pr_tolmark"), mark="tick")]]
