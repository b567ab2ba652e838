"""Validation first: turn user input into clean numpy values or raise TPMathError.

Every public entry point of the core calls these before computing anything, so
a bad value is reported once, by name, with the value quoted, and never turns
into a traceback or a silent NaN further down.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

import numpy as np

from . import fmt
from .errors import TPMathError, name as field_name
from .record import fields_of

DTYPES = ("float64", "float32", "float16")


def _err(code: str, field: str, label: Any = None, **args: Any) -> TPMathError:
    """A TPMathError about input ``field``, whose message calls it ``label`` (default its name)."""
    return TPMathError(code, field, name=field_name(field) if label is None else label, **args)


def parse_json(name: str, text: Any, label: Any = None) -> Any:
    """Parse a JSON string (CLI / browser input); non-strings pass through."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _err("not_json", name, label, value=text, pos=exc.pos, detail=exc.msg) from None


def as_array(name: str, value: Any, ndim: int | Sequence[int] = 2, *, allow_nonfinite: bool = False,
             label: Any = None) -> np.ndarray:
    """A finite float64 array with ``ndim`` dimensions (int or tuple of allowed ints).

    Accepts nested lists, numpy arrays or a JSON string.  Ragged rows, strings,
    booleans, empty arrays, NaN and inf are rejected with the offending value quoted.
    ``label`` is how messages call the input (a cell; default ``name.<name>``).
    """
    value = parse_json(name, value, label)
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, (str, bytes, dict)):
        raise _err("not_matrix", name, label, value=value)
    try:
        arr = np.array(value, dtype=object)
    except ValueError:
        arr = None
    if arr is None or (arr.dtype == object and arr.ndim > 0 and _is_ragged(value)):
        raise _err("ragged", name, label, value=value)
    flat = arr.ravel().tolist() if arr.ndim else [arr.item()]
    for item in flat:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, float, np.integer, np.floating)):
            raise _err("not_a_number_entry", name, label, value=repr(item))
    out = np.asarray(arr.tolist() if arr.ndim else arr.item(), dtype=np.float64)
    if out.size == 0:
        raise _err("empty_array", name, label, shape=fmt.shape(out.shape))
    if out.ndim not in allowed:
        raise _err("wrong_ndim", name, label, want="/".join(f"{d}-D" for d in allowed),
                   shape=fmt.shape(out.shape))
    if not allow_nonfinite and not np.all(np.isfinite(out)):
        raise _err("not_finite_entry", name, label, value=out[~np.isfinite(out)].ravel()[0])
    return out


def _is_ragged(value: Any) -> bool:
    """True if nested lists have inconsistent lengths at some level."""
    if not isinstance(value, (list, tuple)):
        return False
    kinds = {isinstance(v, (list, tuple)) for v in value}
    if len(kinds) > 1:
        return True
    if kinds == {True}:
        if len({len(v) for v in value}) > 1:
            return True
        return any(_is_ragged(v) for v in value)
    return False


def _check_range(name: str, value: Any, shown: Any, lo: Any, hi: Any) -> None:
    """Raise unless lo <= value <= hi (a bound of None is open); the message quotes ``shown``."""
    if lo is not None and value < lo or hi is not None and value > hi:
        if lo is not None and hi is not None:
            raise _err("range", name, value=shown, lo=fmt.bound(lo), hi=fmt.bound(hi))
        if lo is not None:
            raise _err("too_small", name, value=shown, lo=fmt.bound(lo))
        raise _err("too_large", name, value=shown, hi=fmt.bound(hi))


def as_int(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """An integer in [lo, hi]; accepts ints, integral floats and numeric strings."""
    if isinstance(value, (bool, np.bool_)):
        raise _err("not_integer", name, value=value)
    shown = value.strip() if isinstance(value, str) else value   # as typed, for messages
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            raise _err("empty_integer", name)
        try:
            value = float(text) if any(c in text for c in ".eEnNiI") else int(text)
        except ValueError:
            raise _err("not_integer", name, value=text) from None
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value) or value != int(value):
            raise _err("not_integer", name, value=shown)
        value = int(value)
    if not isinstance(value, (int, np.integer)):
        raise _err("not_integer", name, value=value)
    value = int(value)
    _check_range(name, value, shown, lo, hi)
    return value


def as_float(name: str, value: Any, lo: float | None = None, hi: float | None = None) -> float:
    """A finite float in [lo, hi]; accepts numbers and numeric strings."""
    if isinstance(value, (bool, np.bool_)) or value is None:
        raise _err("not_number", name, value=value)
    shown = value.strip() if isinstance(value, str) else value   # as typed, for messages
    if isinstance(value, str):
        if shown == "":
            raise _err("empty_number", name)
        try:
            value = float(shown)
        except ValueError:
            raise _err("not_number", name, value=shown) from None
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise _err("not_number", name, value=value)
    value = float(value)
    if not math.isfinite(value):
        raise _err("not_finite", name, value=shown)
    _check_range(name, value, shown, lo, hi)
    return value


def as_flag(name: str, value: Any) -> bool:
    """A yes/no option: a bool, None (no), or 1/0/true/false/yes/no/on/off as typed."""
    if isinstance(value, (bool, np.bool_)) or value is None:
        return bool(value)
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise _err("not_flag", name, value=value)


def as_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """One of ``choices`` (exact string match)."""
    if not isinstance(value, str) or value not in choices:
        raise _err("not_choice", name, value=value, choices=", ".join(str(c) for c in choices))
    return value


def as_dtype(name: str, value: Any) -> np.dtype:
    """float64 / float32 / float16 as a numpy dtype."""
    if isinstance(value, np.dtype):
        value = value.name
    return np.dtype(as_choice(name, value, DTYPES))


def check_divides(tp: int, size: int, tp_name: str = "tp", size_name: str = "d_ff") -> None:
    """Raise unless ``tp`` divides ``size`` (even shards, as Megatron requires); the field at
    fault is ``tp_name``."""
    if size % tp != 0:
        raise TPMathError("not_divides", tp_name, tp_name=tp_name, tp=tp, size_name=size_name, size=size)


def check_shape(name: str, arr: np.ndarray, shape: tuple) -> None:
    """Raise unless ``arr.shape == shape``; None in ``shape`` matches any size."""
    ok = arr.ndim == len(shape) and all(s is None or s == a for s, a in zip(shape, arr.shape))
    if not ok:
        raise _err("wrong_shape", name, want=fmt.shape(shape), shape=fmt.shape(arr.shape))


def check_finite(dtype_name: str, *results: Any, field: str | None = "dtype") -> None:
    """Raise if any array in ``results`` (dicts or result records) overflowed (inf/NaN) when computed in ``dtype_name``.

    Inputs are validated finite, but products of large finite inputs can still
    overflow (float16 above 65504, float64 above 1.8e308); a shown number must
    never be inf or NaN, so the overflow is reported instead.
    """
    for res in results:
        for key, val in fields_of(res).items():
            if val is None:
                continue
            arr = np.asarray(val)
            if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
                bad = arr[~np.isfinite(arr)].ravel()[0]
                raise TPMathError("overflow", field, quantity=key, dtype=dtype_name, value=bad)
