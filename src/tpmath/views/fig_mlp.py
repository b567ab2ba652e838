"""Figure of the column→row MLP (page 1, section ``mlp``): the active stage, rank by rank.

It draws the matrices of the stage's table (same core result, same numbers), one lane per
rank tinted by the rank's colour, the operation between them, and — where the stage ends in a
sum — the AllReduce as movement: every rank's partial flows into the sum and the result back
out to every rank (:func:`draw.collective_flow`).  Stage 3 also draws each rank's row block
W₂ᵣ, so W₂'s row split sits beside W₁'s column split.  A strip of the six stages on top
lights the active one (forward | backward).  Laid out by the kit alone.
"""

from __future__ import annotations

import numpy as np

from .. import fmt
from ..mlp import MlpOutputs, MlpRank, MlpResult
from .draw import (CELL_H, Panel, Row, arrow_panel, centred, collective_flow, column, figure, label,
                   lane_badge, matrix_panel, sign, pass_strips, STEP_W, text_w)

# stage -> the operation between one drawn matrix and the next: an arrow's label (data flows
# through it), a sign (· or =: the next matrix is an operand or the result), or None (the two
# are shown side by side, no data flows between them).
_OPS = {
    "shards": (None,),
    "forward": ("X·", "tanh"),
    "partial": ("tanh(X·)", "·", "="),
    "backward": ("G_Y·(·)ᵀ", "⊙(1−Hᵣ²)"),
    "grad-w": (None, None),
    "grad-x": (None, "·W₁ᵣᵀ"),
}
_SIGNS = ("·", "=")
# stage -> the matrices drawn, where they are not the table's columns (stage 3 draws the W₂ᵣ
# that turns Hᵣ into Yᵣ: the row split of W₂)
_DRAWN = {"partial": ("W1", "H", "W2", "Y_partial")}
# core key -> symbol in the figure (ᵣ: the rank's own block)
_SYMBOL = {"W1": "W₁ᵣ", "W2": "W₂ᵣ", "Z": "Zᵣ", "H": "Hᵣ", "Y_partial": "Yᵣ", "G_H": "G_Hᵣ", "G_Z": "G_Zᵣ",
           "G_W1": "G_W₁ᵣ", "G_W2": "G_W₂ᵣ", "G_X_partial": "G_Xᵣ"}
_MERGED = {"Y_partial": ("Y", "f̄"), "G_X_partial": ("G_X", "f")}
STAGES = ("shards", "forward", "partial", "backward", "grad-w", "grad-x")
_BACKWARD = ("backward", "grad-w", "grad-x")
RESULT_W = 170.0        # the merged result's panel: room for its caption and the check under it
STAGE_NAME_W = 200.0    # the longest stage name: beside the steps on a desktop, under them on a phone
LONG_OP = 4             # an operation longer than this gets a wider arrow


def drawn_keys(stage: str, cols: tuple) -> tuple[str, ...]:
    """The core keys of the matrices a stage's lanes draw, left to right."""
    return _DRAWN.get(stage, tuple(key for key, _, _ in cols))


def _shape(a: np.ndarray) -> str:
    return "×".join(fmt.integer(s) for s in a.shape)


def _caption(key: str) -> object:
    symbol = _SYMBOL[key]
    return label("fig.partial_of", name=symbol) if key in _MERGED else symbol


def _op(op: str | None, h: float) -> Panel:
    """What stands between two matrices of a lane (``h``: the height of the lane's grids)."""
    if op is None:
        return Panel(4, 1)
    if op in _SIGNS:
        return sign(op, h)
    return arrow_panel(op, w=64 if len(op) > LONG_OP else 44, h=2 * CELL_H)


def _lane(stage: str, rk: MlpRank, keys: tuple, scales: dict) -> Row:
    r = rk.rank
    grids = [matrix_panel(getattr(rk, key), _caption(key), r, f"{key}.{r}", scales[key],
                          shape=_shape(getattr(rk, key))) for key in keys]
    h = max(p.h for p in grids)
    panels = [grids[0]]
    for op, grid in zip(_OPS[stage], grids[1:]):
        panels += [_op(op, h), grid]
    return Row([lane_badge(r, h, "numbers")] + panels, rank=r, hang=True)


