"""The one formatting rule for every number on the site.

Build-time tables (CPython) and live tables (Pyodide/WebAssembly) call these
same functions.  WebAssembly's libm may differ from glibc in the last bits, so
the rule shows 4 decimals (trailing zeros trimmed) for ordinary values and
collapses errors below 1e-15 to "< 1e−15": the two runtimes then print the
same strings.  Negative numbers use the typographic minus (U+2212).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

MINUS = "\u2212"
TINY = 1e-15


_NUM_MEMO: dict = {}
_MEMO_MAX = 8192


def num(x: Any, decimals: int = 4) -> str:
    """A value: fixed ``decimals`` (trailing zeros trimmed), scientific when huge or tiny.

    Memoised: a page prints the same numbers in its tables, figures and rank outputs on every
    control change (a few hundred per change, in the browser's Python)."""
    x = float(x)
    key = (x, decimals)
    text = _NUM_MEMO.get(key)
    if text is None:
        if len(_NUM_MEMO) >= _MEMO_MAX:
            _NUM_MEMO.clear()
        text = _NUM_MEMO[key] = _num(x, decimals)
    return text


def _num(x: float, decimals: int) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return ("" if x > 0 else MINUS) + "∞"
    if x == 0 or abs(x) < 0.5 * 10.0 ** (-decimals) and abs(x) < TINY:
        return "0"
    # Rounding noise off first (12 significant digits): a value that is exactly halfway between
    # two printed values (products of short decimals, e.g. −1.23835) would otherwise print on
    # whichever side the runtime's summation order left it (BLAS, Pyodide's plain loops, PyTorch).
    x = float(f"{x:.12g}")
    if abs(x) >= 1e6 or abs(x) < 10.0 ** (-decimals):
        text = f"{x:.3e}"
        mant, exp = text.split("e")
        text = f"{mant}e{int(exp)}"
    else:
        text = f"{x:.{decimals}f}".rstrip("0").rstrip(".")
        if text in ("-0", ""):
            text = "0"
    return text.replace("-", MINUS)


def err(x: Any) -> str:
    """An error or difference: "< 1e−15" below the noise floor, else 2 significant digits."""
    x = abs(float(x))
    if math.isnan(x):
        return "NaN"
    if x < TINY:
        return "<\u00a01e\u221215"
    mant, exp = f"{x:.1e}".split("e")
    return f"{mant}e{int(exp)}".replace("-", MINUS)


def diff(x: float) -> str:
    """A sharded-vs-unsharded difference: an exact 0 (no addition reordered) is written 0, anything
    else by :func:`err`'s rule (the precision demo's table and figure)."""
    return "0" if x == 0 else err(x)


def within(x: Any, tol: float) -> str:
    """An error checked against a stated tolerance: "< tol" when below it, else :func:`err`.

    For errors that are rounding noise amplified on purpose (finite differences divide
    by the step h), the digits differ between CPython and WebAssembly; what is stable
    and meaningful is that the error is below the check's tolerance.
    """
    x = abs(float(x))
    if math.isnan(x):
        return "NaN"
    if x >= tol:
        return err(x)
    # The bound shown is tol rounded *up* to one significant digit, so "< bound" stays true.
    exp = math.floor(math.log10(tol))
    mant = math.ceil(tol / 10.0 ** exp * (1 - 1e-12))
    if mant == 10:
        mant, exp = 1, exp + 1
    return f"<\u00a0{mant}e{exp}".replace("-", MINUS)


def vec(v: Any, decimals: int = 4) -> str:
    """A 1-D array as ``[a, b, c]``."""
    return "[" + ", ".join(num(x, decimals) for x in np.asarray(v).ravel()) + "]"


def mat(m: Any, decimals: int = 4) -> str:
    """A 2-D array as numpy prints it, one row per line: ``[[a, b],\n [c, d]]``.

    The line breaks are part of the text, so the build-time table, the live table
    (set as plain text) and the CLI comparison all show the same matrix layout
    (cells keep them with ``white-space: pre``).  1-D arrays fall back to :func:`vec`.
    """
    m = np.asarray(m)
    if m.ndim < 2:
        return vec(m, decimals)
    return "[" + ",\n ".join(vec(row, decimals) for row in m) + "]"


def integer(n: Any) -> str:
    """An integer with thin grouping: 1 234 567 (no locale dependence; a narrow no-break space, so a
    number never breaks across lines)."""
    return f"{int(n):,}".replace(",", "\u202f").replace("-", MINUS)


def nbytes(n: Any) -> str:
    """A byte count in binary units (B, KiB, MiB, GiB, TiB) with 3 significant digits."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return (f"{int(n)}\u00a0B" if unit == "B" else f"{n:.3g}\u00a0{unit}").replace("-", MINUS)
        n /= 1024
    raise AssertionError("unreachable")


def bound(x: Any) -> str:
    """A limit a reader must respect: 10 000, −10 000, 0.001, 1e−9 (no trailing zeros)."""
    x = float(x)
    if x.is_integer() and abs(x) < 1e15:
        return integer(x)
    return f"{x:g}".replace("e-0", "e-").replace("e+0", "e").replace("e+", "e").replace("-", MINUS)


def shape(dims: Any) -> str:
    """A shape as numpy writes it, (2, 4) or (3,); ``None`` (any size) as ·."""
    parts = ["·" if d is None else str(int(d)) for d in dims]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
