"""Reading table cells as a reader sees them (views.tree grids and rank tags).

A matrix in a table is a grid cell ``{"el": <table class="grid">}`` and a rank row header a
rank tag ``{"el": <span class="rank-tag">}`` (ARCHITECTURE.md, "Element trees").  The tests
compare what those cells *show* -- the numbers of the grid as printed, the tag's label -- with
numbers they compute themselves, and check which rank tints the cell.  The same functions read
cells that the browser tests turn back from the DOM into the same tree shape.
"""

from __future__ import annotations

import numpy as np

from tpmath import fmt


def _classes(node: dict) -> list[str]:
    return node.get("a", {}).get("class", "").split()


def shown(cell):
    """What a cell shows: a grid's numbers (rows of strings, as printed), a rank tag's label
    ("R0"), a rank stack's rows ``[("R0", [numbers]), …]``; any other cell unchanged.

    Checks on the way that a tag's tint is its own rank and a stack row's tint is its tag's."""
    if not (isinstance(cell, dict) and "el" in cell):
        return cell
    node = cell["el"]
    cls = _classes(node)
    if node["t"] == "span" and "rank-tag" in cls:
        assert node["x"] == "R" + node["a"]["data-rank"], node
        return node["x"]
    assert node["t"] == "table" and "grid" in cls and node["a"].get("role") == "presentation", node
    (body,) = node["c"]
    assert body["t"] == "tbody"
    rows = body["c"]
    if "stack" in cls:
        out = []
        for tr in rows:
            tag = shown({"el": tr["c"][0]["c"][0]})
            assert tr["a"]["data-rank"] == tag[1:] and "rk" in _classes(tr), tr
            out.append((tag, [td["x"] for td in tr["c"][1:]]))
        return out
    return [[td["x"] for td in tr["c"]] for tr in rows]


def tint(cell) -> int | None:
    """The rank whose palette colour a grid or tag carries; None for an untinted (replicated,
    merged) grid."""
    a = cell["el"]["a"]
    if "rep" in a["class"].split():
        assert "data-rank" not in a and "rk" not in a["class"].split(), a
        return None
    assert "rk" in a["class"].split(), a
    return int(a["data-rank"])


def printed(m) -> list[list[str]]:
    """A reference matrix (or vector, as one row) printed by the site's one number rule."""
    a = np.asarray(m, dtype=np.float64)
    a = a.reshape(1, -1) if a.ndim < 2 else a
    return [[fmt.num(x) for x in row] for row in a]


def numbers(cell) -> np.ndarray:
    """A grid cell's numbers back as floats (typographic minus, ∞)."""
    return np.array([[float(x.replace("\u2212", "-").replace("∞", "inf")) for x in row] for row in shown(cell)])


def rank_row(r: int, *mats) -> list:
    """A table row as shown when rank r owns every matrix in it: its tag, then the grids."""
    return ["R" + fmt.integer(r)] + [printed(m) for m in mats]


def text_rows(text: str) -> list[list[str]]:
    """A matrix or vector as ranks print it (fmt.mat / fmt.vec: ``[[a, b],\\n [c, d]]``) as the
    rows of number strings a grid shows, so terminal output and table compare number by number."""
    return [line.strip().strip("[],").split(", ") for line in text.split("\n")]
