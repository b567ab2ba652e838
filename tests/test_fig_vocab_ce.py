"""The vocab-ce and vocab-extras figures (views/fig_vocab_ce.py) against independent numpy
references, never against the core that drew them: each figure is read back from its element
tree (tests/figure_trees.py), the quantity recomputed in plain numpy from the section's inputs
and compared.  tests/test_figures.py checks the contract and that every number is one of the
tables'."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tpmath.views import render, tree

import figure_trees as ft

LOGITS = np.array([1.2, -0.5, 2, 0.1, 1.4, -1])     # the section's six logits (content/en/index.md)
V = len(LOGITS)


# ---------------------------------------------------------------- vocab-ce

def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


VOCAB_CASES = [(s, t, shift) for s in range(1, 7) for t in (0, 2, 5) for shift in (0.0, 1234.5678, -9999.99)]


@pytest.mark.parametrize("shards,target,shift", VOCAB_CASES)
def test_vocab_ce_figure_against_softmax(shards, target, shift):
    fig = render("vocab-ce", {"shards": str(shards), "target": str(target), "shift": shift})["figures"]["vocab-ce"]
    for svg in ft.svgs(fig):        # the desktop and the phone drawing, each against the reference
        _check_vocab_ce_drawing(svg, fig, shards, target, shift)


def _check_vocab_ce_drawing(svg, fig, shards, target, shift):
    keyed = ft.keyed(svg)
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
    probs, grads = ft.texts(svg, "p."), ft.texts(svg, "g.")
    assert sorted(map(int, probs)) == list(range(V)) and sorted(map(int, grads)) == list(range(V))
    for j in range(V):
        assert abs(ft.num(probs[str(j)]) - p[j]) <= 5e-5
        assert abs(ft.num(grads[str(j)]) - grad[j]) <= 5e-5
    for j in range(V, Vp):
        assert f"pbar.{j}" not in keyed and f"gbar.{j}" not in keyed
    # Bars: p and ∂L/∂z on one scale (the target's gradient bar is its p bar pulled down by 1),
    # the logits hanging max(z) − zⱼ below the line of the global maximum.
    unit = ft.proportional([(ft.size(keyed[f"pbar.{j}"], "height"), p[j]) for j in range(V)]
                         + [(ft.size(keyed[f"gbar.{j}"], "height"), grad[j]) for j in range(V)])
    assert unit > 0
    ft.proportional([(ft.size(keyed[f"zbar.{j}"], "height"), LOGITS.max() - LOGITS[j]) for j in range(V)])
    # Per rank: the local maximum (bold among the logits) and Σ exp(z − m) of its own real ids.
    for r in range(shards):
        ids = [j for j in range(r * K, (r + 1) * K) if j < V]
        m_r = max(z[ids]) if ids else -math.inf
        s_r = float(np.exp(z[ids] - z.max()).sum()) if ids else 0.0
        if f"local_max.{r}" in keyed:
            assert ft.num(keyed[f"local_max.{r}"]["x"]) == pytest.approx(m_r, abs=5e-5)
        else:       # too wide for its box: the value is the bold logit above
            assert any("em" in keyed[f"z.{j}"]["a"]["class"].split() and ft.num(keyed[f"z.{j}"]["x"]) ==
                       pytest.approx(m_r, abs=5e-5) for j in ids)
        assert ft.num(keyed[f"local_sum_exp.{r}"]["x"]) == pytest.approx(s_r, abs=5e-5)
        t_r = z[target] - z.max() if target in ids else 0.0
        assert ft.num(keyed[f"target_shifted.{r}"]["x"]) == pytest.approx(t_r, abs=5e-5)
    # The three AllReduces: m, t, s as the unsharded computation gives them.
    bands = {n["a"]["data-part"]: n for n in tree.walk(svg) if n.get("a", {}).get("data-part", "").startswith("allreduce")}
    assert set(bands) == {"allreduce-max", "allreduce-t", "allreduce-s"}
    args = {k: next(c["x"]["args"] for c in n["c"] if c["t"] == "text") for k, n in bands.items()}
    assert ft.num(args["allreduce-max"]["m"]) == pytest.approx(z.max(), abs=5e-5)
    assert ft.num(args["allreduce-t"]["t"]) == pytest.approx(z[target] - z.max(), abs=5e-5)
    assert ft.num(args["allreduce-s"]["s"]) == pytest.approx(np.exp(z - z.max()).sum(), abs=5e-5)
    # The lit column is the target's.
    lit = next(n for n in tree.walk(svg) if n.get("a", {}).get("data-part") == "target")
    assert lit["a"]["x"] == slots[target]["a"]["x"] and lit["a"]["width"] == slots[target]["a"]["width"]
    assert ft.ranks(fig) == set(range(shards))


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
    ft.same_content(fig)
    svg = ft.svgs(fig)[0]
    keyed = ft.keyed(svg)
    target = 2                                        # the section's target
    ours = _pytorch_smoothed(LOGITS, target, eps)
    bars = []
    for r in range(tp):
        assert ft.num(keyed[f"ours.{r}"]["x"]) == pytest.approx(ours, abs=5e-5)   # = PyTorch on every rank
        bars.append((ft.size(keyed[f"oursbar.{r}"], "width"), ours))
        meg = _megatron_rank(LOGITS, target, eps, tp, r)
        if meg is None:
            assert f"megbar.{r}" not in keyed
        else:
            assert ft.num(keyed[f"meg.{r}"]["x"]) == pytest.approx(meg, abs=5e-5)
            bars.append((ft.size(keyed[f"megbar.{r}"], "width"), meg))
    tp1 = _megatron_rank(LOGITS, target, eps, 1, 0)
    assert ft.num(keyed["meg.tp1"]["x"]) == pytest.approx(tp1, abs=5e-5)
    bars.append((ft.size(keyed["megbar.tp1"], "width"), tp1))
    ft.proportional(bars)
    # Our bars end exactly on the dashed PyTorch line.
    panel = next(n for n in tree.walk(svg) if n.get("a", {}).get("data-part") == "smoothing")
    line = next(n for n in tree.walk(panel) if n["t"] == "line" and "ref" in n["a"]["class"].split())
    for r in range(tp):
        bar = keyed[f"oursbar.{r}"]
        assert float(bar["a"]["x"]) + float(bar["a"]["width"]) == pytest.approx(float(line["a"]["x1"]), abs=0.15)
    assert ft.ranks(fig) == set(range(tp))


@pytest.mark.parametrize("tp", range(1, 7))
def test_vocab_extras_ignored_position_and_padding(tp):
    fig = render("vocab-extras", {"tp": str(tp)})["figures"]["vocab-extras"]
    svg = ft.svgs(fig)[0]
    keyed = ft.keyed(svg)
    logits = [LOGITS, LOGITS[::-1], np.roll(LOGITS, -2)]   # the section's three positions
    targets = [2, None, 4]                               # the middle one is ignored
    counted = sum(t is not None for t in targets)
    heights = []
    for i, (z, y) in enumerate(zip(logits, targets)):
        if y is None:   # no loss, no gradient
            assert ft.num(keyed[f"iloss.{i}"]["x"]["args"]["loss"]) == 0
            assert all(ft.size(keyed[f"ig.{i}.{j}"], "height") == 0 for j in range(V))
            continue
        g = (_softmax(z) - np.eye(V)[y]) / counted       # mean over the counted positions
        heights += [(ft.size(keyed[f"ig.{i}.{j}"], "height"), g[j]) for j in range(V)]
        assert ft.num(keyed[f"iloss.{i}"]["x"]["args"]["loss"]) == pytest.approx(
            -np.log(_softmax(z)[y]), abs=5e-5)
    ft.proportional(heights)
    Vp = -(-V // tp) * tp
    slots = {int(k.split(".")[1]): n for k, n in keyed.items() if k.startswith("slot.")}
    assert sorted(slots) == list(range(Vp))
    assert all(("pad" in n["a"]["class"].split()) == (j >= V) for j, n in slots.items())


@pytest.mark.parametrize("name", ["vocab-ce", "vocab-extras"])
def test_section_has_its_figure(name):
    figures = render(name)["figures"]
    assert list(figures) == [name]
    for svg in ft.svgs(figures[name]):
        assert svg["c"][0]["x"]["key"].startswith("fig.")      # a translated title (the accessible name)


@pytest.mark.parametrize("tp", range(1, 7))
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5])
def test_vocab_extras_what_each_rank_adds_up(tp, eps):
    """Megatron's per-rank term: the mean of log p over the rank's K columns of the 0-padded
    logits (torch.log_softmax); ours: Σ (z − m) over the rank's real ids, and after the AllReduce
    (1/V) Σ log p = Σ/V − log s, the smoothing term F.cross_entropy(label_smoothing=ε) uses."""
    import torch                                       # the reference (installed with the test extras)
    F = torch.nn.functional
    fig = render("vocab-extras", {"tp": str(tp), "smoothing": eps})["figures"]["vocab-extras"]
    Vp = -(-V // tp) * tp
    K = Vp // tp
    zp = torch.tensor(np.concatenate([LOGITS, np.zeros(Vp - V)]), dtype=torch.float64)
    logp = F.log_softmax(zp, dim=0).numpy()
    shifted = LOGITS - LOGITS.max()
    for svg in ft.svgs(fig):
        keyed = ft.keyed(svg)
        for r in range(tp):
            assert ft.num(keyed[f"megmean.{r}"]["x"]) == pytest.approx(logp[r * K:(r + 1) * K].mean(), abs=5e-5)
        bars = [(ft.size(keyed[f"logp.{j}"], "height"), -logp[j]) for j in range(Vp)]
        ft.proportional(bars)
        if eps == 0:
            assert not any(k.startswith("oursum.") for k in keyed)
            continue
        sums = [shifted[r * K:min((r + 1) * K, V)].sum() for r in range(tp)]
        for r in range(tp):
            assert ft.num(keyed[f"oursum.{r}"]["x"]) == pytest.approx(sums[r], abs=0.051)
        z = torch.tensor(LOGITS[None, :], dtype=torch.float64)
        y = torch.tensor([2])
        smooth = (F.cross_entropy(z, y, label_smoothing=eps) - (1 - eps) * F.cross_entropy(z, y)).item() / eps
        assert sum(sums) / V - math.log(np.exp(shifted).sum()) == pytest.approx(-smooth, abs=1e-12)
    table = render("vocab-extras", {"tp": str(tp), "smoothing": eps})["tables"]["vocab-smoothing"]
    if eps:
        assert ft.num(table["foot"][0][3]) == pytest.approx(shifted.sum(), abs=0.051)   # the AllReduce's result
