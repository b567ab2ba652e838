"""The pre-LN MLP block with tensor + sequence parallelism on real ranks.

Rank r holds only tokens [r·S/T, (r+1)·S/T) of X and G, columns [r·F/T, (r+1)·F/T) of W1, the
same rows of W2, and a replicated γ, β.  Activations are kept sequence-first, (S/T, B, D) —
Megatron's [s, b, h] — so the sequence is dim 0, the dim ``all_gather_into_tensor`` and
``reduce_scatter_tensor`` split.  g and ḡ are autograd Functions as in Megatron-core
``tensor_parallel/mappings.py`` (``_GatherFromSequenceParallelRegion``,
``_ReduceScatterToSequenceParallelRegion``): autograd runs their conjugate collective in
backward.  γ and β gradients come out of ``F.layer_norm``'s backward as sums over this rank's
tokens only; an explicit AllReduce(SUM) over the group completes them, as Megatron's
``finalize_model_grads`` does for parameters marked ``sequence_parallel``.  Dropout masks are
drawn by the core's counter-based generator from this rank's own (key, offset), so the real
run and the simulation use the same bits.  The mistakes of :mod:`tpmath.sp_layer` run too.

Letters as in :mod:`tpmath.sp_layer`: B batch, S sequence, D hidden, F ffn, T ranks, Sl = S/T.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import ranks, sp_layer
from ..record import fields_of
from .common import Ctx, max_abs, numpy

# torch 2.13 renamed the two collectives *_single and warns on every call; the examples keep
# Megatron-LM's names (as tpmath.real.collectives does).
warnings.filterwarnings("ignore", category=FutureWarning,
                        message=r"`torch\.distributed\.(all_gather_into_tensor|reduce_scatter_tensor)` is deprecated")


def _functions(torch):
    dist = torch.distributed

    def all_gather_dim0(x):
        out = torch.empty((dist.get_world_size() * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(out, x.contiguous())      # rank i's block at rows [i·n, (i+1)·n)
        return out

    def reduce_scatter_dim0(x):
        out = torch.empty((x.shape[0] // dist.get_world_size(), *x.shape[1:]), dtype=x.dtype, device=x.device)
        dist.reduce_scatter_tensor(out, x.contiguous())       # SUM; this rank keeps its block of rows
        return out

    class GatherFromSequenceParallelRegion(torch.autograd.Function):
        """g: AllGather along the sequence forward; ReduceScatter of the gradient backward
        (every rank's W1 columns produced a partial dL/d(full input))."""

        @staticmethod
        def forward(ctx, x):
            return all_gather_dim0(x)

        @staticmethod
        def backward(ctx, grad):
            return reduce_scatter_dim0(grad)

    class ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
        """ḡ: ReduceScatter along the sequence forward (sum the partial outputs, keep own tokens);
        AllGather of the gradient backward (W2's rows need dL/dO of every token)."""

        @staticmethod
        def forward(ctx, x):
            return reduce_scatter_dim0(x)

        @staticmethod
        def backward(ctx, grad):
            return all_gather_dim0(grad)

    class GatherHiddenViewedAsSequence(torch.autograd.Function):
        """The gather-wrong-dim mistake: concatenate along the hidden dim, view as the sequence."""

        @staticmethod
        def forward(ctx, x):                                  # x (Sl, B, D)
            parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
            dist.all_gather(parts, x.contiguous())
            Sl, B, D = x.shape
            # the core's (B, Sl, T·D) → (B, S, D) view, written in the sequence-first layout
            wide = torch.cat(parts, dim=-1).transpose(0, 1).reshape(B, Sl * len(parts), D)
            return wide.transpose(0, 1).contiguous()          # (S, B, D)

        @staticmethod
        def backward(ctx, grad):                              # grad (S, B, D), partial on each rank
            T, r = dist.get_world_size(), dist.get_rank()
            S, B, D = grad.shape
            total = grad.transpose(0, 1).contiguous()         # (B, S, D)
            dist.all_reduce(total)
            wide = total.reshape(B, S // T, T * D)[:, :, r * D:(r + 1) * D]
            return wide.transpose(0, 1).contiguous()          # (Sl, B, D)

    return (GatherFromSequenceParallelRegion.apply, ReduceScatterToSequenceParallelRegion.apply,
            GatherHiddenViewedAsSequence.apply)


def _seq_first(a: np.ndarray) -> np.ndarray:
    """(B, S, ·) → (S, B, ·), the layout the collectives split along dim 0."""
    return np.ascontiguousarray(np.swapaxes(a, 0, 1))


def run(p: dict, ctx: Ctx) -> tuple[list, list | None]:
    """This rank's records and, on rank 0, the comparison with one unsharded process."""
    torch, dist = ctx.torch, ctx.dist
    F = torch.nn.functional
    g, g_bar, g_wrong = _functions(torch)
    res = p["core"]
    inp, pr = res.inputs, res.dropout
    me = res.ranks[ctx.rank]                         # only this rank's ranges and RNG offsets are used
    (a, b), (c, d) = me.seq_range, me.ffn_range
    B, S, D = inp["X"].shape
    Sl, Fl = b - a, d - c
    rng = me.rng
    keep_h = sp_layer.keep_mask(rng.key, rng.tp_offset, (B, S, Fl), 2, pr)          # (B, S, F/T) or None
    keep_o = sp_layer.keep_mask(rng.key, rng.sp_offset, (B, Sl, D), 1, pr)          # (B, Sl, D) or None

    X = ctx.tensor(_seq_first(inp["X"][:, a:b])).requires_grad_()    # (Sl, B, D) own tokens only
    G = ctx.tensor(_seq_first(inp["G"][:, a:b]))                     # (Sl, B, D) dL/dY of own tokens
    gamma = ctx.tensor(inp["gamma"]).requires_grad_()                # (D,) replicated
    beta = ctx.tensor(inp["beta"]).requires_grad_()                  # (D,) replicated
    W1 = ctx.tensor(inp["W1"][:, c:d]).requires_grad_()              # (D, F/T) columns
    W2 = ctx.tensor(inp["W2"][c:d, :]).requires_grad_()              # (F/T, D) rows

    A = F.layer_norm(X, (D,), gamma, beta, eps=sp_layer.EPS)         # (Sl, B, D) on own tokens
    A_full = (g_wrong if res.mistake == "gather-wrong-dim" else g)(A)      # (S, B, D)
    H = torch.tanh(A_full @ W1)                                      # (S, B, F/T)
    O_partial = _dropout(ctx, H, keep_h, pr) @ W2                    # (S, B, D) partial sum over own F/T
    O = g_bar(O_partial)                                             # (Sl, B, D) ReduceScatter(SUM)
    Y = X + _dropout(ctx, O, keep_o, pr)                             # (Sl, B, D)
    for t in (A, O_partial):
        t.retain_grad()      # their gradients are what g's / ḡ's backward collective produced
    loss_partial = (Y * G).sum()
    loss_partial.backward()
    G_gamma_partial, G_beta_partial = gamma.grad.clone(), beta.grad.clone()     # (D,) own tokens only
    if res.mistake != "ln-grad-not-reduced":
        dist.all_reduce(gamma.grad)                                  # (D,) over the TP group
        dist.all_reduce(beta.grad)
    values = {
        "X": X, "W1": W1, "W2": W2, "A": A, "A_full": A_full, "O": O, "Y": Y, "G_Y": G,
        "G_O_full": O_partial.grad, "G_W2": W2.grad, "G_W1": W1.grad, "G_A": A.grad, "G_X": X.grad,
        "G_gamma_partial": G_gamma_partial, "G_gamma": gamma.grad,
        "G_beta_partial": G_beta_partial, "G_beta": beta.grad,
    }
    masks = {"keep_H": keep_h, "keep_O": keep_o}
    names = ranks.sp_layer.sp_names(me, res.mistake)
    records = []
    for key in ranks.sp_layer.sp_stage_keys(p["stage"], res.mistake, pr):
        v = masks[key] if key in masks else _batch_first(numpy(values[key]))
        records.append((names[key], ranks.sp_layer.sp_value(key, v)))

    got = _assemble(ctx, Y, X.grad, W1.grad, W2.grad, loss_partial.detach(), gamma.grad, beta.grad)
    if ctx.rank != 0:
        return records, None
    ref = _unsharded(ctx, inp, res, pr)
    check = [(f"max|Δ| {k}", ranks.verdict(max_abs(got[k], ref[k]), res.tolerances[k])) for k in ranks.sp_layer.SP_CHECK]
    return records, check


def _batch_first(a: np.ndarray) -> np.ndarray:
    """A sequence-first (S·, B, ·) activation back in the page's (B, S·, ·) layout; others unchanged."""
    return np.swapaxes(a, 0, 1) if a.ndim == 3 else a


def _dropout(ctx: Ctx, x, keep: np.ndarray | None, p: float, seq_first: bool = True):
    """Inverted dropout with a keep-mask drawn in the page's (B, S, ·) layout."""
    if keep is None:
        return x
    m = ctx.tensor(_seq_first(keep) if seq_first else keep).to(x.dtype)
    return x * m / (1.0 - p)


def _assemble(ctx: Ctx, Y, G_X, G_W1, G_W2, loss_partial, G_gamma, G_beta) -> dict:
    """The shards gathered (only to compare with the unsharded run, on rank 0)."""
    torch, dist = ctx.torch, ctx.dist

    def cat(t, dim):
        parts = [torch.empty_like(t) for _ in range(ctx.world)]
        dist.all_gather(parts, t.contiguous())
        return torch.cat(parts, dim=dim)

    loss = loss_partial.clone()
    dist.all_reduce(loss)
    return {"Y": cat(Y, 0).transpose(0, 1), "G_X": cat(G_X, 0).transpose(0, 1), "G_W1": cat(G_W1, 1),
            "G_W2": cat(G_W2, 0), "loss": loss, "G_gamma": G_gamma, "G_beta": G_beta}


def _unsharded(ctx: Ctx, inp: dict, res: sp_layer.SpLayerResult, p: float) -> dict:
    """The same block in one process: F.layer_norm and autograd, the one-device masks."""
    torch = ctx.torch
    F = torch.nn.functional
    X, gamma, beta, W1, W2 = (ctx.tensor(inp[k]).requires_grad_() for k in ("X", "gamma", "beta", "W1", "W2"))
    masks = sp_layer.reference_masks(fields_of(res))       # the options are the result's first fields
    H = _dropout(ctx, torch.tanh(F.layer_norm(X, (X.shape[-1],), gamma, beta, eps=sp_layer.EPS) @ W1),
                 masks["H"], p, seq_first=False)
    Y = X + _dropout(ctx, H @ W2, masks["O"], p, seq_first=False)
    loss = (Y * ctx.tensor(inp["G"])).sum()
    loss.backward()
    return {"Y": Y, "loss": loss, "G_X": X.grad, "G_gamma": gamma.grad, "G_beta": beta.grad, "G_W1": W1.grad,
            "G_W2": W2.grad}
