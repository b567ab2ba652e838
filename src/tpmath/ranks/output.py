"""How a rank's records are printed (the page shows the same text): names, values, verdicts.

Records are ``(name, value)`` pairs; values are arrays, numbers or short texts, formatted with
the site's one number rule (:mod:`tpmath.fmt`).  Rank 0 adds a check block comparing with the
unsharded run.  A name or a text value with words in it is a translation cell (``real.*`` in
content/i18n/<lang>.core.toml), printed in the run's language; notation (``W1[:, 0:2]``,
``Y ← all_reduce(SUM)``) stays a plain string.
"""

from __future__ import annotations

import json
import math
import unicodedata
from typing import Any

import numpy as np

from .. import fmt, i18n
from ..i18n import Text

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
    scale = max(1.0, float(np.max(np.abs(finite))) if finite.size else 0.0)
    # Up to the next power of ten: the reference's largest value differs in its last bits between
    # OpenBLAS (build time) and Pyodide's numpy (live), and the examples' inputs have one decimal,
    # so it often sits on a rounding boundary of the printed tolerance (2.65 -> "2.6" or "2.7").
    # A power of ten (with a margin far above that noise) prints the same everywhere.
    return REL_TOL[dtype] * 10.0 ** math.ceil(math.log10(scale) - 1e-6)


def verdict(err: float, tol: float) -> Text:
    """The measured difference, the tolerance beside it, and ✓ or ✗: ``4.4e−16 (tolerance 7.1e−12) ✓``.

    The difference is the site's one rule (fmt.err), the tolerance written as the pages' tolerance
    columns write it.  A real run's digits are its own (PyTorch adds in another order than numpy),
    so tests compare the tolerance and the mark with the expected line, and the digits with it."""
    return Text("real.verdict", err=fmt.err(err), tol=fmt.err(tol), mark=OK if err < tol else BAD)


def cols(a: int, b: int) -> str:
    return f"[:, {a}:{b}]"


def rows(a: int, b: int) -> str:
    return f"[{a}:{b}, :]"


def exact_verdict(err: float) -> str | Text:
    """``0 ✓`` for an exact result, else the difference and ✗."""
    return f"0 {OK}" if err == 0 else Text("real.verdict_not_exact", err=f"{fmt.err(err)} {BAD}")


def value_text(value: Any, lang: str = i18n.DEFAULT_LANG) -> str:
    """A record's value as the site shows it (matrices one row per line; a cell in ``lang``)."""
    if isinstance(value, (str, dict)):
        return i18n.text(value, lang)
    arr = np.asarray(value)
    if arr.ndim == 0:
        return fmt.num(arr)
    return fmt.mat(arr)


# Symbols of the record names that CJK monospace fonts (Noto Sans Mono CJK, measured) draw full-width
# while Latin monospace fonts draw them one column wide.
CJK_WIDE_SYMBOLS = "←⊙∞"


def columns(text: str, lang: str = i18n.DEFAULT_LANG) -> int:
    """The width of ``text`` in a monospace font of ``lang``: a CJK character takes two columns, and
    :data:`CJK_WIDE_SYMBOLS` take ``real.symbol_columns`` (2 in the CJK fonts of a Chinese page)."""
    columns = i18n.text(Text("real.symbol_columns"), lang)
    symbol = int(columns) if columns.isdigit() else 1    # a language Python has no strings for yet: Latin
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else symbol if ch in CJK_WIDE_SYMBOLS else 1
               for ch in text)


def name_width(records: list[tuple[Any, Any]], lang: str = i18n.DEFAULT_LANG) -> int:
    """The columns of the longest record name in ``lang`` (what :func:`format_rank` pads to)."""
    return max((columns(i18n.text(name, lang), lang) for name, _ in records), default=0)


def format_rank(r: int, records: list[tuple[Any, Any]], width: int = 0,
                lang: str = i18n.DEFAULT_LANG) -> list[str]:
    """Lines ``[rank r] name  value``; a matrix continues on the next lines under its value.
    Names (cells printed in ``lang``) are padded to the longest one (at least ``width`` columns)."""
    if not records:
        return []
    width = max(width, name_width(records, lang))
    out = []
    for name, value in records:
        shown = i18n.text(name, lang)
        pad = " " * (width - columns(shown, lang))
        for i, line in enumerate(value_text(value, lang).split("\n")):
            out.append((f"[rank {r}] {shown}{pad}  {line}" if i == 0 else f"[rank {r}] {' ' * width}  {line}").rstrip())
    return out


def check_title(lang: str = i18n.DEFAULT_LANG) -> str:
    """The first line of rank 0's comparison block, in ``lang``."""
    return f"[rank 0] {i18n.text(Text('real.check_title'), lang)}"


def format_check(check: list[tuple[Any, Any]], lang: str = i18n.DEFAULT_LANG) -> list[str]:
    """Rank 0's comparison block."""
    if not check:
        return []
    return [check_title(lang)] + format_rank(0, [("  " + i18n.text(n, lang), v) for n, v in check], lang=lang)


def format_output(per_rank: list, check: list, lang: str = i18n.DEFAULT_LANG) -> str:
    """The whole output of a run: every rank's records in rank order, then the check."""
    lines = [line for r, recs in enumerate(per_rank) for line in format_rank(r, recs, lang=lang)]
    return "\n".join(lines + format_check(check, lang))


def records_json(r: int, records: list[tuple[Any, Any]], check: list | None = None,
                 lang: str = i18n.DEFAULT_LANG) -> str:
    """One JSON line per rank (``--json``): full-precision values, ±inf written as strings
    (names and text values in ``lang``)."""
    def plain(v: Any) -> Any:
        if isinstance(v, (str, dict)):
            return i18n.text(v, lang)
        arr = np.asarray(v, dtype=np.float64)
        out = arr.tolist()
        return _nonfinite_to_str(out)
    obj = {"rank": r, "records": [[i18n.text(n, lang), plain(v)] for n, v in records]}
    if check is not None:
        obj["check"] = [[i18n.text(n, lang), plain(v)] for n, v in check]
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


def _nonfinite_to_str(x: Any) -> Any:
    if isinstance(x, list):
        return [_nonfinite_to_str(v) for v in x]
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf" if x < 0 else "nan")
