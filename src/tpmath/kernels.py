"""Matrix product, tanh and sum with one fixed evaluation order in float16/float32.

Why: the *size* of a low-precision rounding difference depends on the order of the
additions.  CPython's numpy multiplies float32 matrices with OpenBLAS (blocked, vector
order), Pyodide's numpy has no BLAS (plain loops), and their float32 ``tanh`` differ in
the last bit.  The same sharded-vs-unsharded comparison would then show different
numbers at build time and in the browser, and neither would be "the" answer.

So in float16 and float32 these kernels define the order, like a naive GPU kernel
without split-K: products rounded to the dtype, accumulated one inner index at a time
in the dtype; ``tanh`` evaluated in float64 and rounded once.  Every step is a single
IEEE operation, so every runtime gets the same bits.  float64 keeps numpy's fast
``@`` (its last-bit differences are below the site's 1e-15 display floor).

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
    acc = a[..., :, 0:1] * b[..., 0:1, :]                   # (…, M, N) first product
    for k in range(1, a.shape[-1]):
        acc = acc + a[..., :, k:k + 1] * b[..., k:k + 1, :]  # one rounding per add, fixed order
    if out is not None:
        out[...] = acc
        return out
    return acc


def tanh(z: np.ndarray) -> np.ndarray:
    """``tanh``; in float16/float32 computed in float64 and rounded once to the dtype."""
    if not _exact_order(z):
        return np.tanh(z)
    return np.tanh(z.astype(np.float64)).astype(z.dtype)


def total(x: np.ndarray) -> np.ndarray:
    """Sum of all elements; in float16/float32 accumulated in C order, in the dtype."""
    if not _exact_order(x):
        return np.sum(x)
    flat = x.ravel()
    acc = flat[0]
    for v in flat[1:]:
        acc = acc + v                                       # numpy scalar add: stays in the dtype
    return acc
