"""Data parallel × tensor parallel: which gradients are summed, which averaged.

Letters
-------
dp  data-parallel size: replicas k = 0..dp-1, each with its own micro-batch
tp  tensor-parallel size: ranks r = 0..tp-1 inside each replica (a TP group)
b   micro-batch rows per replica; N = dp·b rows in the global batch
D   d_model, F d_ff (tp divides F); W1 (D, F) and W2 (F, D) are the same on
    every replica (DP replicates the model), split over r as in :mod:`tpmath.mlp`

Loss: the mean over the global batch, ``L = (1/N) Σ_i Σ_d Y_id G_id``.  Replica
k's own loss is its micro-batch mean ``L_k = (1/b) Σ_{i∈k} …`` so its upstream
gradient is ``G_k / b`` and ``L = (1/dp) Σ_k L_k``.

The two axes need different coefficients:

* TP (inside a replica): the partial ``G_X`` of the ranks is **summed**
  (AllReduce, operator *f*); the weight gradients need no TP reduction at all,
  because each rank owns a disjoint shard.  The replicated ``G_Y`` is used once.
* DP (across replicas): rank r's shard gradient is **averaged** over the dp
  replicas that hold the same shard (AllReduce-mean in the DP group of r).

The reference is the gradient of L computed unsharded on the whole global
batch.  The wrong variants are computed by actually doing the wrong operation
(not by multiplying the right answer), and compared with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import TPMathError
from .i18n import Text
from .mlp import MAX_BATCH, MAX_D_FF, MAX_D_MODEL, MlpOutputs, all_reduce_sum, reference_mlp, sharded_mlp
from .validate import as_int, check_divides

MAX_DP = 8
MAX_TP = 8

# The reductions compared; each is described by the sentence dp_tp.<name> (content/i18n).
VARIANTS = ("correct", "divide_by_tp_too", "double_count_gy", "dp_sum_no_mean")


# -------------------------------------------------------------------- results

@dataclass(frozen=True, eq=False)
class RankGrads:
    """What TP rank ``rank`` of one replica computes in backward."""
    rank: int
    G_W1: np.ndarray                 # (D, F/tp)  complete for the replica's micro-batch
    G_W2: np.ndarray                 # (F/tp, D)
    G_X_partial: np.ndarray          # (b, D)     a partial sum over the TP group


@dataclass(frozen=True, eq=False)
class Replica:
    """One data-parallel replica: its micro-batch, its TP group's gradients and its G_X check."""
    replica: int
    X: np.ndarray                    # (b, D)
    G: np.ndarray                    # (b, D)
    G_Y: np.ndarray                  # (b, D) G / b: the gradient of the micro-batch mean loss
    loss: Any                        # 0-d
    ranks: list[RankGrads]           # one per TP rank
    G_X: np.ndarray                  # (b, D) TP AllReduce(sum) of the partial G_X
    G_X_reference: np.ndarray        # (b, D)
    max_abs_err_G_X: float


@dataclass(frozen=True, eq=False)
class Reference:
    """The whole global batch on one device, mean loss."""
    loss: Any                        # 0-d
    G_W1: np.ndarray                 # (D, F)
    G_W2: np.ndarray                 # (F, D)


@dataclass(frozen=True, eq=False)
class Variant:
    """One way to reduce the weight gradients (``VARIANTS``), assembled, against the reference."""
    name: str
    description: Text                # dp_tp.<name>
    G_W1: np.ndarray                 # (D, F) the TP shards side by side
    G_W2: np.ndarray                 # (F, D)
    max_abs_err: float
    scale: float                     # least-squares s with grads ≈ s · reference


@dataclass(frozen=True, eq=False)
class DpTpResult:
    """dp replicas × tp ranks on one two-layer MLP: the correct and the wrong reductions."""
    tp: int
    dp: int
    seed: int
    batch: int                       # b, per replica
    d_model: int
    d_ff: int
    W1: np.ndarray                   # (D, F) the same on every replica
    W2: np.ndarray                   # (F, D)
    replicas: list[Replica]
    reference: Reference
    variants: list[Variant]          # in VARIANTS order


