"""Multi-head attention with GQA split by heads on real ranks (tpmath.attention)."""

from __future__ import annotations

import numpy as np

from .. import attention
from ..i18n import Text
from ..record import fields_of
from ..validate import as_choice
from .output import cols, rows, verdict
from .topic import Opt, Topic, opts

STAGES = ("all", "forward", "backward")


def _plan_attention(o: dict) -> dict:
    stage = as_choice("stage", o["stage"], STAGES)
    args = {k: o[k] for k in ("tp", "heads", "kv_heads", "seq", "batch", "hidden", "causal", "mistake")}
    cfg = attention.validate_config(**args)
    res = attention.cached_run(**args, seed=o["seed"])
    return {"world": cfg.tp, "stage": stage, "dtype": "float64", "cfg": cfg, "inputs": res.inputs, "core": res}


def attention_records(cfg: attention.Config, r: int, q_heads: list, kv_heads: list,
                      stage: str) -> list[tuple[str, str]]:
    """(key, printed name) of what rank r prints for ``stage``; keys index a rank's values
    (``P<j>`` = the probabilities of its j-th local head).  Names say which collective made a
    value, and under a mistake what the rank really does."""
    E, tp, m = cfg.head_dim, cfg.tp, cfg.mistake
    a, b = q_heads[0] * E, (q_heads[-1] + 1) * E
    c, d = kv_heads[0] * E, (kv_heads[-1] + 1) * E
    swapped = m == "f-and-g-swapped"
    reduced = " ← all_reduce(SUM)" if tp > 1 else ""
    groups = attention.kv_groups([attention.rank_heads(cfg, q)[1] for q in range(tp)])
    mine = next(g for g in groups if r in g)
    summed = cfg.kv_heads < tp and m != "kv-grad-not-summed"

    def kv_sum(name: str) -> str | Text:
        return Text("real.kv_summed", name=name, ranks=",".join(map(str, mine))) if summed else name
    fwd = [("W_q", "W_q" + cols(a, b)), ("W_k", "W_k" + cols(c, d)), ("W_v", "W_v" + cols(c, d)),
           ("W_o", "W_o" + rows(a, b))]
    if swapped:
        fwd.append(("X_in", "X" + reduced))
    fwd += [("Q", "Q"), ("K", "K"), ("V", "V")]
    fwd += [(f"P{j}", Text("real.p_head", head=str(h))) for j, h in enumerate(q_heads)]
    fwd += [("Y_partial", "Y_partial"), ("Y", "Y" + ("" if swapped else reduced)), ("loss", "loss = Σ Y⊙G")]
    bwd = [("G_Y", "G_Y" + reduced)] if swapped else []
    bwd += [("G_W_q", "G_W_q" + cols(a, b)), ("G_W_k", kv_sum("G_W_k" + cols(c, d))),
            ("G_W_v", kv_sum("G_W_v" + cols(c, d))), ("G_W_o", "G_W_o" + rows(a, b)),
            ("G_X_partial", "G_X_partial"), ("G_X", "G_X" + ("" if swapped else reduced))]
    return {"forward": fwd, "backward": bwd, "all": fwd + bwd}[stage]


def attention_values(rk: attention.AttentionRank | dict) -> dict:
    """A rank's values as printed: tokens as rows (B·S, ·), one (B·S, S) matrix per local head
    (``rk``: the core's rank record, or the same values by name from real ranks)."""
    def rows2(x):
        return np.asarray(x).reshape(-1, np.shape(x)[-1])
    out = {k: (rows2(v) if isinstance(v, np.ndarray) and v.ndim == 3 else v) for k, v in fields_of(rk).items()}
    for j in range(np.shape(out["probs"])[1]):
        out[f"P{j}"] = rows2(out["probs"][:, j])
    return out


ATTENTION_CHECK = ("loss", "Y", "G_X", "G_W_q", "G_W_k", "G_W_v", "G_W_o")


def _expected_attention(p: dict) -> tuple[list, list]:
    res, cfg = p["core"], p["cfg"]
    per_rank = []
    for rk in res.ranks:
        values = attention_values(rk)
        recs = attention_records(cfg, rk.rank, rk.q_heads, rk.kv_heads, p["stage"])
        per_rank.append([(name, values[key]) for key, name in recs])
    check = [(f"max|Δ| {k}", verdict(res.max_abs_err[k], res.tolerances[k])) for k in ATTENTION_CHECK]
    return per_rank, check


TOPICS = (Topic("attention", opts(
    ("tp", "2"), ("heads", "4"), ("kv-heads", None), ("seq", "4"), ("batch", "1"), ("hidden", "8"), ("seed", "0"),
    ("causal", None, True), ("mistake", "none"), ("stage", "all"),
), _plan_attention, _expected_attention, real_module="attention",
    help_args={"mistake": {"choices": attention.MISTAKES}, "stage": {"choices": STAGES}}),)
