"""Figure of the column→row MLP (page 1, section ``mlp``): the active stage, rank by rank.

It draws exactly the matrices of the stage's table (same core result, same numbers), one
lane per rank tinted by the rank's colour, the operation between them, and — where the
stage ends in a sum — the AllReduce that merges the partial results.  A strip of the six
stages on top lights the active one and marks where the operators f̄ (forward
AllReduce) and f (backward AllReduce) sit.
"""

from __future__ import annotations

import numpy as np

from .. import fmt
from ..mlp import MlpOutputs, MlpRank, MlpResult
from .draw import (CELL_H, Panel, Row, arrow_panel, circle, figure, group, label, lane_badge, line, matrix_panel,
                   mid_text, op_box, rect, text, text_w)

# stage -> the operation written on the arrow from one column of the table to the next
# (None: the two matrices are shown side by side, no data flows between them).
_OPS = {
    "shards": (None,),
    "forward": ("X·", "tanh"),
    "partial": ("tanh(X·)", "·W₂ᵣ"),
    "backward": ("G_Y·(·)ᵀ", "⊙(1−Hᵣ²)"),
    "grad-w": (None, None),
    "grad-x": (None, "·W₁ᵣᵀ"),
}
# core key -> symbol in the figure (ᵣ: the rank's own block)
_SYMBOL = {"W1": "W₁ᵣ", "W2": "W₂ᵣ", "Z": "Zᵣ", "H": "Hᵣ", "Y_partial": "Yᵣ", "G_H": "G_Hᵣ", "G_Z": "G_Zᵣ",
           "G_W1": "G_W₁ᵣ", "G_W2": "G_W₂ᵣ", "G_X_partial": "G_Xᵣ"}
_MERGED = {"Y_partial": ("Y", "f̄"), "G_X_partial": ("G_X", "f")}
STAGES = ("shards", "forward", "partial", "backward", "grad-w", "grad-x")
_BACKWARD = ("backward", "grad-w", "grad-x")


def _shape(a: np.ndarray) -> str:
    return "×".join(fmt.integer(s) for s in a.shape)


def _caption(key: str) -> object:
    symbol = _SYMBOL[key]
    return label("fig.partial_of", name=symbol) if key in _MERGED else symbol


def _lane(stage: str, rk: MlpRank, cols: tuple, scales: dict) -> Row:
    r = rk.rank
    panels = []
    for i, (key, _, _) in enumerate(cols):
        if i:
            op = _OPS[stage][i - 1]
            panels.append(arrow_panel(op, w=64 if len(op or "") > 4 else 44, h=CELL_H * 2) if op
                          else Panel(4, 1))
        local = getattr(rk, key)
        panels.append(matrix_panel(local, _caption(key), r, f"{key}.{r}", scales[key], shape=_shape(local)))
    return Row([lane_badge(r, max(p.h for p in panels), "numbers")] + panels, rank=r, hang=True)


def _replicated(stage: str, inputs: dict) -> list[Panel]:
    """The input every rank holds whole: X in the forward pass, G_Y = G in the backward pass."""
    if stage == "shards":
        return []
    name, key, note = ("G_Y", "G", "fig.mlp_gy") if stage in _BACKWARD else ("X", "X", "fig.mlp_x")
    caption = label(note, name=name)
    panel = matrix_panel(inputs[key], caption, None, f"{key}.all", shape=_shape(inputs[key]))
    panel.w = max(panel.w, text_w(caption, "cap"))      # the caption is wider than a small grid
    return [panel]


def _merge(stage: str, res: MlpResult, ref: MlpOutputs, tp: int, merged_key: str) -> list[Panel]:
    """The AllReduce of the partial results and what every rank holds after it."""
    name, op = _MERGED[merged_key]
    total = getattr(res.sharded, name)
    err = float(np.max(np.abs(total - getattr(ref, name))))
    box = op_box(label("fig.allreduce_op", op=op), label("fig.sum_ranks", last="R" + fmt.integer(tp - 1)), 126,
                 "coll", f"allreduce-{op}", h=2 * CELL_H, top=18, title_y=CELL_H * 0.75, sub_y=CELL_H * 1.55, lit="hl")
    result = matrix_panel(total, label("fig.every_rank", name=name), None, f"{name}.merged",
                          shape=label("fig.matches_ref", err=fmt.err(err)))
    result.w = max(result.w, 170.0)      # room for the caption and the check under the grid
    return [box, arrow_panel(None, w=30, h=2 * CELL_H + 18), result]


def _strip(stage: str):
    """Head drawing: the six stages as numbered steps, the active one lit, f̄ and f marked."""
    def head(width: float):
        step = 40.0
        x0, y = 22.0, 20.0
        nodes = [line(x0, y, x0 + step * 5, y, "strip")]
        for i, s in enumerate(STAGES):
            cx = x0 + step * i
            cls = "step hl" if s == stage else "step"
            nodes.append(circle(cx, y, 11, cls))
            nodes.append(mid_text(cx, y, fmt.integer(i + 1), "step-t"))
        # f̄ closes the forward pass (after step 3), f the backward pass (step 6).
        for after, op in ((2, "f̄"), (5, "f")):
            cx = x0 + step * after + (step / 2 if after < 5 else 20)
            nodes.append(rect(cx - 8, y + 14, 16, 16, {"class": "coll"}, rx="3"))
            nodes.append(mid_text(cx, y + 22, op, "coll-t"))
        name = label(f"opt.stage.{stage.replace('-', '_')}")
        if width >= 480:             # beside the steps on a desktop, under them on a phone
            nodes.append(text(x0 + step * 5 + 40, y + 5, name, "stage-name"))
            return [group(nodes, part="stages")], 50.0, width
        nodes.append(text(x0 - 11, y + 50, name, "stage-name"))
        # a drawing narrower than the steps (the shards alone) would cut off step 6 and f
        return [group(nodes, part="stages")], 66.0, x0 + step * 5 + 32     # f's box, 4 px of air
    return head


def figure_mlp(stage: str, tp: int, cols: tuple, res: MlpResult, one: MlpRank) -> dict:
    """The ``mlp`` figure for one stage and tp (``cols``: the stage's table columns)."""
    scales = {key: float(np.max(np.abs(getattr(one, key)))) for key, _, _ in cols}
    ref = res.reference

    def rows():
        out = []
        top = _replicated(stage, res.inputs)
        if top:
            out.append(top)
        for rk in res.ranks:
            out.append(_lane(stage, rk, cols, scales))
        last = cols[-1][0]
        if last in _MERGED:
            out.append(_merge(stage, res, ref, tp, last))
        return out

    title = label("fig.mlp_title", tp=fmt.integer(tp), stage=label(f"opt.stage.{stage.replace('-', '_')}"))
    return figure("mlp", title, rows, head=_strip(stage))
