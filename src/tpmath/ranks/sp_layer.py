"""Y = X + tanh(LN(X) W1) W2 with tensor + sequence parallelism on real ranks (tpmath.sp_layer)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import sp_layer
from ..i18n import Text
from ..validate import as_choice
from .output import cols, rows, verdict
from .topic import Opt, Topic, opts

STAGES = ("all", "forward", "backward")


def _plan_sp_layer(o: dict) -> dict:
    stage = as_choice("stage", o["stage"], STAGES)
    res = sp_layer.run_sp_layer(o["tp"], o["seq"], o["batch"], o["hidden"], o["ffn"], o["seed"], o["mistake"],
                                o["dropout"])
    return {"world": res.tp, "stage": stage, "dtype": "float64", "core": res}


SP_RECORDS = {
    "forward": ("X", "W1", "W2", "A", "A_full", "keep_H", "O", "keep_O", "Y"),
    "backward": ("G_Y", "G_O_full", "G_W2", "G_W1", "G_A", "G_X", "G_gamma_partial", "G_gamma", "G_beta_partial",
                 "G_beta"),
}


def sp_names(rk: sp_layer.SpRank, mistake: str) -> dict[str, str | Text]:
    """Printed names of rank rk's sequence-parallel records (its token and column ranges written out)."""
    (a, b), (c, d) = rk.seq_range, rk.ffn_range
    tok = f"[:, {a}:{b}, :]"
    wrong = mistake == "gather-wrong-dim"
    reduced = mistake != "ln-grad-not-reduced"
    return {"X": "X" + tok, "W1": "W1" + cols(c, d), "W2": "W2" + rows(c, d), "A": "LN(X)" + tok,
            "A_full": Text("real.sp_gather_hidden" if wrong else "real.sp_gather_seq", name="LN(X)"),
            "keep_H": Text("real.keep_mask", name=f"H[:, :, {c}:{d}]"),
            "O": Text("real.sp_scatter_seq", name="O" + tok),
            "keep_O": Text("real.keep_mask", name="O" + tok), "Y": "Y" + tok, "G_Y": "G_Y" + tok,
            "G_O_full": Text("real.sp_gather_seq", name="G_O"), "G_W2": "G_W2" + rows(c, d), "G_W1": "G_W1" + cols(c, d),
            "G_A": Text("real.sp_scatter_hidden" if wrong else "real.sp_scatter_seq", name="G_LN" + tok),
            "G_X": "G_X" + tok, "G_gamma_partial": Text("real.own_tokens", name="G_gamma"),
            "G_beta_partial": Text("real.own_tokens", name="G_beta"),
            "G_gamma": "G_gamma ← all_reduce(SUM)" if reduced else Text("real.never_reduced", name="G_gamma"),
            "G_beta": "G_beta ← all_reduce(SUM)" if reduced else Text("real.never_reduced", name="G_beta")}


def sp_stage_keys(stage: str, mistake: str, dropout: float) -> tuple[str, ...]:
    """Record keys printed for ``stage``: masks only with dropout on, the reduced γ/β only when reduced."""
    stages = ("forward", "backward") if stage == "all" else (stage,)
    skip = set() if dropout else {"keep_H", "keep_O"}
    if mistake == "ln-grad-not-reduced":
        skip |= {"G_gamma", "G_beta"}
    return tuple(k for s in stages for k in SP_RECORDS[s] if k not in skip)


def sp_value(key: str, value: Any) -> Any:
    """What a record prints: (B, ·, ·) tensors as rows (b, s) × columns, masks as 0/1."""
    arr = np.asarray(value, dtype=np.float64)
    return arr.reshape(-1, arr.shape[-1]) if arr.ndim == 3 else arr


SP_CHECK = ("loss", "Y", "G_X", "G_gamma", "G_beta", "G_W1", "G_W2")


def _expected_sp_layer(p: dict) -> tuple[list, list]:
    res = p["core"]
    keys = sp_stage_keys(p["stage"], res.mistake, res.dropout)
    per_rank = []
    for rk in res.ranks:
        names = sp_names(rk, res.mistake)
        per_rank.append([(names[k], sp_value(k, getattr(rk, k))) for k in keys])
    check = [(f"max|Δ| {k}", verdict(res.max_abs_err[k], res.tolerances[k])) for k in SP_CHECK]
    return per_rank, check


TOPICS = (Topic("sp-layer", opts(
    ("tp", "2"), ("stage", "all"), ("seq", "4"), ("batch", "2"), ("hidden", "4"), ("ffn", "8"), ("seed", "0"),
    ("mistake", "none"), ("dropout", None),
), _plan_sp_layer, _expected_sp_layer, real_module="sp_layer",
    help_args={"stage": {"choices": STAGES}, "mistake": {"choices": sp_layer.MISTAKES},
               "dropout": {"demo": sp_layer.DEMO_DROPOUT}}),)
