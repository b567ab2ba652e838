"""Precision: sharded vs unsharded per dtype, and one SGD step of the sharded model.

Letters
-------
B, D, F, tp   as in :mod:`tpmath.mlp` (batch, d_model, d_ff, tensor-parallel size)
V             vocabulary size of the cross-entropy example
u             unit roundoff of a dtype, eps/2 (float64 1.1e-16, float32 6.0e-8, float16 4.9e-4,
              bfloat16 3.9e-3)
lr            SGD learning rate: W ← W − lr·G_W

Sharding reorders additions, so the sharded and unsharded results may differ in the
last bits; they must stay within a tolerance derived from u and the sizes (see
:func:`tpmath.mlp.tolerances` for the MLP and :func:`ce_tolerance` for the
cross-entropy).  Both sides are computed in the same dtype, so the difference measures
reduction order only, not the dtype's distance from the exact result.

Every dtype runs the same arithmetic (:class:`Arith`), one rounded operation at a time in a
fixed order, so that the order of additions is the only thing sharding changes and every
runtime gets the same bits: products and sums rounded to the dtype, matrix products
accumulated over the inner index in index order, the ranks' partial results added in rank
order, tanh / exp / log evaluated in float64 from IEEE operations only (:func:`exp64`) and rounded once.  float64, float32 and float16
are numpy's own dtypes; bfloat16 (8 significand bits, float32's exponent) has no numpy dtype,
so its values live in float32 arrays and every operation is done in float32 and rounded to
bfloat16 (round to nearest even on the float32 bit pattern, :func:`round_bf16`), the way
numpy does float16 (in float32, then rounded) and PyTorch does bfloat16 on the CPU.

With one rank nothing is reordered: every difference is exactly 0.  With more ranks the
quantities a collective completes (Y, the loss, G_X, the cross-entropy loss) are sums in a
different order and differ by a few units of the dtype's last place; the weight gradients
are complete on each rank, computed from the same numbers in the same order, and do not
differ at all.  The demo's inputs (:func:`demo_inputs`) are large enough that the
difference is visible in every dtype at every tp > 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .mlp import default_inputs, finite_difference_grads, sharded_mlp, stack_columns, stack_rows, tolerances
from .mlp import random_inputs, validate_inputs, validate_tp
from .validate import DTYPES, as_choice, as_float, check_divides

PRECISION_DTYPES = DTYPES + ("bfloat16",)    # the dtypes this module compares (bfloat16 emulated)
QUANTITIES = ("Y", "loss", "G_X", "G_W1", "G_W2")
REDUCED = ("Y", "loss", "G_X")               # completed by a collective: the ones sharding reorders
# The demo: 4 tokens of width 8, an MLP of width 32 (8 columns per rank at tp = 4), and 32
# positions of 96 logits for the cross-entropy (96: tp = 1, 2, 3, 4, 6 divide it).  Small enough
# that the worst-case bounds stay finite in bfloat16 (n·u < 1/2 for every sum), large enough that
# every reduced quantity differs in every dtype at tp = 2 and 4, in the order the page states
# (numpy seed 2; tests/test_precision.py checks it over every setting of the demo).
DEMO_SEED, DEMO_BATCH, DEMO_D_MODEL, DEMO_D_FF, DEMO_VOCAB, DEMO_POSITIONS = 2, 4, 8, 32, 96, 32


# ------------------------------------------------------------------ arithmetic

def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), returned as float32.

    bfloat16 is the upper half of a float32: adding 0x7FFF plus the lowest kept bit and
    clearing the lower 16 bits rounds to nearest, ties to even (a carry into the exponent
    gives the next binade or ±inf, as it should).  NaN stays NaN (a quiet NaN, as PyTorch).
    """
    shape = np.shape(x)
    x = np.array(x, dtype=np.float32).reshape(-1)              # a copy, 1-d: its bits can be viewed
    bits = x.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = bits.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), np.float32(np.nan), out).reshape(shape)


def _same(x: np.ndarray) -> np.ndarray:
    return x


