"""Matrix product, tanh and sum with one fixed evaluation order in float16/float32.

Why: the *size* of a low-precision rounding difference depends on the order of the
additions.  CPython's numpy multiplies float32 matrices with OpenBLAS (blocked, vector
order), Pyodide's numpy has no BLAS (plain loops), and their float32 ``tanh`` differ in
the last bit.  The same sharded-vs-unsharded comparison would then show different
numbers at build time and in the browser, and neither would be "the" answer.

So in float16 and float32 these kernels define the order, like a naive GPU kernel
without split-K: products rounded to the dtype, accumulated one inner index at a time
in the dtype; ``tanh`` evaluated in float64 and rounded once.  Every step is a single
IEEE operation, so every runtime gets the same bits.  :func:`matmul` keeps numpy's
fast ``@`` in float64 (the precision demo's float64 row).

The float64 ``*_fixed`` kernels do the same for the pages that print a measured float64
error (attention, transformer layer, sequence parallelism): that error is rounding noise
(1e−16 … 1e−14), so its digits are whatever the summation order and the math library
made them, and they differed between the build (OpenBLAS, x86 SIMD ``exp``/``tanh``) and
the browser (plain loops, musl libm, Python 3.12's compensated ``sum()``) in 51 of 134
results measured.  Built from IEEE operations only (+ − × ÷, ``rint``, ``ldexp``: each
exactly rounded), they give the same bits in CPython and Pyodide, so the page can print
the measured error itself.

Letters: a (…, M, K) @ b (…, K, N) → (…, M, N); leading axes broadcast (rank stacks).
"""

from __future__ import annotations

import numpy as np


def _exact_order(x: np.ndarray) -> bool:
    """True for the dtypes whose results must not depend on the runtime's kernels."""
    return x.dtype in (np.float16, np.float32)


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``a @ b``; in float16/float32 accumulated over K in index order, in the dtype."""
    if not (_exact_order(a) or _exact_order(b)):
        return np.matmul(a, b, out=out)
    acc = matmul_fixed(a, b)
    if out is not None:
        out[...] = acc
        return out
    return acc


def matmul_fixed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in any dtype, accumulated over K in index order: ((a₀b₀ + a₁b₁) + a₂b₂) + …"""
    a, b = np.asarray(a), np.asarray(b)
    acc = a[..., :, 0:1] * b[..., 0:1, :]                   # (…, M, N) first product
    for k in range(1, a.shape[-1]):
        acc = acc + a[..., :, k:k + 1] * b[..., k:k + 1, :]  # one rounding per add, fixed order
    return acc


# exp by Cody–Waite reduction x = k·ln2 + r, |r| ≤ ln2/2, and the Taylor series of eʳ − 1 to r¹³
# (truncation below 1e−18 relative).  LN2_HI has its low 21 bits zero, so k·LN2_HI is exact.
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
INV_LN2 = 1.44269504088896338700e+00
TAYLOR_TERMS = 13
EXP_MIN, EXP_MAX = -745.2, 709.7          # eˣ is 0 below (subnormal limit), overflows above


def _reduce(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(k, eʳ − 1) with x = k·ln2 + r, by Horner's rule in a fixed order."""
    k = np.rint(x * INV_LN2)
    r = (x - k * LN2_HI) - k * LN2_LO
    s = 1.0 + r / TAYLOR_TERMS
    for n in range(TAYLOR_TERMS - 1, 1, -1):
        s = 1.0 + (r / n) * s
    return k, r * s


def exp_fixed(x: np.ndarray) -> np.ndarray:
    """eˣ in float64 from IEEE operations only (within a few ulp of the math library's);
    −∞ (a masked score) gives exactly 0."""
    x = np.asarray(x, dtype=np.float64)
    clipped = np.clip(x, EXP_MIN, EXP_MAX)
    k, em1 = _reduce(clipped)
    y = np.ldexp(1.0 + em1, k.astype(np.int32))
    return np.where(x < EXP_MIN, 0.0, np.where(x > EXP_MAX, np.inf, y))


def _expm1_nonpositive(x: np.ndarray) -> np.ndarray:
    """eˣ − 1 for x ≤ 0, accurate near 0 (the series itself while k = 0)."""
    k, em1 = _reduce(np.maximum(x, EXP_MIN))
    return np.where(k == 0, em1, np.ldexp(1.0 + em1, k.astype(np.int32)) - 1.0)


def tanh_fixed(z: np.ndarray) -> np.ndarray:
    """tanh in float64 from IEEE operations only: tanh|z| = −m / (2 + m), m = e^(−2|z|) − 1
    (no overflow, no cancellation near 0), with the sign of z."""
    z = np.asarray(z, dtype=np.float64)
    m = _expm1_nonpositive(-2.0 * np.abs(z))
    return np.copysign(-m / (2.0 + m), z)


def tanh(z: np.ndarray) -> np.ndarray:
    """``tanh``; in float16/float32 computed in float64 and rounded once to the dtype."""
    if not _exact_order(z):
        return np.tanh(z)
    return np.tanh(z.astype(np.float64)).astype(z.dtype)


def total_fixed(x: np.ndarray) -> np.float64:
    """Sum of all elements in C order, one add at a time: a running sum is sequential by
    definition, while ``np.sum`` may add in SIMD lanes on one machine and pairwise on another."""
    return np.add.accumulate(np.ravel(x))[-1]


def total(x: np.ndarray) -> np.ndarray:
    """Sum of all elements; in float16/float32 accumulated in C order, in the dtype."""
    if not _exact_order(x):
        return np.sum(x)
    flat = x.ravel()
    acc = flat[0]
    for v in flat[1:]:
        acc = acc + v                                       # numpy scalar add: stays in the dtype
    return acc
