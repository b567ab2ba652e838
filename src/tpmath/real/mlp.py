"""The column→row MLP on real ranks: rank r holds W1[:, r·F/tp:(r+1)·F/tp] and the same rows
of W2; X and G are replicated.  Forward and backward run through PyTorch's autograd with
Megatron's f (before the column-parallel matmul) and f̄ (after the row-parallel one).

Letters as in :mod:`tpmath.mlp`: B batch, D d_model, F d_ff, tp ranks.
"""

from __future__ import annotations

from .. import ranks
from .common import Ctx, all_gather_cat, max_abs, numpy, operators


def run(p: dict, ctx: Ctx) -> tuple[list, list | None]:
    """This rank's records and, on rank 0, the comparison with one unsharded process."""
    torch = ctx.torch
    f, f_bar, _ = operators(torch)
    inp = p["inputs"]                                   # already in the run's dtype
    tp, r = ctx.world, ctx.rank
    F = inp["W1"].shape[1]
    k = F // tp
    X = ctx.tensor(inp["X"]).requires_grad_()           # (B, D) replicated
    G = ctx.tensor(inp["G"])                            # (B, D) replicated dL/dY
    # Each rank holds only its shard (as Megatron's _initialize_affine_weight_cpu keeps its slice).
    W1_r = ctx.tensor(inp["W1"][:, r * k:(r + 1) * k]).requires_grad_()   # (D, F/tp) column parallel
    W2_r = ctx.tensor(inp["W2"][r * k:(r + 1) * k, :]).requires_grad_()   # (F/tp, D) row parallel

    X_f = f(X)                                          # (B, D) identity; AllReduce of dL/dX in backward
    X_f.retain_grad()
    Z = X_f @ W1_r                                      # (B, F/tp) local
    H = torch.tanh(Z)                                   # (B, F/tp) elementwise: stays local
    Y_partial = H @ W2_r                                # (B, D) partial sum over this rank's F/tp
    Y = f_bar(Y_partial)                                # (B, D) AllReduce(SUM): every rank holds Y
    loss = (Y * G).sum()                                # replicated scalar
    for t in (Z, H):
        t.retain_grad()
    loss.backward()

    values = {"W1": W1_r, "W2": W2_r, "Z": Z, "H": H, "Y_partial": Y_partial, "Y": Y, "loss": loss,
              "G_H": H.grad, "G_Z": Z.grad, "G_W1": W1_r.grad, "G_W2": W2_r.grad,
              "G_X_partial": X_f.grad, "G_X": X.grad}
    names = ranks.mlp_names(r, tp, F)
    records = [(names[key], numpy(values[key])) for key in ranks.MLP_RECORDS[p["stage"]]]

    # Weight gradients are never reduced (each rank owns its shard); gathered only to compare.
    G_W1 = all_gather_cat(ctx, W1_r.grad, dim=1)        # (D, F)
    G_W2 = all_gather_cat(ctx, W2_r.grad, dim=0)        # (F, D)
    if r != 0:
        return records, None
    ref = _unsharded(ctx, inp)
    got = {"loss": loss, "Y": Y, "G_X": X.grad, "G_W1": G_W1, "G_W2": G_W2}
    tols = p["core"].tolerances
    check = [(f"max|Δ| {key}", ranks.verdict(max_abs(got[key], ref[key]), tols[key]))
             for key in ("loss", "Y", "G_X", "G_W1", "G_W2")]
    return records, check


def _unsharded(ctx: Ctx, inp: dict) -> dict:
    """The same model in one process, no sharding, gradients by autograd."""
    torch = ctx.torch
    X, W1, W2 = (ctx.tensor(inp[k]).requires_grad_() for k in ("X", "W1", "W2"))
    Y = torch.tanh(X @ W1) @ W2                          # (B, D)
    loss = (Y * ctx.tensor(inp["G"])).sum()
    loss.backward()
    return {"loss": loss, "Y": Y, "G_X": X.grad, "G_W1": W1.grad, "G_W2": W2.grad}
