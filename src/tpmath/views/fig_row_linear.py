"""Figures of page 2: row- and column-parallel linear, forward (``row-linear``) and backward
(``row-backward``), and the elements each MLP pairing sends (``row-pairing``).

The linear figures draw the matrices of the section's tables (same core results, same
numbers), one lane per rank in the rank's tint, the shapes under every matrix (B×D/t …), and
how the ranks' results are merged, drawn as movement (every rank's result flows into the
collective, the merged one out to every rank): summed by an AllReduce (a replicated result,
grey) or placed side by side by an AllGather (each block keeps the tint of the rank that
computed it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..schedules import bus_bandwidth_factor
from .. import fmt
from ..row_linear import ColumnLinearResult, RowLinearResult
from .draw import (NARROW_W, NUM_CHAR, PAD, TEXT_CHAR, Panel, Row, cell_width, coll_panel, collective_flow, figure,
                   grid_panel, heading, label, lane_badge, pair, rect, sign, text, text_w)

GAP = 10.0              # tree.flow's gap between panels
CAPTION_W = 170.0       # the width a translated caption above a merged result may take


def _dims(sym: str, a: np.ndarray) -> tuple[str, str]:
    """("B×D/t", "2×2"): the symbolic shape and the numbers (language-neutral)."""
    return sym, "×".join(fmt.integer(s) for s in np.shape(a))


def _lane(r: int, parts: list) -> Row:
    """Rank r's lane (tinted behind): badge | matrix (operator) matrix …; ``parts`` are
    panels and operator symbols.  A phone wraps it, indented past the badge."""
    h = max(p.h for p in parts if isinstance(p, Panel))
    out = [lane_badge(r, h)]
    for p in parts:
        # an operator goes along with the matrix it applies to (it never ends a wrapped line)
        out.append(sign(p, h, "stage-name", "ruled") if isinstance(p, str) else p)
    return Row(out, rank=r, hang=True)


def _sub(what: str, p: int) -> dict:
    """What the collective does with the ranks' results ("adds R0…R3"); with one rank, nothing."""
    return label("fig.rl_one_rank") if p == 1 else label("fig." + what, last="R" + fmt.integer(p - 1))


def _merge(lanes: list, label: Any, sub: Any, results: list[Panel], part: str,
           cls: str = "coll") -> list[list[Panel]]:
    """Where the ranks' results would be merged and none is needed: a band under the lanes (as
    wide as they are, at most a phone column), and what the ranks hold."""
    return [[coll_panel(label, sub, _lanes_w(lanes), part=part, cls=cls)], results]


def _moved(kind: str, lanes: list, label: Any, sub: Any, results: list[Panel], part: str) -> list[list[Panel]]:
    """The collective as movement under the lanes (every rank's result into it, the merged one
    out to every rank: :func:`draw.collective_flow`), what the ranks hold after it beside it."""
    return [[collective_flow(kind, len(lanes), label, sub, part=part, w=_lanes_w(lanes))] + results]


def _lanes_w(lanes: list) -> float:
    panels = [lane.panels if isinstance(lane, Row) else lane for lane in lanes]
    return min(max(sum(p.w for p in row) + GAP * (len(row) - 1) for row in panels), NARROW_W - 16)


def _scale(*mats) -> float:
    return max(float(np.max(np.abs(m))) for m in mats)


def _err(err: float) -> dict:
    return label("fig.matches_ref", err=fmt.err(err))


def _partial(m, name: str, r: int, key: str, cw: float, scale: float, shape) -> Panel:
    """A rank's partial result: its caption is wider than a small grid, so the panel holds it."""
    caption = label("fig.rl_partial", name=name)
    return grid_panel(m, caption, r, key, cw, scale, shape, min_w=max(40.0, text_w(caption, "cap")))


# ---------------------------------------------------------------- forward

def _row_forward(row: RowLinearResult, cw: float) -> list[list[Panel]]:
    p = row.tp
    ys = [rk.Y_partial for rk in row.ranks] + [row.Y]
    sx, sa, sy = _scale(row.inputs["X"]), _scale(row.inputs["A"]), _scale(*ys)
    out = [[heading(label("fig.rl_row_head"), [label("fig.rl_row_sub_1"), label("fig.rl_row_sub_2")])]]
    for rk in row.ranks:
        r = rk.rank
        out.append(_lane(r, [
            grid_panel(rk.X_shard, "Xᵣ", r, f"Xr.{r}", None, sx, _dims("B×D/t", rk.X_shard)), "·",
            grid_panel(rk.A_shard, "Aᵣ", r, f"Ar.{r}", None, sa, _dims("D/t×O", rk.A_shard)), "=",
            _partial(rk.Y_partial, "Yᵣ", r, f"Yr.{r}", cw, sy, _dims("B×O", rk.Y_partial)),
        ]))
    Y = grid_panel(row.Y, label("fig.rl_every_rank", name="Y"), None, "Y.row", cw, sy, _err(row.max_abs_err["Y"]), min_w=CAPTION_W)
    out += _moved("allreduce", out[1:], label("fig.rl_allreduce", op="f̄"), _sub("rl_sum", p), [Y], "allreduce-g")
    return out


