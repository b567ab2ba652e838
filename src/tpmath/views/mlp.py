"""View of the column→row MLP (page 1, section ``mlp``): one table per stage.

Letters as in :mod:`tpmath.mlp`: B batch, D d_model, F d_ff, tp ranks; rank r
holds W1[:, r·F/tp:(r+1)·F/tp] (column parallel) and the same rows of W2 (row
parallel).  Each stage shows, per rank, the local matrices of one step and, in
the footer, the unsharded reference, the local results merged (concatenated
where ranks own different columns, summed where they hold partial sums) and
the largest absolute difference.  The reference for the intermediate values
(Z, H, G_H, G_Z) is the same core run with tp = 1, i.e. one device.
"""

from __future__ import annotations

import numpy as np

from .. import mlp as core
from .. import fmt
from . import Control, Section, parse_controls
from . import tree
from .cells import id_range, label, table
from .fig_mlp import figure_collective_basics, figure_mlp

STAGES = ("shards", "forward", "partial", "backward", "grad-w", "grad-x")
TP_OPTIONS = (1, 2, 4)

# stage -> (columns after "Rank": (core key, column i18n key, merge)); merge is how the
# ranks' local values combine into the unsharded quantity: "cols" concatenates along the
# last axis, "rows" along the first, "sum" adds partial results (the AllReduce).
_COLUMNS = {
    "shards": (("W1", "col.local_w1", "cols"), ("W2", "col.local_w2", "rows")),
    "forward": (("W1", "col.local_w1", "cols"), ("Z", "col.z", "cols"), ("H", "col.h", "cols")),
    "partial": (("W1", "col.local_w1", "cols"), ("H", "col.h", "cols"), ("Y_partial", "col.y_partial", "sum")),
    "backward": (("W2", "col.local_w2", "rows"), ("G_H", "col.g_h", "cols"), ("G_Z", "col.g_z", "cols")),
    "grad-w": (("W1", "col.local_w1", "cols"), ("G_W1", "col.g_w1", "cols"), ("G_W2", "col.g_w2", "rows")),
    "grad-x": (("W1", "col.local_w1", "cols"), ("G_Z", "col.g_z", "cols"), ("G_X_partial", "col.g_x_partial", "sum")),
}


def _merge(parts: list[np.ndarray], how: str) -> np.ndarray:
    """Combine the ranks' local values: concatenate shards or sum partial results."""
    if how == "sum":
        total = parts[0]
        for p in parts[1:]:
            total = total + p          # the AllReduce(sum), in rank order
        return total
    return np.concatenate(parts, axis=1 if how == "cols" else 0)


def _whole_grid(a: np.ndarray, how: str, tp: int, scale: float | None = None) -> dict:
    """An untinted grid of a whole matrix whose column ("cols") or row ("rows") blocks are the
    ranks' shards, each block tinted by its rank; "sum" (a sum or a replicated value): grey."""
    if how == "cols":
        return tree.grid(a, scale=scale, cols=tree.block_ranks(a.shape[-1], tp))
    if how == "rows":
        return tree.grid(a, scale=scale, rows=tree.block_ranks(a.shape[0], tp))
    return tree.grid(a, scale=scale)


def _run(tp: int) -> core.MlpResult:
    """run_mlp on the fixed default inputs: a pure function of tp, computed once per tp
    (a stage change only picks other columns; nothing here modifies the result)."""
    return core.default_run(tp)


def _inputs_table(inputs: dict, tp: int) -> dict:
    """Every input of the example, so the static page shows all of them at every stage."""
    n = fmt.integer(tp)
    held = {"X": label("label.replicated"), "W1": label("label.split_cols", tp=n),
            "W2": label("label.split_rows", tp=n), "G": label("label.upstream_g")}
    names = {"X": "X", "W1": "W₁", "W2": "W₂", "G": "G"}
    # Shown whole (no rank owns all of it): untinted frames; W₁'s column blocks and W₂'s row
    # blocks tinted by the rank that owns them (as the figure draws W₁ᵣ, W₂ᵣ), X and G grey.
    rows = [[names[k], _whole_grid(inputs[k], how, tp), "×".join(fmt.integer(s) for s in inputs[k].shape), held[k]]
            for k, how in (("X", "sum"), ("W1", "cols"), ("W2", "rows"), ("G", "sum"))]
    return table("cap.mlp_inputs", ["col.input", "col.value", "col.shape", "col.held"], rows)


def render_mlp(controls: dict, lang: str) -> dict:
    """Rows of ``mlp-ranks`` for one stage and tp, plus loss and max abs error."""
    c = parse_controls(SECTIONS["mlp"].controls, controls)
    stage, tp = c["stage"], c["tp"]
    res = _run(tp)
    one = _run(1).ranks[0]                   # the unsharded computation, every intermediate
    cols = _COLUMNS[stage]
    width = one.W1.shape[1] // tp            # F/tp hidden columns per rank
    # One shading scale per column, that of the unsharded value (as the figure): a rank's
    # block or partial sum reads against the whole.
    scales = {key: tree.scale_of(getattr(one, key)) for key, _, _ in cols}
    rows = []
    for rk in res.ranks:
        r = rk.rank
        row = [tree.rank_tag(r)]
        if stage == "shards":
            row.append(id_range(r * width, (r + 1) * width))
        row += [tree.grid(getattr(rk, key), rank=r, scale=scales[key]) for key, _, _ in cols]
        rows.append(row)
    columns = ["col.rank"] + (["col.f_columns"] if stage == "shards" else []) + [c for _, c, _ in cols]
    foot = []
    if stage != "shards":
        ref = [getattr(one, key) for key, _, _ in cols]   # with tp = 1 the "partial" Y, G_X are whole
        merged = [_merge([getattr(rk, key) for rk in res.ranks], how) for key, _, how in cols]
        foot = [
            [label("label.reference")] + [tree.grid(a, scale=scales[key]) for a, (key, _, _) in zip(ref, cols)],
            [label("label.merged")] + [_whole_grid(a, how, tp, scales[key]) for a, (key, _, how) in zip(merged, cols)],
            [label("label.max_abs_err")] + [fmt.err(np.max(np.abs(m - a))) for m, a in zip(merged, ref)],
        ]
    return {
        "controls": {"stage": stage, "tp": str(tp)},
        "tables": {"mlp-inputs": _inputs_table(res.inputs, tp),
                   "mlp-ranks": table("cap.mlp_ranks", columns, rows, foot)},
        "figures": {"mlp": figure_mlp(stage, tp, cols, res, one), "mlp-collectives": figure_collective_basics(tp)},
        "values": {
            "loss": fmt.num(res.sharded.loss),
            "reference-loss": fmt.num(res.reference.loss),
            "max-abs-err": fmt.err(max(res.max_abs_err.values())),
        },
        "notes": {"stage": label(f"note.stage_{stage.replace('-', '_')}", tp=fmt.integer(tp))},
    }


SECTIONS = {
    "mlp": Section(
        name="mlp",
        controls=(
            Control("stage", "select", "partial", options=STAGES, slider=True),
            Control("tp", "select", "2", options=tuple(str(t) for t in TP_OPTIONS), slider=True),
        ),
        render=render_mlp,
        tables=("mlp-inputs", "mlp-ranks"),
        values=("loss", "reference-loss", "max-abs-err"),
        real=lambda c: [("mlp", {"tp": c["tp"], "stage": c["stage"]})],
    ),
}
