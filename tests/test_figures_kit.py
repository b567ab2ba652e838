"""The figure modules draw only with the kit (src/tpmath/views/draw.py, issue 26 item 1).

Read from the sources (AST), so a new figure module is covered by itself: it imports its
drawing parts from ``views.draw`` alone, builds no element node itself (no ``el(...)``, no
``{"t": …}`` literal, no tag passed as a string), defines no badge, wide/narrow pair or grid of
its own, and writes translated cells one way (``label``, never a raw ``{"key": …}`` dict).
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

VIEWS = Path(__file__).resolve().parents[1] / "src" / "tpmath" / "views"
FIGURES = sorted(VIEWS.glob("fig_*.py"))
# what only the kit may build or name: element nodes and the figure's own frame
KIT_ONLY_NAMES = {"el", "figure_svg", "check", "Text"}
TAGS = {"svg", "g", "rect", "line", "path", "polygon", "circle", "text", "tspan", "title", "desc",
        "figure", "figcaption"}
FRAME_CLASSES = {"fig-wide", "fig-narrow", "fig-one", "tp-figure"}
KIT_ONLY_DEFS = ("badge", "two_widths", "two_layouts", "grid", "heat", "op_box", "cells")


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def test_the_old_kits_are_gone_and_every_figure_module_is_checked():
    assert not (VIEWS / "fig_kit.py").exists() and not (VIEWS / "fig_parts.py").exists()
    assert len(FIGURES) >= 9


@pytest.mark.parametrize("path", FIGURES, ids=lambda p: p.name)
def test_figure_module_imports_its_drawing_parts_from_the_kit_only(path):
    bad = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module != "draw":
                bad.append(f"line {node.lineno}: from .{node.module} import …")
            bad += [f"line {node.lineno}: {a.name} (kit only)" for a in node.names if a.name in KIT_ONLY_NAMES]
        elif isinstance(node, ast.Import) and any("views" in a.name for a in node.names):
            bad.append(f"line {node.lineno}: import {node.names[0].name}")
    assert not bad, f"{path.name}: {bad}"


@pytest.mark.parametrize("path", FIGURES, ids=lambda p: p.name)
def test_figure_module_builds_no_element_and_no_raw_cell(path):
    bad = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if "t" in keys:
                bad.append(f"line {node.lineno}: an element literal")
            if "key" in keys:
                bad.append(f"line {node.lineno}: a raw translation cell (use label())")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in KIT_ONLY_NAMES:
            bad.append(f"line {node.lineno}: {node.func.id}(…)")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value in TAGS and isinstance(node.func, ast.Name) and node.func.id not in ("text",):
            bad.append(f"line {node.lineno}: {node.func.id}({node.args[0].value!r}, …)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and set(node.value.split()) & FRAME_CLASSES:
            bad.append(f"line {node.lineno}: the figure frame's class {node.value!r} (tree.pair / draw.single)")
    assert not bad, f"{path.name}: {bad}"


@pytest.mark.parametrize("path", FIGURES, ids=lambda p: p.name)
def test_figure_module_defines_no_part_the_kit_has(path):
    defs = [n.name for n in ast.walk(_tree(path)) if isinstance(n, ast.FunctionDef)]
    own = [d for d in defs for k in KIT_ONLY_DEFS
           if d.lstrip("_") == k or d.endswith("_" + k) or d.lstrip("_").startswith(k + "_panel")]
    assert not own, f"{path.name} defines {own}: the kit (views/draw.py) has one"


# Figure modules laid out by the kit alone: they hand panels to the flow (column, words, key,
# axis_chart, bar, owned_panel …) and place no shape at a coordinate of their own.
LAID_OUT = ("fig_backward.py", "fig_comm_cost.py", "fig_vocab_ce.py", "fig_sp_layer.py", "fig_schedules.py", "fig_mlp.py",
            "fig_collectives.py", "fig_attention.py")
SHAPES = {"rect", "text", "mid_text", "line", "hline", "circle", "path", "polygon", "group", "moved", "badge",
          "arrow", "curve", "down_arrow", "arrow_head", "wrapped", "band", "heat", "svg_grid", "pair", "flow"}
# numeric literals per 100 lines: 69.7 (fig_backward) and 65.3 (fig_comm_cost) while they placed
# their shapes by hand, 29.8 and 13.6 since (tree.py: 19.9); fig_vocab_ce 40.0 -> 23.7,
# fig_sp_layer 41.8 -> 26.5, fig_schedules 54.1 -> 30.2, fig_collectives 33.3 -> 27.0 and
# fig_attention 48.3 -> 23.2 when
# they moved to the kit; what remains are values (axis ends, a panel's least width, a cell's
# size), not positions
MAX_LITERALS_PER_100_LINES = 32


@pytest.mark.parametrize("name", LAID_OUT)
def test_a_laid_out_figure_module_places_no_shape_itself(name):
    tree = _tree(VIEWS / name)
    used = sorted({a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for a in node.names
                   if a.name in SHAPES})
    assert not used, f"{name} imports shape parts {used}: its layout belongs to the kit's panels"
    lines = len((VIEWS / name).read_text(encoding="utf-8").splitlines())
    nums = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) in (int, float)]
    assert 100 * len(nums) / lines <= MAX_LITERALS_PER_100_LINES, f"{name}: {len(nums)} number literals in {lines} lines"


def test_the_kit_has_one_numbered_grid_drawer():
    """grid_panel, matrix_panel and owned_panel all draw their numbers with tree.svg_grid."""
    import inspect

    from tpmath.views import draw, tree
    assert tree.svg_grid is draw.svg_grid
    src = inspect.getsource(draw)
    assert "def _cells(" not in src and "def owned_grid(" not in src
    for part in (draw.grid_panel, draw.owned_panel, tree.matrix_panel):
        assert "svg_grid(" in inspect.getsource(part), part.__name__


def test_the_kit_itself_passes_the_tree_contract():
    """The parts build whitelisted trees (tree.check), so a figure made of them does too."""
    import numpy as np

    from tpmath.views import draw, tree

    panels = [draw.lane_badge(1, 60, "numbers"), draw.grid_panel(np.eye(2), "A", 1, "A", 40.0, shape=("B×D", "2×2")),
              draw.op_box(draw.label("fig.sum_ranks", last="R1"), "x", 120, "coll hl", "op"),
              draw.heat_panel(np.eye(3), "P", 0, "P", 12.0), draw.arrow_panel("·W"),
              draw.coll_panel("AllReduce", "sum", 200), draw.sign("+", 60),
              draw.owned_panel(np.eye(2), lambda i, j: j, "G", "G", 1.0, "cols", [("n", "dimtext")]),
              draw.column([draw.words("a", 100, "cap"), draw.bar([draw.Seg(60, "seg-calc", "b.0", "1 ms")], "below",
                                                             ("2 ms", "num em"))]),
              draw.axis_chart(draw.LogAxis(-1, 1, 100), [draw.ChartRow("r", "x", [draw.Mark("dot", 1.0, cls="d"),
                              draw.Mark("floor", 0.5, cls="f")], [("1", "num", "×")])], [(1.0, "1×")], 10),
              draw.badge_grid(2, 2, lambda k: "r", 200), draw.key("tpg", "TP", 100, "wide"),
              draw.cell_block([draw.Cell("cell v2", "1", 0, key="k.0", tip="t", name="c0", mark="newmark"),
                               draw.Cell("cell fin", "2", text_cls="num fin"), draw.Cell(None, "#2")], 2, 30, 20,
                              (1, "frame"), part="blk"),
              draw.text_box([("a", "call-t"), ("b", "dimtext")], 80, 40, "call done", 1, head="#0",
                            under=("u", "warn-t"), faded=True, part="box"),
              draw.orbit([draw.badge_panel(r, 18, 0, part=None) for r in range(3)], 60, 200,
                         [(0, 1, "#0", "send.0.1.0")], [("s", "cap")], track=80),
              draw.heap_tree([draw.badge_panel(r, 18, 0, part=None) for r in range(3)], 200, 60, 20),
              draw.step_strip([1, 2], 2, 30, [0.5, 1.0], (False, True), "phase"), draw.step_strip([1, 2], 1, 28)]
    node = draw.figure("kit", "title", lambda: [draw.Row(panels, rank=1, hang=True)], caption="c")
    tree.check(node)
    kinds = [draw.Link("arrow", ("a", "b"), label="#1"), draw.Link("curve", ("a", "b"), "mv", "mvh", rank=0, gap=2),
             draw.Link("bus", ("a", "b"), "bond ok", None, label="✓", track=10), draw.Link("elbow", ("a", "b"), "w"),
             draw.Link("around", ("a", "b"), track=5, label="#0"), draw.Link("around", ("a", "b"), head=None),
             draw.Link("node", ("a", "b"), "coll", label="Σ", w=40, gap=4), draw.Link("node", ("a",), w=40, h=24),
             draw.Link("arrow", ("a", "b"), "a-edge", None), draw.Link("over", ("a", "b"), track=6)]
    tree.check({"t": "svg", "c": draw.connect(kinds, {"a": (0.0, 0.0), "b": (50.0, 40.0)})})
    assert [s["a"]["class"] for s in node["c"] if s["t"] == "svg"] == ["fig fig-wide", "fig fig-narrow"]


def test_ports_land_where_the_flow_puts_their_panels_and_links_join_them_there():
    """A port is a point of its panel; column, flowed and flow move it with the panel (worked out
    by hand below from their rules: flow's 8 px margin, 10 px between panels, a lane's 6 px inset)."""
    from tpmath.views import draw

    a = draw.Panel(40, 20, ports={"a.out": (40, 10)})
    b = draw.Panel(30, 30, ports={"b.in": (0, 15)})
    stack = draw.column([draw.Panel(10, 12), b], gap=4)          # b 16 px down in the stack
    assert stack.ports == {"b.in": (0, 31)}
    where: dict = {}
    draw.flow([draw.Row([a, stack], rank=0)], 500, where=where)
    # a at (8 + 6, 8 + 6); the stack 10 px right of a's right edge
    assert where == {"a.out": (54, 24), "b.in": (64, 45)}
    arrow = draw.connect([draw.Link("arrow", ("a.out", "b.in"), part="go")], where)[0]
    line = next(c for c in arrow["c"] if c["t"] == "line")
    assert (line["a"]["x1"], line["a"]["y1"]) == ("54", "24")          # from the port ...
    head = next(c for c in arrow["c"] if c["t"] == "polygon")
    assert head["a"]["points"].startswith("64,45 ")                   # ... its tip on the other port
    level = draw.connect([draw.Link("arrow", ("a.out", "b.in"), level=0, gap=(2, 0))], where)[0]
    assert next(c for c in level["c"] if c["t"] == "polygon")["a"]["points"].startswith("64,24 ")
    bus = draw.connect([draw.Link("bus", ("a.out", "b.in"), "bond", None, label="✓", track=6)], where)[0]
    lines = [(c["a"]["x1"], c["a"]["y1"], c["a"]["x2"], c["a"]["y2"]) for c in bus["c"] if c["t"] == "line"]
    # each end to the upright 6 px right of the farther one (64 + 6), and the upright between them
    assert lines == [("54", "24", "70", "24"), ("64", "45", "70", "45"), ("70", "24", "70", "45")]
    # an edge is one line from port to port; "over" goes up 6 px above the higher end, across, down
    edge = draw.connect([draw.Link("arrow", ("a.out", "b.in"), "a-edge", None)], where)[0]["c"]
    assert [(c["t"], c["a"]["x1"], c["a"]["y1"], c["a"]["x2"], c["a"]["y2"]) for c in edge] == \
        [("line", "54", "24", "64", "45")]
    over = draw.connect([draw.Link("over", ("a.out", "b.in"), track=6)], where)[0]["c"]
    assert over[0]["a"]["d"] == "M54,24 V18 H64 V38" and over[1]["a"]["points"].startswith("64,44 ")
    # col_panels centres each panel in its column and hands its ports on, moved with it
    cols = draw.col_panels([draw.Col(0, 50), draw.Col(50, 50)], [draw.Panel(10, 10, ports={"p": (5, 5)}), b])
    assert cols.ports == {"p": (25, 5), "b.in": (60, 15)}


def test_a_cell_block_puts_its_cells_in_rows_and_names_their_edges():
    from tpmath.views import draw

    cells = [draw.Cell("cell v2", str(k), 0, key=f"in.0.{k}", name=f"c{k}") for k in range(6)]
    blk = draw.cell_block(cells, 4, 30, 20, (0, "frame"), part="in.0.0")
    assert (blk.w, blk.h) == (120, 40)                                 # 4 a row: two rows
    rects = [c["a"] for c in blk.nodes if c["t"] == "rect"]
    assert [(r["x"], r["y"]) for r in rects[:6]] == [("0", "0"), ("30", "0"), ("60", "0"), ("90", "0"),
                                                    ("0", "20"), ("30", "20")]
    assert rects[-1]["class"] == "frame rk" and (rects[-1]["width"], rects[-1]["height"]) == ("120", "40")
    assert blk.ports["c5.top"] == (45, 20) and blk.ports["c5.bottom"] == (45, 40)
    assert blk.ports["in.0.0.right"] == (120, 20) and blk.ports["in.0.0.left"] == (0, 20)


def test_a_log_axis_puts_its_ends_and_its_middle_where_the_logarithm_says():
    from tpmath.views import draw

    ten = draw.LogAxis(-17, 2, 190.0)
    assert ten.x(1e-17) == 0 and ten.x(100.0) == pytest.approx(190.0) and ten.x(1e-7) == pytest.approx(100.0)
    assert ten.x(0.0) == 0 and ten.x(1e-300) == 0 and ten.x(1e300) == pytest.approx(190.0)   # clamped
    two = draw.LogAxis(-3, 3, 120.0, base=2)
    assert [two.x(v) for v in (0.125, 0.5, 1.0, 4.0, 8.0)] == pytest.approx([0, 40, 60, 100, 120])


def test_a_bar_writes_a_time_inside_its_segment_only_where_it_fits():
    from tpmath.views import draw

    fits, narrow = draw.Seg(100, "seg-calc", "a", "12.5 ms"), draw.Seg(20, "seg-comm", "b", "3.25 ms")
    texts = [t for t in draw.bar([fits, narrow], "below").nodes if t["t"] == "text"]
    # 7 characters at 6.8 px fit in 100 px with air, not in 20: that one goes under its segment,
    # ending at its right end (from its left end it would run 28 px past the bar)
    assert [(t["x"], t["a"]["x"], t["a"]["y"], t["a"].get("text-anchor")) for t in texts] == \
        [("12.5 ms", "50", "14", "middle"), ("3.25 ms", "120", "33", "end")]
    assert draw.bar([fits, narrow], "below").h == draw.BAR_H + 16
    assert [t["x"] for t in draw.bar([narrow], None).nodes if t["t"] == "text"] == []


# ---------------------------------------------------------------- captions that wrap

def _strings(lang: str) -> dict:
    import tomllib
    root = VIEWS.parents[2] / "content" / "i18n"
    out = {}
    for path in sorted(root.glob(f"{lang}.*.toml")):
        def flat(t, prefix=""):
            for k, v in t.items():
                if isinstance(v, dict):
                    flat(v, f"{prefix}{k}.")
                else:
                    out[f"{prefix}{k}"] = v
        flat(tomllib.loads(path.read_text(encoding="utf-8")))
    return out


def test_text_w_is_a_full_em_per_cjk_character_and_at_least_the_latin_width():
    from tpmath.views import draw

    # Independently of the estimate's code: 12 px text, CJK one em, Latin 0.6 em (0.65 in bold).
    assert draw.text_w("中文") == pytest.approx(24.0)
    assert draw.text_w("abcd") == pytest.approx(4 * 0.6 * 12)
    assert draw.text_w("abcd", "stage-name") == pytest.approx(4 * 0.65 * 13)
    # a cell is measured in the widest language: zh 每层每个 rank 发送 … is wider than en here
    cell = draw.label("fig.cc_layer_bytes_1", bytes="1 MiB")
    en, zh = "1 MiB sent per rank per layer ", "每层每个 rank 发送 1 MiB"
    est = {s: sum(12.0 if "\u4e00" <= ch <= "\u9fff" else 7.2 for ch in s) for s in (en, zh)}
    assert draw.text_w(cell) == pytest.approx(max(est.values()))
    with pytest.raises(draw.TreeError, match="figwrap"):        # not shipped: the browser could not measure it
        draw.text_w(draw.label("fig.bw_title", tp="2"))


def test_wrapped_keeps_one_plain_line_when_it_fits_and_breaks_between_pieces_when_not():
    from tpmath.views import draw, tree

    pieces = [draw.label("fig.qkv_megatron_1"), draw.label("fig.qkv_megatron_2"), draw.label("fig.qkv_megatron_3")]
    one, lines = draw.wrapped(4, 16, pieces, 1000, "cap")
    assert lines == 1 and "c" not in one and one["x"]["key"] == "fig.cat"     # as one text node
    node, lines = draw.wrapped(4, 16, pieces, draw.NARROW_W, "cap")
    tree.check({"t": "svg", "c": [node]})
    spans = node["c"]
    assert lines == len(spans) >= 2
    assert [s["a"]["y"] for s in spans] == [tree.n(16 + 15 * i) for i in range(lines)]
    assert all(s["a"]["x"] == "4" for s in spans)
    for s in spans:                                             # every line fits, in both languages
        assert draw.text_w(s["x"], "cap") <= draw.NARROW_W


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_pieces_of_a_wrapped_caption_read_as_the_whole(lang):
    """The step names under the sp-layer steps are the select's labels cut in two: the same words."""
    s = _strings(lang)
    for step, whole in ((k.split(".")[-1], v) for k, v in s.items() if k.startswith("opt.step.")):
        assert s[f"fig.sp_step_{step}_1"] + s[f"fig.sp_step_{step}_2"] == whole
    assert s["fig.cat"] == "{a}{b}"
    if lang == "en":     # an English caption breaks between words: its first piece ends in a space
        firsts = [k for k, v in s.items() if k.startswith("fig.") and k.endswith("_1") and not v.endswith(" ")]
        assert not firsts