@dataclass(frozen=True, eq=False)
class Arith:
    """One dtype's arithmetic: the numpy dtype values are stored and computed in, the rounding
    applied after every operation (identity where numpy's dtype is the dtype), unit roundoff u."""
    name: str
    work: Any
    rnd: Callable[[np.ndarray], np.ndarray]
    u: float

    def cast(self, x: Any) -> np.ndarray:
        return self.rnd(np.asarray(x, dtype=np.float64).astype(self.work))

    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.rnd(a * b)

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.rnd(a + b)

    def sub(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.rnd(a - b)

    def fn(self, f: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
        """tanh64 / exp64 / log64: evaluated in float64 and rounded once."""
        return self.cast(f(x.astype(np.float64)))

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """a (…, M, K) @ b (…, K, N): rounded products added over K in index order."""
        acc = self.mul(a[..., :, 0:1], b[..., 0:1, :])
        for k in range(1, a.shape[-1]):
            acc = self.add(acc, self.mul(a[..., :, k:k + 1], b[..., k:k + 1, :]))
        return acc

    def sum_in_order(self, parts: Any) -> np.ndarray:
        """parts[0] + parts[1] + … left to right: the ranks of a reduction, or the terms of a sum."""
        acc = parts[0]
        for p in parts[1:]:
            acc = self.add(acc, p)
        return acc


# tanh, exp and log from IEEE operations only (+, −, ×, ÷, ldexp are correctly rounded on every
# platform, unlike the C library's tanh / exp / log, whose last bit differs between CPython and
# Pyodide): the same float64 bits at build time and in the browser, so the float64 differences
# shown are the same too.  Accurate to about one unit in the last place, which is all the demo
# needs: both sides of every comparison use the same function.
_LN2_HI, _LN2_LO = 0.693147180369123816490, 1.90821492927058770002e-10   # ln 2 = HI + LO, HI exact in 32 bits
_EXP_TERMS = tuple(1.0 / np.prod(np.arange(1.0, k + 1.0)) for k in range(14))  # 1/k!, k = 0 … 13


def exp64(x: np.ndarray) -> np.ndarray:
    """e^x = 2^k · e^r with r = x − k·ln 2, |r| ≤ ln 2 / 2, e^r by its Taylor polynomial (Horner)."""
    x = np.asarray(x, dtype=np.float64)
    k = np.rint(x * 1.4426950408889634)                     # x / ln 2
    r = (x - k * _LN2_HI) - k * _LN2_LO
    p = np.full_like(r, _EXP_TERMS[-1])
    for c in _EXP_TERMS[-2::-1]:
        p = p * r + c
    return np.ldexp(p, k.astype(np.int32))                 # int32: the C int of every platform


def log64(x: np.ndarray) -> np.ndarray:
    """ln x for x > 0: x = m·2^e with m in [√½, √2), ln m = 2·atanh(u), u = (m − 1)/(m + 1)."""
    m, e = np.frexp(np.asarray(x, dtype=np.float64))
    low = m < np.sqrt(0.5)
    m, e = np.where(low, 2.0 * m, m), np.where(low, e - 1, e)
    u = (m - 1.0) / (m + 1.0)
    u2 = u * u
    p = np.full_like(u, 1.0 / 23.0)
    for k in range(21, 0, -2):
        p = p * u2 + 1.0 / k
    return e * _LN2_HI + (e * _LN2_LO + 2.0 * u * p)


def tanh64(z: np.ndarray) -> np.ndarray:
    """tanh z = sign(z)·(1 − 2/(e^{2|z|} + 1))."""
    z = np.asarray(z, dtype=np.float64)
    return np.sign(z) * (1.0 - 2.0 / (exp64(2.0 * np.abs(z)) + 1.0))


ARITH = {
    "float64": Arith("float64", np.float64, _same, 2.0 ** -53),
    "float32": Arith("float32", np.float32, _same, 2.0 ** -24),
    "float16": Arith("float16", np.float16, _same, 2.0 ** -11),
    "bfloat16": Arith("bfloat16", np.float32, round_bf16, 2.0 ** -8),
}


def demo_inputs() -> dict[str, np.ndarray]:
    """The precision demo's MLP inputs (float64; weights scaled by 1/sqrt(fan-in))."""
    return random_inputs(DEMO_SEED, DEMO_BATCH, DEMO_D_MODEL, DEMO_D_FF)


def demo_logits() -> tuple[np.ndarray, np.ndarray]:
    """The demo's cross-entropy logits (N, V), standard normal times 3, and one target per position."""
    rng = np.random.default_rng(DEMO_SEED)
    return 3.0 * rng.standard_normal((DEMO_POSITIONS, DEMO_VOCAB)), rng.integers(0, DEMO_VOCAB, DEMO_POSITIONS)


# ---------------------------------------------------------- the two computations

def mlp_outputs(ar: Arith, inp: dict[str, np.ndarray], tp: int) -> dict[str, np.ndarray]:
    """Y, the loss and the gradients of the column→row MLP on tp ranks in ``ar``'s arithmetic
    (tp = 1: the unsharded reference, the same operations in the same order)."""
    X, W1, W2, G = (ar.cast(inp[k]) for k in ("X", "W1", "W2", "G"))
    W1s, W2s = stack_columns(W1, tp), stack_rows(W2, tp)        # (tp, D, F/tp), (tp, F/tp, D)
    H = ar.fn(tanh64, ar.matmul(X, W1s))                         # (tp, B, F/tp) local
    Y = ar.sum_in_order(list(ar.matmul(H, W2s)))                  # (B, D) AllReduce of partial Y
    loss = ar.sum_in_order(list(ar.mul(Y, G).ravel()))
    G_H = ar.matmul(G, W2s.swapaxes(-1, -2))                      # (tp, B, F/tp)
    G_Z = ar.mul(G_H, ar.sub(ar.cast(1.0), ar.mul(H, H)))
    G_W1 = np.concatenate(list(ar.matmul(X.T, G_Z)), axis=1)     # (D, F) own columns, complete locally
    G_W2 = np.concatenate(list(ar.matmul(H.swapaxes(-1, -2), G)), axis=0)   # (F, D) own rows
    G_X = ar.sum_in_order(list(ar.matmul(G_Z, W1s.swapaxes(-1, -2))))      # (B, D) AllReduce
    return {"Y": Y, "loss": loss, "G_X": G_X, "G_W1": G_W1, "G_W2": G_W2}


def ce_loss(ar: Arith, logits: np.ndarray, targets: np.ndarray, tp: int) -> tuple[np.ndarray, dict]:
    """Megatron's vocab-parallel cross-entropy of N positions (logits (N, V)) on tp vocabulary
    shards in ``ar``'s arithmetic: local max (exact), global max, Σ exp(z − m) per shard, then over
    the shards in rank order; loss = log Σ − (z_y − m) per position.  Also returns what
    :func:`ce_tolerance` needs, per position."""
    z = ar.cast(logits)                                           # (N, V)
    m = np.max(z, axis=1, keepdims=True)                          # (N, 1) a max rounds nothing
    e = ar.fn(exp64, ar.sub(z, m)).reshape(len(z), tp, -1)       # (N, tp, V/tp)
    local = ar.sum_in_order(list(np.moveaxis(e, 2, 0)))           # (N, tp) each rank's Σ exp
    total = ar.sum_in_order(list(local.T))                        # (N,) AllReduce(sum) in rank order
    shifted = ar.sub(z[np.arange(len(z)), targets], m[:, 0])      # (N,) z_y − m
    loss = ar.sub(ar.fn(log64, total), shifted)                  # (N,)
    return loss, {"sum_exp": total.astype(np.float64), "target_shifted": shifted.astype(np.float64),
                  "loss": loss.astype(np.float64)}


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
    """The checks in float64, float32, float16 and bfloat16, and one SGD step."""
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
    u = ARITH[as_choice("dtype", dtype, PRECISION_DTYPES)].u
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


def _max_abs(a: Any, b: Any) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


def dtype_check(name: str, inp: dict[str, np.ndarray], logits: np.ndarray, target: np.ndarray, tp: int,
                fd: dict[str, np.ndarray]) -> DtypeCheck:
    """The MLP and the cross-entropy in one dtype, sharded over tp against unsharded."""
    ar = ARITH[name]
    with np.errstate(over="ignore", invalid="ignore"):
        sharded, reference = mlp_outputs(ar, inp, tp), mlp_outputs(ar, inp, 1)
        ce, ce_info = ce_loss(ar, logits, target, tp)
        ce_ref, _ = ce_loss(ar, logits, target, 1)
    errs = {k: _max_abs(sharded[k], reference[k]) for k in QUANTITIES}
    tols = tolerances(inp["X"], inp["W1"], inp["W2"], inp["G"], u=ar.u)
    # per position; the table shows the largest difference against the smallest tolerance
    ce_tol = min(ce_tolerance(logits.shape[1], *(ce_info[k][i] for k in ("sum_exp", "target_shifted", "loss")), name)
                 for i in range(len(logits)))
    ce_diff = _max_abs(ce, ce_ref)
    within = all(errs[k] <= tols[k] for k in QUANTITIES) and ce_diff <= ce_tol
    return DtypeCheck(dtype=name, tolerance=max(tols.values()), tolerances={**tols, "ce": ce_tol}, max_abs_err=errs,
                      finite_difference={k: _max_abs(sharded[k], fd[k]) for k in ("G_X", "G_W1", "G_W2")},
                      ce_abs_diff=ce_diff, ce_tolerance=ce_tol, within_tolerance=bool(within))


def run_precision(tp: Any = 2, lr: Any = 0.1, X: Any = None, W1: Any = None, W2: Any = None,
                  G: Any = None) -> PrecisionResult:
    """The MLP and the vocab-parallel CE in float64/32/16 and bfloat16, and one float64 SGD step.

    Without inputs the dtype checks use :func:`demo_inputs` and :func:`demo_logits` (large enough
    for every dtype to show its rounding) and the SGD step the seed's small MLP
    (:func:`tpmath.mlp.default_inputs`); given X, W1, W2, G, both use them.
    """
    given = any(a is not None for a in (X, W1, W2, G))
    inp = validate_inputs(X, W1, W2, G) if given else validate_inputs(**demo_inputs())
    tp = validate_tp(tp, inp["W1"].shape[1])
    lr = as_float("lr", lr, lo=0.0, hi=10.0)
    logits, target = demo_logits()
    check_divides(tp, logits.shape[1], "tp", "vocab")
    fd = finite_difference_grads(inp["X"], inp["W1"], inp["W2"], inp["G"])
    rows = [dtype_check(name, inp, logits, target, tp, fd) for name in PRECISION_DTYPES]
    small = inp if given else validate_inputs(**default_inputs())
    sgd_tp = validate_tp(tp, small["W1"].shape[1])
    sgd = sgd_step(small["X"], small["W1"], small["W2"], small["G"], sgd_tp, lr)
    return PrecisionResult(tp=tp, dtypes=rows, sgd=sgd)
