"""The figures of collectives, ring, mismatch, backward, dp-tp and precision against independent
references: NCCL's layouts written out with numpy, a ring/tree AllReduce replayed on sets of
ranks, the MLP's gradients from the formulas, the analytic scale of every dp × tp variant.
(The contract and "every figure number is in the tables" are checked for every section by
tests/test_figures.py.)
"""

from __future__ import annotations

import itertools
import math
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from tpmath import TPMathError
from tpmath import mismatch as mismatch_core
from tpmath.mlp import default_inputs
from tpmath import fmt
from tpmath.views import render, tree

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("all-reduce", "reduce", "broadcast", "all-gather", "reduce-scatter", "all-to-all", "gather", "scatter")
OPS = ("sum", "avg", "max", "min", "prod")


# ---------------------------------------------------------------- reading a figure

def nodes(fig):
    return list(tree.walk(fig))


def drawings(fig):
    """Every <svg> of a figure (the desktop and, where there is one, the phone drawing)."""
    return [c for c in fig["c"] if c["t"] == "svg"]


def cells(svg) -> dict:
    """data-key of every number -> (its text, the shape drawn just before it: its cell)."""
    out = {}
    for node in tree.walk(svg):
        kids = node.get("c", [])
        for prev, cur in zip([None] + kids, kids):
            if cur["t"] == "text" and "data-key" in cur.get("a", {}):
                out[cur["a"]["data-key"]] = (cur["x"], prev)
    return out


def parts(svg, prefix: str) -> dict:
    return {n["a"]["data-part"]: n for n in tree.walk(svg) if n.get("a", {}).get("data-part", "").startswith(prefix)}


def ranks_drawn(fig) -> set[int]:
    return {int(n["a"]["data-rank"]) for n in tree.walk(fig) if "data-rank" in n.get("a", {})}


def classes(node) -> set[str]:
    return set(node.get("a", {}).get("class", "").split())


# ---------------------------------------------------------------- collectives

def nccl_reference(name: str, xs: list[np.ndarray], op: str, root: int):
    """NCCL's layouts ("Collective Operations"), written out here: one output per rank or None."""
    n = len(xs)
    stack = np.stack(xs)                                            # (n, L)
    red = {"sum": stack.sum(0), "avg": stack.sum(0) / n, "max": stack.max(0), "min": stack.min(0),
           "prod": stack.prod(0)}[op]
    blocks = stack.reshape(n, n, -1) if stack.shape[1] % n == 0 else None   # [rank, block, elements]
    if name == "all-reduce":
        return [red] * n
    if name == "reduce":
        return [red if r == root else None for r in range(n)]
    if name == "broadcast":
        return [xs[root]] * n
    if name == "all-gather":
        return [stack.ravel()] * n
    if name == "reduce-scatter":
        return list(red.reshape(n, -1))
    if name == "all-to-all":
        return [blocks[:, j, :].ravel() for j in range(n)]          # rank j: block j of every rank, by source
    if name == "gather":
        return [stack.ravel() if r == root else None for r in range(n)]
    return list(blocks[root])                                        # scatter: block r of the root's buffer


def nccl_moves(name: str, n: int, root: int) -> set[tuple]:
    """(source rank, source block, destination rank, destination block) of every copy."""
    if name == "broadcast":
        return {(root, 0, j, 0) for j in range(n)}
    if name == "all-gather":
        return {(i, 0, j, i) for i in range(n) for j in range(n)}
    if name == "gather":
        return {(i, 0, root, i) for i in range(n)}
    if name == "scatter":
        return {(root, j, j, 0) for j in range(n)}
    if name == "all-to-all":
        return {(i, j, j, i) for i in range(n) for j in range(n)}
    return set()


def collective_settings():
    for name, n, op in itertools.product(NAMES, (2, 3, 4), OPS):
        for root in range(n):
            yield name, n, op, root


