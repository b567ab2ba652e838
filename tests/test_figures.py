"""Figures and grid cells: the element-tree contract, figure numbers = table numbers, ranks.

Every section that returns figures is checked generically (so a new figure is tested the day
it lands); the MLP figure is also checked against an unsharded numpy computation.
"""

from __future__ import annotations

import itertools
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from tpmath import mlp as mlp_core
from tpmath.views import render, sections, tree
from tpmath.views.mlp import TP_OPTIONS

import figure_trees as ft

NUMBER = re.compile(r"<\s*\d(?:\.\d+)?e[−-]?\d+|[−-]?\d+(?:\.\d+)?(?:e[−-]?\d+)?|[−]?∞|NaN")


def _strings(obj):
    """Every verbatim string inside a result part (cells, cell args, element trees)."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if k not in ("t", "a", "key"):
                yield from _strings(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _strings(v)


def _table_numbers(result: dict) -> set[str]:
    out = set()
    for s in _strings([result.get("tables", {}), result.get("values", {}), result.get("notes", {})]):
        out.add(s.strip())
        out.update(m.group(0) for m in NUMBER.finditer(s))
    return out


def _settings(name: str, limit: int = 40):
    """The defaults and every combination of the section's select options (capped)."""
    sec = sections()[name]
    selects = [c for c in sec.controls if c.kind == "select"]
    combos = itertools.product(*[c.options for c in selects]) if selects else [()]
    for i, combo in enumerate(combos):
        if i >= limit:
            break
        yield {c.name: v for c, v in zip(selects, combo)}


def _figure_sections():
    return [name for name in sorted(sections()) if render(name).get("figures")]


def test_key_sections_have_figures():
    assert "mlp" in _figure_sections()


@pytest.mark.parametrize("name", _figure_sections())
def test_figure_contract_and_numbers(name):
    for controls in _settings(name):
        try:
            result = render(name, controls)
        except Exception as err:           # an invalid combination is the control's message
            assert type(err).__name__ == "TPMathError", err
            continue
        numbers = _table_numbers(result)
        for fig_name, fig in result["figures"].items():
            tree.check(fig)
            assert fig["t"] == "figure" and fig["a"]["data-figure"] == fig_name
            assert fig["a"]["class"] == "tp-figure"
            svgs = [c for c in fig["c"] if c["t"] == "svg"]
            assert 1 <= len(svgs) <= 2
            for svg in svgs:
                assert svg["a"]["role"] == "img"
                assert svg["c"][0]["t"] == "title" and svg["c"][0]["x"]
                assert re.fullmatch(r"0 0 [\d.]+ [\d.]+", svg["a"]["viewBox"])
            for node in tree.walk(fig):
                if node["t"] == "text" and "num" in node.get("a", {}).get("class", "").split():
                    assert node["x"] in numbers, (name, controls, node["x"])


@pytest.mark.parametrize("stage", ["shards", "forward", "partial", "backward", "grad-w", "grad-x"])
@pytest.mark.parametrize("tp", [1, 2, 4])
def test_mlp_figure_ranks_and_reference(stage, tp):
    result = render("mlp", {"stage": stage, "tp": str(tp)})
    fig = result["figures"]["mlp"]
    ranks = {node["a"]["data-rank"] for node in tree.walk(fig) if "data-rank" in node.get("a", {})}
    assert ranks == {str(r) for r in range(tp)}
    # Lane r shows rank r's blocks: W1's columns [r·F/tp, (r+1)·F/tp) of the unsharded W1.
    inp = mlp_core.default_inputs()
    X, W1, W2, G = inp["X"], inp["W1"], inp["W2"], inp["G"]
    width = W1.shape[1] // tp
    texts = {node["a"]["data-key"]: node["x"] for node in tree.walk(fig)
             if node["t"] == "text" and "data-key" in node.get("a", {})}
    H = np.tanh(X @ W1)                      # the unsharded computation, independently
    for r in range(tp):
        cols = slice(r * width, (r + 1) * width)
        expect = {"W1": W1[:, cols], "H": H[:, cols], "Y_partial": H[:, cols] @ W2[cols, :],
                  "W2": W2[cols, :]}
        for key, block in expect.items():
            if f"{key}.{r}.0.0" not in texts:
                continue
            for (i, j), v in np.ndenumerate(block):
                shown = float(texts[f"{key}.{r}.{i}.{j}"].replace("−", "-"))
                assert abs(shown - v) <= 5e-5 * max(1, abs(v)), (key, r, i, j)
    if stage == "partial":
        Y = H @ W2
        for (i, j), v in np.ndenumerate(Y):
            assert abs(float(texts[f"Y.merged.{i}.{j}"].replace("−", "-")) - v) <= 5e-5 * max(1, abs(v))



