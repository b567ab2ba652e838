"""View functions: turn core results into the rows of each table on the site.

The same functions run at build time (CPython, rendered by Jinja) and in the
browser (Pyodide, in a Web Worker), so static and live tables cannot disagree.
Nothing here imports jinja2 or markdown.

A *section* is one interactive demo on a page (``mlp``, ``vocab-ce`` …).  Each
view module declares ``SECTIONS: dict[str, Section]``.  :func:`render` merges a
section's control defaults with the given control values, validates them (bad
values raise :class:`~tpmath.TPMathError` whose ``field`` names the control)
and returns a JSON-ready result::

    {"section": "mlp",
     "controls": {"stage": "forward", "tp": 2},          # normalised values
     "tables": {"mlp-ranks": {"caption": "cap.mlp_ranks",   # i18n key
                              "columns": ["col.rank", ...],  # i18n keys
                              "rows": [[cell, ...], ...],
                              "foot": [[cell, ...], ...]}},
     "values": {"loss": "0.7384", ...},                  # formatted strings
     "notes": {"name": cell},                            # optional dynamic sentences
     "control_state": {"op": {"disabled": True, "why": cell}},   # optional, see ARCHITECTURE.md
     "real": [{"command": "torchrun …", "output": "[rank 0] …"}]}   # optional, see below

``real`` (sections that declare ``Section.real``): the command that runs the same example on
real processes (``python -m tpmath.real``) and what every rank prints, computed here by
:func:`tpmath.ranks.expected_output` from the core, so it follows the controls.

A cell is either a formatted string (shown verbatim) or ``{"key": "i18n.key",
"args": {...}}`` for text that must be translated (row labels and sentences).
All numbers are formatted with :mod:`tpmath.fmt`.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .. import ranks
from . import table
from ..errors import TPMathError
from ..errors import name as field_name
from ..i18n import joined, option
from ..validate import as_float, as_int

# Which module defines each section, so a render imports only the module it needs (in the
# browser, importing every view module at boot costs a noticeable part of a second).  Written
# out, not discovered: tests/test_cli_main.py checks it against every module's SECTIONS.
SECTION_MODULES = {
    "attention": "attention", "layer": "attention", "qkv-layout": "attention",
    "backward": "backward", "dp-tp": "backward", "precision": "backward",
    "collectives": "collectives", "mismatch": "collectives", "ring": "collectives",
    "comm-cost": "comm_cost",
    "mlp": "mlp",
    "row-linear": "row_linear", "row-backward": "row_linear", "row-pairing": "row_linear",
    "sp-layer": "sp_layer", "memory": "sp_layer", "dropout": "sp_layer",
    "vocab-ce": "vocab_ce", "vocab-extras": "vocab_ce", "vocab-head": "vocab_ce",
}
VIEW_MODULES = tuple(sorted(set(SECTION_MODULES.values())))


@dataclass(frozen=True)
class Control:
    """One form control of a section (rendered as <select> or <input>)."""

    name: str                      # form element name, also the URL query key
    kind: str                      # "select" | "number" (Control.parse types the value)
    default: Any
    options: tuple = ()            # select: allowed values (as strings in the page)
    min: float | None = None       # number: bounds shown to the reader
    max: float | None = None
    step: float | str | None = None
    label: str = ""                # i18n key; defaults to "ctl.<name>"
    # A range slider beside the control, for values a reader scrubs: True (a select's options in
    # order, or a number on min…max), "log" (a number on powers of two: sizes spanning decades),
    # "symlog" (a signed number spanning decades either side of 0).  The page keeps ``name`` on the
    # control itself (the exact-entry box); the slider is an extra, unnamed input.
    slider: bool | str = False

    @property
    def label_key(self) -> str:
        return self.label or f"ctl.{self.name.replace('-', '_')}"

    @property
    def int_options(self) -> tuple[int, ...] | None:
        """A select's options as integers when every one is an integer (1, "2" …), else None."""
        if self.kind != "select" or not all(_is_int_text(o) for o in self.options):
            return None
        return tuple(int(o) for o in self.options)

    def parse(self, value: Any) -> Any:
        """The page's ``value`` of this control, typed and checked against this record's own
        options or min/max (the bounds the page shows, so the two cannot drift).

        A select of integers gives an int among its options, any other select one of its
        strings, a number an int (integer step) or a float, within min…max.  A bad value raises
        :class:`~tpmath.TPMathError` with ``field`` = the control's name.
        """
        if self.kind == "select":
            ints = self.int_options
            if ints is None:
                if isinstance(value, str) and value in self.options:
                    return value
                # the page's message lists the choices by their labels, never their keys
                raise TPMathError("not_choice", self.name, name=field_name(self.name), value=value,
                                  choices=joined([option(self.name, o) for o in self.options]))
            v = as_int(self.name, value)
            if v not in ints:
                raise TPMathError("not_choice", self.name, name=field_name(self.name), value=v,
                                  choices=", ".join(str(o) for o in self.options))
            return v
        if self.kind == "number":
            integral = isinstance(self.step, int) and not isinstance(self.step, bool)
            return (as_int if integral else as_float)(self.name, value, self.min, self.max)
        raise TypeError(f"control {self.name!r}: no parser for kind {self.kind!r}")