@pytest.mark.parametrize("name", NAMES)
def test_collective_figure_equals_nccl_layout(name):
    checked = 0
    for _, n, op, root in (s for s in collective_settings() if s[0] == name):
        res = render("collectives", {"collective": name, "ranks": str(n), "op": op, "root": str(root)})
        fig = res["figures"]["collectives"]
        assert ranks_drawn(fig) == set(range(n))
        length = 4 if 4 % n == 0 else 6                 # the page's rule: 10^r·[1, …, L], L = 4, or 6 for n = 3
        xs = [np.arange(1, length + 1) * 10.0 ** r for r in range(n)]
        want = nccl_reference(name, xs, op, root)
        reduces = name in ("all-reduce", "reduce", "reduce-scatter")
        for svg in drawings(fig):
            shown = cells(svg)
            for r in range(n):
                for e, v in enumerate(xs[r]):
                    text, cell = shown[f"in.{r}.{e}"]
                    assert text == fmt.num(v) and cell["a"]["data-rank"] == str(r)
                outs = sorted((int(k.split(".")[2]), k) for k in shown if k.startswith(f"out.{r}."))
                if want[r] is None:
                    assert outs == [], (name, n, r)
                    continue
                assert [shown[k][0] for _, k in outs] == [fmt.num(v) for v in want[r]], (name, n, op, root, r)
                for _, k in outs:               # a reduction's result is final (no rank's tint)
                    assert ("fin" in classes(shown[k][1])) == reduces
            moves = parts(svg, "mv.")
            assert {tuple(int(x) for x in p.split(".")[1:]) for p in moves} == nccl_moves(name, n, root)
            for p, g in moves.items():          # an arrow carries its source rank's tint ...
                src, block, dst, slot = (int(x) for x in p.split(".")[1:])
                assert {c["a"].get("data-rank") for c in g["c"]} == {str(src)}
                # ... and the block it lands on holds exactly the source block's numbers
                size = len(xs[0]) // n if name in ("all-to-all", "scatter") else len(xs[0])
                landed = [shown[f"out.{dst}.{slot * size + e}"] for e in range(size)]
                assert [t for t, _ in landed] == [fmt.num(v) for v in xs[src][block * size:(block + 1) * size]]
                assert {c["a"]["data-rank"] for _, c in landed} == {str(src)}
            if reduces:
                into = {tuple(int(x) for x in p.split(".")[2:]) for p in parts(svg, "op.in.")}
                out_of = {tuple(int(x) for x in p.split(".")[2:]) for p in parts(svg, "op.out.")}
                blocks = n if name == "reduce-scatter" else 1
                assert into == {(i, b) for i in range(n) for b in range(blocks)}
                receivers = [root] if name == "reduce" else range(n)
                assert out_of == {(j if name == "reduce-scatter" else 0, j, 0) for j in receivers}
            checked += 1
    assert checked >= 5 * 9


def test_collective_unused_inputs_are_dimmed_and_nonreceivers_marked():
    res = render("collectives", {"collective": "broadcast", "ranks": "3", "root": "1"})
    svg = drawings(res["figures"]["collectives"])[0]
    groups = parts(svg, "in")
    assert [("dim" in classes(groups[f"in{r}"])) for r in range(3)] == [True, False, True]
    res = render("collectives", {"collective": "gather", "ranks": "4", "root": "2"})
    svg = drawings(res["figures"]["collectives"])[0]
    outs = parts(svg, "out")
    for r in range(4):
        empty = any("nothing" in classes(c) for c in outs[f"out{r}"]["c"])
        assert empty == (r != 2)


def test_collective_phone_drawing_fits_a_phone_column():
    for name, n, op, root in collective_settings():
        if root:
            continue
        fig = render("collectives", {"collective": name, "ranks": str(n), "op": op})["figures"]["collectives"]
        svgs = drawings(fig)
        phone = svgs[-1]
        assert float(phone["a"]["width"]) <= tree.NARROW_W, (name, n, op)
        assert float(svgs[0]["a"]["width"]) <= tree.WIDE_W, (name, n, op)