def make_inputs(tp: int, dp: int, seed: int, batch: int, d_model: int, d_ff: int) -> dict:
    """Shared weights and one micro-batch (X_k, G_k) per replica, from ``seed``."""
    rng = np.random.default_rng(seed)
    W1 = np.round(rng.uniform(-1, 1, (d_model, d_ff)), 2)       # (D, F) same on every replica
    W2 = np.round(rng.uniform(-1, 1, (d_ff, d_model)), 2)       # (F, D)
    Xs = [np.round(rng.uniform(-2, 2, (batch, d_model)), 1) for _ in range(dp)]  # dp × (b, D)
    Gs = [np.round(rng.uniform(-1, 1, (batch, d_model)), 1) for _ in range(dp)]  # dp × (b, D)
    return {"W1": W1, "W2": W2, "X": Xs, "G": Gs}


def replica_grads(X: np.ndarray, W1: np.ndarray, W2: np.ndarray, G_Y: np.ndarray,
                  tp: int) -> tuple[list[RankGrads], MlpOutputs]:
    """One replica's TP group: per-rank gradients from its upstream gradient G_Y."""
    ranks, assembled = sharded_mlp(X, W1, W2, G_Y, tp)
    return [RankGrads(rank=rk.rank, G_W1=rk.G_W1, G_W2=rk.G_W2, G_X_partial=rk.G_X_partial) for rk in ranks], assembled


def dp_reduce(per_replica: list[list[np.ndarray]], divisor: int) -> list[np.ndarray]:
    """For each TP rank r: AllReduce(sum) over the replicas' shard r, then ÷ divisor."""
    tp = len(per_replica[0])
    return [all_reduce_sum([rep[r] for rep in per_replica]) / divisor for r in range(tp)]  # tp × shard