def _reference_blocks(kind: str, tp: int) -> tuple[list, list]:
    """What each rank's buffer holds before and after the collective, block by block, from numpy
    run on marked data: rank r's block k is a one-hot vector of rank r (its data), and a block
    that is a sum of several ranks' data has several ones ("fin"); an empty block: None."""
    mark = np.eye(tp)
    def who(v):
        if v is None:
            return None
        hot = np.flatnonzero(v)
        return int(hot[0]) if len(hot) == 1 else "fin"
    if kind == "allgather":
        before = [[mark[r] if k == r else None for k in range(tp)] for r in range(tp)]
        after = [list(np.concatenate([[mark[s]] for s in range(tp)])) for _ in range(tp)]
    else:
        full = [np.tile(mark[r], (tp, 1)) for r in range(tp)]
        before = [list(f) for f in full]
        total = np.sum(full, axis=0)        # the sum every rank gets (AllReduce), block r of it (ReduceScatter)
        after = [list(total) if kind == "allreduce" else [total[k] if k == r else None for k in range(tp)]
                 for r in range(tp)]
    return [[who(v) for v in bl] for bl in before], [[who(v) for v in bl] for bl in after]


def _part(node: dict, name: str) -> dict:
    from tpmath.views import tree
    found = [x for x in tree.walk(node) if x.get("a", {}).get("data-part") == name]
    assert len(found) == 1, f"{name}: {len(found)} found"
    return found[0]


