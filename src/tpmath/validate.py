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

from .errors import TPMathError

DTYPES = ("float64", "float32", "float16")


def _err(name: str, en: str, zh: str) -> TPMathError:
    """A TPMathError that remembers which input (``name``) was bad."""
    return TPMathError(en, zh, field=name)


def _short(value: Any, limit: int = 60) -> str:
    """repr() of a value, cut to ``limit`` characters for one-line messages."""
    text = repr(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_json(name: str, text: Any) -> Any:
    """Parse a JSON string (CLI / browser input); non-strings pass through."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _err(name, 
            f"{name}: not valid JSON ({exc.msg} at character {exc.pos}): {_short(text)}",
            f"{name}：不是合法的 JSON（第 {exc.pos} 个字符处 {exc.msg}）：{_short(text)}",
        ) from None


def as_array(name: str, value: Any, ndim: int | Sequence[int] = 2, *, allow_nonfinite: bool = False) -> np.ndarray:
    """A finite float64 array with ``ndim`` dimensions (int or tuple of allowed ints).

    Accepts nested lists, numpy arrays or a JSON string.  Ragged rows, strings,
    booleans, empty arrays, NaN and inf are rejected with the offending value quoted.
    """
    value = parse_json(name, value)
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, (str, bytes, dict)):
        raise _err(name, f"{name}: expected a numeric matrix, got {_short(value)}",
                          f"{name}：需要数值矩阵，收到 {_short(value)}")
    try:
        arr = np.array(value, dtype=object)
    except ValueError:
        arr = None
    if arr is None or (arr.dtype == object and arr.ndim > 0 and _is_ragged(value)):
        raise _err(name, f"{name}: rows have different lengths (ragged): {_short(value)}",
                          f"{name}：各行长度不一致：{_short(value)}")
    flat = arr.ravel().tolist() if arr.ndim else [arr.item()]
    for item in flat:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, float, np.integer, np.floating)):
            raise _err(name, f"{name}: entry {_short(item)} is not a number",
                              f"{name}：元素 {_short(item)} 不是数字")
    out = np.asarray(arr.tolist() if arr.ndim else arr.item(), dtype=np.float64)
    if out.size == 0:
        raise _err(name, f"{name}: is empty (shape {out.shape})", f"{name}：为空（形状 {out.shape}）")
    if out.ndim not in allowed:
        want = " or ".join(f"{d}-D" for d in allowed)
        raise _err(name, f"{name}: expected a {want} array, got shape {out.shape}",
                          f"{name}：需要 {want} 数组，收到形状 {out.shape}")
    if not allow_nonfinite and not np.all(np.isfinite(out)):
        bad = out[~np.isfinite(out)].ravel()[0]
        raise _err(name, f"{name}: contains a non-finite value ({bad})",
                          f"{name}：含有非有限值（{bad}）")
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


def as_int(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """An integer in [lo, hi]; accepts ints, integral floats and numeric strings."""
    if isinstance(value, (bool, np.bool_)):
        raise _err(name, f"{name}: expected an integer, got {_short(value)}",
                          f"{name}：需要整数，收到 {_short(value)}")
    shown = value.strip() if isinstance(value, str) else value   # as typed, for messages
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            raise _err(name, f"{name}: is empty; enter an integer", f"{name}：为空，请输入整数")
        try:
            value = float(text) if any(c in text for c in ".eEnNiI") else int(text)
        except ValueError:
            raise _err(name, f"{name}: {_short(text)} is not an integer",
                              f"{name}：{_short(text)} 不是整数") from None
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value) or value != int(value):
            raise _err(name, f"{name}: {value!r} is not an integer", f"{name}：{value!r} 不是整数")
        value = int(value)
    if not isinstance(value, (int, np.integer)):
        raise _err(name, f"{name}: expected an integer, got {_short(value)}",
                          f"{name}：需要整数，收到 {_short(value)}")
    value = int(value)
    if lo is not None and value < lo or hi is not None and value > hi:
        rng = f"[{lo if lo is not None else '-∞'}, {hi if hi is not None else '∞'}]"
        raise _err(name, f"{name}={shown} is out of range {rng}", f"{name}={shown} 超出范围 {rng}")
    return value


def as_float(name: str, value: Any, lo: float | None = None, hi: float | None = None) -> float:
    """A finite float in [lo, hi]; accepts numbers and numeric strings."""
    if isinstance(value, (bool, np.bool_)) or value is None:
        raise _err(name, f"{name}: expected a number, got {_short(value)}",
                          f"{name}：需要数字，收到 {_short(value)}")
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            raise _err(name, f"{name}: is empty; enter a number", f"{name}：为空，请输入数字")
        try:
            value = float(text)
        except ValueError:
            raise _err(name, f"{name}: {_short(text)} is not a number",
                              f"{name}：{_short(text)} 不是数字") from None
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise _err(name, f"{name}: expected a number, got {_short(value)}",
                          f"{name}：需要数字，收到 {_short(value)}")
    value = float(value)
    if not math.isfinite(value):
        raise _err(name, f"{name}: {value!r} is not a finite number", f"{name}：{value!r} 不是有限数")
    if lo is not None and value < lo or hi is not None and value > hi:
        rng = f"[{lo if lo is not None else '-∞'}, {hi if hi is not None else '∞'}]"
        raise _err(name, f"{name}={value!r} is out of range {rng}", f"{name}={value!r} 超出范围 {rng}")
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
    raise _err(name, f"{name}: {_short(value)} is not one of true, false, 1, 0",
                      f"{name}：{_short(value)} 不是 true、false、1、0 之一")


def as_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """One of ``choices`` (exact string match)."""
    if not isinstance(value, str) or value not in choices:
        raise _err(name, f"{name}: {_short(value)} is not one of {', '.join(choices)}",
                          f"{name}：{_short(value)} 不在可选值 {', '.join(choices)} 中")
    return value


def as_dtype(name: str, value: Any) -> np.dtype:
    """float64 / float32 / float16 as a numpy dtype."""
    if isinstance(value, np.dtype):
        value = value.name
    return np.dtype(as_choice(name, value, DTYPES))


def check_divides(tp: int, size: int, tp_name: str = "tp", size_name: str = "d_ff") -> None:
    """Raise unless ``tp`` divides ``size`` (even shards, as Megatron requires)."""
    if size % tp != 0:
        raise _err(tp_name,
            f"{tp_name}={tp} does not divide {size_name}={size}: shards must be equal",
            f"{tp_name}={tp} 不能整除 {size_name}={size}：各分片必须等大",
        )


def check_shape(name: str, arr: np.ndarray, shape: tuple, zh_hint: str = "") -> None:
    """Raise unless ``arr.shape == shape``; None in ``shape`` matches any size."""
    ok = arr.ndim == len(shape) and all(s is None or s == a for s, a in zip(shape, arr.shape))
    if not ok:
        want = "(" + ", ".join("·" if s is None else str(s) for s in shape) + ")"
        raise _err(name, f"{name}: expected shape {want}, got {arr.shape}",
                          f"{name}：形状应为 {want}，实际为 {arr.shape}")


def check_finite(dtype_name: str, *results: dict, field: str | None = "dtype") -> None:
    """Raise if any array in ``results`` overflowed (inf/NaN) when computed in ``dtype_name``.

    Inputs are validated finite, but products of large finite inputs can still
    overflow (float16 above 65504, float64 above 1.8e308); a shown number must
    never be inf or NaN, so the overflow is reported instead.
    """
    for res in results:
        for key, val in res.items():
            if val is None:
                continue
            arr = np.asarray(val)
            if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
                bad = arr[~np.isfinite(arr)].ravel()[0]
                raise TPMathError(
                    f"{key} overflows in {dtype_name} (a value is {bad}); use smaller inputs or a wider dtype",
                    f"{key} 在 {dtype_name} 下溢出（出现 {bad}）；请用更小的输入或更宽的 dtype",
                    field=field)
