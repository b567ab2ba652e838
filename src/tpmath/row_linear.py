"""Row- and column-parallel linear layers in Megatron's orientation ``Y = X A``.

Letters
-------
B    batch (rows of X)
D    d_in, the input features: X is (B, D), A is (D, O)
O    d_out, the output features: Y and dY are (B, O)
tp   tensor-parallel size; rank r owns the r-th of tp equal consecutive slices

``A`` is Megatron's (in, out) matrix.  PyTorch's ``nn.Linear`` stores ``weight = Aᵀ`` of
shape (out, in), so Megatron's *column* parallel splits ``weight`` along dim 0 (its rows)
and *row* parallel splits ``weight`` along dim 1.  The gradient convention is the
upstream gradient ``dY = ∂L/∂Y`` (for example L = Σ Y ⊙ dY).

Row parallel (``RowParallelLinear`` with ``input_is_parallel=True``):
    X = [X_1 … X_tp] split along D, A split along its rows (D), Y_r = X_r A_r is a *partial*
    sum; Y = Σ_r Y_r needs an AllReduce forward (operator g); the bias is added once, after
    the reduce.  Backward is local: dX_r = dY A_rᵀ, dA_r = X_rᵀ dY; db = Σ_batch dY is
    the same on every rank (replicated bias).
Column parallel (``ColumnParallelLinear``):
    A split along its columns (O), each rank uses the full X: Y_r = X A_r (+ b_r) is a *slice*
    of Y; ``gather_output`` concatenates the slices with an AllGather.  Backward:
    dA_r = Xᵀ dY_r and db_r are local, but dX = Σ_r dY_r A_rᵀ needs an AllReduce (operator f).

``comm`` lists each collective with ``elements`` = the size of the full tensor every rank
holds afterwards (B·O for the forward AllReduce / AllGather of Y, B·D for the dX AllReduce).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .collectives import reduce_all
from .errors import TPMathError
from .record import OMIT_IF_NONE, CommStep, fields_of
from .validate import as_array, as_int, check_divides, check_finite, check_shape

MAX_TP = 64


# -------------------------------------------------------------------- results

@dataclass(frozen=True, eq=False)
class LinearOutputs:
    """The layer's output and gradients: assembled from the ranks, or the unsharded reference."""
    Y: np.ndarray               # (B, O)
    dX: np.ndarray              # (B, D)
    dA: np.ndarray              # (D, O)
    db: np.ndarray | None = field(default=None, metadata=OMIT_IF_NONE)   # (O,) with a bias only


@dataclass(frozen=True, eq=False)
class RowRank:
    """Rank ``rank`` of the row-parallel layer: its input and weight shards, partial Y, gradients."""
    rank: int
    X_shard: np.ndarray         # (B, D/tp)  input_is_parallel
    A_shard: np.ndarray         # (D/tp, O)  rows of A
    Y_partial: np.ndarray       # (B, O)     a partial sum: g's AllReduce adds the ranks'
    dX_shard: np.ndarray        # (B, D/tp)  local
    dA_shard: np.ndarray        # (D/tp, O)  local


@dataclass(frozen=True, eq=False)
class ColumnRank:
    """Rank ``rank`` of the column-parallel layer: its weight shard, Y slice, gradients."""
    rank: int
    A_shard: np.ndarray         # (D, O/tp)  columns of A
    Y_shard: np.ndarray         # (B, O/tp)  a slice of Y
    dY_shard: np.ndarray        # (B, O/tp)
    dX_partial: np.ndarray      # (B, D)     a partial sum: f's backward AllReduce adds the ranks'
    dA_shard: np.ndarray        # (D, O/tp)  local


@dataclass(frozen=True, eq=False)
class RowLinearResult:
    """The row-parallel layer over ``tp`` ranks next to its unsharded reference."""
    kind: str                            # "row"
    tp: int
    inputs: dict[str, Any]               # X (B, D), A (D, O), dY (B, O), bias (O,) or None
    ranks: list[RowRank]                 # one per rank, in rank order
    Y: np.ndarray                        # (B, O) after the AllReduce (and the bias)
    sharded: LinearOutputs
    reference: LinearOutputs
    max_abs_err: dict[str, float]        # per output of ``reference``
    comm: list[CommStep]


@dataclass(frozen=True, eq=False)
class ColumnLinearResult:
    """The column-parallel layer over ``tp`` ranks next to its unsharded reference."""
    kind: str                            # "column"
    tp: int
    gather_output: bool
    inputs: dict[str, Any]               # X (B, D), A (D, O), dY (B, O), bias (O,) or None
    ranks: list[ColumnRank]              # one per rank, in rank order
    Y: np.ndarray                        # (B, O) the slices side by side (gathered or not)
    sharded: LinearOutputs
    reference: LinearOutputs
    max_abs_err: dict[str, float]        # per output of ``reference``
    comm: list[CommStep]


