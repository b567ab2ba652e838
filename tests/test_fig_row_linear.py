"""The row-linear, row-backward and row-pairing figures (views/fig_row_linear.py) against independent numpy
references, never against the core that drew them: each figure is read back from its element
tree (tests/figure_trees.py), the quantity recomputed in plain numpy from the section's inputs
and compared.  tests/test_figures.py checks the contract and that every number is one of the
tables'."""

from __future__ import annotations

import numpy as np
import pytest

from tpmath import row_linear
from tpmath.views import render, tree
from tpmath.views.row_linear import TP_CHOICES

import figure_trees as ft


# ---------------------------------------------------------------- row-linear / row-backward

ROW_CASES = [(tp, b, d, o, seed) for tp, b, d, o, seed in
             [(1, 2, 4, 4, 0), (2, 2, 4, 4, 0), (4, 3, 8, 4, 5), (2, 1, 2, 6, 11), (4, 4, 8, 8, 7)]]


def _matrix(texts: dict[str, str], prefix: str, shape: tuple[int, int]) -> np.ndarray:
    return np.array([[ft.num(texts[f"{prefix}.{i}.{j}"]) for j in range(shape[1])] for i in range(shape[0])])


def _drawn(section: str, tp, b, d, o, seed) -> tuple[dict, dict, dict, dict]:
    """The section's figure at these controls (its two drawings showing the same numbers), its
    first drawing, that drawing's texts by data-key, and the inputs it was drawn from."""
    fig = render(section, {"tp": tp, "batch": b, "d_in": d, "d_out": o, "seed": seed})["figures"][section]
    ft.same_content(fig)
    svg = ft.svgs(fig)[0]
    texts = {k: n["x"] for k, n in ft.keyed(svg).items() if n["t"] == "text"}
    return fig, svg, texts, row_linear.example_inputs(seed, b, d, o)


@pytest.mark.parametrize("tp,b,d,o,seed", ROW_CASES)
def test_row_linear_partials_sum_to_xa(tp, b, d, o, seed):
    fig, svg, texts, inp = _drawn("row-linear", tp, b, d, o, seed)
    X, A = inp["X"], inp["A"]
    Y = X @ A                                           # the unsharded layer, by numpy
    partials = [_matrix(texts, f"Yr.{r}", (b, o)) for r in range(tp)]
    # Each partial has the full shape (B, O) and they add up to X A (4-decimal rounding per term).
    assert np.allclose(sum(partials), Y, atol=5e-5 * tp)
    k = d // tp
    for r in range(tp):
        assert np.allclose(partials[r], X[:, r * k:(r + 1) * k] @ A[r * k:(r + 1) * k, :], atol=5e-5)
    assert np.allclose(_matrix(texts, "Y.row", (b, o)), Y, atol=5e-5)
    # Column parallel: rank r's slice is X A[:, cols of r]; the AllGather puts the slices in rank order.
    c = o // tp
    for r in range(tp):
        assert np.allclose(_matrix(texts, f"cYr.{r}", (b, c)), X @ A[:, r * c:(r + 1) * c], atol=5e-5)
        assert np.allclose(_matrix(texts, f"Y.col.b{r}", (b, c)), Y[:, r * c:(r + 1) * c], atol=5e-5)
    _check_blocks(svg, {f"Xr.{r}": ((b, k), r) for r in range(tp)} | {f"Ar.{r}": ((k, o), r) for r in range(tp)}
                  | {f"cAr.{r}": ((d, c), r) for r in range(tp)} | {"X.all": ((b, d), None)})
    assert ft.ranks(fig) == set(range(tp))


def _check_blocks(svg: dict, expect: dict) -> None:
    """A matrix drawn without numbers is a block of its shape (one rule per row and column
    boundary, square entries), tinted by its owner (None: replicated)."""
    groups = {n["a"]["data-part"]: n for n in tree.walk(svg) if n["t"] == "g" and "data-part" in n.get("a", {})}
    for part, ((rows, cols), owner) in expect.items():
        kids = groups[part]["c"]
        frame = next(c for c in kids if "frame" in c["a"]["class"].split())
        w, h = float(frame["a"]["width"]), float(frame["a"]["height"])
        assert w / cols == pytest.approx(h / rows, abs=0.05), part
        rules = [c for c in kids if c["t"] == "path"]
        d = rules[0]["a"]["d"] if rules else ""
        assert (d.count("v"), d.count("h")) == (cols - 1, rows - 1), part
        for shape in (c for c in kids if c["t"] == "rect"):
            if owner is None:
                assert "rep" in shape["a"]["class"].split() and "data-rank" not in shape["a"]
            else:
                assert shape["a"]["data-rank"] == str(owner)