def assemble(w1_shards: list[np.ndarray], w2_shards: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Concatenate the TP shards (for comparison only; no rank holds this)."""
    return {"G_W1": np.concatenate(w1_shards, axis=1),   # (D, F)
            "G_W2": np.concatenate(w2_shards, axis=0)}   # (F, D)


def _flat(G_W1: np.ndarray, G_W2: np.ndarray) -> np.ndarray:
    return np.concatenate([G_W1.ravel(), G_W2.ravel()])


def _scale(v: np.ndarray, r: np.ndarray) -> float:
    """The least-squares s with v ≈ s·r."""
    rr = float(r @ r)
    if rr == 0.0:
        # An all-zero reference gradient has no scale to compare against: every variant
        # that is also zero is "right" by any factor.  Reject rather than show NaN.
        raise TPMathError("zero_reference_gradient", "seed")
    return float(v @ r / rr)


def compare(grads: dict, ref: MlpOutputs) -> tuple[float, float]:
    """Max abs error vs the reference and the least-squares scale s (grads ≈ s·ref)."""
    v, r = _flat(grads["G_W1"], grads["G_W2"]), _flat(ref.G_W1, ref.G_W2)
    return float(np.max(np.abs(v - r))), _scale(v, r)


# torch.optim's defaults: SGD lr 1e-3 here (no momentum, no weight decay); Adam lr 1e-3, betas, eps.
LR, ADAM_BETAS, ADAM_EPS = 1e-3, (0.9, 0.999), 1e-8
OPTIMIZERS = ("sgd", "adam")


def first_update(g: np.ndarray, optimizer: str) -> np.ndarray:
    """The first step of ``optimizer`` from its zero state on gradient ``g``: SGD −lr·g; Adam
    (Kingma & Ba 2015, Algorithm 1) m = (1−β₁)g, v = (1−β₂)g², bias-corrected m̂ = m/(1−β₁),
    v̂ = v/(1−β₂), step −lr·m̂/(√v̂ + eps): a factor shared by every gradient cancels but for eps."""
    if optimizer == "sgd":
        return -LR * g
    b1, b2 = ADAM_BETAS
    m_hat = (1 - b1) * g / (1 - b1)
    v_hat = (1 - b2) * g * g / (1 - b2)
    return -LR * m_hat / (np.sqrt(v_hat) + ADAM_EPS)


def update_scales(v: Variant, correct: Variant) -> dict[str, float]:
    """How large each optimizer's first step with this variant's gradients is against the step
    with the correct ones (the least-squares factor, as :func:`compare`'s scale)."""
    g, r = _flat(v.G_W1, v.G_W2), _flat(correct.G_W1, correct.G_W2)
    return {o: _scale(first_update(g, o), first_update(r, o)) for o in OPTIMIZERS}


def run_dp_tp(tp: Any = 2, dp: Any = 2, seed: Any = 0, batch: Any = 2, d_model: Any = 2,
              d_ff: Any = None) -> DpTpResult:
    """dp replicas × tp ranks on one two-layer MLP; the correct and the wrong reductions.

    ``d_ff`` defaults to 2·tp (two hidden columns per rank).
    """
    tp = as_int("tp", tp, 1, MAX_TP)
    dp = as_int("dp", dp, 1, MAX_DP)
    seed = as_int("seed", seed, 0, 2**32 - 1)
    b = as_int("batch", batch, 1, MAX_BATCH)
    d = as_int("d_model", d_model, 1, MAX_D_MODEL)
    f = as_int("d_ff", 2 * tp if d_ff is None else d_ff, 1, MAX_D_FF)
    check_divides(tp, f, "tp", "d_ff")
    inp = make_inputs(tp, dp, seed, b, d, f)
    W1, W2 = inp["W1"], inp["W2"]

    replicas, right, doubled = [], [], []
    for k in range(dp):
        X, G = inp["X"][k], inp["G"][k]
        G_Y = G / b                                     # (b, D) gradient of the micro-batch mean loss
        ranks, asm = replica_grads(X, W1, W2, G_Y, tp)
        # Wrong: AllReduce the (already replicated) G_Y over the TP group -> tp·G_Y on every rank.
        G_Y_twice = all_reduce_sum([G_Y for _ in range(tp)])   # (b, D)
        ranks_twice, _ = replica_grads(X, W1, W2, G_Y_twice, tp)
        right.append(ranks)
        doubled.append(ranks_twice)
        local_ref = reference_mlp(X, W1, W2, G_Y)
        replicas.append(Replica(replica=k, X=X, G=G, G_Y=G_Y, loss=asm.loss, ranks=ranks, G_X=asm.G_X,
                                G_X_reference=local_ref.G_X,
                                max_abs_err_G_X=float(np.max(np.abs(asm.G_X - local_ref.G_X)))))

    # Unsharded reference: the whole global batch on one device, mean loss.
    X_all = np.concatenate(inp["X"], axis=0)            # (N, D)
    G_all = np.concatenate(inp["G"], axis=0)            # (N, D)
    ref = reference_mlp(X_all, W1, W2, G_all / X_all.shape[0])

    def shards(reps: list, key: str) -> list[list[np.ndarray]]:
        return [[getattr(rk, key) for rk in rep] for rep in reps]

    computed = {
        "correct": assemble(dp_reduce(shards(right, "G_W1"), dp), dp_reduce(shards(right, "G_W2"), dp)),
        "divide_by_tp_too": assemble(dp_reduce(shards(right, "G_W1"), dp * tp),
                                     dp_reduce(shards(right, "G_W2"), dp * tp)),
        "double_count_gy": assemble(dp_reduce(shards(doubled, "G_W1"), dp),
                                    dp_reduce(shards(doubled, "G_W2"), dp)),
        "dp_sum_no_mean": assemble(dp_reduce(shards(right, "G_W1"), 1), dp_reduce(shards(right, "G_W2"), 1)),
    }
    variants = []
    for name, grads in computed.items():
        err, scale = compare(grads, ref)
        variants.append(Variant(name=name, description=Text(f"dp_tp.{name}"), G_W1=grads["G_W1"],
                                G_W2=grads["G_W2"], max_abs_err=err, scale=scale))
    return DpTpResult(tp=tp, dp=dp, seed=seed, batch=b, d_model=d, d_ff=f, W1=W1, W2=W2, replicas=replicas,
                      reference=Reference(loss=ref.loss, G_W1=ref.G_W1, G_W2=ref.G_W2), variants=variants)
