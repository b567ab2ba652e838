"""Vocab-parallel cross-entropy, following Megatron's ``_VocabParallelCrossEntropy`` step by step.

Letters
-------
V    true vocabulary size (the last dim of ``logits``)
tp   number of vocab shards (the CLI and the page call it ``shards``)
Vp   padded vocabulary: the smallest multiple of ``pad_multiple · tp`` that is >= V
K    ids per rank, ``Vp / tp``; rank r owns ids ``[r·K, (r+1)·K)`` (Megatron's VocabUtility)
N    positions (1 for a 1-D logits vector)
H    hidden size (only in :func:`run_vocab_parallel_head`)
m    global max of a position's logits, s its global Σ exp(z − m), t the target's z_y − m

Algorithm (forward; backward needs no communication)::

    m_r = max_{j∈V_r} z_j                    local
    m   = AllReduce(MAX, m_r)                so every rank subtracts the same number
    t_r = 1[y∈V_r] (z_y − m)                 only the owning rank knows z_y; others give 0
    t   = AllReduce(SUM, t_r)
    s_r = Σ_{j∈V_r} exp(z_j − m)             local
    s   = AllReduce(SUM, s_r)
    L   = log s − t
    dL/dz_j = exp(z_j − m)/s − 1[j = y]      local on the rank that owns j

Padding: ids V … Vp−1 are padding.  Their logits are masked to −inf, so they add
exp(−inf) = 0 to s, never win the max (there is always a real id somewhere) and get
gradient 0.  Megatron itself does *not* mask them: it relies on the padded rows of
the output layer, whose logits are real numbers that do enter its softmax.

Label smoothing ε matches PyTorch ``F.cross_entropy(label_smoothing=ε)``::

    L = (1−ε)·(log s − t) + (ε/V)·Σ_{k<V} (log s − (z_k − m))

with V the *global true* vocabulary at every shard count.  The sum over all ids needs
one more AllReduce(SUM) of the local Σ (z_k − m).  Megatron instead (``_VocabParallelCrossEntropy``
in megatron/core/tensor_parallel/cross_entropy.py) uses ε̃ = ε·K/(K−1) with K = the width of the
rank's logits, ``exp_logits.size(-1)`` = Vp/tp *padding included*, and the mean of log p over
those K local columns, so its smoothed loss differs from rank to rank when tp > 1 (Megatron-LM
issues #737, #7464).  Its padded logits are not masked: they are real numbers and enter the max,
the softmax and that mean.  :func:`megatron_ce` computes Megatron's loss rank by rank with the
padded logits set to :data:`MEGATRON_PAD_LOGIT`, so the page can show the discrepancy.

Shift: adding a constant to every logit changes nothing in exact arithmetic (m absorbs it), and
nothing overflows at |shift| = 1e4 in any dtype because exp only ever sees z − m <= 0.  But the
shifted logits are *stored* in ``dtype`` first: float16 spaces numbers near 1e4 by 8, so in
float16 the shifted logits themselves are rounded away (default example: loss 0.824 becomes
1.792 at shift ±1e4, sharded and unsharded alike).  float64 agrees to ~1e-13.

ignore_index (default −100): those positions contribute no loss and no gradient; the loss is
the mean over the other positions, as PyTorch's ``reduction="mean"``.  If *every* position is
ignored PyTorch returns NaN (0/0).  This module never shows NaN: it returns loss 0 with
``all_ignored = True`` and ``counted = 0`` (and zero gradients).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .collectives import reduce_all
from . import fmt
from .errors import TPMathError
from .i18n import Text
from .record import OMIT_IF_NONE, CommStep
from .validate import as_array, as_dtype, as_float, as_int, check_finite, parse_json

DEFAULT_LOGITS = [1.2, -0.5, 2, 0.1, 1.4, -1]
DEFAULT_TARGET = 2
# The value of the padded logits in Megatron's loss (megatron_ce).  In Megatron they are whatever the
# padded columns of the output layer produce (those columns are parameters, initialised like the
# others); here they are 0, what a zero padded column of W_out gives (run_vocab_parallel_head pads
# W_out with zero columns).
MEGATRON_PAD_LOGIT = 0.0
SHIFT_LIMIT = 1e4   # |shift| bound (the page's control); the shifted logits still fit float16 (max 65504)
MAX_SHARDS = 64


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class PadRank:
    """The ids rank ``rank`` owns in Megatron's padded vocabulary: [start, end), real ones first."""
    rank: int
    vocab_range: list[int]              # [start, end), K = Vp/tp ids
    real: int                           # ids < V in the range
    padding: int                        # ids ≥ V in the range
    padding_range: list[int] | None     # [first, end) of the padding ids, None without padding