def _tints(chip: dict, tp: int) -> list:
    """Block k of a drawn buffer: the rank whose tint fills it, "fin" (grey: a sum) or None."""
    cells = [x["a"] for x in chip.get("c", []) if x["t"] == "rect" and "cell" in x["a"]["class"].split()]
    width = float(next(x["a"]["width"] for x in chip["c"] if "frame" in x["a"]["class"].split()))
    out = [None] * tp
    for a in cells:
        k = round(float(a["x"]) / (width / tp))
        out[k] = "fin" if "fin" in a["class"].split() else int(a["data-rank"])
    return out


@pytest.mark.parametrize("kind", ["allreduce", "allgather", "reducescatter"])
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_a_collective_flow_carries_every_ranks_data_in_and_the_result_out_to_every_rank(kind, tp):
    from tpmath.views import draw, tree

    panel = draw.collective_flow(kind, tp, "AllReduce", "sub", part="c")
    node = tree.el("svg", None, [panel.at(0, 0)])
    tree.check(node)
    before, after = _reference_blocks(kind, tp)
    assert panel.w <= tree.NARROW_W - 16
    for r in range(tp):
        send, recv = _part(node, f"c.send.{r}"), _part(node, f"c.recv.{r}")
        # the arrow in carries rank r's tint, the way out the result's (no single rank's)
        assert {x["a"].get("data-rank") for x in tree.walk(send) if x["t"] in ("line", "polygon")} == {str(r)}
        assert all("fin" in x["a"]["class"] for x in tree.walk(recv) if x["t"] in ("line", "polygon"))
        src, dst = _part(node, f"c.src.{r}"), _part(node, f"c.dst.{r}")
        assert _tints(src, tp) == before[r] and _tints(dst, tp) == after[r]
        # the rank is named on its buffers, not told by colour alone
        assert [x["x"] for x in tree.walk(src) if x["t"] == "text"] == [f"R{r}"]
        assert [x["x"] for x in tree.walk(dst) if x["t"] == "text"] == [f"R{r}"]
        # the arrows start under rank r's buffer before and end over its buffer after
        (x1, y1), (x2, y2) = panel.ports[f"c.in.{r}"], panel.ports[f"c.out.{r}"]
        line_in = next(x["a"] for x in tree.walk(send) if x["t"] == "line")
        line_out = next(x["a"] for x in tree.walk(recv) if x["t"] == "line")
        assert float(line_in["x1"]) == pytest.approx(x1, abs=0.1) and float(line_in["y1"]) > y1
        assert float(line_out["x2"]) == pytest.approx(x2, abs=0.1) and float(line_out["y2"]) < y2


def test_a_collective_flow_refuses_an_unknown_collective():
    from tpmath.views import draw, tree
    with pytest.raises(tree.TreeError):
        draw.collective_flow("broadcast", 2, "x")