def _replicated(stage: str, inputs: dict) -> list[Panel]:
    """The input every rank holds whole: X in the forward pass, G_Y = G in the backward pass."""
    if stage == "shards":
        return []
    name, key, note = ("G_Y", "G", "fig.mlp_gy") if stage in _BACKWARD else ("X", "X", "fig.mlp_x")
    caption = label(note, name=name)
    panel = matrix_panel(inputs[key], caption, None, f"{key}.all", shape=_shape(inputs[key]))
    panel.w = max(panel.w, text_w(caption, "cap"))      # the caption is wider than a small grid
    return [panel]


def _merge(res: MlpResult, ref: MlpOutputs, tp: int, merged_key: str) -> list[Panel]:
    """The AllReduce of the partial results as movement, and what every rank holds after it."""
    name, op = _MERGED[merged_key]
    total = getattr(res.sharded, name)
    err = float(np.max(np.abs(total - getattr(ref, name))))
    flow_ = collective_flow("allreduce", tp, label("fig.allreduce_op", op=op),
                            label("fig.sum_ranks", last="R" + fmt.integer(tp - 1)), part=f"allreduce-{op}",
                            cls="coll hl")
    result = matrix_panel(total, label("fig.every_rank", name=name), None, f"{name}.merged",
                          shape=label("fig.matches_ref", err=fmt.err(err)))
    result.w = max(result.w, RESULT_W)
    return [flow_, result]


def _strip(stage: str) -> list[Panel]:
    """The six stages as numbered steps (forward | backward), the active one lit, and its name."""
    current, split = STAGES.index(stage) + 1, STAGES.index("backward")
    steps = pass_strips(len(STAGES), split, current, 2 * len(STAGES) * STEP_W, "stages")
    return [steps, centred(label(f"opt.stage.{stage.replace('-', '_')}"), steps.h, "stage-name", w=STAGE_NAME_W)]


def figure_mlp(stage: str, tp: int, cols: tuple, res: MlpResult, one: MlpRank) -> dict:
    """The ``mlp`` figure for one stage and tp (``cols``: the stage's table columns)."""
    keys = drawn_keys(stage, cols)
    scales = {key: float(np.max(np.abs(getattr(one, key)))) for key in keys}

    def rows():
        out = [_strip(stage)]
        top = _replicated(stage, res.inputs)
        if top:
            out.append(top)
        out += [_lane(stage, rk, keys, scales) for rk in res.ranks]
        if keys[-1] in _MERGED:
            out.append(_merge(res, res.reference, tp, keys[-1]))
        return out

    title = label("fig.mlp_title", tp=fmt.integer(tp), stage=label(f"opt.stage.{stage.replace('-', '_')}"))
    return figure("mlp", title, rows)


# The three collectives the MLP is built from (page 1, before its prose first uses AllReduce):
# AllReduce is a ReduceScatter followed by an AllGather.
_BASICS = (("allreduce", "AllReduce", "fig.coll_ar_sub"), ("reducescatter", "ReduceScatter", "fig.coll_rs_sub"),
           ("allgather", "AllGather", "fig.coll_ag_sub"))
BASIC_W = 200.0         # one collective's drawing: three side by side fill a desktop column
BASIC_GAP = 12.0
_BETWEEN = ("=", "+")   # AllReduce = ReduceScatter + AllGather


def figure_collective_basics(tp: int) -> dict:
    """The ``mlp-collectives`` figure: AllReduce, ReduceScatter and AllGather on ``tp`` ranks,
    each drawn as the movement of every rank's data (:func:`draw.collective_flow`)."""
    # room under each: on a phone they stack, and one's outputs must not read as the next one's inputs
    flows = [column([collective_flow(kind, tp, name, label(sub), part=kind, w=BASIC_W), Panel(BASIC_W, BASIC_GAP)], gap=0)
             for kind, name, sub in _BASICS]
    row = [flows[0]]
    for symbol, flow_ in zip(_BETWEEN, flows[1:]):
        row += [sign(symbol, flow_.h), flow_]
    return figure("mlp-collectives", label("fig.coll_basics_title", tp=fmt.integer(tp)), lambda: [row],
                  caption=label("fig.coll_basics_caption"))
