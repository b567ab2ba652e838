"""Multi-head attention with GQA on real ranks: rank r holds only its query heads' columns of
W_q and rows of W_o, and the KV heads those heads read (K < tp: one KV head, replicated on
tp/K ranks).  X and G are replicated.  Forward and backward run through PyTorch's autograd
with Megatron's f (before the QKV projections) and f̄ (after W_o) as autograd Functions; the
partial gradients of a replicated KV weight are summed over its replica group (a process
group of the ranks holding it) after the backward pass.  ``--mistake`` makes the same error
as the core (:mod:`tpmath.attention`).

Letters as in :mod:`tpmath.attention`.
"""

from __future__ import annotations

import math

from .. import attention, ranks
from .common import Ctx, all_gather_cat, max_abs, numpy, operators


def run(p: dict, ctx: Ctx) -> tuple[list, list | None]:
    """This rank's records and, on rank 0, the comparison with one unsharded process."""
    torch = ctx.torch
    cfg, inp = p["cfg"], p["inputs"]
    r, tp = ctx.rank, ctx.world
    B, S, D = inp["X"].shape
    E, Hr, Kr = cfg.head_dim, cfg.q_per_rank, cfg.kv_per_rank
    f, f_bar, _ = operators(torch)
    enter, leave = (f_bar, f) if cfg.mistake == "f-and-g-swapped" else (f, f_bar)
    kv_of_rank = [attention.rank_heads(cfg, q)[1] for q in range(tp)]
    q_heads, kv_heads = attention.rank_heads(cfg, r)
    # Each rank holds only its slices (as Megatron's _initialize_affine_weight_cpu keeps its part).
    W = {k: ctx.tensor(v).requires_grad_() for k, v in attention.shard(inp, cfg, q_heads, kv_heads).items()}
    X = ctx.tensor(inp["X"]).requires_grad_()                 # (B, S, D) replicated
    G = ctx.tensor(inp["G"])                                   # (B, S, D) replicated dL/dY

    X_in = enter(X)                                            # f: identity; AllReduce of dL/dX backward
    X_in.retain_grad()
    Q = X_in @ W["W_q"]                                        # (B, S, H_r·E) this rank's query heads
    K = X_in @ W["W_k"]                                        # (B, S, K_r·E) its KV heads
    V = X_in @ W["W_v"]
    q = Q.view(B, S, Hr, E).transpose(1, 2)                    # (B, H_r, S, E)
    k = K.view(B, S, Kr, E).transpose(1, 2).repeat_interleave(Hr // Kr, dim=1)   # (B, H_r, S, E)
    v = V.view(B, S, Kr, E).transpose(1, 2).repeat_interleave(Hr // Kr, dim=1)
    scores = (q @ k.transpose(-1, -2)) * attention.softmax_scale(cfg)           # (B, H_r, S, S)
    if cfg.causal:
        keep = torch.ones(S, S, dtype=torch.bool, device=ctx.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    P = torch.softmax(scores, dim=-1)                          # no communication: heads are independent
    C = (P @ v).transpose(1, 2).reshape(B, S, Hr * E)          # (B, S, H_r·E)
    Y_partial = C @ W["W_o"]                                   # (B, S, D) partial sum over this rank's heads
    Y_partial.retain_grad()
    Y = leave(Y_partial)                                       # f̄: AllReduce(SUM)
    loss = (Y * G).sum()
    loss.backward()

    groups = attention.kv_groups(kv_of_rank)
    if cfg.kv_heads < tp:
        # every rank creates every group, in the same order (new_group is collective)
        handles = [ctx.dist.new_group(grp) for grp in groups]
        if cfg.mistake != "kv-grad-not-summed":
            mine = next(h for h, grp in zip(handles, groups) if r in grp)
            for w in ("W_k", "W_v"):
                ctx.dist.all_reduce(W[w].grad, group=mine)      # replicas' partial gradients summed

    values = {"W_q": W["W_q"], "W_k": W["W_k"], "W_v": W["W_v"], "W_o": W["W_o"], "X_in": X_in,
              "Q": Q, "K": K, "V": V, "Y_partial": Y_partial, "Y": Y, "loss": loss, "G_Y": Y_partial.grad,
              "G_W_q": W["W_q"].grad, "G_W_k": W["W_k"].grad, "G_W_v": W["W_v"].grad, "G_W_o": W["W_o"].grad,
              "G_X_partial": X_in.grad, "G_X": X.grad}
    values = {k: numpy(v) for k, v in values.items()}
    values = ranks.attention.attention_values({**values, "probs": numpy(P)})
    recs = ranks.attention.attention_records(cfg, r, q_heads, kv_heads, p["stage"])
    records = [(name, values[key]) for key, name in recs]

    # Shards gathered only to compare (weight gradients stay on their ranks in training).
    G_W_q = all_gather_cat(ctx, W["W_q"].grad, dim=1)           # (D, H·E)
    G_W_o = all_gather_cat(ctx, W["W_o"].grad, dim=0)           # (H·E, D)
    G_W_k = all_gather_cat(ctx, W["W_k"].grad, dim=1)           # (D, tp·K_r·E) rank blocks
    G_W_v = all_gather_cat(ctx, W["W_v"].grad, dim=1)
    if r != 0:
        return records, None
    blocks = lambda t: list(numpy(t).reshape(D, tp, Kr * E).transpose(1, 0, 2))   # noqa: E731
    got = {"loss": loss, "Y": Y, "G_X": X.grad, "G_W_q": G_W_q, "G_W_o": G_W_o,
           "G_W_k": ctx.tensor(attention.merge_kv(blocks(G_W_k), kv_of_rank, cfg.kv_heads, E)),
           "G_W_v": ctx.tensor(attention.merge_kv(blocks(G_W_v), kv_of_rank, cfg.kv_heads, E))}
    ref = _unsharded(ctx, inp, cfg)
    tols = p["core"].tolerances
    check = [(f"max|Δ| {key}", ranks.verdict(max_abs(got[key], ref[key]), tols[key])) for key in ranks.attention.ATTENTION_CHECK]
    return records, check


def _unsharded(ctx: Ctx, inp: dict, cfg: attention.Config) -> dict:
    """The model in one process, no sharding: PyTorch's scaled_dot_product_attention with GQA
    (query head h reads KV head h // (H/K)), gradients by autograd."""
    torch = ctx.torch
    B, S, D = inp["X"].shape
    H, K, E = cfg.heads, cfg.kv_heads, cfg.head_dim
    X, W_q, W_k, W_v, W_o = (ctx.tensor(inp[k]).requires_grad_() for k in ("X", "W_q", "W_k", "W_v", "W_o"))
    q = (X @ W_q).view(B, S, H, E).transpose(1, 2)
    k = (X @ W_k).view(B, S, K, E).transpose(1, 2)
    v = (X @ W_v).view(B, S, K, E).transpose(1, 2)
    O = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=cfg.causal, scale=1 / math.sqrt(E),
                                                         enable_gqa=True)
    Y = O.transpose(1, 2).reshape(B, S, H * E) @ W_o
    loss = (Y * ctx.tensor(inp["G"])).sum()
    loss.backward()
    return {"loss": loss, "Y": Y, "G_X": X.grad, "G_W_q": W_q.grad, "G_W_k": W_k.grad, "G_W_v": W_v.grad,
            "G_W_o": W_o.grad}