def test_collective_lanes_keep_input_and_output_side_by_side():
    """A rank's badge, input and output stay on one line of its lane in both drawings (the flow
    must not wrap the output under the input: the arrows would run backwards)."""
    for name, n, op, root in collective_settings():
        fig = render("collectives", {"collective": name, "ranks": str(n), "op": op, "root": str(root)})["figures"]
        for svg in drawings(fig["collectives"]):
            for r in range(n):
                tops = {g["a"]["data-part"]: g["a"]["transform"].split(",")[1] for g in nodes(svg)
                        if g.get("a", {}).get("data-part") in (f"rank{r}", f"in{r}", f"out{r}")}
                assert len(tops) == 3 and len(set(tops.values())) == 1, (name, n, op, root, r, tops)


# ---------------------------------------------------------------- ring and tree

def ring_reference(n: int) -> list[list[list[frozenset]]]:
    """Ring AllReduce on sets of ranks: RS step s, rank r sends chunk (r−1−s) mod n to r+1, which
    adds it; AG step s, rank r sends chunk (r−s) mod n, which r+1 stores."""
    state = [[frozenset({r})] * n for r in range(n)]
    out = [state]
    for phase in ("rs", "ag"):
        for s in range(n - 1):
            new = [list(row) for row in state]
            for r in range(n):
                k = (r - 1 - s) % n if phase == "rs" else (r - s) % n
                dst = (r + 1) % n
                new[dst][k] = state[r][k] | state[dst][k] if phase == "rs" else state[r][k]
            state = new
            out.append(state)
    return out


