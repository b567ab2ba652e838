"""The pre-LN transformer layer on real ranks (tpmath.layer): f and g twice, the KV replica-group
sums, and the replicated LayerNorm weights and row-parallel biases."""

from __future__ import annotations

import numpy as np

from .. import attention, layer
from ..i18n import Text
from ..record import fields_of
from ..validate import as_choice
from .attention import STAGES
from .output import cols, rows, verdict
from .topic import Topic, opts


def _plan_layer(o: dict) -> dict:
    stage = as_choice("stage", o["stage"], STAGES)
    args = {k: o[k] for k in ("tp", "heads", "kv_heads", "seq", "batch", "hidden", "ffn", "causal")}
    cfg, F = layer.validate_layer(**args)
    res = layer.cached_run(**args, seed=o["seed"])
    return {"world": cfg.tp, "stage": stage, "dtype": "float64", "cfg": cfg, "ffn": F, "inputs": res.inputs,
            "core": res}


# The replicated parameters: every rank computes their whole gradient, no collective.
LAYER_GRADS = ("G_gamma1", "G_beta1", "G_b_o", "G_gamma2", "G_beta2", "G_b2")


def layer_records(cfg: attention.Config, r: int, q: list, kv: list, ffn_cols: list,
                  stage: str) -> list[tuple[str, str]]:
    """(key, printed name) of what rank r of the layer (query heads ``q``, KV heads ``kv``, MLP
    columns ``ffn_cols``) prints for ``stage``: its shards, the two g results, and every
    gradient; the replicated parameters' gradients say that no collective made them."""
    E, tp = cfg.head_dim, cfg.tp
    a, b = q[0] * E, (q[-1] + 1) * E
    c, d = kv[0] * E, (kv[-1] + 1) * E
    e, f = ffn_cols
    reduced = " ← all_reduce(SUM)" if tp > 1 else ""
    groups = attention.kv_groups([attention.rank_heads(cfg, x)[1] for x in range(tp)])
    mine = next(g for g in groups if r in g)

    def kv_sum(name: str) -> str | Text:
        return Text("real.kv_summed", name=name, ranks=",".join(map(str, mine))) if cfg.kv_heads < tp else name
    fwd = [("W_q", "W_q" + cols(a, b)), ("W_k", "W_k" + cols(c, d)), ("W_v", "W_v" + cols(c, d)),
           ("W_o", "W_o" + rows(a, b)), ("W1", "W1" + cols(e, f)), ("b1", f"b1[{e}:{f}]"), ("W2", "W2" + rows(e, f)),
           ("Y_attn_partial", Text("real.attn_partial")), ("H1", Text("real.layer_u", reduced=reduced)),
           ("Y_mlp_partial", Text("real.mlp_partial")), ("Y", "Y = U + MLP" + reduced + " + b2"),
           ("loss", "loss = Σ Y⊙G")]
    bwd = [("G_W_q", "G_W_q" + cols(a, b)), ("G_W_k", kv_sum("G_W_k" + cols(c, d))),
           ("G_W_v", kv_sum("G_W_v" + cols(c, d))), ("G_W_o", "G_W_o" + rows(a, b)), ("G_W1", "G_W1" + cols(e, f)),
           ("G_b1", f"G_b1[{e}:{f}]"), ("G_W2", "G_W2" + rows(e, f))]
    bwd += [(k, Text("real.local_grad", name=k)) for k in LAYER_GRADS]
    bwd += [("G_X", Text("real.layer_gx", name="G_X") if tp > 1 else "G_X")]
    return {"forward": fwd, "backward": bwd, "all": fwd + bwd}[stage]


def layer_values(rk: layer.LayerRank | dict) -> dict:
    """A layer rank's values as printed: tokens as rows (B·S, ·) (``rk``: the core's rank
    record, or the same values by name from real ranks)."""
    return {k: (np.asarray(v).reshape(-1, v.shape[-1]) if isinstance(v, np.ndarray) and v.ndim == 3 else v)
            for k, v in fields_of(rk).items()}


LAYER_CHECK = ("loss", "Y", "G_X") + tuple("G_" + p for p in layer.PARAMS)


def _expected_layer(p: dict) -> tuple[list, list]:
    res, cfg = p["core"], p["cfg"]
    per_rank = []
    for rk in res.ranks:
        values = layer_values(rk)
        recs = layer_records(cfg, rk.rank, rk.q_heads, rk.kv_heads, rk.ffn_cols, p["stage"])
        per_rank.append([(name, values[key]) for key, name in recs])
    check = [(f"max|Δ| {k}", verdict(res.max_abs_err[k], res.tolerances[k])) for k in LAYER_CHECK]
    return per_rank, check


TOPICS = (Topic("layer", opts(
    ("tp", "2"), ("heads", "4"), ("kv-heads", None), ("seq", "4"), ("batch", "1"), ("hidden", "8"), ("ffn", None),
    ("seed", "0"), ("causal", None, True), ("stage", "all"),
), _plan_layer, _expected_layer, real_module="layer", help_args={"stage": {"choices": STAGES}}),)