@pytest.mark.parametrize("tp", TP_OPTIONS)
def test_mlp_figure_draws_the_row_split_of_w2_and_its_allreduces_as_movement(tp):
    """Issue 27 item 5: stage 3 draws every rank's row block W₂ᵣ (numpy's split of W₂, tinted by
    its rank) beside W₁ᵣ; the forward (f̄) and backward (f) AllReduce carry every rank's partial
    into the sum and the sum out to every rank, in both drawings."""
    W2 = mlp_core.default_inputs()["W2"]
    shards = np.split(W2, tp, axis=0)
    for stage, part in (("partial", "allreduce-f̄"), ("grad-x", "allreduce-f")):
        fig = render("mlp", {"stage": stage, "tp": str(tp)})["figures"]["mlp"]
        for svg in ft.svgs(fig):
            ft.moves(svg, part, tp)
            if stage != "partial":
                continue
            keyed = ft.keyed(svg)
            for r, block in enumerate(shards):
                for (i, j), v in np.ndenumerate(block):
                    node = keyed[f"W2.{r}.{i}.{j}"]
                    assert abs(ft.num(node["x"]) - v) <= 5e-5 * max(1, abs(v)), (r, i, j)
                grid = next(n for n in tree.walk(svg) if n.get("a", {}).get("data-part") == f"W2.{r}")
                assert {n["a"].get("data-rank") for n in tree.walk(grid) if n["t"] == "rect"} == {str(r)}
                assert f"W1.{r}.0.0" in keyed       # beside W₁'s column block


@pytest.mark.parametrize("tp", TP_OPTIONS)
def test_page_one_draws_the_three_collectives_at_the_demos_tp(tp):
    """Issue 27 item 4: AllReduce, ReduceScatter and AllGather, each as movement on tp ranks."""
    fig = render("mlp", {"stage": "shards", "tp": str(tp)})["figures"]["mlp-collectives"]
    for svg in ft.svgs(fig):
        for part in ("allreduce", "reducescatter", "allgather"):
            ft.moves(svg, part, tp)

