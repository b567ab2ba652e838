"""The pre-LN transformer layer on real ranks: LN → attention → residual → LN → MLP → residual.

Rank r holds its query heads' columns of W_q and rows of W_o, the KV heads those read (K < tp:
one KV head, replicated on tp/K ranks), its F/tp columns of W1 and b1 and the same rows of W2.
The LayerNorm weights and the row-parallel biases b_o, b2 are replicated: every rank holds them
whole and computes them on the same values.  Megatron's f (before the QKV projections and
before W1) and f̄ (after W_o and after W2) are autograd Functions; the replicas' partial KV
weight gradients are summed in their replica group after the backward pass.  The gradients
of the replicated parameters need no collective: rank 0 compares every one of them, on every
rank, with the unsharded layer run in one process by PyTorch's autograd.

Letters as in :mod:`tpmath.layer`.
"""

from __future__ import annotations

import math

from .. import attention, layer, ranks
from .common import Ctx, all_gather_cat, max_abs, numpy, operators


def _attention(torch, x, W: dict, heads: int, kv_heads: int, E: int, causal: bool):
    """Softmax attention of ``heads`` query heads reading ``kv_heads`` KV heads; (B, S, heads·E)."""
    B, S, _ = x.shape
    q = (x @ W["W_q"]).view(B, S, heads, E).transpose(1, 2)
    k = (x @ W["W_k"]).view(B, S, kv_heads, E).transpose(1, 2)
    v = (x @ W["W_v"]).view(B, S, kv_heads, E).transpose(1, 2)
    O = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1 / math.sqrt(E),
                                                         enable_gqa=True)
    return O.transpose(1, 2).reshape(B, S, heads * E)


def _ln(torch, x, gamma, beta):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), gamma, beta, eps=layer.LN_EPS)


def _gelu(torch, z):
    return torch.nn.functional.gelu(z, approximate="tanh")


def run(p: dict, ctx: Ctx) -> tuple[list, list | None]:
    """This rank's records and, on rank 0, the comparison with one unsharded process."""
    torch = ctx.torch
    cfg, inp, F = p["cfg"], p["inputs"], p["ffn"]
    r, tp = ctx.rank, ctx.world
    E, Fr = cfg.head_dim, F // tp
    f, f_bar, _ = operators(torch)
    q_heads, kv_heads = attention.rank_heads(cfg, r)
    shards = attention.shard(inp, cfg, q_heads, kv_heads)
    cols = slice(r * Fr, (r + 1) * Fr)
    shards.update(W1=inp["W1"][:, cols], b1=inp["b1"][cols], W2=inp["W2"][cols, :])   # (D, F/tp) (F/tp,) (F/tp, D)
    W = {k: ctx.tensor(v).requires_grad_() for k, v in shards.items()}
    R = {k: ctx.tensor(inp[k]).requires_grad_() for k in layer.REPLICATED}             # whole on every rank
    X = ctx.tensor(inp["X"]).requires_grad_()                                           # (B, S, D) replicated
    G = ctx.tensor(inp["G"])

    A1 = f(_ln(torch, X, R["gamma1"], R["beta1"]))             # f: identity; AllReduce of dL/dA1 backward
    Y_attn_partial = _attention(torch, A1, W, cfg.q_per_rank, cfg.kv_per_rank, E, cfg.causal) @ W["W_o"]
    H1 = X + f_bar(Y_attn_partial) + R["b_o"]                  # f̄: AllReduce; b_o added once, after it
    A2 = f(_ln(torch, H1, R["gamma2"], R["beta2"]))
    Y_mlp_partial = _gelu(torch, A2 @ W["W1"] + W["b1"]) @ W["W2"]   # (B, S, D) partial over this rank's columns
    Y = H1 + f_bar(Y_mlp_partial) + R["b2"]
    loss = (Y * G).sum()
    loss.backward()

    if cfg.kv_heads < tp:
        groups = attention.kv_groups([attention.rank_heads(cfg, x)[1] for x in range(tp)])
        handles = [ctx.dist.new_group(grp) for grp in groups]       # collective: every rank, same order
        mine = next(h for h, grp in zip(handles, groups) if r in grp)
        for w in ("W_k", "W_v"):
            ctx.dist.all_reduce(W[w].grad, group=mine)

    values = {**{k: W[k] for k in shards}, "Y_attn_partial": Y_attn_partial, "H1": H1, "Y_mlp_partial": Y_mlp_partial,
              "Y": Y, "loss": loss, "G_X": X.grad, **{"G_" + k: W[k].grad for k in shards},
              **{"G_" + k: R[k].grad for k in layer.REPLICATED}}
    values = ranks.layer.layer_values({k: numpy(v) for k, v in values.items()})
    recs = ranks.layer.layer_records(cfg, r, q_heads, kv_heads, [r * Fr, (r + 1) * Fr], p["stage"])
    records = [(name, values[key]) for key, name in recs]

    # Shards gathered only to compare; the replicated gradients are compared rank by rank.
    got = {"G_W_q": all_gather_cat(ctx, W["W_q"].grad, 1), "G_W_o": all_gather_cat(ctx, W["W_o"].grad, 0),
           "G_W1": all_gather_cat(ctx, W["W1"].grad, 1), "G_b1": all_gather_cat(ctx, W["b1"].grad, 0),
           "G_W2": all_gather_cat(ctx, W["W2"].grad, 0)}
    kv_parts = {w: all_gather_cat(ctx, W[w].grad, 1) for w in ("W_k", "W_v")}
    repl = {k: all_gather_cat(ctx, R[k].grad[None], 0) for k in layer.REPLICATED}   # (tp, D) every rank's copy
    if r != 0:
        return records, None
    D = inp["X"].shape[-1]
    kv_of_rank = [attention.rank_heads(cfg, x)[1] for x in range(tp)]
    for w, t in kv_parts.items():
        blocks = list(numpy(t).reshape(D, tp, cfg.kv_per_rank * E).transpose(1, 0, 2))
        got["G_" + w] = ctx.tensor(attention.merge_kv(blocks, kv_of_rank, cfg.kv_heads, E))
    got.update(loss=loss, Y=Y, G_X=X.grad)
    ref = _unsharded(ctx, inp, cfg)
    tols = p["core"].tolerances
    errs = {k: max_abs(got[k], ref[k]) for k in got}
    for k, t in repl.items():                                  # the worst rank's copy
        errs["G_" + k] = max(max_abs(t[i], ref["G_" + k]) for i in range(tp))
    check = [(f"max|Δ| {k}", ranks.verdict(errs[k], tols[k])) for k in ranks.layer.LAYER_CHECK]
    return records, check


def _unsharded(ctx: Ctx, inp: dict, cfg: attention.Config) -> dict:
    """The layer in one process, no sharding; gradients by autograd."""
    torch = ctx.torch
    T = {k: ctx.tensor(v).requires_grad_() for k, v in inp.items() if k != "G"}
    W = {k: T[k] for k in attention.WEIGHTS}
    A1 = _ln(torch, T["X"], T["gamma1"], T["beta1"])
    H1 = T["X"] + _attention(torch, A1, W, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.causal) @ T["W_o"] + T["b_o"]
    A2 = _ln(torch, H1, T["gamma2"], T["beta2"])
    Y = H1 + _gelu(torch, A2 @ T["W1"] + T["b1"]) @ T["W2"] + T["b2"]
    loss = (Y * ctx.tensor(inp["G"])).sum()
    loss.backward()
    return {"loss": loss, "Y": Y, "G_X": T["X"].grad, **{"G_" + k: T[k].grad for k in layer.PARAMS}}