@dataclass(frozen=True, eq=False)
class VocabPad:
    """Megatron's padded vocabulary: V up to a multiple of ``divisor = multiple · tp``."""
    vocab: int
    tp: int
    multiple: int
    divisor: int
    padded_vocab: int
    padding: int                        # Vp − V
    per_rank: int                       # K = Vp / tp
    ranks: list[PadRank]


@dataclass(frozen=True, eq=False)
class VocabRank:
    """What rank ``rank`` holds and computes.  1-D logits give (K,) arrays and scalars; 2-D logits
    give one row / value per position."""
    rank: int
    vocab_range: list[int]              # [start, end) of the padded vocabulary
    padding_range: list[int] | None     # [first, end) of its padding ids, None without padding
    padding: int
    logits: np.ndarray                  # (N, K) own logits, padding = −inf
    local_max: np.ndarray               # (N,)  m_r, before AllReduce(MAX)
    local_sum_exp: np.ndarray           # (N,)  s_r, before AllReduce(SUM)
    target_shifted: np.ndarray          # (N,)  t_r = z_y − m on the owning rank, 0 elsewhere
    prob: np.ndarray                    # (N, K) softmax of own ids
    grad: np.ndarray                    # (N, K) dL/dz of own ids, complete locally
    # with label smoothing only: Σ (z − m) over own real ids, before AllReduce(SUM)
    local_sum_shifted: np.ndarray | None = field(default=None, metadata=OMIT_IF_NONE)   # (N,)


@dataclass(frozen=True, eq=False)
class Token:
    """One vocabulary id of one position: its owner, probability and gradient."""
    position: int | None = field(metadata=OMIT_IF_NONE)   # 2-D logits only
    token: int
    rank: int
    prob: Any                           # 0-d, in the run's dtype
    grad: Any


@dataclass(frozen=True, eq=False)
class MegatronLoss:
    """Megatron's smoothed loss on the same logits (:func:`megatron_ce`), per rank."""
    K: int                              # columns per rank, padding included
    padded_vocab: int
    pad_logit: float                    # the padded logits' value (unmasked in Megatron)
    loss_per_rank: list[float | None]   # None where K = 1 with smoothing (Megatron divides by 0)
    loss_tp1: float | None = None       # one rank, K = V


@dataclass(frozen=True, eq=False)
class VocabCeResult:
    """One vocab-parallel cross-entropy over ``shards`` ranks next to the unsharded reference.
    1-D logits give scalars where 2-D logits give one value per position (N)."""
    # the run
    vocab: int
    padded_vocab: int
    shards: int
    dtype: str
    shift: float
    label_smoothing: float
    ignore_index: int
    target: int | list[int]
    counted: int                        # positions not ignored
    all_ignored: bool
    # the loss (mean over counted positions) against the reference in dtype and in float64
    loss: float
    reference_loss: float
    abs_diff: float
    reference_loss_float64: float       # unshifted, float64
    abs_diff_float64: float
    position_loss: np.ndarray           # (N,)
    # the AllReduce results every rank holds
    global_max: np.ndarray              # (N,)  m
    global_sum_exp: np.ndarray          # (N,)  s
    target_rank: int | None | list[int | None]   # None where ignored
    ranks: list[VocabRank]              # one per rank, in rank order
    tokens: list[Token]                 # N·V, position-major
    grad: np.ndarray                    # (N, V) assembled from the ranks
    reference_grad: np.ndarray          # (N, V)
    grad_max_abs_err: float
    comm: list[CommStep]
    megatron: MegatronLoss


@dataclass(frozen=True, eq=False)
class HeadRank:
    """Rank ``rank`` of the output head: its W_out columns, local logits and gradients."""
    rank: int
    vocab_range: list[int]              # [start, end) of the padded vocabulary
    W_shard: np.ndarray                 # (H, K)  padded columns are zeros
    logits: np.ndarray                  # (N, K)  local logits
    grad_logits: np.ndarray             # (N, K)  local dL/dlogits
    grad_W: np.ndarray                  # (H, K_real) complete locally
    grad_hidden_partial: np.ndarray     # (N, H)  partial: AllReduce(SUM) over the shards