def ring_sends(n: int, count: int, step: int) -> set[tuple]:
    s = step - 1
    if s < n - 1:
        chunks = [(r, (r - 1 - s) % n) for r in range(n)]
    else:
        chunks = [(r, (r - (s - n + 1)) % n) for r in range(n)]
    sizes = [count // n + (1 if k < count % n else 0) for k in range(n)]
    return {(r, (r + 1) % n, k) for r, k in chunks if sizes[k] > 0}


def tree_reference(n: int) -> tuple[list, list]:
    """Binary tree in heap order rooted at 0: reduce level by level (deepest first), broadcast back."""
    depth = [int(math.log2(r + 1)) for r in range(n)]
    state = [[frozenset({r})] for r in range(n)]
    states, sends = [state], []
    levels = list(range(max(depth), 0, -1))
    for d in levels:                                       # reduce: depth d sends to its parent
        new = [list(row) for row in state]
        for r in (r for r in range(n) if depth[r] == d):
            new[(r - 1) // 2][0] = new[(r - 1) // 2][0] | state[r][0]
        sends.append({(r, (r - 1) // 2, 0) for r in range(n) if depth[r] == d})
        state = new
        states.append(state)
    for d in range(max(depth)):                            # broadcast: depth d sends to its children, top first
        new = [list(row) for row in state]
        step = set()
        for r in (r for r in range(n) if depth[r] == d):
            for c in (2 * r + 1, 2 * r + 2):
                if c < n:
                    new[c][0] = state[r][0]
                    step.add((r, c, 0))
        sends.append(step)
        state = new
        states.append(state)
    return states, sends


def shown_chunks(svg, n: int) -> dict:
    """(rank, chunk) -> the set of ranks its tooltip names; checks the count written on it."""
    out = {}
    for node in tree.walk(svg):
        kids = node.get("c", [])
        for cur, nxt in zip(kids, kids[1:]):
            part = cur.get("a", {}).get("data-part", "")
            if cur["t"] == "rect" and part.startswith("chunk."):
                _, r, k = part.split(".")
                tip = cur["c"][0]["x"]
                named = frozenset(int(x) for x in re.findall(r"R(\d)", tip.split(":", 1)[1]))
                assert tip.startswith(f"#{k}:")
                assert nxt["x"] == fmt.integer(len(named))
                assert ("fin" in classes(cur)) == (len(named) == n)
                out[(int(r), int(k))] = named
    return out


@pytest.mark.parametrize("n", range(2, 9))
@pytest.mark.parametrize("count", [8, 3, 1000])
def test_ring_figure_every_step_equals_a_set_replay(n, count):
    ref = ring_reference(n)
    sizes = [count // n + (1 if k < count % n else 0) for k in range(n)]
    for step in range(2 * (n - 1) + 1):
        res = render("ring", {"ranks": str(n), "algorithm": "ring", "count": count, "step": str(step)})
        assert res["controls"]["step"] == str(step) and "value" not in res["control_state"]["step"]
        # the steps this schedule has not are offered disabled, with the reason (issue 25 item 26)
        off = res["control_state"]["step"]["options"]
        assert sorted(map(int, off)) == list(range(2 * (n - 1) + 1, 15))
        assert all(w == {"key": "note.ring_step_beyond", "args": {"steps": fmt.integer(2 * (n - 1))}} for w in off.values())
        fig = res["figures"]["ring"]
        assert ranks_drawn(fig) == set(range(n))
        svg = drawings(fig)[0]
        chunks = shown_chunks(svg, n)
        assert chunks == {(r, k): ref[step][r][k] for r in range(n) for k in range(n) if sizes[k] > 0}
        sends = {tuple(int(x) for x in p.split(".")[1:]) for p in parts(svg, "send.")}
        assert sends == (ring_sends(n, count, step) if step else set())
        lit = [c for c in tree.walk(svg) if c["t"] == "circle" and classes(c) == {"step", "hl"}]
        assert len(lit) == 1
        marked = [i for i, row in enumerate(res["tables"]["ring-steps"]["rows"]) if isinstance(row[0], dict)]
        assert marked == ([step - 1] if step else [])
        if step:
            assert res["tables"]["ring-steps"]["rows"][step - 1][0] == {"key": "label.step_shown",
                                                                        "args": {"step": fmt.integer(step)}}


@pytest.mark.parametrize("n", range(2, 9))
def test_tree_figure_every_step_equals_a_set_replay(n):
    states, sends = tree_reference(n)
    for step in range(len(states)):
        res = render("ring", {"ranks": str(n), "algorithm": "tree", "count": 5, "step": str(step)})
        svg = drawings(res["figures"]["ring"])[0]
        assert ranks_drawn(res["figures"]["ring"]) == set(range(n))
        assert shown_chunks(svg, n) == {(r, 0): states[step][r][0] for r in range(n)}
        drawn = {tuple(int(x) for x in p.split(".")[1:]) for p in parts(svg, "send.")}
        assert drawn == (sends[step - 1] if step else set())


def test_ring_step_is_clamped_to_the_schedule_and_validated():
    res = render("ring", {"ranks": "3", "algorithm": "ring", "step": "9"})
    assert res["controls"]["step"] == "4"                   # 2(n−1) = 4 steps
    state = res["control_state"]["step"]
    assert state["value"] == "4" and "9" in state["options"] and "4" not in state["options"]
    # the page shows why the step moved (the view's reason used to go nowhere)
    assert res["notes"]["ring-step-clamped"] == {"key": "note.ring_step_clamped", "args": {"step": "9", "steps": "4"}}
    assert render("ring", {"ranks": "3", "step": "2"})["notes"]["ring-step-clamped"] == ""
    for svg in drawings(res["figures"]["ring"]):        # the desktop and the phone drawing: one step lit
        lit = [c for c in tree.walk(svg) if c["t"] == "circle" and classes(c) == {"step", "hl"}]
        assert len(lit) == 1
    tree_res = render("ring", {"ranks": "8", "algorithm": "tree", "step": "14"})
    assert tree_res["controls"]["step"] == "6"              # 2·⌊log2 8⌋ = 6 steps
    for bad in ("15", "-1", "x", "2.5"):
        with pytest.raises(TPMathError) as info:
            render("ring", {"step": bad})
        assert info.value.field == "step"


# ---------------------------------------------------------------- mismatch

@pytest.mark.parametrize("scenario", list(mismatch_core.SCENARIOS))
def test_mismatch_figure_follows_the_checker(scenario):
    calls = mismatch_core.SCENARIOS[scenario]
    check = mismatch_core.check_calls(calls)
    res = render("mismatch", {"scenario": scenario})
    fig = res["figures"]["mismatch"]
    assert ranks_drawn(fig) == set(range(len(calls)))
    svg = drawings(fig)[0]
    boxes = parts(svg, "call.")
    assert set(boxes) == {f"call.{r}.{i}" for r, seq in enumerate(calls) for i in range(len(seq))}
    stuck = {h.rank: h.call_index for h in check.hangs}
    for r, seq in enumerate(calls):
        end = stuck.get(r, len(seq))
        for i in range(len(seq)):
            box = boxes[f"call.{r}.{i}"]["c"][0]
            state = "done" if i < end else "never" if i > end else None
            if state == "never":            # the box faded in its own group; the words under it not
                assert "dim" in classes(box) and "dim" not in classes(boxes[f"call.{r}.{i}"]), (scenario, r, i)
                box = box["c"][0]
            if state:
                assert state in classes(box), (scenario, r, i)
            else:
                assert classes(box) & {"wait", "bad"}, (scenario, r, i)
    bonds = {p: g for p, g in parts(svg, "bond.").items()}
    done = {"bond." + ".".join(f"{g}-{i}" for g, i in sorted((int(a), b) for a, b in c.call_index.items()))
            for c in check.completed}
    assert {p for p, g in bonds.items() if "ok" in classes(g["c"][0])} == done


# What each named scenario's story says must be drawn (module comments of tpmath.mismatch).
STORIES = {
    "ok": {"ok_bonds": 2, "bad_bonds": [], "waits": set(), "exits": {0, 1}},
    "order_swapped": {"ok_bonds": 0, "bad_bonds": [(0, 1)], "waits": set(), "exits": set()},
    "early_exit": {"ok_bonds": 1, "bad_bonds": [], "waits": {(0, 1)}, "exits": {1}},
    "shape_mismatch": {"ok_bonds": 0, "bad_bonds": [(0, 1)], "waits": set(), "exits": set()},
    "dtype_mismatch": {"ok_bonds": 0, "bad_bonds": [(0, 1)], "waits": set(), "exits": set()},
    "group_mismatch": {"ok_bonds": 0, "bad_bonds": [], "waits": {(0, 2), (1, 2), (2, 0)}, "exits": set()},
    # TP {0,1},{2,3} then DP {0,2},{1,3} in a different order per rank: the waits form a cycle 0→1→3→2→0
    "cross_group_deadlock": {"ok_bonds": 0, "bad_bonds": [], "waits": {(0, 1), (1, 3), (3, 2), (2, 0)},
                             "exits": set()},
}


@pytest.mark.parametrize("scenario", list(STORIES))
def test_mismatch_figure_tells_the_story(scenario):
    story = STORIES[scenario]
    svg = drawings(render("mismatch", {"scenario": scenario})["figures"]["mismatch"])[0]
    bonds = parts(svg, "bond.")
    assert sum("ok" in classes(g["c"][0]) for g in bonds.values()) == story["ok_bonds"]
    bad = [tuple(int(m.split("-")[0]) for m in p.split(".")[1:]) for p, g in bonds.items()
           if "bad" in classes(g["c"][0])]
    assert bad == story["bad_bonds"]
    assert {tuple(int(x) for x in p.split(".")[1:]) for p in parts(svg, "wait.")} == story["waits"]
    exits = {p for p, g in parts(svg, "exit.").items() if any("exitp" in classes(c) for c in g["c"])}
    assert {int(p.split(".")[1]) for p in exits} == story["exits"]


# ---------------------------------------------------------------- backward

def mlp_gradients(tp: int) -> dict:
    """The column→row MLP's gradients from the formulas, unsharded, and the partial G_X per rank."""
    d = default_inputs()
    X, W1, W2, G = d["X"], d["W1"], d["W2"], d["G"]
    H = np.tanh(X @ W1)
    GZ = (G @ W2.T) * (1 - H ** 2)
    k = W1.shape[1] // tp
    return {"G_W1": X.T @ GZ, "G_W2": H.T @ G, "G_X": GZ @ W1.T, "k": k,
            "partial": [GZ[:, r * k:(r + 1) * k] @ W1[:, r * k:(r + 1) * k].T for r in range(tp)]}


def close(text: str, v: float) -> bool:
    return text == fmt.num(v) or abs(float(text.replace("−", "-")) - v) <= 5e-5 * max(1.0, abs(v))


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_backward_figure_gradients_and_owners(tp):
    ref = mlp_gradients(tp)
    fig = render("backward", {"tp": str(tp)})["figures"]["backward"]
    assert ranks_drawn(fig) == set(range(tp))
    for svg in drawings(fig):
        shown = cells(svg)
        for (i, j), v in np.ndenumerate(ref["G_W1"]):           # columns of G_W₁ stay on their rank
            text, cell = shown[f"G_W1.{i}.{j}"]
            assert close(text, v) and cell["a"]["data-rank"] == str(j // ref["k"])
        for (i, j), v in np.ndenumerate(ref["G_W2"]):           # rows of G_W₂ stay on their rank
            text, cell = shown[f"G_W2.{i}.{j}"]
            assert close(text, v) and cell["a"]["data-rank"] == str(i // ref["k"])
        for r in range(tp):
            for (i, j), v in np.ndenumerate(ref["partial"][r]):
                text, cell = shown[f"G_X_partial.{r}.{i}.{j}"]
                assert close(text, v) and cell["a"]["data-rank"] == str(r)
        for (i, j), v in np.ndenumerate(ref["G_X"]):            # the AllReduce's result: no rank's tint
            text, cell = shown[f"G_X.merged.{i}.{j}"]
            assert close(text, v) and "data-rank" not in cell["a"] and "fin" in classes(cell)
        assert len(parts(svg, "allreduce-f")) == 1


# ---------------------------------------------------------------- dp-tp

@pytest.mark.parametrize("tp,dp", list(itertools.product((1, 2, 4), (1, 2, 4))))
def test_dp_tp_figure_scales_and_groups(tp, dp):
    res = render("dp-tp", {"tp": str(tp), "dp": str(dp)})
    fig = res["figures"]["dp-tp"]
    assert ranks_drawn(fig) == set(range(tp))
    svg = drawings(fig)[0]
    assert set(parts(svg, "rank.")) == {f"rank.{k}.{r}" for k in range(dp) for r in range(tp)}
    # The factor each mistake must produce, by reasoning (the page's prose), not by the core:
    analytic = {"correct": 1.0, "divide_by_tp_too": 1 / tp, "double_count_gy": float(tp), "dp_sum_no_mean": float(dp)}
    variants = parts(svg, "variant.")
    assert set(variants) == {f"variant.{v}" for v in analytic}
    octave = []                               # the length of a factor 2: the same for every bar
    for name, s in analytic.items():
        g = variants[f"variant.{name}"]
        value = next(c for c in g["c"] if c["t"] == "text" and "num" in classes(c))
        assert value["x"] == fmt.num(s)
        one = float(next(c for c in g["c"] if c["t"] == "line" and "one" in classes(c))["a"]["x1"])
        if s == 1.0:                          # on the 1× line, drawn as a dot
            dot = next(c for c in g["c"] if c["t"] == "circle")
            assert abs(float(dot["a"]["cx"]) - one) < 0.11 and "ok" in classes(dot)
        else:                                 # a bar from 1× towards the wrong factor, log scale
            bar = next(c for c in g["c"] if c["t"] == "rect" and "dev" in classes(c))
            x, w = float(bar["a"]["x"]), float(bar["a"]["width"])
            assert "bad" in classes(bar)
            assert abs((x + w if s < 1 else x) - one) < 0.11
            octave.append(w / abs(math.log2(s)))
    assert max(octave, default=0) - min(octave, default=0) < 0.2


# ---------------------------------------------------------------- precision

@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("tp", ["1", "2", "4"])
def test_precision_figure_matches_its_table_on_a_log_axis(dtype, tp):
    res = render("precision", {"dtype": dtype, "tp": tp})
    table = res["tables"]["precision"]["rows"]
    svg = drawings(res["figures"]["precision"])[0]
    rows = list(parts(svg, "q.").values())
    assert len(rows) == len(table) == 6
    xs, floors = [], []
    for g, row in zip(rows, table):
        nums = [c["x"] for c in g["c"] if c["t"] == "text" and "num" in classes(c)]
        assert nums == [row[1], row[2]]                      # error, tolerance: the table's strings
        tol_x = float(next(c for c in g["c"] if "tolmark" in classes(c))["a"]["x1"])
        dot = next(c for c in g["c"] if "errdot" in classes(c))
        within = row[3] == {"key": "label.yes"}
        if row[1].startswith("<") or row[1] == "0":          # "< 1e−15" or 0: pointing left from 1e−15
            base = max(float(p.split(",")[0]) for p in dot["a"]["points"].split())
            assert dot["t"] == "polygon" and within
            floors.append(base)
        else:
            assert (float(dot["a"]["cx"]) <= tol_x) == within and ("bad" in classes(dot)) != within
            xs.append((float(row[1].replace("−", "-")), float(dot["a"]["cx"])))
        xs.append((float(row[2].replace("−", "-")), tol_x))
    # one log axis: x = a + b·log10(value) fits every error and tolerance drawn (values read back from
    # 2-digit strings, so within a pixel); "< 1e−15" starts at 1e−15 on the same axis
    b, a = np.polyfit([math.log10(v) for v, _ in xs], [x for _, x in xs], 1)
    assert b > 0
    for v, x in xs:
        assert abs(a + b * math.log10(v) - x) < 1.0, (v, x)
    for x in floors:
        assert abs(a + b * math.log10(1e-15) - x) < 2.5, x


# ---------------------------------------------------------------- every figure text exists in both languages

def _strings(lang: str) -> dict:
    out = {}
    for path in sorted((ROOT / "content" / "i18n").glob(f"{lang}*.toml")):
        if path.name.split(".")[0] != lang:
            continue

        def flat(d, prefix=""):
            for k, v in d.items():
                if isinstance(v, dict):
                    flat(v, prefix + k + ".")
                else:
                    out[prefix + k] = v
        flat(tomllib.loads(path.read_text("utf-8")))
    return out


STATES = {
    "collectives": [{"collective": c, "ranks": n, "root": "1"} for c in NAMES for n in ("2", "3")],
    "ring": [{"ranks": n, "algorithm": a, "step": s} for n in ("2", "5") for a in ("ring", "tree") for s in ("0", "1", "3")],
    "mismatch": [{"scenario": s} for s in mismatch_core.SCENARIOS],
    "backward": [{"tp": "4"}], "dp-tp": [{"dp": "4"}], "precision": [{"dtype": "float16"}],
}


def test_figure_texts_exist_in_both_languages_with_their_placeholders():
    tables = {lang: _strings(lang) for lang in ("en", "zh")}
    used = set()
    for section, states in STATES.items():
        for controls in states:
            res = render(section, controls)
            for node in tree.walk({"t": "figure", "c": list(res["figures"].values())}):
                cell = node.get("x")
                stack = [cell]
                while stack:
                    c = stack.pop()
                    if isinstance(c, dict):
                        used.add((c["key"], tuple(sorted(c.get("args", {})))))
                        stack += list(c.get("args", {}).values())
    for key, args in used:
        for lang in ("en", "zh"):
            assert key in tables[lang], (lang, key)
            assert set(re.findall(r"\{(\w+)\}", tables[lang][key])) == set(args), (lang, key)
    assert sum(k.startswith("fig.") for k, _ in used) >= 30
