"""Core results are frozen dataclasses, one per result kind; this is what their readers share."""

from __future__ import annotations

import dataclasses
from typing import Any


def fields_of(record: Any) -> dict[str, Any]:
    """A result's fields as a shallow dict, in declaration order (the JSON key order);
    a dict is returned as it is."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    return record