@dataclass(frozen=True, eq=False)
class HeadGrads:
    """The unsharded reference of the output head."""
    loss: float
    grad_hidden: np.ndarray             # (N, H)
    grad_W: np.ndarray                  # (H, V)


@dataclass(frozen=True, eq=False)
class HeadResult:
    """Output layer W_out split by vocab columns, then vocab-parallel CE (float64)."""
    shards: int
    vocab: int
    padded_vocab: int
    hidden: np.ndarray                  # (N, H) replicated
    W_out: np.ndarray                   # (H, V)
    target: int | list[int]
    ranks: list[HeadRank]
    loss: float
    grad_hidden: np.ndarray             # (N, H)  the sum of the ranks' partials
    grad_W: np.ndarray                  # (H, V)  the ranks' columns side by side
    reference: HeadGrads
    max_abs_err: dict[str, float]       # loss, grad_hidden, grad_W
    comm: list[CommStep]


# ---------------------------------------------------------------------------------------------
# Padding and vocabulary ranges
# ---------------------------------------------------------------------------------------------

def megatron_padded_vocab(V: int, tp: int, multiple: int = 128) -> int:
    """Megatron's rule: pad V up to a multiple of ``multiple · tp`` (make-vocab-size-divisible-by).

    GPT-2's 50257 becomes 50304 at tp 1 and 51200 at tp 8.
    """
    V = as_int("vocab", V, lo=1)
    tp = as_int("tp", tp, lo=1, hi=4096)
    multiple = as_int("multiple", multiple, lo=1)
    step = multiple * tp
    return -(-V // step) * step  # ceil(V / step) * step


def vocab_ranges(V: int, shards: int, pad_multiple: int = 1) -> tuple[int, list[tuple[int, int]]]:
    """(Vp, [(start, end) per rank]): equal consecutive ranges of the padded vocabulary."""
    Vp = megatron_padded_vocab(V, shards, pad_multiple)
    K = Vp // shards
    return Vp, [(r * K, (r + 1) * K) for r in range(shards)]


def rank_padding(V: int, start: int, end: int) -> tuple[list[int] | None, int, int]:
    """([first, end) of the padding ids inside [start, end) or None, real count, padding count)."""
    real = max(0, min(end, V) - start)
    pad = (end - start) - real
    return ([max(start, V), end] if pad else None), real, pad


def vocab_pad_table(V: int, tp: int, multiple: int = 128) -> VocabPad:
    """Megatron's padded vocabulary and each rank's id range (the ``vocab-pad`` command)."""
    V = as_int("vocab", V, lo=1, hi=10**9)
    tp = as_int("tp", tp, lo=1, hi=4096)
    multiple = as_int("multiple", multiple, lo=1, hi=10**6)
    Vp, ranges = vocab_ranges(V, tp, multiple)
    ranks = []
    for r, (a, b) in enumerate(ranges):
        pad_range, real, pad = rank_padding(V, a, b)
        ranks.append(PadRank(rank=r, vocab_range=[a, b], real=real, padding=pad, padding_range=pad_range))
    return VocabPad(vocab=V, tp=tp, multiple=multiple, divisor=multiple * tp, padded_vocab=Vp, padding=Vp - V,
                    per_rank=Vp // tp, ranks=ranks)


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

def _check_representable(name: str, Z: np.ndarray, dt: np.dtype) -> None:
    """Accept every finite logit ``dt`` can hold, as F.cross_entropy does (the algorithm is
    shift-stable: only z − m ≤ 0 meets exp); reject one the conversion to ``dt`` would make ±inf."""
    big = np.abs(Z) > np.finfo(dt).max
    if np.any(big):
        raise TPMathError("beyond_dtype", name, name=Text(f"name.{name}"), value=float(Z[big].ravel()[0]),
                          dtype=dt.name, max=fmt.bound(float(np.finfo(dt).max)))


def _targets(target: Any, V: int, N: int, two_d: bool, ignore_index: int) -> np.ndarray:
    """Targets as an int array of length N; each in [0, V) or equal to ignore_index."""
    target = parse_json("target", target)
    if two_d:
        if not isinstance(target, (list, tuple, np.ndarray)):
            raise TPMathError("targets_not_a_list", "target", n=N, value=target)
        items = list(np.asarray(target, dtype=object).ravel()) if isinstance(target, np.ndarray) else list(target)
        if len(items) != N or any(isinstance(t, (list, tuple)) for t in items):
            raise TPMathError("targets_count", "target", n=N, value=target)
    else:
        if isinstance(target, (list, tuple, np.ndarray)):
            raise TPMathError("target_not_an_id", "target", value=target)
        items = [target]
    out = []
    for t in items:
        t = as_int("target", t)
        if t != ignore_index and not 0 <= t < V:
            raise TPMathError("target_out_of_vocab", "target", value=t, last=V - 1, vocab=V,
                              ignore_index=ignore_index)
        out.append(t)
    return np.asarray(out, dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# Building blocks (one entry per rank)
# ---------------------------------------------------------------------------------------------

def reference_ce(Z: np.ndarray, y: np.ndarray, counted: np.ndarray, eps: float) -> dict:
    """Unsharded log-softmax cross-entropy in Z's dtype (PyTorch's definition, mean reduction).

    Returns per-position loss (0 where ignored), the mean loss and dL/dZ.
    """
    dt = Z.dtype
    N, V = Z.shape
    m = Z.max(axis=1, keepdims=True)                                   # (N, 1)
    shifted = Z - m                                                    # (N, V)
    lse = np.log(np.exp(shifted).sum(axis=1, keepdims=True))           # (N, 1)
    logp = shifted - lse                                               # (N, V)
    yy = np.where(counted, y, 0)
    nll = -logp[np.arange(N), yy]                                      # (N,)
    smooth = -logp.mean(axis=1)                                        # (N,)  (1/V) Σ −log p_k
    per = (dt.type(1 - eps) * nll + dt.type(eps) * smooth) if eps else nll
    per = np.where(counted, per, dt.type(0))
    n = int(counted.sum())
    loss = per.sum() / dt.type(n) if n else dt.type(0)
    target_dist = np.zeros((N, V), dtype=dt)
    target_dist[np.arange(N), yy] = dt.type(1 - eps)
    target_dist += dt.type(eps / V)
    w = np.where(counted, dt.type(1.0 / n) if n else dt.type(0), dt.type(0))[:, None]  # (N, 1)
    grad = (np.exp(logp) - target_dist) * w                           # (N, V)
    return {"loss": loss, "position_loss": per, "grad": grad}


def megatron_log_p(Z: np.ndarray, V: int, Vp: int, pad_logit: float = MEGATRON_PAD_LOGIT) -> np.ndarray:
    """(N, Vp) log-probabilities of Megatron's softmax over the padded vocabulary of (N, V) logits
    ``Z`` (float64): its padded logits are ``pad_logit``, numbers that enter it, not −inf."""
    z = np.full((Z.shape[0], Vp), pad_logit, dtype=np.float64)
    z[:, :V] = Z
    shifted = z - z.max(axis=1, keepdims=True)                 # z − m
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))   # log(exp(z − m)/s)


def megatron_local_means(log_p: np.ndarray, ranges: list[tuple[int, int]]) -> list[np.ndarray]:
    """What each rank smooths with in Megatron: the mean of log p over its K columns, padding
    included, (N,) per rank; no collective joins them."""
    return [log_p[:, a:b].mean(axis=1) for a, b in ranges]


def megatron_ce(Z: np.ndarray, y: np.ndarray, counted: np.ndarray, eps: float,
                ranges: list[tuple[int, int]], V: int, pad_logit: float = MEGATRON_PAD_LOGIT) -> MegatronLoss:
    """Megatron's ``_VocabParallelCrossEntropy.forward`` rank by rank on (N, V) logits ``Z`` (float64).

    Every rank holds K = Vp/tp columns, padding included (Megatron's ``partition_vocab_size`` and
    ``vocab_size = exp_logits.size(-1)``).  The padded logits are ``pad_logit`` and, unmasked as in
    Megatron, enter everything::

        m = max over all Vp logits                 (AllReduce MAX)
        s = Σ over all Vp of exp(z − m)            (AllReduce SUM)
        loss = log s − (z_y − m)                   (the target term by AllReduce SUM)
        ε > 0:  ε̃ = ε·K/(K − 1)
                loss_r = (1 − ε̃)·loss − ε̃ · (1/K) Σ_{k in the rank's K columns} log(exp(z_k − m)/s)

    Each rank's per-position losses are averaged over the counted positions.  K = 1 with ε > 0
    gives None (Megatron divides by K − 1 = 0).  ``loss_tp1`` is left None (see :func:`run_vocab_ce`).
    """
    tp, K = len(ranges), ranges[0][1] - ranges[0][0]
    Vp = tp * K
    N = Z.shape[0]
    log_p = megatron_log_p(Z, V, Vp, pad_logit)                # (N, Vp)
    loss = -log_p[np.arange(N), np.where(counted, y, 0)]       # (N,) log s − (z_y − m)
    n = int(counted.sum())

    def mean(per: np.ndarray) -> float:                        # over the counted positions
        return float(np.where(counted, per, 0.0).sum() / n) if n else 0.0

    if not eps:
        per_rank = [mean(loss)] * tp                           # no smoothing: the same loss on every rank
    elif K <= 1:
        per_rank = [None] * tp
    else:
        e = eps * K / (K - 1)
        per_rank = [mean((1 - e) * loss - e * local) for local in megatron_local_means(log_p, ranges)]
    return MegatronLoss(K=K, padded_vocab=Vp, pad_logit=pad_logit, loss_per_rank=per_rank)


def sharded_ce(Z: np.ndarray, y: np.ndarray, counted: np.ndarray, eps: float,
               ranges: list[tuple[int, int]], V: int) -> dict:
    """The vocab-parallel forward and backward of (N, V) logits ``Z`` over ``ranges``.

    Every per-rank quantity is a list with one entry per rank; the AllReduce results and
    the assembled ``prob`` / ``grad`` (N, V) are what every rank holds (or, for the
    gradient, what the ranks hold together).  Runs in Z's dtype.

    All ranks are computed with one numpy call per step: the padded logits are one (N, Vp)
    array whose rank blocks are (N, tp, K) slices, so per-rank arrays are views (no copies)
    and per-rank reductions (max, Σ exp) reduce the K axis.
    """
    dt = Z.dtype
    N = Z.shape[0]
    tp, K = len(ranges), ranges[0][1] - ranges[0][0]
    Vp = tp * K
    n = int(counted.sum())
    rows = np.arange(N)
    padded = np.full((N, Vp), -np.inf, dtype=dt)              # (N, Vp) padding ids masked with −inf
    padded[:, :V] = Z
    z_r = [padded[:, a:b] for a, b in ranges]                  # each (N, K)
    real = np.arange(Vp) < V                                   # (Vp,)
    real_r = [real[a:b] for a, b in ranges]                    # each (K,)

    # Step 1: local max, then AllReduce(MAX) so all ranks subtract the same m (stability).
    local_max = list(padded.reshape(N, tp, K).max(axis=2).T)   # each (N,); −inf on an all-padding rank
    m = reduce_all(local_max, "max")                          # (N,)
    shifted = padded - m[:, None]                              # (N, Vp); padding stays −inf
    shifted_r = [shifted[:, a:b] for a, b in ranges]           # each (N, K)
    # Step 2: the target's shifted logit lives on exactly one rank; the others contribute 0,
    # so AllReduce(SUM) hands every rank z_y − m.
    owner = y // K                                             # (N,) rank owning each target
    t_stack = np.zeros((tp, N), dtype=dt)                      # (tp, N)
    t_stack[owner[counted], rows[counted]] = shifted[rows[counted], y[counted]]
    t_local = list(t_stack)                                    # each (N,)
    t = reduce_all(t_local, "sum")                            # (N,)
    # Step 3: local Σ exp, AllReduce(SUM) gives the softmax denominator on every rank.
    prob = np.exp(shifted)                                     # (N, Vp); exp(−inf) = 0
    local_sum_exp = list(prob.reshape(N, tp, K).sum(axis=2).T)  # each (N,)
    s = reduce_all(local_sum_exp, "sum")                      # (N,)
    log_s = np.log(s)                                          # (N,)
    nll = log_s - t                                            # (N,)
    comm = [CommStep("forward", "all-reduce (max)", N), CommStep("forward", "all-reduce (sum)", N),
            CommStep("forward", "all-reduce (sum)", N)]

    if eps:
        # PyTorch's smoothing term needs Σ over the whole true vocabulary of (z_k − m):
        # one more AllReduce(SUM) of the local sums over real ids.
        real_shifted = np.where(real[None, :], shifted, dt.type(0))            # (N, Vp)
        local_sum_shifted = list(real_shifted.reshape(N, tp, K).sum(axis=2).T)  # each (N,)
        sum_shifted = reduce_all(local_sum_shifted, "sum")                  # (N,)
        smooth = (dt.type(V) * log_s - sum_shifted) / dt.type(V)             # (N,) (1/V) Σ −log p_k
        per = dt.type(1 - eps) * nll + dt.type(eps) * smooth
        comm.append(CommStep("forward", "all-reduce (sum)", N))
    else:
        local_sum_shifted = None
        per = nll
    per = np.where(counted, per, dt.type(0))                   # (N,)
    loss = per.sum() / dt.type(n) if n else dt.type(0)
    comm.append(CommStep("backward", "none", 0))

    # Backward, local on every rank: softmax − (smoothed) one-hot, scaled by 1/n for the mean.
    w = np.where(counted, dt.type(1.0 / n) if n else dt.type(0), dt.type(0))[:, None]   # (N, 1)
    np.divide(prob, s[:, None], out=prob)                      # (N, Vp) exp(z − m) / s, in place
    if eps:
        grad = (prob - real.astype(dt) * dt.type(eps / V)) * w  # (N, Vp); padding ids get 0
    else:
        grad = prob * w                                        # (N, Vp)
    # The owning rank subtracts the target's share 1 − ε (+ ε/V, as every real id).
    hit = (rows[counted], y[counted])
    target_share = dt.type(1 - eps) + dt.type(eps / V) if eps else dt.type(1 - eps)
    grad[hit] = (prob[hit] - target_share) * w[counted, 0]
    prob_r = [prob[:, a:b] for a, b in ranges]                 # each (N, K)
    grad_r = [grad[:, a:b] for a, b in ranges]                 # each (N, K)
    return {"z_r": z_r, "real_r": real_r, "local_max": local_max, "m": m, "shifted_r": shifted_r,
            "t_local": t_local, "t": t, "local_sum_exp": local_sum_exp, "s": s, "log_s": log_s,
            "nll": nll, "local_sum_shifted": local_sum_shifted, "per": per, "loss": loss,
            "prob_r": prob_r, "grad_r": grad_r, "prob": prob[:, :V], "grad": grad[:, :V], "comm": comm}


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------

def run_vocab_ce(logits: Any = None, target: Any = None, shards: Any = 2, shift: Any = 0.0,
                 label_smoothing: Any = 0.0, ignore_index: Any = -100, dtype: Any = "float64",
                 pad_multiple: Any = 1) -> VocabCeResult:
    """Vocab-parallel CE of ``logits`` (V,) or (N, V) over ``shards`` ranks, next to the reference.

    ``shift`` is added to every logit (it changes nothing mathematically).  Shard counts that
    do not divide V pad the vocabulary (masked ids).  ``None`` logits/target = the seed's
    ``DEFAULT_LOGITS`` and target 2.  All steps run in ``dtype``.

    The result (:class:`VocabCeResult`) has ``reference_loss``, the unsharded log-softmax CE of the
    same shifted ``dtype`` logits, and ``reference_loss_float64`` (unshifted, float64); ``megatron`` is
    Megatron's loss on the same logits (:func:`megatron_ce`), which differs from ours with label
    smoothing.
    """
    if logits is None:
        logits = DEFAULT_LOGITS
        if target is None:
            target = DEFAULT_TARGET
    L64 = as_array("logits", logits, ndim=(1, 2))
    if target is None:
        raise TPMathError("target_missing", "target")
    two_d = L64.ndim == 2
    Z64 = L64 if two_d else L64[None, :]                     # (N, V)
    N, V = Z64.shape
    if V < 2:
        raise TPMathError("vocab_too_small", "logits", vocab=V)
    shards = as_int("shards", shards, lo=1, hi=MAX_SHARDS)
    shift = as_float("shift", shift, lo=-SHIFT_LIMIT, hi=SHIFT_LIMIT)
    eps = as_float("label_smoothing", label_smoothing, lo=0.0, hi=1.0)
    ignore_index = as_int("ignore_index", ignore_index)
    pad_multiple = as_int("pad_multiple", pad_multiple, lo=1, hi=1024)
    dt = as_dtype("dtype", dtype)
    y = _targets(target, V, N, two_d, ignore_index)           # (N,)
    counted = y != ignore_index                                # (N,)
    n = int(counted.sum())

    _check_representable("logits", Z64 + shift, dt)
    Z = (Z64 + shift).astype(dt)                               # (N, V) the logits as computed
    Vp, ranges = vocab_ranges(V, shards, pad_multiple)
    with np.errstate(over="ignore", invalid="ignore"):       # reported just below, as an error
        sh = sharded_ce(Z, y, counted, eps, ranges, V)
        ref = reference_ce(Z, y, counted, eps)
        ref64 = reference_ce(Z64, y, counted, eps)
    # Finite logits far apart (a target 1e308 below the max) give a loss beyond the dtype: F.cross_entropy
    # would return inf; a shown number is never inf, so it is reported.
    check_finite(dt.name, {"loss": sh["loss"], "dL/dz": sh["grad"]}, {"loss": ref64["loss"]}, field="logits")
    z_r, local_max, m = sh["z_r"], sh["local_max"], sh["m"]
    t_local, local_sum_exp, s = sh["t_local"], sh["local_sum_exp"], sh["s"]
    local_sum_shifted, per, loss, comm = sh["local_sum_shifted"], sh["per"], sh["loss"], sh["comm"]
    prob_r, grad_r, prob, grad = sh["prob_r"], sh["grad_r"], sh["prob"], sh["grad"]

    owner = np.arange(V) // (Vp // shards)                     # rank of each real id

    def pick(a):  # (N, ...) -> squeeze the position axis for 1-D input
        return a if two_d else a[0]

    ranks = []
    for r, ((a, b), zr, lm, tr, se) in enumerate(zip(ranges, z_r, local_max, t_local, local_sum_exp)):
        pad_range, n_real, n_pad = rank_padding(V, a, b)
        ranks.append(VocabRank(
            rank=r, vocab_range=[a, b], padding_range=pad_range, padding=n_pad, logits=pick(zr),
            local_max=pick(lm), local_sum_exp=pick(se), target_shifted=pick(tr), prob=pick(prob_r[r]),
            grad=pick(grad_r[r]), local_sum_shifted=None if local_sum_shifted is None else pick(local_sum_shifted[r])))

    tokens = [Token(position=i if two_d else None, token=j, rank=int(owner[j]), prob=prob[i, j], grad=grad[i, j])
              for i in range(N) for j in range(V)]

    target_rank = [int(owner[t]) if c else None for t, c in zip(y, counted)]
    Z_64 = Z.astype(np.float64)                                # the logits as computed (rounded to dtype)
    megatron = dataclasses.replace(megatron_ce(Z_64, y, counted, eps, ranges, V),
                                   loss_tp1=megatron_ce(Z_64, y, counted, eps, [(0, V)], V).loss_per_rank[0])
    return VocabCeResult(
        vocab=V, padded_vocab=Vp, shards=shards, dtype=dt.name, shift=shift, label_smoothing=eps,
        ignore_index=ignore_index, target=y.tolist() if two_d else int(y[0]), counted=n, all_ignored=n == 0,
        loss=float(loss), reference_loss=float(ref["loss"]), abs_diff=abs(float(loss) - float(ref["loss"])),
        reference_loss_float64=float(ref64["loss"]), abs_diff_float64=abs(float(loss) - float(ref64["loss"])),
        position_loss=pick(per), global_max=pick(m), global_sum_exp=pick(s),
        target_rank=target_rank if two_d else target_rank[0], ranks=ranks, tokens=tokens, grad=pick(grad),
        reference_grad=pick(ref["grad"]),
        grad_max_abs_err=float(np.max(np.abs(grad.astype(np.float64) - ref["grad"].astype(np.float64)))),
        comm=comm, megatron=megatron,
    )


def default_head_inputs() -> dict:
    """A small output head: hidden (2, 3), W_out (3, 6), targets [2, 4] (no zeros)."""
    hidden = np.array([[0.5, -1.0, 1.5], [1.2, 0.3, -0.7]])
    W_out = np.array([[0.4, -0.3, 1.1, 0.2, 0.7, -0.6],
                      [-0.5, 0.8, 0.3, -1.2, 0.6, 0.9],
                      [1.0, 0.2, 0.5, 0.4, -0.8, -0.3]])
    return {"hidden": hidden, "W_out": W_out, "target": [2, 4]}


def run_vocab_parallel_head(hidden: Any = None, W_out: Any = None, target: Any = None, shards: Any = 2,
                            label_smoothing: Any = 0.0, ignore_index: Any = -100) -> HeadResult:
    """Output layer W_out (H, V) split by vocab columns, then vocab-parallel CE (float64).

    Each rank computes logits_r = hidden W_r (the hidden state is shared, i.e. replicated),
    the CE gradient dlogits_r locally, dW_r = hiddenᵀ dlogits_r locally, and a partial
    dhidden_r = dlogits_r W_rᵀ; the gradient w.r.t. the shared hidden state is their sum,
    an AllReduce(SUM) across the vocab shards.
    """
    d = default_head_inputs()
    hidden = d["hidden"] if hidden is None else hidden
    W_out = d["W_out"] if W_out is None else W_out
    target = d["target"] if target is None else target
    Hs = as_array("hidden", hidden, ndim=(1, 2))
    two_d = Hs.ndim == 2
    Hm = Hs if two_d else Hs[None, :]                          # (N, H)
    W = as_array("W_out", W_out, ndim=2)                       # (H, V)
    if W.shape[0] != Hm.shape[1]:
        raise TPMathError("head_w_rows", "W_out", rows=W.shape[0], hidden=Hm.shape[1])
    shards = as_int("shards", shards, lo=1, hi=MAX_SHARDS)
    N, _ = Hm.shape
    V = W.shape[1]
    logits = Hm @ W                                            # (N, V) only to validate / reference
    _check_representable("logits", logits, np.dtype(np.float64))
    ce = run_vocab_ce(logits if two_d else logits[0], target, shards=shards,
                      label_smoothing=label_smoothing, ignore_index=ignore_index)
    Vp, ranges = vocab_ranges(V, shards)
    Wp = np.zeros((W.shape[0], Vp))                            # (H, Vp) padded columns are zeros
    Wp[:, :V] = W
    pick = (lambda a: a) if two_d else (lambda a: a[0])
    ranks, partials = [], []
    for r, (a, b) in enumerate(ranges):
        W_r = Wp[:, a:b]                                       # (H, K) padded columns are zeros
        g = np.asarray(ce.ranks[r].grad).reshape(N, b - a)     # (N, K) local dL/dlogits
        partials.append(g @ W_r.T)                             # (N, H) partial
        ranks.append(HeadRank(rank=r, vocab_range=[a, b], W_shard=W_r,
                              logits=pick(Hm @ W_r),                        # (N, K) local logits
                              grad_logits=pick(g),
                              grad_W=(Hm.T @ g)[:, : max(0, min(b, V) - a)],  # (H, K_real) local
                              grad_hidden_partial=pick(partials[-1])))
    # The hidden state feeds every shard, so its gradient is the sum of the shards' partials.
    grad_hidden = reduce_all(partials, "sum")                                    # (N, H)
    grad_W = np.concatenate([rk.grad_W for rk in ranks], axis=1)                 # (H, V)

    # Unsharded reference: the full-vocab CE gradient through the whole W_out.
    ref_grad_logits = np.asarray(ce.reference_grad).reshape(N, V)   # (N, V)
    ref_grad_hidden = ref_grad_logits @ W.T                        # (N, H)
    ref_grad_W = Hm.T @ ref_grad_logits                            # (H, V)
    return HeadResult(
        shards=shards, vocab=V, padded_vocab=Vp, hidden=Hs, W_out=W, target=ce.target, ranks=ranks,
        loss=ce.loss, grad_hidden=pick(grad_hidden), grad_W=grad_W,
        reference=HeadGrads(loss=ce.reference_loss, grad_hidden=pick(ref_grad_hidden), grad_W=ref_grad_W),
        max_abs_err={"loss": ce.abs_diff, "grad_hidden": float(np.max(np.abs(grad_hidden - ref_grad_hidden))),
                     "grad_W": float(np.max(np.abs(grad_W - ref_grad_W)))},
        comm=ce.comm[:-1] + [CommStep("backward", "all-reduce (sum)", int(Hm.size))],
    )


@functools.lru_cache(maxsize=128)
def default_run(target: int, shards: int, shift: float = 0.0, label_smoothing: float = 0.0,
                dtype: str = "float64") -> VocabCeResult:
    """:func:`run_vocab_ce` of :data:`DEFAULT_LOGITS`, memoised: a page section and its
    real-ranks block ask for the same run on every control change.  The result is shared:
    callers must not modify it."""
    return run_vocab_ce(DEFAULT_LOGITS, target, shards=shards, shift=shift, label_smoothing=label_smoothing,
                        dtype=dtype)
