"""Column→row tensor-parallel MLP (Megatron §3, Fig. 3a), forward and backward.

Letters
-------
B   batch (rows of X)              D   d_model (columns of X, of Y)
F   d_ff (hidden width)            tp  tensor-parallel size; tp must divide F
r   rank index, 0 ≤ r < tp         F/tp columns of W1 (rows of W2) live on each rank

The model, in Megatron's orientation ``Y = X A``::

    Z = X W1          (B, F)      W1: (D, F), split along F (column parallel)
    H = tanh(Z)       (B, F)      elementwise, so it stays local on each rank
    Y = H W2          (B, D)      W2: (F, D), split along F (row parallel)
    L = Σ Y ⊙ G                   so the upstream gradient is G_Y = G

Forward needs one AllReduce (Megatron's operator *g*) to sum the partial ``Y``;
backward needs one AllReduce (operator *f*) to sum the partial ``G_X``.  The
upstream gradient ``G_Y = G`` is replicated: every rank uses it exactly once and
it is never summed across ranks again (that would multiply it by tp).

Every result is computed twice: sharded (one list entry per rank) and as the
unsharded reference, in the same dtype, and the largest absolute difference is
reported next to a tolerance derived from the dtype's eps and the sizes (see
:func:`tolerances`).  Gradients are also checked against central finite
differences of the float64 loss.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .collectives import reduce_all
from . import fmt
from .errors import TPMathError
from .errors import name as field_name
from .kernels import matmul, tanh, total
from .validate import as_array, as_dtype, as_int, check_divides, check_finite

# Size limits keep the finite-difference check (2 forward passes per input
# element) fast enough for the browser.
MAX_BATCH = 32
MAX_D_MODEL = 32
MAX_D_FF = 96
MAX_TP = 96
FD_STEP = 1e-6
FD_CHUNK = 256    # perturbed copies evaluated per numpy call (bounds memory)

# The seed page's numbers, and a fixed W1/W2 with no zero anywhere in the
# tables (every entry of Z, H, partial Y, G_H, G_Z, G_W1, G_W2, partial G_X at tp=2
# has |value| ≥ 0.019) and |Z| ≤ 1.9, so tanh is visibly non-linear but not saturated.
_SEED_X = [[1.0, 2.0], [3.0, -1.0]]
_SEED_G = [[0.2, -0.4], [0.6, 0.1]]
_W1 = [[0.5, -0.3, 0.3, 0.2],
       [-0.4, 0.6, 0.1, -0.3]]
_W2 = [[-0.7, -0.6],
       [0.7, 0.2],
       [-0.5, 0.4],
       [0.1, 0.9]]


def default_inputs() -> dict[str, np.ndarray]:
    """The seed's X and G with the project's fixed W1 (2×4) and W2 (4×2)."""
    return {"X": np.array(_SEED_X), "W1": np.array(_W1), "W2": np.array(_W2), "G": np.array(_SEED_G)}


def random_inputs(seed: Any = 0, batch: Any = 4, d_model: Any = 4, d_ff: Any = 24) -> dict[str, np.ndarray]:
    """Random float64 inputs; weights scaled by 1/sqrt(fan-in) so tanh is not saturated."""
    seed = as_int("seed", seed, 0, 2**32 - 1)
    b = as_int("batch", batch, 1, MAX_BATCH)
    d = as_int("d_model", d_model, 1, MAX_D_MODEL)
    f = as_int("d_ff", d_ff, 1, MAX_D_FF)
    rng = np.random.default_rng(seed)
    return {
        "X": rng.standard_normal((b, d)),
        "W1": rng.standard_normal((d, f)) / math.sqrt(d),
        "W2": rng.standard_normal((f, d)) / math.sqrt(f),
        "G": rng.standard_normal((b, d)),
    }


def command_line_inputs(X: Any = None, W1: Any = None, W2: Any = None, G: Any = None, seed: Any = None,
                        batch: Any = None, d_model: Any = None, d_ff: Any = None) -> dict[str, Any]:
    """Inputs as the command lines take them: the defaults, or random ones when any of
    seed / batch / d_model / d_ff is given (missing sizes 0, 4, 4, 24); an explicit
    matrix overrides its random counterpart.  Validation happens in :func:`run_mlp`."""
    given = {"X": X, "W1": W1, "W2": W2, "G": G}
    sizes = {"seed": seed, "batch": batch, "d_model": d_model, "d_ff": d_ff}
    if all(v is None for v in sizes.values()):
        return given
    rnd = random_inputs(**{k: (v if v is not None else d) for (k, v), d in zip(sizes.items(), (0, 4, 4, 24))})
    return {k: (v if v is not None else rnd[k]) for k, v in given.items()}


# -------------------------------------------------------------------- results

@dataclass(frozen=True, eq=False)
class MlpRank:
    """What rank ``rank`` holds and computes: its weight shards, then forward, then backward."""
    rank: int
    W1: np.ndarray              # (D, F/tp)  own columns of W1
    W2: np.ndarray              # (F/tp, D)  own rows of W2
    # forward, no communication
    Z: np.ndarray               # (B, F/tp)
    H: np.ndarray               # (B, F/tp)
    Y_partial: np.ndarray       # (B, D)     a partial sum: g's AllReduce adds the ranks'
    # backward from the replicated upstream gradient
    G_H: np.ndarray             # (B, F/tp)
    G_Z: np.ndarray             # (B, F/tp)
    G_W1: np.ndarray            # (D, F/tp)  complete locally
    G_W2: np.ndarray            # (F/tp, D)  complete locally
    G_X_partial: np.ndarray     # (B, D)     a partial sum: f's backward AllReduce adds the ranks'


@dataclass(frozen=True, eq=False)
class MlpOutputs:
    """The whole output, loss and gradients: assembled from the ranks, or the unsharded reference."""
    Y: np.ndarray               # (B, D)
    loss: Any                   # 0-d, in the run's dtype
    G_X: np.ndarray             # (B, D)
    G_W1: np.ndarray            # (D, F)
    G_W2: np.ndarray            # (F, D)


@dataclass(frozen=True, eq=False)
class MlpResult:
    """One run of the MLP sharded over ``tp`` ranks next to its unsharded reference."""
    tp: int
    dtype: str
    inputs: dict[str, np.ndarray]        # X (B, D), W1 (D, F), W2 (F, D), G (B, D), cast to dtype
    ranks: list[MlpRank]                 # one per rank, in rank order
    sharded: MlpOutputs
    reference: MlpOutputs
    # the checks: per quantity (Y, loss, G_X, G_W1, G_W2), max |sharded − reference| and its bound
    max_abs_err: dict[str, float]
    finite_difference: dict[str, float]  # G_X, G_W1, G_W2: max |sharded − central difference|
    tolerance: float                     # the largest of ``tolerances``
    tolerances: dict[str, float]
    within_tolerance: bool


# ----------------------------------------------------------------- validation

def validate_inputs(X: Any = None, W1: Any = None, W2: Any = None, G: Any = None) -> dict[str, np.ndarray]:
    """Fill missing inputs with the defaults, parse, and check the shapes agree.

    X is (B, D), W1 (D, F), W2 (F, D), G (B, D); a mismatch quotes both shapes.
    """
    dflt = default_inputs()
    X = as_array("X", dflt["X"] if X is None else X)
    W1 = as_array("W1", dflt["W1"] if W1 is None else W1)
    W2 = as_array("W2", dflt["W2"] if W2 is None else W2)
    G = as_array("G", dflt["G"] if G is None else G)
    (b, d), f = X.shape, W1.shape[1]
    if X.shape[0] > MAX_BATCH or d > MAX_D_MODEL or f > MAX_D_FF:
        raise TPMathError("mlp_too_large", "X", batch=X.shape[0], d_model=d, d_ff=f, max_batch=MAX_BATCH,
                          max_d_model=MAX_D_MODEL, max_d_ff=MAX_D_FF)
    if W1.shape[0] != d:
        raise TPMathError("mlp_w1_rows", "W1", rows=W1.shape[0], d=d, shape=fmt.shape(W1.shape))
    if W2.shape != (f, d):
        raise TPMathError("mlp_w2_shape", "W2", shape=fmt.shape(W2.shape), want=fmt.shape((f, d)),
                          w1_shape=fmt.shape(W1.shape), x_shape=fmt.shape(X.shape))
    if G.shape != (b, d):
        raise TPMathError("mlp_g_shape", "G", shape=fmt.shape(G.shape), want=fmt.shape((b, d)))
    return {"X": X, "W1": W1, "W2": W2, "G": G}


def validate_tp(tp: Any, d_ff: int) -> int:
    """tp is a positive integer that divides d_ff (equal shards, as Megatron requires)."""
    tp = as_int("tp", tp, 1, MAX_TP)
    check_divides(tp, d_ff, "tp", "d_ff")
    return tp


# ------------------------------------------------------------------ sharding

def all_reduce_sum(parts: list[np.ndarray]) -> np.ndarray:
    """The value every rank holds after AllReduce(sum): ranks added in order 0..tp-1."""
    return reduce_all(parts, "sum")

def stack_columns(A: np.ndarray, tp: int) -> np.ndarray:
    """A (D, F) as (tp, D, F/tp): entry r is rank r's column block, a view (no copy)."""
    d, f = A.shape
    return A.reshape(d, tp, f // tp).transpose(1, 0, 2)   # (tp, D, F/tp)


def stack_rows(A: np.ndarray, tp: int) -> np.ndarray:
    """A (F, D) as (tp, F/tp, D): entry r is rank r's row block, a view (no copy)."""
    f, d = A.shape
    return A.reshape(tp, f // tp, d)                       # (tp, F/tp, D)


def _mT(A: np.ndarray) -> np.ndarray:
    """Transpose of the last two axes (one rank's matrix, or every rank's at once)."""
    return A.swapaxes(-1, -2)


def forward_rank(X: np.ndarray, W1_r: np.ndarray, W2_r: np.ndarray) -> dict[str, np.ndarray]:
    """One rank's forward: everything up to its partial Y, no communication.

    Given stacked shards (a leading rank axis, see :func:`stack_columns`) it computes every
    rank at once, each rank still seeing only its own shard.
    """
    Z = matmul(X, W1_r)           # (B, F/tp)  column parallel: full X, own columns of W1
    H = tanh(Z)                   # (B, F/tp)  elementwise: needs no other rank's columns
    Y_partial = matmul(H, W2_r)   # (B, D)     row parallel: a partial sum over this rank's F/tp
    return {"Z": Z, "H": H, "Y_partial": Y_partial}


def backward_rank(X: np.ndarray, W1_r: np.ndarray, W2_r: np.ndarray, H: np.ndarray,
                  G_Y: np.ndarray, out_G_W1: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """One rank's backward from the replicated upstream gradient G_Y (used once).

    Like :func:`forward_rank`, also takes every rank's arrays stacked on a leading rank axis.
    ``out_G_W1``, if given, receives G_W1 (e.g. rank views of one (D, F) array, so that
    assembling the shards for comparison needs no copy).
    """
    one = np.ones((), dtype=H.dtype)
    G_H = matmul(G_Y, _mT(W2_r))  # (B, F/tp)  g's backward is identity: G_Y is already on every rank
    G_W2 = matmul(_mT(H), G_Y)    # (F/tp, D)  this rank's rows of G_W2, complete locally
    G_Z = G_H * (one - H * H)     # (B, F/tp)  tanh'(Z) = 1 - H²
    G_W1 = matmul(X.T, G_Z, out=out_G_W1)     # (D, F/tp)  own columns of G_W1, complete locally
    G_X_partial = matmul(G_Z, _mT(W1_r))  # (B, D)    partial: f's backward AllReduce sums it over ranks
    return {"G_H": G_H, "G_Z": G_Z, "G_W1": G_W1, "G_W2": G_W2, "G_X_partial": G_X_partial}


def sharded_mlp(X: np.ndarray, W1: np.ndarray, W2: np.ndarray, G: np.ndarray,
                tp: int) -> tuple[list[MlpRank], MlpOutputs]:
    """The tensor-parallel computation: per-rank records and the assembled results.

    All ranks run in one numpy call per step: the shards are views stacked on a leading rank
    axis (no copies of the weights), and rank r's arrays in the returned records are views [r].
    """
    d, f = W1.shape
    W1s = stack_columns(W1, tp)   # (tp, D, F/tp)
    W2s = stack_rows(W2, tp)      # (tp, F/tp, D)
    fwd = forward_rank(X, W1s, W2s)                            # each (tp, B, ·)
    # g: AllReduce(sum) of the partial Y, so every rank holds the full Y and the same loss.
    Y = all_reduce_sum(list(fwd["Y_partial"]))                 # (B, D)
    loss = total(Y * G)
    G_Y = G                       # (B, D) one logical upstream gradient, replicated, not re-summed
    G_W1 = np.empty((d, f), dtype=np.result_type(X, W1, W2, G_Y))  # (D, F) rank r writes its columns
    bwd = backward_rank(X, W1s, W2s, fwd["H"], G_Y, out_G_W1=stack_columns(G_W1, tp))  # each (tp, ·, ·)
    # f's backward: AllReduce(sum) of the partial G_X (X was used by every rank).
    G_X = all_reduce_sum(list(bwd["G_X_partial"]))             # (B, D)
    # Weight gradients are not reduced: each rank owns its shard. Assembled only to compare
    # (G_W1 was written in place, G_W2 is a view: neither needs a copy).
    G_W2 = bwd["G_W2"].reshape(f, d)                           # (F, D) a view: rank blocks are rows
    ranks = [MlpRank(rank=r, W1=W1s[r], W2=W2s[r], **{k: v[r] for k, v in fwd.items()},
                     **{k: v[r] for k, v in bwd.items()}) for r in range(tp)]
    return ranks, MlpOutputs(Y=Y, loss=loss, G_X=G_X, G_W1=G_W1, G_W2=G_W2)


def reference_mlp(X: np.ndarray, W1: np.ndarray, W2: np.ndarray, G: np.ndarray) -> MlpOutputs:
    """The unsharded computation (one device), same formulas, no splitting."""
    Z = matmul(X, W1)             # (B, F)
    H = tanh(Z)                   # (B, F)
    Y = matmul(H, W2)             # (B, D)
    one = np.ones((), dtype=H.dtype)
    G_H = matmul(G, W2.T)         # (B, F)
    G_Z = G_H * (one - H * H)     # (B, F)
    return MlpOutputs(Y=Y, loss=total(Y * G), G_X=matmul(G_Z, W1.T), G_W1=matmul(X.T, G_Z),
                      G_W2=matmul(H.T, G))


def loss64(X: np.ndarray, W1: np.ndarray, W2: np.ndarray, G: np.ndarray) -> float:
    """L = Σ tanh(X W1) W2 ⊙ G in float64 (the function finite differences probe)."""
    return float(np.sum((np.tanh(X @ W1) @ W2) * G))


def _stacked_loss64(X: np.ndarray, W1: np.ndarray, W2: np.ndarray, G: np.ndarray) -> np.ndarray:
    """:func:`loss64` for inputs stacked on a leading axis: one loss per stack entry."""
    return np.sum((np.tanh(X @ W1) @ W2) * G, axis=(-2, -1))


def finite_difference_grads(X: np.ndarray, W1: np.ndarray, W2: np.ndarray, G: np.ndarray,
                            h: float = FD_STEP) -> dict[str, np.ndarray]:
    """Central differences (L(v+h) − L(v−h)) / 2h for every entry of X, W1, W2, in float64.

    The perturbed copies are stacked (up to FD_CHUNK at a time) so one numpy call evaluates
    the loss for many entries; each copy differs from the input in one entry only.
    """
    args = {"X": X.astype(np.float64), "W1": W1.astype(np.float64), "W2": W2.astype(np.float64)}
    G = G.astype(np.float64)
    out = {}
    for name in ("X", "W1", "W2"):
        base = args[name]
        grad = np.empty(base.size)
        for start in range(0, base.size, FD_CHUNK):
            idx = np.arange(start, min(start + FD_CHUNK, base.size))   # the entries probed now
            k = np.arange(len(idx))
            plus = np.repeat(base[None], len(idx), axis=0)              # (k, *shape)
            minus = plus.copy()
            plus.reshape(len(idx), -1)[k, idx] += h
            minus.reshape(len(idx), -1)[k, idx] -= h
            lp = _stacked_loss64(**{**args, name: plus}, G=G)          # (k,)
            lm = _stacked_loss64(**{**args, name: minus}, G=G)         # (k,)
            grad[idx] = (lp - lm) / (2 * h)
        out["G_" + name] = grad.reshape(base.shape)
    return out


# ----------------------------------------------------------------- tolerance

def tolerances(X: np.ndarray, W1: np.ndarray, W2: np.ndarray, G: np.ndarray, dtype: Any = None,
               u: float | None = None) -> dict[str, float]:
    """Allowed |sharded − reference| per quantity for ``dtype`` (or for a unit roundoff ``u``:
    bfloat16 has no numpy dtype, :mod:`tpmath.precision`).

    Sharding changes only the order of additions (and which BLAS kernel runs),
    never the formula.  Higham's bound for an inner product of length n is
    |fl(aᵀb) − aᵀb| ≤ γ_n |a|ᵀ|b| with γ_n = n·u / (1 − n·u), u = eps/2.  Both
    the sharded and the unsharded result carry such an error, so the allowed
    difference is 2·γ_n·M, where

    * n = D + F + B + 4 bounds the number of rounded operations on the longest
      path to Y or a gradient (an inner product over D for Z, tanh, one over F
      or D for Y or G_H, 1 − H², a product, one over B, F or D); the loss adds
      a product and a sum over B·D terms: n + B·D + 1;
    * M is the first-order magnitude, with P = |X||W1| (bounds |Z| and the
      error δH ≤ γ·P, since |tanh'| ≤ 1) and Hb = min(1, P) (bounds |H|):
      Y: (Hb + P)|W2|;  G_W2: (Hb + P)ᵀ|G|;  G_Z: |G||W2|ᵀ ⊙ (1 + 2·Hb·P)
      (δ(1 − H²) ≤ 2|H|δH);  G_W1: |X|ᵀ M_GZ;  G_X: M_GZ |W1|ᵀ;
      loss: Σ M_Y ⊙ |G|.

    Second-order terms in u are dropped.  It is a worst-case bound: typical
    differences are a few units in the last place of the result, far below it.
    """
    if u is None:
        u = float(np.finfo(as_dtype("dtype", dtype)).eps) / 2
    (b, d), f = X.shape, W1.shape[1]
    aX, a1, a2, aG = (np.abs(np.asarray(a, dtype=np.float64)) for a in (X, W1, W2, G))
    P = aX @ a1                                   # (B, F) bound on |Z|; δH ≤ γ·P
    Hb = np.minimum(1.0, P)                       # (B, F) bound on |H|
    mY = (Hb + P) @ a2                            # (B, D)
    mGZ = (aG @ a2.T) * (1.0 + 2.0 * Hb * P)      # (B, F)
    m = {
        "Y": float(mY.max()),
        "loss": float(np.sum(mY * aG)),
        "G_X": float((mGZ @ a1.T).max()),
        "G_W1": float((aX.T @ mGZ).max()),
        "G_W2": float(((Hb + P).T @ aG).max()),
    }

    def gamma(n: int) -> float:
        return n * u / (1 - n * u) if n * u < 0.5 else float("inf")

    n = d + f + b + 4
    return {k: 2 * gamma(n + (b * d + 1 if k == "loss" else 0)) * v for k, v in m.items()}


# -------------------------------------------------------------------- public

def _max_abs(a: np.ndarray, b: np.ndarray) -> float:
    """max |a − b| evaluated in float64 (so the comparison adds no rounding)."""
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


def cast_inputs(inputs: dict[str, np.ndarray], dt: np.dtype) -> dict[str, np.ndarray]:
    """Cast validated float64 inputs to ``dt``; a value beyond the dtype's range is an error."""
    big = float(np.finfo(dt).max)
    for name, arr in inputs.items():
        over = np.abs(arr) > big
        if np.any(over):
            raise TPMathError("beyond_dtype", name, name=field_name(name), value=float(arr[over].ravel()[0]),
                              dtype=dt.name, max=fmt.bound(big))
    return {k: v.astype(dt) for k, v in inputs.items()}


def run_mlp(X: Any = None, W1: Any = None, W2: Any = None, G: Any = None, tp: Any = 2,
            dtype: Any = "float64") -> MlpResult:
    """Run the column→row MLP sharded over tp ranks and unsharded, in ``dtype``.

    ``finite_difference`` holds max |analytic − numerical| for G_X, G_W1, G_W2,
    where analytic is the sharded gradient shown (in ``dtype``) and numerical
    the central difference of the float64 loss (step 1e-6); in float32/16 it
    therefore also contains the rounding of the low-precision gradient.
    """
    inputs64 = validate_inputs(X, W1, W2, G)
    dt = as_dtype("dtype", dtype)
    tp = validate_tp(tp, inputs64["W1"].shape[1])
    inp = cast_inputs(inputs64, dt)
    with np.errstate(over="ignore", invalid="ignore"):   # overflow is reported just below
        ranks, sharded = sharded_mlp(inp["X"], inp["W1"], inp["W2"], inp["G"], tp)
        reference = reference_mlp(inp["X"], inp["W1"], inp["W2"], inp["G"])
    check_finite(dt.name, sharded, reference)
    fd = finite_difference_grads(inp["X"], inp["W1"], inp["W2"], inp["G"])
    tols = tolerances(inp["X"], inp["W1"], inp["W2"], inp["G"], dt)
    errs = {k: _max_abs(getattr(sharded, k), getattr(reference, k)) for k in ("Y", "loss", "G_X", "G_W1", "G_W2")}
    return MlpResult(
        tp=tp, dtype=dt.name, inputs=inp, ranks=ranks, sharded=sharded, reference=reference, max_abs_err=errs,
        finite_difference={k: _max_abs(getattr(sharded, k), fd[k]) for k in ("G_X", "G_W1", "G_W2")},
        tolerance=max(tols.values()), tolerances=tols, within_tolerance=all(errs[k] <= tols[k] for k in errs),
    )


@functools.lru_cache(maxsize=None)
def default_run(tp: int, dtype: str = "float64") -> MlpResult:
    """:func:`run_mlp` on :func:`default_inputs`, computed once per (tp, dtype): several page
    sections and their real-ranks blocks show it, and a stage change must not recompute the
    finite differences.  The result is shared: callers must not modify it."""
    return run_mlp(tp=tp, dtype=dtype)