@pytest.mark.parametrize("tp,b,d,o,seed", ROW_CASES)
def test_row_backward_gradients(tp, b, d, o, seed):
    fig, svg, texts, inp = _drawn("row-backward", tp, b, d, o, seed)
    X, A, dY = inp["X"], inp["A"], inp["dY"]
    dX = dY @ A.T                                       # unsharded gradients, by numpy
    k, c = d // tp, o // tp
    for r in range(tp):
        # Row parallel: rank r's dXᵣ is column block r of dX, computed from the whole dY.
        assert np.allclose(_matrix(texts, f"dXr.{r}", (b, k)), dX[:, r * k:(r + 1) * k], atol=5e-5)
    # Column parallel: the partials dYᵣ Aᵣᵀ have the full shape and sum to dX (the AllReduce of f).
    partials = [_matrix(texts, f"cdXr.{r}", (b, d)) for r in range(tp)]
    for r in range(tp):
        assert np.allclose(partials[r], dY[:, r * c:(r + 1) * c] @ A[:, r * c:(r + 1) * c].T, atol=5e-5)
    assert np.allclose(sum(partials), dX, atol=5e-5 * tp)
    assert np.allclose(_matrix(texts, "dX.col", (b, d)), dX, atol=5e-5)
    # The row layer's merged gradients are its ranks' blocks, each in its rank's tint.
    _check_blocks(svg, {f"dX.row.b{r}": ((b, k), r) for r in range(tp)} | {f"dA.row.b{r}": ((k, o), r) for r in range(tp)}
                  | {f"dAr.{r}": ((k, o), r) for r in range(tp)} | {f"cdAr.{r}": ((d, c), r) for r in range(tp)}
                  | {"dY.all": ((b, o), None)})
    assert ft.ranks(fig) == set(range(tp))


# ---------------------------------------------------------------- row-pairing

def _ring(name: str, n: int) -> float:
    """Elements one rank sends per element of the full tensor (nccl-tests' bus factors)."""
    return 2 * (n - 1) / n if name == "AR" else (n - 1) / n


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("T,h,F", [(8192, 4096, 16384), (1, 8, 8), (1000, 64, 256)])
def test_row_pairing_bars(tp, T, h, F):
    fig = render("row-pairing", {"tp": tp, "tokens": T, "hidden": h, "ffn": F})["figures"]["row-pairing"]
    svgs = ft.svgs(fig)
    assert len(svgs) == 2      # the desktop drawing and the phone one (narrower bars)
    for svg in svgs:
        keyed = ft.keyed(svg)
        assert ft.ranks(fig) == set()                        # per-rank amounts, the same on every rank
        segs = {k: n for k, n in keyed.items() if k.startswith("seg.")}
        if tp == 1:
            assert not segs
            return
        size = {"T×h": T * h, "T×F": T * F}
        name = {"all-reduce": "AR", "all-gather": "AG", "reduce-scatter": "RS"}
        pairs = []
        for k, node in segs.items():
            coll, symbol = k.split(".")[-2:]
            pairs.append((ft.size(node, "width"), _ring(name[coll], tp) * size[symbol]))
        ft.proportional(pairs, tol=0.2)
        # The ratios written next to the bars, from the collectives of each pairing (Megatron: AR T×h
        # forward and backward; row→row: AR T×F + AR T×h, AG T×F + AG T×h; column→column: AG T×F +
        # AG T×h, RS T×F + AR T×h).
        base = 2 * _ring("AR", tp) * T * h
        expect = {"column-row": 1.0,
                  "row-row": (_ring("AR", tp) + _ring("AG", tp)) * (T * F + T * h) / base,
                  "column-column": (_ring("AG", tp) * (T * F + T * h) + _ring("RS", tp) * T * F
                                    + _ring("AR", tp) * T * h) / base}
        for scheme, ratio in expect.items():
            assert ft.num(keyed[f"ratio.{scheme}"]["x"].lstrip("×")) == pytest.approx(ratio, abs=5e-3)


@pytest.mark.parametrize("name", ["row-linear", "row-backward", "row-pairing"])
def test_section_has_its_figure(name):
    figures = render(name)["figures"]
    assert list(figures) == [name]
    for svg in ft.svgs(figures[name]):
        assert svg["c"][0]["x"]["key"].startswith("fig.")      # a translated title (the accessible name)


@pytest.mark.parametrize("tp", TP_CHOICES)
def test_row_linear_collectives_move_every_ranks_result_in_and_out(tp):
    """Issue 27 item 5: the AllReduce (f̄ forward, f backward) and the AllGather drawn as movement,
    from every rank into the collective and out to every rank, in both drawings, at every tp."""
    controls = {"tp": tp, "batch": 2, "d_in": 4, "d_out": 4, "seed": 0}
    for section, parts in (("row-linear", ("allreduce-g", "allgather")), ("row-backward", ("allreduce-f",))):
        for svg in ft.svgs(render(section, controls)["figures"][section]):
            for part in parts:
                ft.moves(svg, part, tp)
