"""Turn core results (dataclasses / dicts of numpy arrays) into JSON-ready values."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .i18n import Text, text
from .record import fields_of


def to_jsonable(obj: Any, lang: str | None = None) -> Any:
    """Recursively convert numpy arrays/scalars and dataclasses to plain Python.

    Non-finite floats become ``None`` (JSON has no NaN) so a bug shows up as a
    visible ``null`` instead of invalid JSON.  With ``lang``, every translation cell
    (:class:`~tpmath.i18n.Text`) becomes its text in that language (the command line);
    without, it stays a cell (the page translates it).
    """
    if lang is not None and isinstance(obj, Text):
        return text(obj, lang)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        # A result record is the JSON object of its fields, in declaration order: the keys and
        # their order are those of the dicts the core returned before it had records.
        return {name: to_jsonable(value, lang) for name, value in fields_of(obj).items()}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, lang) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, lang) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist(), lang)
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        value = float(obj)
        return value if math.isfinite(value) else None
    if isinstance(obj, np.dtype):
        return obj.name
    return obj
