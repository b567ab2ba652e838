"""The pieces every view builds its result from (one dialect for all view modules).

Translated cells (:func:`label`, a ``{"key": …, "args": …}`` cell), rank labels and tables,
as described in :mod:`tpmath.views`.  Numbers are formatted only through :mod:`tpmath.fmt`.
"""

from __future__ import annotations

from typing import Any, Sequence

from .. import fmt
from ..i18n import Text


def label(key: str, **args: Any) -> Text:
    """A cell whose text is the i18n string ``key`` with ``{name}`` placeholders filled."""
    return Text(key, **args)


def rank(r: int) -> str:
    """Row header of rank ``r``: R0, R1, … (language-neutral)."""
    return "R" + fmt.integer(r)


def table(caption: str, columns: Sequence[str], rows: list, foot: list | None = None) -> dict:
    """One table of a view result (caption and columns are i18n keys)."""
    return {"caption": caption, "columns": list(columns), "rows": rows, "foot": foot or []}


def int_range(lo: int, hi: int) -> tuple[str, ...]:
    """Select options lo..hi as strings (how the page sends them)."""
    return tuple(str(i) for i in range(lo, hi + 1))


def id_range(a: int, b: int) -> str:
    """A half-open id range ``[a, b)`` written as ``a–b−1`` (inclusive), e.g. 0–2."""
    if b - a == 1:
        return fmt.integer(a)
    return f"{fmt.integer(a)}–{fmt.integer(b - 1)}"