def _col_forward(col: ColumnLinearResult, cw: float) -> list[list[Panel]]:
    p = col.tp
    X = col.inputs["X"]
    sa, sy = _scale(col.inputs["A"]), _scale(col.Y)
    out = [[heading(label("fig.rl_col_head"), [label("fig.rl_col_sub_1"), label("fig.rl_col_sub_2")])],
           [grid_panel(X, label("fig.rl_every_rank", name="X"), None, "X.all", None, _scale(X), _dims("B×D", X))]]
    for rk in col.ranks:
        r = rk.rank
        out.append(_lane(r, [
            "X·", grid_panel(rk.A_shard, "Aᵣ", r, f"cAr.{r}", None, sa, _dims("D×O/t", rk.A_shard)), "=",
            grid_panel(rk.Y_shard, label("fig.rl_slice", name="Yᵣ"), r, f"cYr.{r}", cw, sy, _dims("B×O/t", rk.Y_shard)),
        ]))
    Y = grid_panel(col.Y, label("fig.rl_every_rank", name="Y"), None, "Y.col", cw, sy, _err(col.max_abs_err["Y"]),
                   blocks=p, axis=1, min_w=CAPTION_W)
    out += _moved("allgather", out[2:], "AllGather", _sub("rl_concat", p), [Y], "allgather")
    return out


def figure_row_linear(row: RowLinearResult, col: ColumnLinearResult) -> dict:
    """The ``row-linear`` figure: both layers forward on the same X and A."""
    mats = [row.inputs["X"], row.inputs["A"], row.Y] + [rk.Y_partial for rk in row.ranks]
    cw = cell_width(*mats)
    title = label("fig.rl_title", n=fmt.integer(row.tp))
    rows = _row_forward(row, cw) + _col_forward(col, cw)
    return figure("row-linear", title, lambda: rows)      # flow only places panels: both layouts share them


# ---------------------------------------------------------------- backward

def _row_backward(row: RowLinearResult, cw: float) -> list[list[Panel]]:
    p = row.tp
    dY = row.inputs["dY"]
    sdx, sda = _scale(row.sharded.dX), _scale(row.sharded.dA)
    out = [[heading(label("fig.rb_row_head"), label("fig.rb_row_sub"))],
           [grid_panel(dY, label("fig.rl_every_rank", name="dY"), None, "dY.all", None, _scale(dY), _dims("B×O", dY))]]
    for rk in row.ranks:
        r = rk.rank
        out.append(_lane(r, [
            grid_panel(rk.dX_shard, "dXᵣ = dY·Aᵣᵀ", r, f"dXr.{r}", cw, sdx, _dims("B×D/t", rk.dX_shard)),
            grid_panel(rk.dA_shard, "dAᵣ = Xᵣᵀ·dY", r, f"dAr.{r}", None, sda, _dims("D/t×O", rk.dA_shard)),
        ]))
    err = row.max_abs_err
    dX = grid_panel(row.sharded.dX, label("fig.rb_concat_cols", name="dX"), None, "dX.row", None, sdx,
                    _err(err["dX"]), blocks=p, axis=1, min_w=CAPTION_W)
    dA = grid_panel(row.sharded.dA, label("fig.rb_concat_rows", name="dA"), None, "dA.row", None, sda,
                    _err(err["dA"]), blocks=p, axis=0, min_w=CAPTION_W)
    out += _merge(out[2:], label("fig.rb_none"), label("fig.rb_none_sub"), [dX, dA], "no-collective", "coll none")
    return out


def _col_backward(col: ColumnLinearResult, cw: float) -> list[list[Panel]]:
    p = col.tp
    sdy = _scale(col.inputs["dY"])
    sdx = _scale(col.sharded.dX, *[rk.dX_partial for rk in col.ranks])
    sda = _scale(col.sharded.dA)
    out = [[heading(label("fig.rb_col_head"), label("fig.rb_col_sub"))]]
    for rk in col.ranks:
        r = rk.rank
        out.append(_lane(r, [
            grid_panel(rk.dY_shard, "dYᵣ", r, f"cdYr.{r}", None, sdy, _dims("B×O/t", rk.dY_shard)), "·Aᵣᵀ =",
            _partial(rk.dX_partial, "dXᵣ", r, f"cdXr.{r}", cw, sdx, _dims("B×D", rk.dX_partial)),
            grid_panel(rk.dA_shard, "dAᵣ = Xᵀ·dYᵣ", r, f"cdAr.{r}", None, sda, _dims("D×O/t", rk.dA_shard)),
        ]))
    dX = grid_panel(col.sharded.dX, label("fig.rl_every_rank", name="dX"), None, "dX.col", cw, sdx,
                    _err(col.max_abs_err["dX"]), min_w=CAPTION_W)
    out += _moved("allreduce", out[1:], label("fig.rl_allreduce", op="f"), _sub("rl_sum", p), [dX], "allreduce-f")
    return out


