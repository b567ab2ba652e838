"""A table and its section's figure tint the same numbers the same way (issue 14 review).

Rule of the site: a number is tinted by the rank that owns it (a shard, a block of an assembled
matrix, a block an AllGather or AlltoAll delivered: the rank it came from); a replicated value or
the result of a reduction is grey.  A grid's frame is the rank that holds the grid (its row).

Each test reads the tint of every number out of the table's grid and out of the figure, and
compares both with the owner computed here from the layout alone (NCCL's buffer layouts,
design.md §2; even column / row blocks of a split matrix), not from the views.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from tpmath import collectives as core
from tpmath.views import render, sections, tree

ROOT = Path(__file__).resolve().parents[1]
REP = None


def _tint(attrs: dict, inherited):
    """The rank a shape's attributes tint it with (REP for grey), or ``inherited``."""
    if "data-rank" in attrs:
        return int(attrs["data-rank"])
    if {"rep", "fin"} & set(attrs.get("class", "").split()):    # fin: a figure's reduced result
        return REP
    return inherited


def grid_tints(cell: dict) -> tuple[object, list[list[str]], list[list[object]]]:
    """(frame rank, numbers, per-number tint) of a table grid cell."""
    node = cell["el"]
    assert node["t"] == "table" and "grid" in node["a"]["class"].split()
    frame = _tint(node["a"], REP)
    (body,) = node["c"]
    nums = [[td["x"] for td in tr["c"]] for tr in body["c"]]
    tints = [[_tint(td.get("a", {}), frame) for td in tr["c"]] for tr in body["c"]]
    return frame, nums, tints


def _svgs(figure: dict) -> list[dict]:
    return [n for n in tree.walk(figure) if n["t"] == "svg"]


def _part(svg: dict, name: str) -> dict:
    return next(n for n in tree.walk(svg) if n.get("a", {}).get("data-part") == name)


def _cell_tints(node: dict) -> list[object]:
    """Tints of the figure cells (rect.cell) under ``node``, in drawing order."""
    return [_tint(n["a"], "?") for n in tree.walk(node)
            if n["t"] == "rect" and "cell" in n["a"].get("class", "").split()]


# ---------------------------------------------------------------- collectives (page 1)