def _is_int_text(option: Any) -> bool:
    """An int, or a string that is an int written plainly ("4", not "04" or "0.1")."""
    if isinstance(option, bool):
        return False
    if isinstance(option, int):
        return True
    return isinstance(option, str) and option.lstrip("-").isdigit() and str(int(option)) == option


def parse_controls(controls: Sequence[Control], raw: dict | None) -> dict:
    """``{name: typed value}`` of ``controls`` from the page's ``raw`` values (:meth:`Control.parse`),
    in declaration order; a missing value is the control's default.  Rules between controls
    (a size one divides, a value another one clamps) stay in the view, after this."""
    raw = raw or {}
    return {c.name: c.parse(raw[c.name] if c.name in raw else c.default) for c in controls}


@dataclass(frozen=True)
class Section:
    """A demo: its controls and the function that renders them."""

    name: str
    controls: tuple[Control, ...]
    render: Callable[[dict, str], dict]
    tables: tuple[str, ...] = field(default=())   # data-table names it produces, in page order
    values: tuple[str, ...] = field(default=())   # data-value names it produces
    # normalised controls -> [(tpmath.real example, its options)] run on real ranks
    real: Callable[[dict], list[tuple[str, dict]]] | None = None


def sections() -> dict[str, Section]:
    """All sections of all view modules, by name."""
    out: dict[str, Section] = {}
    for mod_name in VIEW_MODULES:
        mod = importlib.import_module(f".{mod_name}", __name__)
        for name, sec in getattr(mod, "SECTIONS", {}).items():
            if name in out:
                raise RuntimeError(f"section {name!r} defined twice")
            if SECTION_MODULES.get(name) != mod_name:
                raise RuntimeError(f"section {name!r} of views/{mod_name}.py: SECTION_MODULES says "
                                   f"{SECTION_MODULES.get(name)!r}")
            out[name] = sec
    if set(out) != set(SECTION_MODULES):
        raise RuntimeError(f"SECTION_MODULES lists sections no module defines: {set(SECTION_MODULES) - set(out)}")
    return out


def defaults(section: str) -> dict:
    """Default control values of ``section``."""
    return {c.name: c.default for c in _section(section).controls}


def _section(name: str) -> Section:
    """The section ``name``, importing only the module that defines it."""
    mod_name = SECTION_MODULES.get(name) if isinstance(name, str) else None
    if mod_name is None:
        raise TPMathError("unknown_section", value=name, choices=", ".join(sorted(SECTION_MODULES)))
    return importlib.import_module(f".{mod_name}", __name__).SECTIONS[name]


def render(section: str, controls: dict | None = None, lang: str = "en") -> dict:
    """Render ``section`` for the given control values (missing ones take defaults)."""
    sec = _section(section)
    values = {c.name: c.default for c in sec.controls}
    for key, value in (controls or {}).items():
        if key in values:
            values[key] = value
    with np.errstate(all="ignore"):   # overflow is checked by the core and raised as TPMathError
        result = sec.render(values, lang)
    result.setdefault("tables", {})
    result.setdefault("values", {})
    result.setdefault("notes", {})
    result["section"] = section
    result.setdefault("controls", values)
    if sec.real is not None and not result.get("stale", {}).get("real"):
        with np.errstate(all="ignore"):
            result["real"] = [ranks.expected_output(example, given, lang)
                              for example, given in sec.real(result["controls"])]
    return result


def render_json(section: str, controls_json: str, lang: str) -> str:
    """Worker entry point: JSON in, JSON out; a TPMathError becomes ``{"ok": false}``.  The
    tables go as element trees (``views.table``: the page morphs them in like figures)."""
    try:
        controls = json.loads(controls_json)
        result = render(section, controls, lang)
        result["tables"] = table.trees(_section(section), result)
        return json.dumps({"ok": True, "result": result}, ensure_ascii=False)
    except TPMathError as err:
        out = {"ok": False, "error": err.cell, "field": err.field}
        state = getattr(err, "control_state", None)   # a view's control state for the refused values
        if state is not None:
            out["control_state"] = state
        return json.dumps(out, ensure_ascii=False)
