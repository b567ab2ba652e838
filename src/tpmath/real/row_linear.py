"""Row- and column-parallel linear layers (Megatron's Y = X A, A (D, O)) on real ranks.

Row parallel: rank r holds A[r·D/tp:(r+1)·D/tp, :] and the same columns of X; f̄ sums the
partial Y.  Column parallel: rank r holds A[:, r·O/tp:(r+1)·O/tp]; X is replicated (f before
the matmul) and an AllGather assembles Y.  Gradients come from PyTorch's autograd.
"""

from __future__ import annotations

from .. import ranks
from .common import Ctx, all_gather_cat, max_abs, numpy, operators


def run(p: dict, ctx: Ctx) -> tuple[list, list | None]:
    """This rank's records and, on rank 0, the comparison with one unsharded process."""
    torch = ctx.torch
    f, f_bar, gather = operators(torch)
    res = p["core"]
    kind, inp = res.kind, res.inputs
    tp, r = ctx.world, ctx.rank
    k = (inp["A"].shape[0] if kind == "row" else inp["A"].shape[1]) // tp
    a, b = r * k, (r + 1) * k
    dY = ctx.tensor(inp["dY"])                          # (B, O) upstream gradient, replicated
    bias = inp["bias"]                                  # (O,) or None
    v = {}
    if kind == "row":
        X_r = ctx.tensor(inp["X"][:, a:b]).requires_grad_()      # (B, D/tp) input_is_parallel
        A_r = ctx.tensor(inp["A"][a:b, :]).requires_grad_()      # (D/tp, O) rows of A
        Y_partial = X_r @ A_r                                     # (B, O) partial sum
        Y = f_bar(Y_partial)                                      # (B, O) AllReduce(SUM)
        if bias is not None:
            b_full = ctx.tensor(bias).requires_grad_()            # (O,) replicated, added once
            Y = Y + b_full
        (Y * dY).sum().backward()
        v.update(X_shard=X_r, A_shard=A_r, Y_partial=Y_partial, Y=Y, dY=dY, dX_shard=X_r.grad,
                 dA_shard=A_r.grad)
        if bias is not None:
            v["db"] = b_full.grad
        assembled = {"Y": Y, "dX": all_gather_cat(ctx, X_r.grad, dim=1),
                     "dA": all_gather_cat(ctx, A_r.grad, dim=0)}
        if bias is not None:
            assembled["db"] = b_full.grad
    else:
        X = ctx.tensor(inp["X"]).requires_grad_()                 # (B, D) replicated
        X_f = f(X)                                                # identity; AllReduce of dX in backward
        X_f.retain_grad()
        A_r = ctx.tensor(inp["A"][:, a:b]).requires_grad_()      # (D, O/tp) columns of A
        Y_r = X_f @ A_r                                           # (B, O/tp)
        if bias is not None:
            b_r = ctx.tensor(bias[a:b]).requires_grad_()          # (O/tp,) this rank's slice
            Y_r = Y_r + b_r
        Y_r.retain_grad()
        Y = gather(Y_r)                                           # (B, O) AllGather (gather_output)
        (Y * dY).sum().backward()
        v.update(X=X, A_shard=A_r, Y_shard=Y_r, Y=Y, dY_shard=Y_r.grad, dX_partial=X_f.grad, dX=X.grad,
                 dA_shard=A_r.grad)
        if bias is not None:
            v.update(b_shard=b_r, db_shard=b_r.grad)
        assembled = {"Y": Y, "dX": X.grad, "dA": all_gather_cat(ctx, A_r.grad, dim=1)}
        if bias is not None:
            assembled["db"] = all_gather_cat(ctx, b_r.grad, dim=0)
    names = ranks.linear_names(kind, r, k, bias is not None)
    records = [(names[key], numpy(v[key])) for key in ranks.linear_stage_keys(kind, p["stage"], bias is not None)]
    if r != 0:
        return records, None
    ref = _unsharded(ctx, inp)
    # The tolerance depends on the inputs only: scaled by the core's reference values.
    check = [(f"max|Δ| {key}", ranks.verdict(max_abs(assembled[key], ref[key]),
                                             ranks.tolerance("float64", getattr(res.reference, key))))
             for key in res.max_abs_err]
    return records, check


def _unsharded(ctx: Ctx, inp: dict) -> dict:
    """Y = X A + b and its gradients in one process, by autograd."""
    X, A = (ctx.tensor(inp[k]).requires_grad_() for k in ("X", "A"))
    Y = X @ A
    out = {}
    if inp["bias"] is not None:
        b = ctx.tensor(inp["bias"]).requires_grad_()
        Y = Y + b
    (Y * ctx.tensor(inp["dY"])).sum().backward()
    out.update(Y=Y, dX=X.grad, dA=A.grad)
    if inp["bias"] is not None:
        out["db"] = b.grad
    return out