def figure_row_backward(row: RowLinearResult, col: ColumnLinearResult) -> dict:
    """The ``row-backward`` figure: both layers backward from the same dY."""
    mats = [row.inputs["dY"], row.sharded.dX, row.sharded.dA]
    mats += [rk.dX_partial for rk in col.ranks]
    cw = cell_width(*mats)
    title = label("fig.rb_title", n=fmt.integer(row.tp))
    rows = _row_backward(row, cw) + _col_backward(col, cw)
    return figure("row-backward", title, lambda: rows)


# ---------------------------------------------------------------- pairing

BAR_W = 270.0           # the longest bar (the pairing that sends most)
_ABBR = {"all-reduce": "AR", "all-gather": "AG", "reduce-scatter": "RS"}


def _segments(ops: list, n: int, x: float, y: float, unit: float, cls: str, h: float,
              part: str) -> tuple[list[dict], float]:
    """One segment per collective, as long as the elements one rank sends for it; its name inside
    when it fits (AR T×F, or just T×F)."""
    nodes = []
    for name, elements, symbol in ops:
        w = bus_bandwidth_factor(name, n) * elements * unit
        nodes.append(rect(x, y, w, h, {"class": cls}, **{"data-key": f"seg.{part}.{name}.{symbol}"}))
        for name_ in (f"{_ABBR[name]} {symbol}", symbol):
            if TEXT_CHAR * len(name_) + 4 <= w:
                nodes.append(text(x + w / 2, y + h / 2 + 4, name_, "seg-t", "middle"))
                break
        x += w
    return nodes, x


def figure_row_pairing(n: int, schemes: list[dict], rows: list[list]) -> dict:
    """The ``row-pairing`` figure: per pairing, the elements one rank sends forward and backward
    (ring), one segment per collective; ``rows``: the table's rows (their totals and ratios)."""
    title = label("fig.rp_title", tp=fmt.integer(n))
    return pair("row-pairing", title, lambda max_w: _pairing(n, schemes, rows, min(BAR_W, max_w - PAD * 2 - 56)))


def _pairing(n: int, schemes: list[dict], rows: list[list], bar_w: float) -> tuple[list[dict], float, float]:
    totals = [sum(bus_bandwidth_factor(c, n) * e for c, e, _ in s["forward"] + s["backward"]) for s in schemes]
    unit = bar_w / (max(totals) or 1.0)
    nodes = [rect(PAD, PAD, 14, 12, {"class": "seg-comm"}), text(PAD + 20, PAD + 10, label("fig.rp_fwd"), "dimtext"),
             rect(PAD + 120, PAD, 14, 12, {"class": "seg-bwd"}), text(PAD + 140, PAD + 10, label("fig.rp_bwd"), "dimtext")]
    y = PAD + 30
    for s, row in zip(schemes, rows):
        nodes.append(text(PAD, y + 12, row[0], "cap"))
        bar_y = y + 18
        if n == 1:
            nodes.append(text(PAD, bar_y + 13, label("fig.rp_none"), "dimtext"))
        else:
            fwd, x = _segments(s["forward"], n, PAD, bar_y, unit, "seg-comm", 18, f"{s['name']}.forward")
            bwd, x = _segments(s["backward"], n, x, bar_y, unit, "seg-bwd", 18, f"{s['name']}.backward")
            nodes += fwd + bwd + [text(x + 6, bar_y + 13, row[4], "num em", **{"data-key": f"ratio.{s['name']}"})]
        nodes.append(text(PAD, bar_y + 34, row[3], "num dimtext", **{"data-key": f"sent.{s['name']}"}))
        if bar_w < BAR_W:        # a phone drawing: the words under the count (they would not fit beside it)
            nodes.append(text(PAD, bar_y + 49, label("fig.rp_elements"), "dimtext"))
            y = bar_y + 61
        else:                    # the count is 12 px (dimtext), not the 11 px NUM_CHAR measures
            nodes.append(text(PAD + NUM_CHAR * 12 / 11 * len(row[3]) + 6, bar_y + 34, label("fig.rp_elements"),
                              "dimtext"))
            y = bar_y + 46
    return nodes, PAD * 2 + bar_w + 56, y - 4