def default_inputs() -> dict:
    """Small readable inputs with no zeros: X (2, 4), A (4, 4), dY (2, 4)."""
    X = np.array([[1.0, 2.0, -1.0, 0.5],
                  [3.0, -1.0, 2.0, -2.0]])
    A = np.array([[0.5, -1.0, 0.25, 1.0],
                  [1.0, 0.5, -0.5, 2.0],
                  [-1.0, 1.5, 1.0, -0.5],
                  [2.0, -0.5, 0.75, 1.5]])
    dY = np.array([[0.2, -0.4, 0.1, 0.3],
                   [0.6, 0.1, -0.2, 0.5]])
    return {"X": X, "A": A, "dY": dY}


def random_inputs(seed: Any = 0, batch: Any = 2, d_in: Any = 4, d_out: Any = 4) -> dict:
    """Standard-normal X (B, D), A (D, O), dY (B, O) from ``numpy.random.default_rng(seed)``."""
    seed = as_int("seed", seed, lo=0, hi=2**32 - 1)
    batch = as_int("batch", batch, lo=1, hi=512)
    d_in = as_int("d_in", d_in, lo=1, hi=512)
    d_out = as_int("d_out", d_out, lo=1, hi=512)
    rng = np.random.default_rng(seed)
    return {"X": rng.standard_normal((batch, d_in)), "A": rng.standard_normal((d_in, d_out)),
            "dY": rng.standard_normal((batch, d_out))}


def example_inputs(seed: Any = 0, batch: Any = 2, d_in: Any = 4, d_out: Any = 4) -> dict:
    """The page's example: :func:`random_inputs` rounded to one decimal, so every table cell
    stays short; an entry that would round to 0 becomes ±0.1 (a zero could hide a wrong slice)."""
    inp = random_inputs(seed, batch, d_in, d_out)
    return {k: _readable(v) for k, v in inp.items()}


def _readable(v: np.ndarray) -> np.ndarray:
    """``v`` rounded to one decimal, with no zeros."""
    r = np.round(v, 1)
    return np.where(r == 0, np.copysign(0.1, v), r)


def _pattern(B: int, O: int) -> np.ndarray:
    """A deterministic (B, O) upstream gradient with no zeros, for when only X and A are given."""
    i = np.arange(B * O).reshape(B, O)
    return (1 + i % 5) * 0.1 * np.where(i % 2, -1.0, 1.0)


