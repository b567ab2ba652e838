"""Precision: sharded vs unsharded per dtype, and one SGD step of the sharded model.

Letters
-------
B, D, F, tp   as in :mod:`tpmath.mlp` (batch, d_model, d_ff, tensor-parallel size)
V             vocabulary size of the cross-entropy example (:mod:`tpmath.vocab_ce`)
u             unit roundoff of a dtype, eps/2 (float64 1.1e-16, float32 6.0e-8, float16 4.9e-4)
lr            SGD learning rate: W ← W − lr·G_W

Sharding reorders additions, so in float32/float16 the sharded and unsharded
results may differ in the last bits; they must stay within a tolerance derived
from u and the sizes (see :func:`tpmath.mlp.tolerances` for the MLP and
:func:`ce_tolerance` for the cross-entropy).  Both sides are computed in the
same dtype, so the difference measures reduction order only, not the dtype's
distance from the exact result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .mlp import run_mlp, sharded_mlp, validate_inputs, validate_tp
from .validate import DTYPES, as_dtype, as_float
from .vocab_ce import run_vocab_ce


# -------------------------------------------------------------------- results

@dataclass(frozen=True, eq=False)
class DtypeCheck:
    """The MLP and the vocab-parallel CE in one dtype: sharded vs unsharded, against the bounds."""
    dtype: str
    tolerance: float                     # the MLP's largest bound
    tolerances: dict[str, float]         # the MLP's per quantity (Y, loss, G_X, G_W1, G_W2), and "ce"
    max_abs_err: dict[str, float]        # the MLP's per quantity
    finite_difference: dict[str, float]  # the MLP's G_X, G_W1, G_W2 against central differences
    ce_abs_diff: float
    ce_tolerance: float
    within_tolerance: bool


@dataclass(frozen=True, eq=False)
class SgdStep:
    """One float64 SGD step of the MLP: each rank updates its own shard, next to the unsharded update."""
    lr: float
    dtype: str
    W1_sharded: np.ndarray               # (D, F) the ranks' updated columns, assembled
    W1_reference: np.ndarray             # (D, F)
    W2_sharded: np.ndarray               # (F, D) the ranks' updated rows, assembled
    W2_reference: np.ndarray             # (F, D)
    max_abs_err: dict[str, float]        # W1, W2
    loss_before: float
    loss_after: float
    loss_after_reference: float


@dataclass(frozen=True, eq=False)
class PrecisionResult:
    """The checks in float64, float32 and float16, and one SGD step."""
    tp: int
    dtypes: list[DtypeCheck]             # in DTYPES order
    sgd: SgdStep


def ce_tolerance(V: int, sum_exp: float, target_shifted: float, loss: float, dtype: Any) -> float:
    """Allowed |sharded − unsharded| of the vocab-parallel CE loss in ``dtype``.

    The shards change only the order of the V-term sum s = Σ exp(z_j − m); its
    terms are positive, so each side's relative error is at most γ_{V+1}
    (V − 1 additions plus the rounding of each exp), which moves log s by at
    most γ_{V+1}/(1 − γ_{V+1}).  log, the subtraction z_y − m and the final
    subtraction add u·|log s|, u·|z_y − m| and u·|loss|.  Both sides carry this
    error, hence the factor 2.
    """
    u = float(np.finfo(as_dtype("dtype", dtype)).eps) / 2
    n = V + 2
    g = n * u / (1 - n * u)
    return 2 * (g / (1 - g) + u * (abs(np.log(sum_exp)) + abs(target_shifted) + abs(loss)))


def sgd_step(X: np.ndarray, W1: np.ndarray, W2: np.ndarray, G: np.ndarray, tp: int, lr: float) -> SgdStep:
    """One SGD step, sharded (each rank updates its own shard) and unsharded."""
    ranks, sharded = sharded_mlp(X, W1, W2, G, tp)
    # Each rank owns a disjoint shard and its complete gradient: the update needs no communication.
    W1_new = [rk.W1 - lr * rk.G_W1 for rk in ranks]     # tp × (D, F/tp)
    W2_new = [rk.W2 - lr * rk.G_W2 for rk in ranks]     # tp × (F/tp, D)
    W1_sharded = np.concatenate(W1_new, axis=1)                # (D, F) assembled to compare
    W2_sharded = np.concatenate(W2_new, axis=0)                # (F, D)
    # Unsharded reference: one device, whole matrices, gradients by the plain formulas.
    H = np.tanh(X @ W1)                                        # (B, F)
    G_Z = (G @ W2.T) * (1 - H * H)                             # (B, F)
    W1_ref = W1 - lr * (X.T @ G_Z)                             # (D, F)
    W2_ref = W2 - lr * (H.T @ G)                               # (F, D)
    _, after = sharded_mlp(X, W1_sharded, W2_sharded, G, tp)
    after_ref = float(np.sum((np.tanh(X @ W1_ref) @ W2_ref) * G))
    return SgdStep(
        lr=lr, dtype=X.dtype.name, W1_sharded=W1_sharded, W1_reference=W1_ref, W2_sharded=W2_sharded,
        W2_reference=W2_ref, max_abs_err={"W1": float(np.max(np.abs(W1_sharded - W1_ref))),
                                          "W2": float(np.max(np.abs(W2_sharded - W2_ref)))},
        loss_before=float(sharded.loss), loss_after=float(after.loss), loss_after_reference=after_ref,
    )


def run_precision(tp: Any = 2, lr: Any = 0.1, X: Any = None, W1: Any = None, W2: Any = None,
                  G: Any = None) -> PrecisionResult:
    """The MLP and the vocab-parallel CE in float64/32/16, and one float64 SGD step.

    Inputs default to the seed's MLP numbers and the seed's CE example
    (``DEFAULT_LOGITS``, target 2) with ``shards = tp``.
    """
    inp = validate_inputs(X, W1, W2, G)
    tp = validate_tp(tp, inp["W1"].shape[1])
    lr = as_float("lr", lr, lo=0.0, hi=10.0)
    rows = []
    for name in DTYPES:
        mlp = run_mlp(**inp, tp=tp, dtype=name)
        ce = run_vocab_ce(shards=tp, dtype=name)
        t = sum(float(r.target_shifted) for r in ce.ranks)          # z_y − m (one rank is non-zero)
        ce_tol = ce_tolerance(ce.vocab, float(ce.global_sum_exp), t, float(ce.loss), name)
        tols = {**mlp.tolerances, "ce": ce_tol}
        within = mlp.within_tolerance and ce.abs_diff <= ce_tol
        rows.append(DtypeCheck(dtype=name, tolerance=mlp.tolerance, tolerances=tols, max_abs_err=mlp.max_abs_err,
                               finite_difference=mlp.finite_difference, ce_abs_diff=ce.abs_diff, ce_tolerance=ce_tol,
                               within_tolerance=bool(within)))
    sgd = sgd_step(inp["X"], inp["W1"], inp["W2"], inp["G"], tp, lr)
    return PrecisionResult(tp=tp, dtypes=rows, sgd=sgd)
