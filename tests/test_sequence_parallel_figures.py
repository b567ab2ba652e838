"""Page 4's figures against references computed here (tests/test_figures.py checks every figure's
contract generically): the ranks drawn, each rank's token shard, the order of the gathered rows
(right and wrong gather), dropped entries = the one-device mask's block, the γ/β numbers and their
AllReduce, the lit step, and the memory bars (one per configuration, the chosen one lit)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tpmath import sp_layer as core
from tpmath.views import render
from tpmath.views import sp_layer as spv
from tpmath.views.tree import walk

from test_sequence_parallel import block   # noqa: E402  the independent numpy block
from test_figures import collective_moves   # noqa: E402  arrows in from every rank, out to every rank

STEPS = spv.STEP_NAMES
MINUS = "\u2212"


def drawings(fig: dict) -> list[dict]:
    """The <svg> drawings of a figure (one, or a desktop and a phone layout)."""
    return [c for c in fig["c"] if c["t"] == "svg"]


def part(svg: dict, name: str) -> dict:
    found = [n for n in walk(svg) if n.get("a", {}).get("data-part") == name]
    assert len(found) == 1, name
    return found[0]


def token_rows(block: dict) -> list[str | None]:
    """The rank tint of each token row of a drawn block (one rect per token, see fig_sp_layer.Block)."""
    rects = [n for n in block["c"] if n["t"] == "rect" and "cell" in n["a"]["class"].split()]
    return [r["a"].get("data-rank") for r in rects]


def token_labels(block: dict) -> list[int]:
    return [int(n["x"]) for n in block["c"] if n["t"] == "text" and n["a"]["class"] == "tok"]


@pytest.mark.parametrize("tp,seq", [(1, 4), (2, 4), (2, 8), (4, 4), (4, 8)])
@pytest.mark.parametrize("step", ["gather", "grad-scatter"])
def test_ranks_and_token_shards(tp, seq, step):
    fig = render("sp-layer", {"tp": str(tp), "seq": str(seq), "step": step})["figures"]["sp-layer"]
    s_l = seq // tp
    for svg in drawings(fig):
        ranks = {n["a"]["data-rank"] for n in walk(svg) if "data-rank" in n.get("a", {})}
        assert ranks == {str(r) for r in range(tp)}
        in_bands = {id(n) for b in walk(svg) if b.get("a", {}).get("data-part", "").startswith("band-")
                    for n in walk(b)}
        badges = [n["x"] for n in walk(svg) if n["t"] == "text" and n["a"].get("class") == "badge-t"
                  and id(n) not in in_bands]
        assert badges == [f"R{r}" for r in range(tp)]           # the columns' heads (the bands name theirs)
        first, full = ("X", "A_full") if step == "gather" else ("G_Y", "G_O_full")
        for r in range(tp):
            own = part(svg, f"{first}.{r}")
            assert token_rows(own) == [str(r)] * s_l                          # s/t tokens, all rank r's
            assert token_labels(own) == list(range(r * s_l, (r + 1) * s_l))
            gathered = part(svg, f"{full}.{r}")
            assert token_rows(gathered) == [str(q) for q in range(tp) for _ in range(s_l)]   # rank order
            assert token_labels(gathered) == list(range(seq))


@pytest.mark.parametrize("tp", spv.TP_OPTIONS)
@pytest.mark.parametrize("step", ["gather", "grad-w"])
def test_the_conversions_move_each_ranks_tokens_tinted_by_the_rank_they_come_from(tp, step):
    """AllGather: rank r's shard (its tint) in, every shard to every rank; ReduceScatter: every
    rank's partial in, rank r keeps block r of the sum. Expected from numpy on marked data: rank
    r's shard is e_r (a one-hot vector), a block holding several ranks' ones is a sum ("fin")."""
    fig = render("sp-layer", {"tp": str(tp), "seq": "4", "step": step})["figures"]["sp-layer"]
    mark = np.eye(tp)
    gathered = np.concatenate([mark[r][None] for r in range(tp)])          # np.concatenate of the shards
    summed = np.sum([np.tile(mark[r], (tp, 1)) for r in range(tp)], axis=0)

    def who(v):
        return "fin" if np.count_nonzero(v) > 1 else int(np.flatnonzero(v)[0])
    want_gather = [[who(b) for b in gathered] for _ in range(tp)]
    want_scatter = [[who(b) if k == r else None for k, b in enumerate(summed)] for r in range(tp)]
    for svg in drawings(fig):
        assert collective_moves(svg, "band-1", tp) == want_gather
        assert collective_moves(svg, "band-3", tp) == want_scatter


@pytest.mark.parametrize("tp,seq", [(2, 8), (4, 8), (4, 4)])
def test_wrong_gather_shows_the_rows_out_of_order(tp, seq):
    fig = render("sp-layer", {"tp": str(tp), "seq": str(seq), "mistake": "gather-wrong-dim"})["figures"]["sp-layer"]
    s_l = seq // tp
    # concatenated along h and read as tokens: row k comes from rank k mod t, token (k mod t)·s/t + ⌊k/t⌋
    want_rank = [str(k % tp) for k in range(seq)]
    want_token = [(k % tp) * s_l + k // tp for k in range(seq)]
    for svg in drawings(fig):
        for r in range(tp):
            block = part(svg, f"A_full.{r}")
            assert token_rows(block) == want_rank and token_labels(block) == want_token
    back = render("sp-layer", {"tp": str(tp), "seq": str(seq), "mistake": "gather-wrong-dim",
                               "step": "grad-ln"})["figures"]["sp-layer"]
    for svg in drawings(back):
        for r in range(tp):     # the wrong ReduceScatter leaves rank r tokens r, r + t, …
            assert token_labels(part(svg, f"G_A.{r}")) == [i * tp + r for i in range(s_l)]


@pytest.mark.parametrize("mistake", ["none", "same-dropout-seed"])
def test_dropped_entries_are_the_masks(mistake):
    tp, seq, p = 4, 8, 0.25
    res = render("sp-layer", {"tp": str(tp), "seq": str(seq), "dropout": str(p), "mistake": mistake, "step": "tp"})
    one = core.reference_masks(core.validate_options(tp=tp, seq=seq, batch=1, hidden=4, ffn=8, dropout=p))
    f_l = 8 // tp
    for svg in drawings(res["figures"]["sp-layer"]):
        for r in range(tp):
            block = part(svg, f"H.{r}")
            dropped = sum(1 for n in block["c"] if n["t"] == "line" and n["a"]["class"] == "drop")
            sub = [n["x"] for n in block["c"] if n["t"] == "text" and n["a"]["class"] == "dimtext"][0]
            if mistake == "none":       # rank r's block of the one-device mask
                assert dropped == int(np.sum(~one["H"][0][:, r * f_l:(r + 1) * f_l]))
                assert sub == {"key": "fig.sp_mask_ok"}
            else:                       # rank 0's block, repeated
                assert dropped == int(np.sum(~one["H"][0][:, :f_l]))
                assert sub == {"key": "fig.sp_mask_ok" if r == 0 else "fig.sp_mask_bad"}


def test_the_step_is_lit():
    for step in STEPS:
        fig = render("sp-layer", {"step": step})["figures"]["sp-layer"]
        for svg in drawings(fig):
            circles = [n for n in walk(svg) if n["t"] == "circle"]
            assert len(circles) == 9 and ["hl" in c["a"]["class"] for c in circles] == [s == step for s in STEPS]
            lit = [n for n in walk(svg) if n["t"] == "rect" and "hl" in n["a"].get("class", "").split()]
            assert len(lit) == (2 if step == "grad-gather" else 1)


@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize("mistake", ["none", "ln-grad-not-reduced"])
def test_layernorm_figure_numbers(tp, mistake):
    res = render("sp-layer", {"tp": str(tp), "seq": "8", "mistake": mistake})
    run = core.run_sp_layer(tp=tp, seq=8, batch=1, mistake=mistake)
    fig = res["figures"]["sp-ln"]
    texts = {n["a"]["data-key"]: float(n["x"].replace(MINUS, "-")) for n in walk(fig)
             if n["t"] == "text" and "data-key" in n.get("a", {})}
    # each rank's partial sums over its tokens, from the block written out in numpy (test_sequence_parallel)
    ref = block(run.inputs)
    xh, G_A = ref["xhat"], ref["G_A"]
    s_l = 8 // tp
    for r in range(tp):
        want_g = (G_A * xh)[r * s_l:(r + 1) * s_l].sum(0)
        want_b = G_A[r * s_l:(r + 1) * s_l].sum(0)
        for j in range(4):
            assert abs(texts[f"G_gamma_partial.{r}.0.{j}"] - want_g[j]) <= 5.01e-5
            assert abs(texts[f"G_beta_partial.{r}.0.{j}"] - want_b[j]) <= 5.01e-5
    ranks = {n["a"]["data-rank"] for n in walk(fig) if "data-rank" in n.get("a", {})}
    assert ranks == {str(r) for r in range(tp)}
    box = [n for n in walk(fig) if n.get("a", {}).get("data-part") == "ln-allreduce"]
    if mistake == "none":
        assert all(n["a"]["class"] == "hl" for n in box)
        for j in range(4):
            assert abs(texts[f"G_gamma.0.{j}"] - (G_A * xh).sum(0)[j]) <= 5.01e-5
    else:
        assert all(n["a"]["class"] == "dim" for n in box)
        assert not any(k.startswith("G_gamma.") for k in texts)


@pytest.mark.parametrize("preset,tp,sp,rc", [("llama-2-7b", "8", "off", "none"), ("paper-22b", "8", "on", "selective"),
                                             ("llama-2-70b", "1", "off", "full"), ("gpt-3-175b", "4", "on", "full")])
def test_memory_bars(preset, tp, sp, rc):
    res = render("memory", {"preset": preset, "tp": tp, "sp": sp, "recompute": rc})
    fig = res["figures"]["memory"]
    want = ["tp", "tp-selective", "full"] if res["controls"]["tp"] == "1" else \
        ["tp", "tp-sp", "tp-selective", "tp-sp-selective", "full", "full-sp"]
    chosen = {("off", "none"): "tp", ("on", "none"): "tp-sp", ("off", "selective"): "tp-selective",
              ("on", "selective"): "tp-sp-selective", ("off", "full"): "full", ("on", "full"): "full-sp"}[
        (res["controls"]["sp"], rc)]
    for svg in drawings(fig):
        bars = [n["a"]["data-part"][4:] for n in walk(svg) if n.get("a", {}).get("data-part", "").startswith("bar-")]
        assert bars == want
        lit = [n["a"]["data-part"][4:] for n in walk(svg) if n.get("a", {}).get("data-part", "").startswith("bar-")
               and n["a"].get("class") == "hl"]
        assert lit == [chosen]
        # within a drawing the model states are the same width in every bar; activations shrink
        widths = {}
        for n in walk(svg):
            if n.get("a", {}).get("data-part", "").startswith("bar-"):
                widths[n["a"]["data-part"][4:]] = [float(r["a"]["width"]) for r in n["c"]
                                                    if r["t"] == "rect" and "mem-seg" in r["a"]["class"].split()]
        states = {tuple(w[:3]) for w in widths.values()}
        assert len(states) == 1
        assert widths["tp"][3] >= widths["full"][-1]


@pytest.mark.parametrize("preset,tp,sp,rc,attention", [("llama-2-7b", "8", "off", "none", "eager"),
                                                       ("paper-22b", "8", "on", "selective", "eager"),
                                                       ("llama-2-7b", "4", "on", "none", "flash"),
                                                       ("llama-2-70b", "1", "off", "full", "flash")])
def test_memory_layer_bars(preset, tp, sp, rc, attention):
    """One layer's activations: each configuration's bar split as the paper's terms split it
    (test_memory.paper_split, typed in), segment lengths in proportion, the chosen one lit."""
    from test_memory import paper_split
    res = render("memory", {"preset": preset, "tp": tp, "sp": sp, "recompute": rc, "attention": attention})
    c = res["controls"]
    s, b, h, a, t = (int(c[k]) for k in ("seq", "batch", "hidden", "heads", "tp"))
    want_bars = ["tp", "tp-selective", "full"] if t == 1 else \
        ["tp", "tp-sp", "tp-selective", "tp-sp-selective", "full", "full-sp"]
    chosen = {("off", "none"): "tp", ("on", "none"): "tp-sp", ("off", "selective"): "tp-selective",
              ("on", "selective"): "tp-sp-selective", ("off", "full"): "full", ("on", "full"): "full-sp"}[(c["sp"], rc)]
    want = {name: paper_split(s, b, h, a, t, "sp" in name, {"full": "full", "full-sp": "full"}.get(
        name, "selective" if "selective" in name else "none"), attention) for name in want_bars}
    for svg in drawings(res["figures"]["memory-layer"]):
        bars = {n["a"]["data-part"][6:]: n for n in walk(svg) if n.get("a", {}).get("data-part", "").startswith("layer-")}
        assert list(bars) == want_bars
        assert [k for k, n in bars.items() if n["a"].get("class") == "hl"] == [chosen]
        widths = {r["a"]["data-key"]: float(r["a"]["width"]) for n in bars.values() for r in n["c"]
                  if r["t"] == "rect" and "mem-seg" in r["a"]["class"].split()}
        assert {k for k in widths} == {f"{name}.{part}" for name, w in want.items() for part, v in w.items() if v > 0}
        longest = max(sum(w.values()) for w in want.values())      # the bars share one axis
        unit = sum(w for k, w in widths.items() if k.startswith("tp.")) / sum(want["tp"].values())
        assert sum(want["tp"].values()) == longest
        for k, w in widths.items():
            name, part = k.split(".")
            assert w == pytest.approx(max(unit * want[name][part], 0.5), rel=2e-3, abs=0.06), k


def reference_keep(key: int, rows: int, cols: int, p: float) -> np.ndarray:
    """One dropout call's keep-mask from a pure-Python SplitMix64, counters token-major from 0."""
    from test_sp_layer import splitmix_uniform
    return np.array([[splitmix_uniform(key, i * cols + j) >= p for j in range(cols)] for i in range(rows)])


