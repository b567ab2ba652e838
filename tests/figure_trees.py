"""Reading a figure back from its element tree, for the tests of the figure modules
(tests/test_fig_<topic>.py): texts and shapes carry ``data-key`` names (``p.3``, ``Yr.1.0.2`` …),
so a test finds the number or the bar that stands for a quantity and compares it with what it
computes itself; bars are checked for being proportional to what they stand for (one px-per-unit
ratio per chart), figures for the ranks they draw."""

from __future__ import annotations

import math

from tpmath.views import tree


def num(s: str) -> float:
    """A number as the site writes it (typographic minus, thin-space groups, ∞)."""
    s = s.replace("\u2212", "-").replace("\u2009", "").replace("\u202f", "").replace(" ms", "")
    return -math.inf if s == "-∞" else float(s)


def svgs(fig: dict) -> list[dict]:
    return [c for c in fig["c"] if c["t"] == "svg"]


def keyed(svg: dict) -> dict[str, dict]:
    """data-key -> node of one drawing (keys are unique within a drawing)."""
    out = {}
    for node in tree.walk(svg):
        k = node.get("a", {}).get("data-key")
        if k is not None:
            assert k not in out, f"data-key {k} twice in one drawing"
            out[k] = node
    return out


def texts(svg: dict, prefix: str) -> dict[str, str]:
    return {k[len(prefix):]: v["x"] for k, v in keyed(svg).items() if k.startswith(prefix) and v["t"] == "text"}


def ranks(fig: dict) -> set[int]:
    return {int(node["a"]["data-rank"]) for node in tree.walk(fig) if "data-rank" in node.get("a", {})}


def size(node: dict, dim: str) -> float:
    return float(node["a"][dim])


def proportional(pairs: list[tuple[float, float]], tol: float = 0.11) -> float:
    """Every (length in px, value) pair has the same px-per-unit ratio (lengths are rounded to
    0.1 px in the tree, hence the absolute tolerance); returns the ratio."""
    pairs = [(px, v) for px, v in pairs if abs(v) > 1e-12]
    assert pairs
    ratio = max(pairs, key=lambda p: abs(p[1]))
    unit = ratio[0] / abs(ratio[1])
    for px, v in pairs:
        assert abs(px - unit * abs(v)) <= tol, (px, v, unit)
    return unit


def same_content(fig: dict) -> None:
    """The desktop and the phone drawing of a figure show the same keyed numbers."""
    drawings = svgs(fig)
    if len(drawings) == 2:
        a = {k: n.get("x") for k, n in keyed(drawings[0]).items()}
        b = {k: n.get("x") for k, n in keyed(drawings[1]).items()}
        assert a == b


def moves(svg: dict, part: str, tp: int) -> None:
    """A collective drawn as movement (draw.collective_flow, data-part ``part``): an arrow from
    every rank into the reduction node, tinted by that rank (the data on it is the rank's), and one
    out to every rank, under and over that rank's named buffers; and nothing more."""
    from tpmath.views import tree
    flows = [n for n in tree.walk(svg) if n.get("a", {}).get("data-part") == part]
    assert len(flows) == 1, f"{part}: {len(flows)} drawn"
    named = {n["a"]["data-part"]: n for n in tree.walk(flows[0]) if "data-part" in n.get("a", {})}
    for side in ("send", "recv", "src", "dst"):
        assert {k for k in named if k.startswith(f"{part}.{side}.")} == {f"{part}.{side}.{r}" for r in range(tp)}
    for r in range(tp):
        shapes = [n for n in tree.walk(named[f"{part}.send.{r}"]) if n["t"] in ("line", "polygon")]
        assert len(shapes) == 2 and all(n["a"].get("data-rank") == str(r) for n in shapes), (part, r)
        shapes = [n for n in tree.walk(named[f"{part}.recv.{r}"]) if n["t"] in ("line", "polygon")]
        assert len(shapes) == 2 and all("fin" in n["a"]["class"].split() for n in shapes), (part, r)
        for side in ("src", "dst"):
            assert [n["x"] for n in tree.walk(named[f"{part}.{side}.{r}"]) if n["t"] == "text"] == [f"R{r}"]
