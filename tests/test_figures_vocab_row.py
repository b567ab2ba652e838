"""The figures of vocab-ce, vocab-extras, row-linear, row-backward, row-pairing and comm-cost against
independent numpy references (never against the core that drew them).

Each figure is read back from its element tree: texts and shapes carry ``data-key`` names (``p.3``,
``Yr.1.0.2`` …), so a test finds the number or the bar that stands for a quantity, recomputes the
quantity in plain numpy from the section's inputs and compares.  Bars are checked for being
proportional to what they stand for (one px-per-unit ratio per chart), figures for the ranks they
draw.  tests/test_figures.py checks the contract and that every number is one of the tables'.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tpmath import row_linear
from tpmath.views import render, tree

LOGITS = np.array([1.2, -0.5, 2, 0.1, 1.4, -1])     # the section's six logits (content/en/index.md)
V = len(LOGITS)


def _num(s: str) -> float:
    """A number as the site writes it (typographic minus, thin-space groups, ∞)."""
    s = s.replace("\u2212", "-").replace("\u2009", "").replace("\u202f", "").replace(" ms", "")
    return -math.inf if s == "-∞" else float(s)


def _svgs(fig: dict) -> list[dict]:
    return [c for c in fig["c"] if c["t"] == "svg"]


def _keyed(svg: dict) -> dict[str, dict]:
    """data-key -> node of one drawing (keys are unique within a drawing)."""
    out = {}
    for node in tree.walk(svg):
        k = node.get("a", {}).get("data-key")
        if k is not None:
            assert k not in out, f"data-key {k} twice in one drawing"
            out[k] = node
    return out


def _texts(svg: dict, prefix: str) -> dict[str, str]:
    return {k[len(prefix):]: v["x"] for k, v in _keyed(svg).items() if k.startswith(prefix) and v["t"] == "text"}


def _ranks(fig: dict) -> set[int]:
    return {int(node["a"]["data-rank"]) for node in tree.walk(fig) if "data-rank" in node.get("a", {})}


def _size(node: dict, dim: str) -> float:
    return float(node["a"][dim])


def _proportional(pairs: list[tuple[float, float]], tol: float = 0.11) -> float:
    """Every (length in px, value) pair has the same px-per-unit ratio (lengths are rounded to
    0.1 px in the tree, hence the absolute tolerance); returns the ratio."""
    pairs = [(px, v) for px, v in pairs if abs(v) > 1e-12]
    assert pairs
    ratio = max(pairs, key=lambda p: abs(p[1]))
    unit = ratio[0] / abs(ratio[1])
    for px, v in pairs:
        assert abs(px - unit * abs(v)) <= tol, (px, v, unit)
    return unit


def _same_content(fig: dict) -> None:
    """The desktop and the phone drawing of a figure show the same keyed numbers."""
    svgs = _svgs(fig)
    if len(svgs) == 2:
        a = {k: n.get("x") for k, n in _keyed(svgs[0]).items()}
        b = {k: n.get("x") for k, n in _keyed(svgs[1]).items()}
        assert a == b


# ---------------------------------------------------------------- vocab-ce

def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


VOCAB_CASES = [(s, t, shift) for s in range(1, 7) for t in (0, 2, 5) for shift in (0.0, 1234.5678, -9999.99)]


@pytest.mark.parametrize("shards,target,shift", VOCAB_CASES)
def test_vocab_ce_figure_against_softmax(shards, target, shift):
    fig = render("vocab-ce", {"shards": str(shards), "target": str(target), "shift": shift})["figures"]["vocab-ce"]
    (svg,) = _svgs(fig)
    keyed = _keyed(svg)
    z = LOGITS + shift
    p = _softmax(z)                                   # plain softmax of the shifted logits
    grad = p - np.eye(V)[target]
    Vp = -(-V // shards) * shards                     # padded to a multiple of the shard count
    K = Vp // shards
    # Every id of the padded vocabulary has a slot owned by id // K; padding ids are marked.
    slots = {int(k.split(".")[1]): n for k, n in keyed.items() if k.startswith("slot.")}
    assert sorted(slots) == list(range(Vp))
    for j, node in slots.items():
        assert node["a"]["data-rank"] == str(j // K)
        assert ("pad" in node["a"]["class"].split()) == (j >= V)
    # Probabilities and gradients: only real ids carry them, equal to the reference to 4 decimals.
    probs, grads = _texts(svg, "p."), _texts(svg, "g.")
    assert sorted(map(int, probs)) == list(range(V)) and sorted(map(int, grads)) == list(range(V))
    for j in range(V):
        assert abs(_num(probs[str(j)]) - p[j]) <= 5e-5
        assert abs(_num(grads[str(j)]) - grad[j]) <= 5e-5
    for j in range(V, Vp):
        assert f"pbar.{j}" not in keyed and f"gbar.{j}" not in keyed
    # Bars: p and ∂L/∂z on one scale (the target's gradient bar is its p bar pulled down by 1),
    # the logits hanging max(z) − zⱼ below the line of the global maximum.
    unit = _proportional([(_size(keyed[f"pbar.{j}"], "height"), p[j]) for j in range(V)]
                         + [(_size(keyed[f"gbar.{j}"], "height"), grad[j]) for j in range(V)])
    assert unit > 0
    _proportional([(_size(keyed[f"zbar.{j}"], "height"), LOGITS.max() - LOGITS[j]) for j in range(V)])
    # Per rank: the local maximum (bold among the logits) and Σ exp(z − m) of its own real ids.
    for r in range(shards):
        ids = [j for j in range(r * K, (r + 1) * K) if j < V]
        m_r = max(z[ids]) if ids else -math.inf
        s_r = float(np.exp(z[ids] - z.max()).sum()) if ids else 0.0
        if f"local_max.{r}" in keyed:
            assert _num(keyed[f"local_max.{r}"]["x"]) == pytest.approx(m_r, abs=5e-5)
        else:       # too wide for its box: the value is the bold logit above
            assert any("em" in keyed[f"z.{j}"]["a"]["class"].split() and _num(keyed[f"z.{j}"]["x"]) ==
                       pytest.approx(m_r, abs=5e-5) for j in ids)
        assert _num(keyed[f"local_sum_exp.{r}"]["x"]) == pytest.approx(s_r, abs=5e-5)
        t_r = z[target] - z.max() if target in ids else 0.0
        assert _num(keyed[f"target_shifted.{r}"]["x"]) == pytest.approx(t_r, abs=5e-5)
    # The three AllReduces: m, t, s as the unsharded computation gives them.
    bands = {n["a"]["data-part"]: n for n in tree.walk(svg) if n.get("a", {}).get("data-part", "").startswith("allreduce")}
    assert set(bands) == {"allreduce-max", "allreduce-t", "allreduce-s"}
    args = {k: next(c["x"]["args"] for c in n["c"] if c["t"] == "text") for k, n in bands.items()}
    assert _num(args["allreduce-max"]["m"]) == pytest.approx(z.max(), abs=5e-5)
    assert _num(args["allreduce-t"]["t"]) == pytest.approx(z[target] - z.max(), abs=5e-5)
    assert _num(args["allreduce-s"]["s"]) == pytest.approx(np.exp(z - z.max()).sum(), abs=5e-5)
    # The lit column is the target's.
    lit = next(n for n in tree.walk(svg) if n.get("a", {}).get("data-part") == "target")
    assert lit["a"]["x"] == slots[target]["a"]["x"] and lit["a"]["width"] == slots[target]["a"]["width"]
    assert _ranks(fig) == set(range(shards))


# ---------------------------------------------------------------- vocab-extras

def _pytorch_smoothed(z: np.ndarray, y: int, eps: float) -> float:
    """F.cross_entropy(label_smoothing=ε) of one position, written out."""
    logp = z - z.max() - np.log(np.exp(z - z.max()).sum())
    return float((1 - eps) * -logp[y] + eps * -logp.mean())


def _megatron_rank(z: np.ndarray, y: int, eps: float, tp: int, r: int) -> float | None:
    """Megatron's loss on rank r: logits padded with 0 to a multiple of tp (not masked), K = Vp/tp
    columns, s = εK/(K−1), the mean of log p over the rank's K columns."""
    Vp = -(-len(z) // tp) * tp
    K = Vp // tp
    zp = np.concatenate([z, np.zeros(Vp - len(z))])
    logp = zp - zp.max() - np.log(np.exp(zp - zp.max()).sum())
    if eps == 0:
        return float(-logp[y])
    if K <= 1:
        return None
    s = eps * K / (K - 1)
    return float((1 - s) * -logp[y] - s * logp[r * K:(r + 1) * K].mean())


@pytest.mark.parametrize("tp", range(1, 7))
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5, 1.0])
def test_vocab_extras_smoothing_per_rank(tp, eps):
    fig = render("vocab-extras", {"tp": str(tp), "smoothing": eps})["figures"]["vocab-extras"]
    _same_content(fig)
    svg = _svgs(fig)[0]
    keyed = _keyed(svg)
    target = 2                                        # the section's target
    ours = _pytorch_smoothed(LOGITS, target, eps)
    bars = []
    for r in range(tp):
        assert _num(keyed[f"ours.{r}"]["x"]) == pytest.approx(ours, abs=5e-5)   # = PyTorch on every rank
        bars.append((_size(keyed[f"oursbar.{r}"], "width"), ours))
        meg = _megatron_rank(LOGITS, target, eps, tp, r)
        if meg is None:
            assert f"megbar.{r}" not in keyed
        else:
            assert _num(keyed[f"meg.{r}"]["x"]) == pytest.approx(meg, abs=5e-5)
            bars.append((_size(keyed[f"megbar.{r}"], "width"), meg))
    tp1 = _megatron_rank(LOGITS, target, eps, 1, 0)
    assert _num(keyed["meg.tp1"]["x"]) == pytest.approx(tp1, abs=5e-5)
    bars.append((_size(keyed["megbar.tp1"], "width"), tp1))
    _proportional(bars)
    # Our bars end exactly on the dashed PyTorch line.
    panel = next(n for n in tree.walk(svg) if n.get("a", {}).get("data-part") == "smoothing")
    line = next(n for n in tree.walk(panel) if n["t"] == "line" and "ref" in n["a"]["class"].split())
    for r in range(tp):
        bar = keyed[f"oursbar.{r}"]
        assert float(bar["a"]["x"]) + float(bar["a"]["width"]) == pytest.approx(float(line["a"]["x1"]), abs=0.15)
    assert _ranks(fig) == set(range(tp))