def drawn_dropped(panel: dict) -> tuple[set, list]:
    """(dropped (row, col) entries, row tints) of a drawn token map."""
    cells = [n for n in panel["c"] if n["t"] == "rect" and "cell" in n["a"]["class"].split()]
    x0, y0, size = float(cells[0]["a"]["x"]), float(cells[0]["a"]["y"]), float(cells[0]["a"]["height"])
    off = {(round((float(n["a"]["y"]) - y0) / size), round((float(n["a"]["x"]) - x0) / size))
           for n in panel["c"] if n["t"] == "rect" and n["a"]["class"] == "cell-off"}
    return off, [c["a"].get("data-rank") for c in cells]


@pytest.mark.parametrize("tp,seq,p", [("2", "8", "0.25"), ("4", "8", "0.5"), ("2", "4", "0.1"), ("4", "4", "0.25")])
def test_dropout_masks_per_rank(tp, seq, p):
    """Every rank's crossed entries are the mask a pure-Python SplitMix64 draws with Megatron's
    seeds: key = seed on every rank (the default state), seed + 2718 + rank (the model-parallel
    state); the shared seed repeats rank 0's mask, the per-rank seeds do not."""
    res = render("dropout", {"tp": tp, "seq": seq, "dropout": p})
    t, s, q = int(tp), int(seq), float(p)
    want = {"replicated": [reference_keep(0, s, 4, q) for r in range(t)],
            "sharded-same": [reference_keep(0, s // t, 4, q) for r in range(t)],
            "sharded-offset": [reference_keep(2718 + r, s // t, 4, q) for r in range(t)]}
    for svg in drawings(res["figures"]["dropout"]):
        for case, masks in want.items():
            for r, keep in enumerate(masks):
                panel = part(svg, f"dr-{case}-{r}")
                off, tints = drawn_dropped(panel)
                assert off == {(int(i), int(j)) for i, j in zip(*np.nonzero(~keep))}, (case, r)
                assert tints == ([None] * s if case == "replicated" else [str(r)] * (s // t))
                subs = [n["x"]["key"] for n in walk(panel) if isinstance(n.get("x"), dict)]
                if r:
                    assert subs == ["fig.dr_eq0" if np.array_equal(keep, masks[0]) else "fig.dr_ne0"]
        assert all(np.array_equal(m, want["sharded-same"][0]) for m in want["sharded-same"])
    rows = res["tables"]["dr-masks"]["rows"]
    for r, row in enumerate(rows):
        assert row[2] == f"2\u202f{718 + r}"
        assert [int(row[3]), int(row[4])] == [int((~want[k][r]).sum()) for k in ("sharded-same", "sharded-offset")]
