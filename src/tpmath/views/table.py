"""A view's table record as an element tree: the one place a table becomes markup.

A view returns each table as a record, ``{"caption", "columns", "rows", "foot"}``
(:func:`tpmath.views.cells.table`).  :func:`trees` turns a result's records into element trees
(ARCHITECTURE.md, "Element trees"), which the builder serialises like a figure and the page's
js/tree.js morphs into the page like a figure: the static table and the live one cannot differ.
The tree is the whole ``div.table-wrap`` (a named, focusable region: a wide table scrolls
inside it, from the keyboard too)::

    div.table-wrap[role=region][tabindex=0][aria-labelledby=cap-SECTION-NAME]
      table[data-table=NAME]
        caption#cap-SECTION-NAME    (the record's caption: an i18n key or a cell)
        thead > tr > th[scope=col]  (the columns: i18n keys or cells)
        tbody > tr > th[scope=row], td…   (rows: the first cell heads its row)
        tfoot > tr > …              (only when the record has foot rows)

A body cell is a formatted string, a translation cell (prose: ``td.prose``, set in the text
font) or ``{"el": node}`` (a grid, a rank tag: the node is the cell's content).
"""

from __future__ import annotations

from typing import Any


def trees(section: Any, result: dict) -> dict:
    """``{name: tree}`` of ``result``'s tables, in the section's page order (``section.tables``),
    then any others in the result's order."""
    tables = result.get("tables", {})
    order = [n for n in section.tables if n in tables] + [n for n in tables if n not in section.tables]
    return {name: table_tree(section.name, name, tables[name]) for name in order}


def table_tree(section: str, name: str, spec: dict) -> dict:
    """The element tree of one table record (see the module docstring)."""
    caption = spec.get("caption")
    wrap = {"class": "table-wrap", "role": "region", "tabindex": "0"}
    parts = []
    if caption is not None:
        cap_id = f"cap-{section}-{name}"
        wrap["aria-labelledby"] = cap_id
        parts.append({"t": "caption", "a": {"id": cap_id}, "x": _key_cell(caption)})
    head = [{"t": "th", "a": _COL, "x": _key_cell(c)} for c in spec.get("columns", [])]
    parts.append({"t": "thead", "c": [_node("tr", head)]})
    parts.append(_node("tbody", [_row(r) for r in spec.get("rows", [])]))
    if spec.get("foot"):
        parts.append(_node("tfoot", [_row(r) for r in spec["foot"]]))
    return {"t": "div", "a": wrap, "c": [{"t": "table", "a": {"data-table": name}, "c": parts}]}


_COL = {"scope": "col"}
_ROW = {"scope": "row"}
_PROSE = {"class": "prose"}


def _node(tag: str, kids: list) -> dict:
    return {"t": tag, "c": kids} if kids else {"t": tag}


def _key_cell(cell: Any) -> Any:
    """A caption or column header: a plain string is an i18n key, a dict a cell."""
    return {"key": cell} if isinstance(cell, str) else cell


def _row(row: list) -> dict:
    return {"t": "tr", "c": [_cell(value, j == 0) for j, value in enumerate(row)]}


def _cell(value: Any, header: bool) -> dict:
    """One body/foot cell: the row's header (``th``) or a ``td`` (prose when translated)."""
    node: dict = {"t": "th", "a": _ROW} if header else {"t": "td"}
    if isinstance(value, dict) and "el" in value:
        node["c"] = [value["el"]]
        return node
    if not header and isinstance(value, dict) and "key" in value:
        node["a"] = _PROSE
    node["x"] = "" if value is None else value
    return node