class _Collect(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.seq = []

    def handle_starttag(self, tag, attrs):
        self.seq.append((tag, tuple(sorted(attrs))))

    def handle_startendtag(self, tag, attrs):
        self.seq.append((tag, tuple(sorted(attrs))))


def test_serialiser_writes_the_tree_element_for_element():
    from tpsite.render import Translator, tree_html
    from tpsite.content import load_content
    from pathlib import Path
    content = load_content(Path(__file__).resolve().parents[1] / "content")
    t = Translator(content.strings["en"], "en", "test")
    fig = render("mlp", {"stage": "grad-x", "tp": "4"})["figures"]["mlp"]
    parser = _Collect()
    parser.feed(str(tree_html(fig, t)))
    expect = [(node["t"].lower(), tuple(sorted((k.lower(), v) for k, v in node.get("a", {}).items())))
              for node in tree.walk(fig)]
    assert parser.seq == expect


@pytest.mark.parametrize("bad", [
    {"t": "script", "x": "alert(1)"},
    {"t": "svg", "c": [{"t": "rect", "a": {"onclick": "x()"}}]},
    {"t": "svg", "c": [{"t": "rect", "a": {"x": 1.5}}]},
    {"t": "svg", "c": [{"t": "foreignObject"}]},
    {"t": "span", "x": {"no-key": 1}},
])
def test_whitelist_refuses(bad):
    with pytest.raises(tree.TreeError):
        tree.check(bad)


# ---------------------------------------------------------------- page 3: attention, layer, qkv-layout

def _first_svg(fig):
    return next(c for c in fig["c"] if c["t"] == "svg")


def _placed(node, x=0.0, y=0.0):
    """(node, x, y) of every node under ``node``: the offset of its frame (the groups' translates)."""
    kids = node.get("c", []) if isinstance(node.get("c"), list) else []
    m = re.fullmatch(r"translate\(([-\d.]+),([-\d.]+)\)", node.get("a", {}).get("transform", "") or "") \
        if node is not None else None
    if m and node["t"] == "g":
        x, y = x + float(m.group(1)), y + float(m.group(2))
    yield node, x, y
    for c in kids:
        yield from _placed(c, x, y)


def _ranks_in(node):
    return {n["a"]["data-rank"] for n in tree.walk(node) if "data-rank" in n.get("a", {})}


@pytest.mark.parametrize("tp, H, K, mistake", [
    (1, 4, 2, "none"), (2, 4, 2, "none"), (4, 8, 2, "none"), (4, 4, 1, "none"), (8, 8, 8, "none"),
    (4, 8, 2, "kv-not-replicated"), (8, 8, 2, "kv-not-replicated"), (4, 4, 2, "kv-grad-not-summed"),
    (2, 8, 2, "f-and-g-swapped"), (2, 4, 4, "scale-local-width"),
])
def test_attention_figure_heads_edges_and_ranks(tp, H, K, mistake):
    res = render("attention", {"tp": str(tp), "heads": str(H), "kv_heads": str(K), "mistake": mistake})
    fig = res["figures"]["attention"]
    assert _ranks_in(fig) == {str(r) for r in range(tp)}
    assert _ranks_in(res["figures"]["attention-grads"]) == {str(r) for r in range(tp)}
    svg = _first_svg(fig)
    Hr = H // tp
    # every P panel of rank r's lane is one of rank r's query heads, each head exactly once
    panels = [n["a"]["data-part"] for n in tree.walk(svg) if n.get("a", {}).get("data-part", "").startswith("P.")]
    assert sorted(panels, key=lambda p: int(p.split(".")[2])) == [f"P.{h // Hr}.{h}" for h in range(H)]
    # head map: an edge from q_h's box to the box of the KV head it reads
    heads = next(n for n in tree.walk(svg) if n.get("a", {}).get("data-part") == "heads")
    # where each head's name is drawn, in the head map's frame (the kit nests panels in translated groups)
    x_of = {n["x"]: x + float(n["a"]["x"]) for n, x, _ in _placed(heads)
            if n["t"] == "text" and "a-ht" in n["a"]["class"]}
    edges = [(n, x) for n, x, _ in _placed(heads) if n["t"] == "line" and "a-edge" in n["a"]["class"]]
    assert len(edges) == H
    q_at = {round(x_of[f"q{h}"], 1): h for h in range(H)}
    k_at = {round(x_of[f"k{k}"], 1): k for k in range(K)}
    for e, dx in edges:
        h, j = q_at[round(dx + float(e["a"]["x1"]), 1)], k_at[round(dx + float(e["a"]["x2"]), 1)]
        r = h // Hr
        read = r % K if mistake == "kv-not-replicated" and K < tp else h * K // H
        assert j == read, (h, j)
        assert ("a-bad" in e["a"]["class"]) == (read != h * K // H)
    # replica tags under each KV head: the ranks holding it
    tags = [n["x"] for n in tree.walk(heads) if n["t"] == "text" and "a-tag" in n["a"]["class"]]
    assert len(tags) == (tp if K <= tp else K)          # a tag per holder: tp/K replicas of each, or one
    # the result: Y drawn with off-reference cells marked only under a forward mistake
    bad = [n for n in tree.walk(svg) if "a-badcell" in n.get("a", {}).get("class", "")]
    assert bool(bad) == (mistake in ("kv-not-replicated", "f-and-g-swapped", "scale-local-width"))


@pytest.mark.parametrize("tp, K, direction", [(1, 2, "forward"), (2, 2, "backward"), (4, 1, "forward"),
                                              (4, 4, "backward")])
def test_layer_figure_lights_the_pass_and_stacks_one_box_per_rank(tp, K, direction):
    res = render("layer", {"tp": str(tp), "heads": "4", "kv_heads": str(K), "pass": direction})
    fig = res["figures"]["layer"]
    assert _ranks_in(fig) == {str(r) for r in range(tp)}
    for svg in (c for c in fig["c"] if c["t"] == "svg"):
        for part in ("attn", "mlp"):
            block = next(n for n in tree.walk(svg) if n.get("a", {}).get("data-part") == part)
            boxes = [n for n in tree.walk(block) if "a-hbox" in n.get("a", {}).get("class", "")]
            assert [b["a"]["data-rank"] for b in boxes] == [str(r) for r in range(tp)]
            lit = {n["a"]["data-part"] for n in tree.walk(block) if n.get("a", {}).get("class") == "coll hl"}
            assert lit == {f"{part}-{'g' if direction == 'forward' else 'f'}"}


def _tp_options(section: str) -> list[int]:
    return [int(v) for c in sections()[section].controls if c.name == "tp" for v in c.options]


def _by_part(svg: dict, name: str) -> dict:
    found = [n for n in tree.walk(svg) if n.get("a", {}).get("data-part") == name]
    assert len(found) == 1, f"{name}: {len(found)} drawn"
    return found[0]


def collective_moves(svg: dict, part: str, tp: int) -> list[list]:
    """Checks a collective drawn as movement (issue 27 item 5): from every rank an arrow in that
    rank's tint into the reduction, from it an arrow (the result, no one rank's tint) to every
    rank, each rank's buffers named R<r>.  Returns what each rank's buffer holds after it, block
    by block: the rank whose data fills the block, "fin" (a sum of every rank's) or None."""
    after = []
    for r in range(tp):
        send, recv = _by_part(svg, f"{part}.send.{r}"), _by_part(svg, f"{part}.recv.{r}")
        assert {n["a"].get("data-rank") for n in tree.walk(send) if n["t"] in ("line", "polygon")} == {str(r)}
        assert all("fin" in n["a"]["class"].split() for n in tree.walk(recv) if n["t"] in ("line", "polygon"))
        src, dst = _by_part(svg, f"{part}.src.{r}"), _by_part(svg, f"{part}.dst.{r}")
        for chip in (src, dst):
            assert [n["x"] for n in tree.walk(chip) if n["t"] == "text"] == [f"R{r}"]
        width = float(next(n["a"]["width"] for n in dst["c"] if "frame" in n["a"]["class"].split()))
        blocks = [None] * tp
        for n in dst["c"]:
            if n["t"] == "rect" and "cell" in n["a"]["class"].split():
                k = round(float(n["a"]["x"]) / (width / tp))
                blocks[k] = "fin" if "fin" in n["a"]["class"].split() else int(n["a"]["data-rank"])
        after.append(blocks)
    assert not [n for n in tree.walk(svg) if n.get("a", {}).get("data-part") == f"{part}.send.{tp}"]
    return after


def _allreduce_after(tp: int) -> list[list]:
    """What an AllReduce leaves on every rank, from numpy on marked data: rank r's partial is the
    one-hot vector e_r in each of tp blocks; a block holding several ranks' ones is a sum ("fin")."""
    total = np.sum([np.tile(np.eye(tp)[r], (tp, 1)) for r in range(tp)], axis=0)
    return [["fin" if np.count_nonzero(b) > 1 else int(np.flatnonzero(b)[0]) for b in total] for _ in range(tp)]


@pytest.mark.parametrize("tp", _tp_options("attention"))
def test_attention_allreduces_move_every_ranks_partial_in_and_the_sum_out(tp):
    H = max(tp, 4)
    res = render("attention", {"tp": str(tp), "heads": str(H), "kv_heads": "1" if tp < 8 else "8"})
    for name, part in (("attention", "leave"), ("attention-grads", "f-back")):
        svgs = [c for c in res["figures"][name]["c"] if c["t"] == "svg"]
        for svg in svgs:
            assert collective_moves(svg, part, tp) == _allreduce_after(tp), (name, tp)


@pytest.mark.parametrize("tp", _tp_options("layer"))
@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_layer_allreduces_of_the_pass_move_partials_in_and_the_sum_out(tp, direction):
    fig = render("layer", {"tp": str(tp), "heads": "4", "kv_heads": "1", "pass": direction})["figures"]["layer"]
    active = "g" if direction == "forward" else "f"
    for svg in (c for c in fig["c"] if c["t"] == "svg"):
        for block in ("attn", "mlp"):
            assert collective_moves(svg, f"{block}-{active}-flow", tp) == _allreduce_after(tp)
            other = "f" if active == "g" else "g"          # the identity of the pass moves nothing
            assert not [n for n in tree.walk(svg) if n.get("a", {}).get("data-part", "").startswith(f"{block}-{other}-flow")]


@pytest.mark.parametrize("tp, H, K, E", [(2, 4, 2, 2), (4, 8, 2, 1), (8, 8, 1, 4), (1, 2, 2, 1)])
def test_qkv_figure_tints_each_column_by_the_rank_that_gets_it(tp, H, K, E):
    res = render("qkv-layout", {"tp": str(tp), "heads": str(H), "kv_heads": str(K), "head_dim": str(E)})
    svg = _first_svg(res["figures"]["qkv-layout"])
    per = (H + 2 * K) * E // tp
    for layout in ("megatron", "concatenated"):
        bar = next(n for n in tree.walk(svg) if n.get("a", {}).get("data-part") == layout)
        cells = [n for n in tree.walk(bar) if n["t"] == "rect" and "cell" in n["a"]["class"].split()]
        assert len(cells) == (H + 2 * K) * E
        assert [c["a"]["data-rank"] for c in cells] == [str(i // per) for i in range(len(cells))]
# ---------------------------------------------------------------- grid cells in tables

NESTED_LIST = re.compile(r"\[\s*\[|^\[[−\d.e∞NaN, ]+\]$| \| R\d")   # "[[…", a bare "[a, b, …]", "R0 […] | R1"
RANK_COLUMNS = ("col.rank", "col.row_rank")


def _cells(result: dict):
    """(table, part, row index, column index, cell) of every body and foot cell."""
    for name, spec in result["tables"].items():
        for part in ("rows", "foot"):
            for i, row in enumerate(spec.get(part, [])):
                for j, cell in enumerate(row):
                    yield name, part, i, j, cell


@pytest.mark.parametrize("name", sorted(sections()))
def test_matrices_in_tables_are_grids_and_ranks_are_tags(name):
    """No nested-list strings left in any table; every tree cell keeps to the whitelist; a rank
    row header is a rank tag whose colour is that of the grids in its row (or untinted)."""
    checked = 0
    for controls in _settings(name, limit=12):
        try:
            result = render(name, controls)
        except Exception as err:
            assert type(err).__name__ == "TPMathError", err
            continue
        for table, part, i, j, cell in _cells(result):
            where = (name, controls, table, part, i, j)
            if isinstance(cell, str):
                assert not NESTED_LIST.search(cell), (where, cell)
            elif "el" in cell:
                tree.check(cell["el"])
                checked += 1
        for table, spec in result["tables"].items():
            if spec["columns"][:1] and spec["columns"][0] in RANK_COLUMNS:
                for row in spec["rows"]:
                    head = row[0]["el"]
                    assert head["t"] == "span" and "rank-tag" in head["a"]["class"].split(), (name, table)
                    r = head["a"]["data-rank"]
                    for cell in row[1:]:
                        if isinstance(cell, dict) and "el" in cell and cell["el"]["t"] == "table":
                            assert cell["el"]["a"].get("data-rank") == r, (name, table, r)
    assert checked or name in ("comm-cost", "dp-tp", "memory", "precision", "row-pairing"), name


def test_grid_shading_and_stack():
    # One scale per column: the same number has the same shade in every rank's grid.
    a = tree.grid([[1.0, -2.0]], rank=0, scale=4.0)["el"]
    b = tree.grid([[4.0, 2.0]], rank=1, scale=4.0)["el"]
    cls = lambda g: [td["a"]["class"] for tr in g["c"][0]["c"] for td in tr["c"]]
    assert cls(a) == ["v1", "v2"] and cls(b) == ["v4", "v2"]
    # A masked logit (−∞) is shown as such, with the lightest shade; the scale ignores it.
    g = tree.grid([-np.inf, 1.0, -0.5], rank=2)["el"]
    assert [td["x"] for td in g["c"][0]["c"][0]["c"]] == ["−∞", "1", "−0.5"]
    assert cls(g) == ["v0", "v4", "v2"]
    assert tree.scale_of([1.0, -np.inf], [[-3.0]], []) == 3.0
    # A stack: one row per rank, led by its tag, tinted by it; the table itself untinted.
    s = tree.rank_stack([[1.0, 2.0], [10.0, 20.0]])["el"]
    tree.check(s)
    assert "rep" in s["a"]["class"].split() and s["a"]["role"] == "presentation"
    rows = s["c"][0]["c"]
    assert [tr["a"]["data-rank"] for tr in rows] == ["0", "1"]
    assert [tr["c"][0]["c"][0]["x"] for tr in rows] == ["R0", "R1"]
    assert [[td["x"] for td in tr["c"][1:]] for tr in rows] == [["1", "2"], ["10", "20"]]


# The figures that had a fixed geometry wider than a phone column (issue 25 item 4): their phone
# drawing (the narrow one, or the only one) fits the 280 px column at every setting of their
# selects, so a 320 px screen shows them at their natural size.
PHONE_FIGURES = {"ring": "ring", "mismatch": "mismatch", "vocab-ce": "vocab-ce", "vocab-extras": "vocab-extras",
                 "sp-ln": "sp-layer"}


@pytest.mark.parametrize("fig_name", sorted(PHONE_FIGURES))
def test_phone_drawing_fits_the_phone_column_at_every_setting(fig_name):
    checked = 0
    for controls in _settings(PHONE_FIGURES[fig_name], limit=400):
        try:
            fig = render(PHONE_FIGURES[fig_name], controls)["figures"][fig_name]
        except Exception as err:
            assert type(err).__name__ == "TPMathError", err
            continue
        svgs = [c for c in fig["c"] if c["t"] == "svg"]
        phone = svgs[-1]
        assert phone["a"]["class"] in ("fig fig-narrow", "fig fig-one"), controls
        assert float(phone["a"]["width"]) <= tree.NARROW_W, (fig_name, controls, phone["a"]["width"])
        # the viewBox is the drawing's size: nothing is scaled inside it
        assert phone["a"]["viewBox"] == f"0 0 {phone['a']['width']} {phone['a']['height']}"
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize("section", sorted(sections()))
def test_every_phone_drawing_fits_the_phone_column(section):
    """Every figure of every section, at every combination of its selects (capped): the drawing a
    phone shows is at most 280 px wide, so its 12 px text is not scaled down (the mlp figure at
    tp = 1 was 290 px: a whole matrix hung beside its lane's badge)."""
    for controls in _settings(section, limit=150):
        try:
            figures = render(section, controls).get("figures") or {}
        except Exception as err:
            assert type(err).__name__ == "TPMathError", err
            continue
        for name, fig in figures.items():
            phone = [c for c in fig["c"] if c["t"] == "svg"][-1]
            assert float(phone["a"]["width"]) <= tree.NARROW_W, (name, controls, phone["a"]["width"])


# ---- every tinted shape has a tint -------------------------------------------------------------
# style.css fills and strokes these classes from --rk / --rk-ink, which only [data-rank] and .rep
# define: a shape of such a class with neither on itself or an ancestor (and no rule of its own,
# such as .cell.fin) is drawn in the default colour, black, as the shared KV head box of the
# attention figure was for K < tp.
ROOT = Path(__file__).resolve().parents[1]


def _tint_rules() -> tuple[set[str], set[tuple[str, str]]]:
    """(classes style.css colours from --rk / --rk-ink, (class, modifier) pairs that a rule such
    as ``.cell.fin`` colours without them)."""
    css = (ROOT / "templates" / "static" / "style.css").read_text(encoding="utf-8")
    reads, own = set(), set()
    for sel, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        for one in sel.split(","):
            last = re.findall(r"\.([\w-]+)", one.strip().split()[-1]) if one.strip() else []
            if "var(--rk" in body and "--rk:" not in body:
                reads |= set(last)
            elif len(last) >= 2 and re.search(r"(^|;)\s*(fill|stroke)\s*:", body):
                own |= {(a, b) for a in last for b in last if a != b}
    return reads - {"fig", "grid"}, own


def _untinted(node: dict, rules, tinted: bool = False) -> list[str]:
    reads, own_colour = rules
    a = node.get("a", {})
    cls = set(a.get("class", "").split())
    tinted = tinted or "data-rank" in a or "rep" in cls
    needs = {c for c in cls & reads if not any((c, m) in own_colour for m in cls)}
    bad = [f"<{node['t']} class={a.get('class')!r}>"] if needs and not tinted else []
    for child in node.get("c", []):
        bad += _untinted(child, rules, tinted)
    return bad


def _choices(section: str) -> list[dict]:
    """The section's defaults, every choice of each select one at a time, and every pair of the
    first two selects' choices (K < tp, stage × tp …)."""
    sec = sections()[section]
    base = {c.name: str(c.default) for c in sec.controls}
    selects = [c for c in sec.controls if c.kind == "select"]
    out = [base] + [{**base, c.name: str(o)} for c in selects for o in c.options]
    if len(selects) >= 2:
        a, b = selects[:2]
        out += [{**base, a.name: str(x), b.name: str(y)} for x in a.options for y in b.options]
    return out


@pytest.mark.parametrize("section", _figure_sections())
def test_every_tinted_shape_has_a_rank_or_the_replica_tint(section):
    rules = _tint_rules()
    assert {"cell", "badge", "a-hbox", "frame"} <= rules[0] and ("cell", "fin") in rules[1], rules
    drawn = 0
    for controls in _choices(section):
        try:
            res = render(section, controls, "en")
        except Exception:                # a refused pair (GPT-2 XL at tp 8 …): nothing drawn
            continue
        for name, fig in (res.get("figures") or {}).items():
            bad = _untinted(fig, rules)
            assert not bad, (section, controls, name, sorted(set(bad))[:5])
            drawn += 1
    assert drawn, section                      # every demo with controls draws a figure
