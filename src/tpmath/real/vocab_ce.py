"""Vocab-parallel cross-entropy on real ranks (Megatron's _VocabParallelCrossEntropy).

Rank r holds the logits of vocabulary ids [r·K, (r+1)·K) (K = Vp / tp; ids ≥ V are padding,
masked with −inf).  Three AllReduces make the loss: MAX of the local maxima, SUM of the
target's shifted logit (non-zero on the owning rank only), SUM of the local Σ exp.  Label
smoothing follows F.cross_entropy (ε spread over the V true ids), which needs one more SUM of
the local Σ (z − m); Megatron's own smoothing averages over the rank's K ids instead (no extra
AllReduce, a different loss: the page's label-smoothing table compares the two).  The backward is local, as in Megatron: the
gradient softmax − one-hot needs only this rank's ids and the already reduced Σ exp.
(Differentiating through a differentiable all_reduce instead would sum the replicated loss
gradient over ranks and scale the gradient by tp.)

The simulated twin is :func:`tpmath.vocab_ce.sharded_ce`.  Letters as there: V vocabulary, Vp padded, K ids per rank, N positions.
"""

from __future__ import annotations

import numpy as np

from .. import ranks
from .common import Ctx, numpy


def run(p: dict, ctx: Ctx) -> tuple[list, list | None]:
    """This rank's records and, on rank 0, the comparison with F.cross_entropy."""
    torch, dist = ctx.torch, ctx.dist
    res = p["core"]
    dt = res.dtype
    V, tp, r = res.vocab, ctx.world, ctx.rank
    eps, ignore = res.label_smoothing, res.ignore_index
    L64 = p["logits"]
    two_d = L64.ndim == 2
    Z = ((L64 if two_d else L64[None, :]) + res.shift).astype(dt)         # (N, V) as the core computes
    y = np.asarray(res.target if two_d else [res.target], dtype=np.int64)        # (N,)
    counted = y != ignore                                                  # (N,)
    n = int(counted.sum())
    N = Z.shape[0]
    a, b = res.ranks[r].vocab_range                                        # [a, b): K ids
    K = b - a

    z = torch.full((N, K), float("-inf"), dtype=getattr(torch, dt), device=ctx.device)   # (N, K)
    if min(b, V) > a:
        z[:, :min(b, V) - a] = ctx.tensor(Z[:, a:min(b, V)])
    real = torch.arange(a, b, device=ctx.device) < V                       # (K,) padding ids False

    local_max = z.max(dim=1).values                                        # (N,) −inf on all-padding rank
    m = local_max.clone()
    dist.all_reduce(m, op=dist.ReduceOp.MAX)                               # (N,) same shift everywhere
    shifted = z - m[:, None]                                               # (N, K)
    mine = torch.from_numpy(counted & (y >= a) & (y < b)).to(ctx.device)   # (N,) target on this rank
    local_t = torch.zeros(N, dtype=z.dtype, device=ctx.device)             # (N,)
    rows = torch.nonzero(mine).flatten()
    cols = torch.from_numpy(y).to(ctx.device)[rows] - a
    local_t[rows] = shifted[rows, cols]
    t = local_t.clone()
    dist.all_reduce(t)                                                     # (N,) z_y − m on every rank
    e = torch.exp(shifted)                                                 # (N, K) exp(−inf) = 0
    local_s = e.sum(dim=1)                                                 # (N,)
    s = local_s.clone()
    dist.all_reduce(s)                                                     # (N,) softmax denominator
    log_s = torch.log(s)
    nll = log_s - t                                                        # (N,)
    values = {"ids": ranks.vocab_ids(a, b, V), "logits": z, "local_max": local_max, "m": m,
              "target_shifted": local_t, "t": t, "local_sum_exp": local_s, "s": s}
    if eps:
        zero = torch.zeros((), dtype=z.dtype, device=ctx.device)
        local_sum_shifted = torch.where(real[None, :], shifted, zero).sum(dim=1)   # (N,)
        sum_shifted = local_sum_shifted.clone()
        dist.all_reduce(sum_shifted)                                       # (N,) Σ over the true vocabulary
        per = (1 - eps) * nll + eps * ((V * log_s - sum_shifted) / V)
        values.update(local_sum_shifted=local_sum_shifted, sum_shifted=sum_shifted)
    else:
        per = nll
    keep = torch.from_numpy(counted).to(ctx.device)
    per = torch.where(keep, per, torch.zeros((), dtype=z.dtype, device=ctx.device))
    loss = per.sum() / n if n else per.sum() * 0                           # mean over counted positions

    # Backward, local: (softmax − (1 − ε)·one-hot − ε/V on real ids) / n on counted positions.
    prob = e / s[:, None]                                                  # (N, K)
    w = (keep.to(z.dtype) / n if n else keep.to(z.dtype) * 0)[:, None]     # (N, 1)
    grad = (prob - real.to(z.dtype) * (eps / V)) * w if eps else prob * w  # (N, K)
    grad[rows, cols] = (prob[rows, cols] - ((1 - eps) + (eps / V if eps else 0))) * w[rows, 0]
    values.update(loss=loss, prob=prob, grad=grad)

    def pick(v):                                                           # 1-D input: drop the N axis
        if isinstance(v, (str, dict)):                                     # a text or a cell
            return v
        arr = numpy(v)
        return arr if two_d or arr.ndim == 0 else arr[0]

    names = ranks.vocab_names(a, b)
    records = [(names[key], pick(values[key])) for key in ranks.VOCAB_RECORDS if key in values]

    parts = [torch.empty_like(grad) for _ in range(tp)]
    dist.all_gather(parts, grad.contiguous())                              # only to compare, on rank 0
    if r != 0:
        return records, None
    full_grad = torch.cat(parts, dim=1)[:, :V]                             # (N, V) padding dropped
    ref_loss, ref_grad = _unsharded(ctx, Z, y, ignore, eps)
    check = ranks.vocab_check(float(loss), ref_loss, numpy(full_grad), ref_grad, dt, n)
    return records, check


def _unsharded(ctx: Ctx, Z: np.ndarray, y: np.ndarray, ignore: int, eps: float) -> tuple[float, np.ndarray]:
    """PyTorch's own F.cross_entropy on the whole vocabulary, and its autograd gradient."""
    torch = ctx.torch
    z = ctx.tensor(Z).requires_grad_()
    loss = torch.nn.functional.cross_entropy(z, torch.from_numpy(y).to(ctx.device), ignore_index=ignore,
                                             label_smoothing=eps)
    if torch.isnan(loss):           # every position ignored: nothing to compare
        return 0.0, np.zeros(Z.shape)
    loss.backward()
    return float(loss), numpy(z.grad)