@pytest.mark.parametrize("tp", range(1, 7))
def test_vocab_extras_ignored_position_and_padding(tp):
    fig = render("vocab-extras", {"tp": str(tp)})["figures"]["vocab-extras"]
    svg = _svgs(fig)[0]
    keyed = _keyed(svg)
    logits = [LOGITS, LOGITS[::-1], np.roll(LOGITS, -2)]   # the section's three positions
    targets = [2, None, 4]                               # the middle one is ignored
    counted = sum(t is not None for t in targets)
    heights = []
    for i, (z, y) in enumerate(zip(logits, targets)):
        if y is None:   # no loss, no gradient
            assert _num(keyed[f"iloss.{i}"]["x"]["args"]["loss"]) == 0
            assert all(_size(keyed[f"ig.{i}.{j}"], "height") == 0 for j in range(V))
            continue
        g = (_softmax(z) - np.eye(V)[y]) / counted       # mean over the counted positions
        heights += [(_size(keyed[f"ig.{i}.{j}"], "height"), g[j]) for j in range(V)]
        assert _num(keyed[f"iloss.{i}"]["x"]["args"]["loss"]) == pytest.approx(
            -np.log(_softmax(z)[y]), abs=5e-5)
    _proportional(heights)
    Vp = -(-V // tp) * tp
    slots = {int(k.split(".")[1]): n for k, n in keyed.items() if k.startswith("slot.")}
    assert sorted(slots) == list(range(Vp))
    assert all(("pad" in n["a"]["class"].split()) == (j >= V) for j, n in slots.items())


# ---------------------------------------------------------------- row-linear / row-backward

ROW_CASES = [(tp, b, d, o, seed) for tp, b, d, o, seed in
             [(1, 2, 4, 4, 0), (2, 2, 4, 4, 0), (4, 3, 8, 4, 5), (2, 1, 2, 6, 11), (4, 4, 8, 8, 7)]]


def _matrix(texts: dict[str, str], prefix: str, shape: tuple[int, int]) -> np.ndarray:
    return np.array([[_num(texts[f"{prefix}.{i}.{j}"]) for j in range(shape[1])] for i in range(shape[0])])


def _controls(tp, b, d, o, seed):
    return {"tp": tp, "batch": b, "d_in": d, "d_out": o, "seed": seed}


@pytest.mark.parametrize("tp,b,d,o,seed", ROW_CASES)
def test_row_linear_partials_sum_to_xa(tp, b, d, o, seed):
    fig = render("row-linear", _controls(tp, b, d, o, seed))["figures"]["row-linear"]
    _same_content(fig)
    svg = _svgs(fig)[0]
    texts = {k: n["x"] for k, n in _keyed(svg).items() if n["t"] == "text"}
    inp = row_linear.example_inputs(seed, b, d, o)
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
    assert _ranks(fig) == set(range(tp))


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
    fig = render("row-backward", _controls(tp, b, d, o, seed))["figures"]["row-backward"]
    _same_content(fig)
    svg = _svgs(fig)[0]
    texts = {k: n["x"] for k, n in _keyed(svg).items() if n["t"] == "text"}
    inp = row_linear.example_inputs(seed, b, d, o)
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
    assert _ranks(fig) == set(range(tp))


# ---------------------------------------------------------------- row-pairing

def _ring(name: str, n: int) -> float:
    """Elements one rank sends per element of the full tensor (nccl-tests' bus factors)."""
    return 2 * (n - 1) / n if name == "AR" else (n - 1) / n


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("T,h,F", [(8192, 4096, 16384), (1, 8, 8), (1000, 64, 256)])
def test_row_pairing_bars(tp, T, h, F):
    fig = render("row-pairing", {"tp": tp, "tokens": T, "hidden": h, "ffn": F})["figures"]["row-pairing"]
    svgs = _svgs(fig)
    assert len(svgs) == 2      # the desktop drawing and the phone one (narrower bars)
    for svg in svgs:
        keyed = _keyed(svg)
        assert _ranks(fig) == set()                        # per-rank amounts, the same on every rank
        segs = {k: n for k, n in keyed.items() if k.startswith("seg.")}
        if tp == 1:
            assert not segs
            return
        size = {"T×h": T * h, "T×F": T * F}
        name = {"all-reduce": "AR", "all-gather": "AG", "reduce-scatter": "RS"}
        pairs = []
        for k, node in segs.items():
            coll, symbol = k.split(".")[-2:]
            pairs.append((_size(node, "width"), _ring(name[coll], tp) * size[symbol]))
        _proportional(pairs, tol=0.2)
        # The ratios written next to the bars, from the collectives of each pairing (Megatron: AR T×h
        # forward and backward; row→row: AR T×F + AR T×h, AG T×F + AG T×h; column→column: AG T×F +
        # AG T×h, RS T×F + AR T×h).
        base = 2 * _ring("AR", tp) * T * h
        expect = {"column-row": 1.0,
                  "row-row": (_ring("AR", tp) + _ring("AG", tp)) * (T * F + T * h) / base,
                  "column-column": (_ring("AG", tp) * (T * F + T * h) + _ring("RS", tp) * T * F
                                    + _ring("AR", tp) * T * h) / base}
        for scheme, ratio in expect.items():
            assert _num(keyed[f"ratio.{scheme}"]["x"].lstrip("×")) == pytest.approx(ratio, abs=5e-3)


# ---------------------------------------------------------------- comm-cost

@pytest.mark.parametrize("controls", [{}, {"link_gbps": 400}, {"preset": "gpt-3-175b", "tp": 8},
                                      {"preset": "custom", "hidden": 1024, "seq": 512, "layers": 4, "tp": 2,
                                       "tflops": 10, "link_gbps": 50}])
def test_comm_cost_bars(controls):
    result = render("comm-cost", controls)
    c = result["controls"]
    fig = result["figures"]["comm-cost"]
    svgs = _svgs(fig)
    assert len(svgs) == 2      # the desktop drawing and the phone one (narrower bars)
    for svg in svgs:
        keyed = _keyed(svg)
        B, L, H, n, K, N = c["batch"], c["seq"], c["hidden"], c["tp"], c["dtype_bytes"], c["layers"]
        # Independently: FLOPs of a GPT layer (24BLH² + 4BL²H forward, ×3 with backward) split over n;
        # 4 AllReduces of B·L·H elements per layer, ring: each rank sends 2(n−1)/n of it.
        t_calc = N * 3 * (24 * B * L * H ** 2 + 4 * B * L ** 2 * H) / n / (c["tflops"] * 1e12)
        t_comm = N * 4 * 2 * (n - 1) / n * B * L * H * K / (c["link_gbps"] * 1e9 / 8)
        serial_calc, serial_comm = _size(keyed["serial.calc"], "width"), _size(keyed["serial.comm"], "width")
        unit = _proportional([(serial_calc, t_calc), (serial_comm, t_comm),
                              (_size(keyed["overlap.calc"], "width"), t_calc),
                              (_size(keyed["overlap.comm"], "width"), t_comm)], tol=0.15)
        assert unit > 0
        # One layer: compute and its four AllReduces in the step's proportions.
        layer_comm = sum(_size(keyed[f"layer.comm.{i}"], "width") for i in range(4))
        assert layer_comm == pytest.approx(_size(keyed["layer.calc"], "width") * t_comm / t_calc, abs=0.3)  # 5 × 0.05 px
        shown = [_num(n["x"]) for n in tree.walk(svg) if n["t"] == "text" and n.get("x") and str(n["x"]).endswith(" ms")]
        for t in (t_calc, t_comm, t_calc + t_comm, max(t_calc, t_comm)):
            assert any(abs(v - t * 1e3) <= 5e-4 * max(1, t * 1e3) for v in shown), (t, shown)
        assert _ranks(fig) == set()


@pytest.mark.parametrize("name", ["vocab-ce", "vocab-extras", "row-linear", "row-backward", "row-pairing", "comm-cost"])
def test_section_has_its_figure(name):
    figures = render(name)["figures"]
    assert list(figures) == [name]
    for svg in _svgs(figures[name]):
        assert svg["c"][0]["x"]["key"].startswith("fig.")      # a translated title (the accessible name)
