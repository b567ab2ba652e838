"""Core results are frozen dataclasses, one per result kind; this is what their readers share."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

# Field metadata of a key the result has only in some runs (e.g. a label-smoothing term):
# ``None`` there means "absent", so the field is left out of :func:`fields_of` (and the JSON)
# instead of showing as ``null``.
OMIT_IF_NONE = {"omit_if_none": True}


def fields_of(record: Any) -> dict[str, Any]:
    """A result's fields as a shallow dict, in declaration order (the JSON key order), without
    absent optional ones (:data:`OMIT_IF_NONE`); a dict is returned as it is."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        out = {}
        for f in dataclasses.fields(record):
            value = getattr(record, f.name)
            if value is None and f.metadata.get("omit_if_none"):
                continue
            out[f.name] = value
        return out
    return record


@dataclass(frozen=True, eq=False)
class CommStep:
    """One communication of a run: its phase, the collective (``none`` = nothing to send) and
    the elements each rank contributes."""
    phase: str                  # forward / backward
    collective: str             # e.g. ``all-reduce``, ``all-reduce (max)``, ``none``
    elements: int
