"""The column→row MLP on real ranks: options, plan, what every rank prints.

Letters as in :mod:`tpmath.mlp`: B batch, D d_model, F d_ff, tp ranks.
"""

from __future__ import annotations

from .. import mlp
from ..record import fields_of
from ..validate import as_choice, as_dtype
from .output import cols, rows, verdict
from .topic import Topic, opts

MLP_STAGES = ("all", "shards", "forward", "partial", "backward", "grad-w", "grad-x", "grads")

def _plan_mlp(o: dict) -> dict:
    stage = as_choice("stage", o["stage"], MLP_STAGES)
    inputs = mlp.command_line_inputs(o["x"], o["w1"], o["w2"], o["g"], seed=o["seed"], batch=o["batch"],
                                     d_model=o["d_model"], d_ff=o["d_ff"])
    if all(v is None for v in inputs.values()):      # the page's inputs: computed once per (tp, dtype)
        d_ff = mlp.default_inputs()["W1"].shape[1]
        res = mlp.default_run(mlp.validate_tp(o["tp"], d_ff), as_dtype("dtype", o["dtype"]).name)
    else:
        res = mlp.run_mlp(**inputs, tp=o["tp"], dtype=o["dtype"])
    return {"world": res.tp, "stage": stage, "dtype": res.dtype, "inputs": res.inputs, "core": res}


MLP_RECORDS = {
    "all": ("W1", "W2", "Z", "H", "Y_partial", "Y", "loss", "G_H", "G_Z", "G_W1", "G_W2", "G_X_partial", "G_X"),
    "shards": ("W1", "W2"),
    "forward": ("W1", "Z", "H"),
    "partial": ("W1", "H", "Y_partial", "Y", "loss"),
    "backward": ("W2", "G_H", "G_Z"),
    "grad-w": ("W1", "G_W1", "G_W2"),
    "grad-x": ("W1", "G_Z", "G_X_partial", "G_X"),
    "grads": ("G_H", "G_Z", "G_W1", "G_W2", "G_X_partial", "G_X"),
}


def mlp_names(r: int, tp: int, d_ff: int) -> dict[str, str]:
    """Printed name of each MLP record on rank r (its slice of F = d_ff written out)."""
    k = d_ff // tp
    a, b = r * k, (r + 1) * k
    return {"W1": "W1" + cols(a, b), "W2": "W2" + rows(a, b), "Z": "Z", "H": "H", "Y_partial": "Y_partial",
            "Y": "Y ← all_reduce(SUM)", "loss": "loss = Σ Y⊙G", "G_H": "G_H", "G_Z": "G_Z",
            "G_W1": "G_W1" + cols(a, b), "G_W2": "G_W2" + rows(a, b), "G_X_partial": "G_X_partial",
            "G_X": "G_X ← all_reduce(SUM)"}


def _expected_mlp(p: dict) -> tuple[list, list]:
    res = p["core"]
    tp, d_ff = res.tp, res.inputs["W1"].shape[1]
    per_rank = []
    for rk in res.ranks:
        values = {**fields_of(rk), "Y": res.sharded.Y, "loss": res.sharded.loss, "G_X": res.sharded.G_X}
        names = mlp_names(rk.rank, tp, d_ff)
        per_rank.append([(names[k], values[k]) for k in MLP_RECORDS[p["stage"]]])
    check = [(f"max|Δ| {k}", verdict(res.max_abs_err[k], res.tolerances[k]))
             for k in ("loss", "Y", "G_X", "G_W1", "G_W2")]
    return per_rank, check



TOPICS = (Topic("mlp", opts(
    ("tp", "2"), ("stage", "all"), ("dtype", "float64"), ("x", None), ("w1", None), ("w2", None), ("g", None),
    ("seed", None), ("batch", None), ("d-model", None), ("d-ff", None),
), _plan_mlp, _expected_mlp, real_module="mlp", help_args={"stage": {"choices": MLP_STAGES}}),)