def nccl_sources(name: str, n: int, root: int, length: int) -> list[list[int | None] | None]:
    """Per rank, the rank each output element came from (None: reduced), from NCCL's layouts."""
    if core.REGISTRY[name].reduces:
        if name == "reduce":
            return [[None] * length if r == root else None for r in range(n)]
        out = length // n if name == "reduce-scatter" else length
        return [[None] * out for _ in range(n)]
    if name == "broadcast":
        return [[root] * length for _ in range(n)]
    if name == "scatter":
        return [[root] * (length // n) for _ in range(n)]
    if name == "all-gather":                    # rank i's data at offset i·count
        return [[i for i in range(n) for _ in range(length)] for _ in range(n)]
    if name == "gather":
        return [[i for i in range(n) for _ in range(length)] if r == root else None for r in range(n)]
    if name == "all-to-all":                    # data from rank i lands at block i
        return [[i for i in range(n) for _ in range(length // n)] for _ in range(n)]
    raise AssertionError(name)


def _collective_settings():
    for name in core.REGISTRY:
        for n in (2, 3, 4):
            roots = range(n) if core.REGISTRY[name].root is not None else (0,)
            for root in roots:
                yield name, n, root


@pytest.mark.parametrize("name,n,root", list(_collective_settings()))
def test_collective_table_tints_numbers_by_source_like_the_figure(name, n, root):
    res = render("collectives", {"collective": name, "ranks": str(n), "root": str(root), "op": "sum"})
    inputs = core.example_inputs(n)
    want = nccl_sources(name, n, root, len(inputs[0]))
    rows = res["tables"]["collective"]["rows"]
    fig = _svgs(res["figures"]["collectives"])
    for r, row in enumerate(rows):
        frame, _, tints = grid_tints(row[1])
        assert frame == r and tints == [[r] * len(inputs[r])], (r, tints)   # a rank's own input
        if want[r] is None:
            assert not (isinstance(row[2], dict) and "el" in row[2]), row[2]
            continue
        frame, nums, tints = grid_tints(row[2])
        assert frame == r, "an output grid is framed by the rank that holds it"
        assert tints == [want[r]], (name, n, root, r, tints, want[r])
        # The figure: rank r's output cells, in buffer order, carry the same tints.
        for svg in fig:
            assert _cell_tints(_part(svg, f"out{r}")) == want[r], (name, r)


def test_rs_ag_table_tints_reduced_grey_and_gathered_blocks_by_rank():
    for n in (2, 3, 4):
        rows = render("collectives", {"collective": "all-reduce", "ranks": str(n)})["tables"]["rs-ag"]["rows"]
        for r, row in enumerate(rows):
            (f1, _, rs), (f2, ag_nums, ag), (f3, _, ar) = (grid_tints(c) for c in row[1:4])
            assert f1 == f2 == f3 == r
            size = len(rs[0])
            assert rs == [[REP] * size] and ar == [[REP] * (size * n)]
            assert ag == [[i for i in range(n) for _ in range(size)]]


# ---------------------------------------------------------------- mlp (page 1)

@pytest.mark.parametrize("tp", ["1", "2", "4"])
def test_mlp_inputs_tint_w1_columns_and_w2_rows_like_the_figure(tp):
    tp_n = int(tp)
    res = render("mlp", {"stage": "shards", "tp": tp})
    rows = {row[0]: row for row in res["tables"]["mlp-inputs"]["rows"]}
    _, x_nums, x = grid_tints(rows["X"][1])
    assert all(t is REP for line in x for t in line)
    frame, w1_nums, w1 = grid_tints(rows["W₁"][1])
    F = len(w1_nums[0])
    assert frame is REP and w1 == [[j // (F // tp_n) for j in range(F)]] * len(w1_nums)
    frame, w2_nums, w2 = grid_tints(rows["W₂"][1])
    assert frame is REP and w2 == [[i // (F // tp_n)] * len(w2_nums[0]) for i in range(F)]
    # The figure draws rank r's W₁ᵣ, tinted r, with exactly the numbers of its column block.
    fig = _svgs(res["figures"]["mlp"])[0]
    w = F // tp_n
    for r in range(tp_n):
        part = _part(fig, f"W1.{r}")
        assert set(_cell_tints(part)) == {r}
        shown = [n["x"] for n in tree.walk(part) if n["t"] == "text" and "num" in n["a"].get("class", "")]
        assert shown == [v for line in w1_nums for v in line[r * w:(r + 1) * w]]


@pytest.mark.parametrize("stage", ["shards", "forward", "partial", "backward", "grad-w", "grad-x"])
def test_mlp_merged_row_tints_blocks_and_greys_sums(stage):
    tp = 2
    spec = render("mlp", {"stage": stage, "tp": str(tp)})["tables"]["mlp-ranks"]
    merged = [row for row in spec["foot"] if row[0]["key"] == "label.merged"]
    if stage == "shards":
        assert not merged
        return
    (row,) = merged
    for col, cell in zip(spec["columns"][1:], row[1:]):
        frame, nums, tints = grid_tints(cell)
        assert frame is REP
        if col in ("col.y_partial", "col.g_x_partial"):           # sums: grey
            assert all(t is REP for line in tints for t in line)
        elif col in ("col.local_w2", "col.g_w2"):                     # row blocks
            assert tints == [[i // (len(nums) // tp)] * len(nums[0]) for i in range(len(nums))]
        else:                                                       # column blocks
            assert tints == [[j // (len(nums[0]) // tp) for j in range(len(nums[0]))]] * len(nums)


# ---------------------------------------------------------------- row-parallel page

@pytest.mark.parametrize("tp", ["1", "2", "4"])
def test_row_linear_allgather_y_tinted_by_block_like_the_figure(tp):
    res = render("row-linear", {"tp": tp})
    (ag,) = [row for row in res["tables"]["col-ranks"]["foot"] if row[0]["key"] == "label.row_allgather_y"]
    frame, nums, tints = grid_tints(ag[2])
    O = len(nums[0])
    want = [j // (O // int(tp)) for j in range(O)]
    assert frame is REP and tints == [want] * len(nums)
    for svg in _svgs(res["figures"]["row-linear"]):
        for r in range(int(tp)):
            assert set(_cell_tints(_part(svg, f"Y.col.b{r}"))) == {r}
    # The AllReduce result stays grey, in the table and the figure.
    (ar,) = [row for row in res["tables"]["row-ranks"]["foot"] if row[0]["key"] == "label.row_allreduce_y"]
    assert all(t is REP for line in grid_tints(ar[3])[2] for t in line)
    for svg in _svgs(res["figures"]["row-linear"]):
        assert set(_cell_tints(_part(svg, "Y.row"))) == {REP}


@pytest.mark.parametrize("tp", ["1", "2", "4"])
def test_row_backward_replicated_dy_is_grey_in_each_rank_row_like_the_figure(tp):
    res = render("row-backward", {"tp": tp})
    spec = res["tables"]["row-bwd-ranks"]
    for r, row in enumerate(spec["rows"]):
        frame, _, tints = grid_tints(row[1])
        assert frame == r and all(t is REP for line in tints for t in line)
        for cell in row[2:]:                    # its own shards: tinted r
            assert all(t == r for line in grid_tints(cell)[2] for t in line)
    for svg in _svgs(res["figures"]["row-backward"]):
        assert set(_cell_tints(_part(svg, "dY.all"))) == {REP}
    # Shards side by side: dX's column blocks and dA's row blocks by rank.
    (side,) = [row for row in spec["foot"] if row[0]["key"] == "label.row_concat_shards"]
    _, dx_nums, dx = grid_tints(side[2])
    _, da_nums, da = grid_tints(side[3])
    n = int(tp)
    assert dx == [[j // (len(dx_nums[0]) // n) for j in range(len(dx_nums[0]))]] * len(dx_nums)
    assert da == [[i // (len(da_nums) // n)] * len(da_nums[0]) for i in range(len(da_nums))]


def test_grids_in_rank_rows_are_framed_by_that_rank_everywhere():
    """Every section at its defaults: a grid in rank r's row is framed by r; any number in it
    tinted otherwise is grey, or (only where data moves between ranks) its source rank."""
    moves = {("collectives", "collective"), ("collectives", "rs-ag")}
    for name in sections():
        res = render(name)
        for tname, spec in res.get("tables", {}).items():
            for row in spec["rows"]:
                head = row[0]
                if not (isinstance(head, dict) and "el" in head and "rank-tag" in head["el"]["a"]["class"]):
                    continue
                r = int(head["el"]["a"]["data-rank"])
                for cell in row[1:]:
                    if isinstance(cell, dict) and "el" in cell and cell["el"]["t"] == "table" \
                            and "stack" not in cell["el"]["a"]["class"].split():
                        frame, _, tints = grid_tints(cell)
                        assert frame == r, (name, tname, r)
                        others = {t for line in tints for t in line} - {r, REP}
                        assert not others or (name, tname) in moves, (name, tname, r, others)


# ---------------------------------------------------------------- notation

# An ASCII "_" before a one-character subscript that Unicode writes as a subscript (the rank r,
# a digit): the site writes Xᵣ, W₁ (as the prose's MathML shows them).  Capital subscripts (G_X)
# and words (d_in, W_out: control and parameter names) have no Unicode subscript form, and the
# attention weights keep W_q, W_k, W_v, W_o together (there is no subscript q).
ASCII_SUB = re.compile(r"(?<=[A-Za-zᵀ])_[r0-9](?![A-Za-z0-9_])")
LABEL_SPACES = ("col", "cap", "label", "fig", "value", "opt", "note")


def _flat(d: dict, prefix: str = ""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _flat(v, prefix + k + ".")
        else:
            yield prefix + k, v


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_labels_use_unicode_subscripts(lang):
    bad = []
    for path in sorted((ROOT / "content" / "i18n").glob(f"{lang}*.toml")):
        for key, text in _flat(tomllib.loads(path.read_text(encoding="utf-8"))):
            if key.split(".")[0] in LABEL_SPACES and isinstance(text, str):
                if ASCII_SUB.search(re.sub(r"\{[a-z_0-9]+\}", "", text)):
                    bad.append((path.name, key, text))
    assert not bad, bad


def test_view_strings_use_unicode_subscripts():
    """Verbatim strings of every section's tables and figures (cells, labels drawn in SVG)."""
    def strings(obj):
        if isinstance(obj, str):
            yield obj
        elif isinstance(obj, dict):
            for k, v in obj.items():
                if k not in ("t", "a", "key"):
                    yield from strings(v)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                yield from strings(v)
    bad = set()
    for name in sections():
        res = render(name)
        for s in strings([res.get("tables", {}), res.get("figures", {})]):
            if ASCII_SUB.search(s):
                bad.add((name, s))
    assert not bad, sorted(bad)
