"""How a rank's records are printed (the page shows the same text): names, values, verdicts.

Records are ``(name, value)`` pairs; values are arrays, numbers or short texts, formatted with
the site's one number rule (:mod:`tpmath.fmt`).  Rank 0 adds a check block comparing with the
unsharded run.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from .. import fmt

OK = "\u2713"       # ✓
BAD = "\u2717"      # ✗

# Allowed |TP − unsharded| relative to the largest reference value, per dtype, for examples
# without a derived bound (the MLP uses mlp.tolerances).  Sharding only reorders additions;
# these are generous multiples of eps for the small sizes of the examples.
REL_TOL = {"float64": 1e-12, "float32": 1e-5, "float16": 1e-2}


def tolerance(dtype: str, reference: Any) -> float:
    """The tolerance for comparing with ``reference`` in ``dtype``."""
    ref = np.asarray(reference, dtype=np.float64)
    finite = ref[np.isfinite(ref)]
    scale = float(np.max(np.abs(finite))) if finite.size else 0.0
    return REL_TOL[dtype] * max(1.0, scale)


def verdict(err: float, tol: float) -> str:
    """``< tol ✓`` when the difference passes, else its digits and ``✗ (tolerance …)``."""
    if err < tol:
        return f"{fmt.within(err, tol)} {OK}"
    return f"{fmt.err(err)} {BAD} (tolerance {fmt.within(0.0, tol)[2:]})"


def cols(a: int, b: int) -> str:
    return f"[:, {a}:{b}]"


def rows(a: int, b: int) -> str:
    return f"[{a}:{b}, :]"


def exact_verdict(err: float) -> str:
    """``0 ✓`` for an exact result, else the difference and ✗."""
    return f"0 {OK}" if err == 0 else f"{fmt.err(err)} {BAD} (expected exactly 0)"


def value_text(value: Any) -> str:
    """A record's value as the site shows it (matrices one row per line)."""
    if isinstance(value, str):
        return value
    arr = np.asarray(value)
    if arr.ndim == 0:
        return fmt.num(arr)
    return fmt.mat(arr)


def format_rank(r: int, records: list[tuple[str, Any]], width: int = 0) -> list[str]:
    """Lines ``[rank r] name  value``; a matrix continues on the next lines under its value.
    Names are padded to the longest one (at least ``width``)."""
    if not records:
        return []
    width = max(width, *(len(name) for name, _ in records))
    out = []
    for name, value in records:
        for i, line in enumerate(value_text(value).split("\n")):
            out.append(f"[rank {r}] {(name if i == 0 else ''):<{width}}  {line}".rstrip())
    return out


CHECK_TITLE = "vs the unsharded reference (one process):"


def format_check(check: list[tuple[str, Any]]) -> list[str]:
    """Rank 0's comparison block."""
    if not check:
        return []
    return [f"[rank 0] {CHECK_TITLE}"] + format_rank(0, [("  " + n, v) for n, v in check])


def format_output(per_rank: list, check: list) -> str:
    """The whole output of a run: every rank's records in rank order, then the check."""
    lines = [line for r, recs in enumerate(per_rank) for line in format_rank(r, recs)]
    return "\n".join(lines + format_check(check))


def records_json(r: int, records: list[tuple[str, Any]], check: list | None = None) -> str:
    """One JSON line per rank (``--json``): full-precision values, ±inf written as strings."""
    def plain(v: Any) -> Any:
        if isinstance(v, str):
            return v
        arr = np.asarray(v, dtype=np.float64)
        out = arr.tolist()
        return _nonfinite_to_str(out)
    obj = {"rank": r, "records": [[n, plain(v)] for n, v in records]}
    if check is not None:
        obj["check"] = [[n, plain(v)] for n, v in check]
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


def _nonfinite_to_str(x: Any) -> Any:
    if isinstance(x, list):
        return [_nonfinite_to_str(v) for v in x]
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf" if x < 0 else "nan")