def _inputs(X: Any, A: Any, dY: Any, bias: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Validated float64 X (B, D), A (D, O), dY (B, O), bias (O,) or None; None = defaults."""
    d = default_inputs()
    X = as_array("x", d["X"] if X is None else X, ndim=2)
    A = as_array("a", d["A"] if A is None else A, ndim=2)
    B, D = X.shape
    if A.shape[0] != D:
        raise TPMathError("linear_a_rows", "a", rows=A.shape[0], d=D)
    O = A.shape[1]
    if dY is None:
        dY = d["dY"] if d["dY"].shape == (B, O) else _pattern(B, O)
    dY = as_array("dy", dY, ndim=2)
    check_shape("dy", dY, (B, O))
    if bias is not None:
        bias = as_array("bias", bias, ndim=1)
        check_shape("bias", bias, (O,))
    return X, A, dY, bias


def _prepare(X: Any, A: Any, dY: Any, bias: Any, tp: Any, split: str) -> tuple:
    """Validated inputs, tp, and the shard width k of the split dim (``d_in`` rows / ``d_out`` columns of A)."""
    X, A, dY, bias = _inputs(X, A, dY, bias)
    tp = as_int("tp", tp, lo=1, hi=MAX_TP)
    size = A.shape[0] if split == "d_in" else A.shape[1]
    check_divides(tp, size, "tp", split)   # Megatron requires equal shards
    return X, A, dY, bias, tp, size // tp


def _reference(X: np.ndarray, A: np.ndarray, dY: np.ndarray, bias: np.ndarray | None) -> LinearOutputs:
    """The unsharded layer: Y = X A + b, dX = dY Aᵀ, dA = Xᵀ dY, db = Σ_batch dY."""
    Y = X @ A + (bias if bias is not None else 0.0)
    return LinearOutputs(Y=Y, dX=dY @ A.T, dA=X.T @ dY, db=None if bias is None else dY.sum(axis=0))


def _errors(got: LinearOutputs, ref: LinearOutputs) -> dict[str, float]:
    """Max abs error of every assembled result against the reference."""
    return {k: float(np.max(np.abs(getattr(got, k) - v))) for k, v in fields_of(ref).items()}


def run_row_linear(X: Any = None, A: Any = None, dY: Any = None, tp: Any = 2, bias: Any = None) -> RowLinearResult:
    """Row-parallel linear: X split along D, A along its rows; AllReduce of the partial Y."""
    X, A, dY, bias, tp, k = _prepare(X, A, dY, bias, tp, split="d_in")
    (B, D), O = X.shape, A.shape[1]
    X_r = [X[:, r * k:(r + 1) * k] for r in range(tp)]       # each (B, D/tp) input_is_parallel
    A_r = [A[r * k:(r + 1) * k, :] for r in range(tp)]       # each (D/tp, O) rows of A
    Y_partial = [x @ a for x, a in zip(X_r, A_r)]             # each (B, O) partial sums
    # g: every rank holds only a partial sum over its D/tp inputs; AllReduce(SUM) gives Y.
    Y = reduce_all(Y_partial, "sum")                          # (B, O)
    if bias is not None:
        Y = Y + bias                                          # once, after the reduce
    # Backward of g is the identity: dY is already complete on every rank, so all is local.
    dX_r = [dY @ a.T for a in A_r]                            # each (B, D/tp)
    dA_r = [x.T @ dY for x in X_r]                            # each (D/tp, O)
    db = None if bias is None else dY.sum(axis=0)            # (O,) replicated, same on every rank
    sharded = LinearOutputs(Y=Y, dX=np.concatenate(dX_r, axis=1), dA=np.concatenate(dA_r, axis=0), db=db)
    ref = _reference(X, A, dY, bias)
    check_finite("float64", sharded, ref, field=None)
    ranks = [RowRank(rank=r, X_shard=X_r[r], A_shard=A_r[r], Y_partial=Y_partial[r], dX_shard=dX_r[r],
                     dA_shard=dA_r[r]) for r in range(tp)]
    return RowLinearResult(
        kind="row", tp=tp, inputs={"X": X, "A": A, "dY": dY, "bias": bias}, ranks=ranks, Y=Y, sharded=sharded,
        reference=ref, max_abs_err=_errors(sharded, ref),
        comm=[CommStep("forward", "all-reduce", B * O), CommStep("backward", "none", 0)],
    )


def run_column_linear(X: Any = None, A: Any = None, dY: Any = None, tp: Any = 2,
                      gather_output: bool = True, bias: Any = None) -> ColumnLinearResult:
    """Column-parallel linear: A split along its columns; optional AllGather of Y."""
    X, A, dY, bias, tp, k = _prepare(X, A, dY, bias, tp, split="d_out")
    (B, D), O = X.shape, A.shape[1]
    A_r = [A[:, r * k:(r + 1) * k] for r in range(tp)]       # each (D, O/tp) columns of A
    b_r = [bias[r * k:(r + 1) * k] for r in range(tp)] if bias is not None else [None] * tp  # (O/tp,)
    Y_r = [X @ a + (b if b is not None else 0.0) for a, b in zip(A_r, b_r)]   # each (B, O/tp)
    # gather_output: AllGather places rank r's slice at columns [r·O/tp, (r+1)·O/tp).
    Y = np.concatenate(Y_r, axis=1)                           # (B, O)
    # Backward: each rank needs only its slice of dY (the backward of AllGather is a split;
    # without gather_output the next layer hands each rank its slice directly).
    dY_r = [dY[:, r * k:(r + 1) * k] for r in range(tp)]      # each (B, O/tp)
    dA_r = [X.T @ g for g in dY_r]                            # each (D, O/tp) local
    dX_partial = [g @ a.T for g, a in zip(dY_r, A_r)]         # each (B, D) partial
    # f: X fed every rank, so dX = Σ_r dY_r A_rᵀ needs AllReduce(SUM).
    dX = reduce_all(dX_partial, "sum")                        # (B, D)
    # Without gather_output each rank keeps only Y_shard; "Y" is the logical output assembled here
    # for the comparison with the reference.
    db = None if bias is None else np.concatenate([g.sum(axis=0) for g in dY_r])   # (O,) from local (O/tp,)
    sharded = LinearOutputs(Y=Y, dX=dX, dA=np.concatenate(dA_r, axis=1), db=db)
    ref = _reference(X, A, dY, bias)
    check_finite("float64", sharded, ref, field=None)
    ranks = [ColumnRank(rank=r, A_shard=A_r[r], Y_shard=Y_r[r], dY_shard=dY_r[r], dX_partial=dX_partial[r],
                        dA_shard=dA_r[r]) for r in range(tp)]
    forward = CommStep("forward", "all-gather", B * O) if gather_output else CommStep("forward", "none", 0)
    return ColumnLinearResult(
        kind="column", tp=tp, gather_output=bool(gather_output), inputs={"X": X, "A": A, "dY": dY, "bias": bias},
        ranks=ranks, Y=Y, sharded=sharded, reference=ref, max_abs_err=_errors(sharded, ref),
        comm=[forward, CommStep("backward", "all-reduce", B * D)],
    )
