"""Page 4 (sequence parallelism): the views sp-layer and memory against references computed here.

Independent references: the TP + SP block is recomputed below with plain numpy from its formulas
(LayerNorm, tanh, the two matrices, inverted dropout, residual; the backward pass written out),
sliced by rank the way the page says ranks hold their shards; the collectives' element counts and
ring traffic are the nccl-tests factors typed in; Table 2's formulas, the extra terms of §4.3 and
the parameter count of Llama-2-7B are typed in from the paper and the model's config.  Every check
compares numbers (the tables' texts parsed back), never a view's output with itself.  Controls:
every value of every control renders or raises TPMathError naming its control; the control_state
rules; every i18n key the sections emit exists in both languages.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from tpmath import TPMathError
from tpmath import sp_layer as core
from tpmath import fmt
from tpmath.views import render, sections
from tpmath.views import sp_layer as spv
from tpmath.views.tree import walk

ROOT = Path(__file__).resolve().parents[1]
MINUS = "\u2212"
SPACES = str.maketrans("", "", "\u2009\u202f\u00a0 ")   # digit grouping in fmt.integer
STEPS = ("ln", "gather", "tp", "scatter", "residual", "grad-gather", "grad-w", "grad-scatter", "grad-ln")
EPS = 1e-5


def num(text: str) -> float:
    """The leading number of a cell ("12.5\u00a0%", "3.03 GiB", "−0.8139")."""
    return float(text.replace(MINUS, "-").replace("\u00a0", " ").replace("\u202f", " ").split()[0])


def mat(cell) -> np.ndarray:
    """A grid cell (tree.grid: rows of numbers) back to numbers; a text cell's leading number."""
    rows = [[num(td["x"]) for td in tr.get("c", [])] for tr in walk(cell["el"]) if tr["t"] == "tr"]
    return np.array(rows, dtype=float)


def rank_of(cell) -> tuple[str, str]:
    """(text, data-rank) of a rank-tag row header."""
    node = cell["el"]
    return node["x"], node["a"]["data-rank"]


def err(text: str) -> float:
    """The number behind an fmt.err string ("< 1e−15" counts as 1e-15)."""
    return 1e-15 if text.startswith("<") else num(text)


def cell_key(cell) -> str | None:
    return cell.get("key") if isinstance(cell, dict) else None


# ------------------------------------------------------------------ the block, independently

def block(inp: dict, keep_h=None, keep_o=None, p: float = 0.0) -> dict:
    """One device, b = 1, from the formulas (x̂ = (x − μ)/√(σ² + ε), γ x̂ + β, tanh, inverted dropout)."""
    X, g, be, W1, W2, G = (inp[k][0] if inp[k].ndim == 3 else inp[k] for k in ("X", "gamma", "beta", "W1", "W2", "G"))
    drop_h = (lambda a: a) if keep_h is None else (lambda a: a * keep_h[0] / (1 - p))
    drop_o = (lambda a: a) if keep_o is None else (lambda a: a * keep_o[0] / (1 - p))
    mu = X.mean(axis=1, keepdims=True)
    sd = np.sqrt(((X - mu) ** 2).mean(axis=1, keepdims=True) + EPS)
    xh = (X - mu) / sd
    A = g * xh + be
    H = np.tanh(A @ W1)
    Hd = drop_h(H)
    O = Hd @ W2
    Y = X + drop_o(O)
    GO = drop_o(G)
    GH = drop_h(GO @ W2.T)
    GZ = GH * (1 - H ** 2)
    GA = GZ @ W1.T
    ga = GA * g                                   # d/dx̂
    h = X.shape[1]
    GXln = (ga - ga.mean(axis=1, keepdims=True) - xh * (ga * xh).mean(axis=1, keepdims=True)) / sd
    return {"X": X, "A": A, "xhat": xh, "H": H, "Hd": Hd, "O": O, "Y": Y, "G": G, "G_O": GO, "G_Z": GZ,
            "G_A": GA, "G_X": G + GXln, "G_W1": A.T @ GZ, "G_W2": Hd.T @ GO, "loss": float(np.sum(Y * G)),
            "G_gamma": (GA * xh).sum(axis=0), "G_beta": GA.sum(axis=0), "W1": W1, "W2": W2, "h": h}


def expected_step(ref: dict, step: str, t: int, r: int) -> list[np.ndarray]:
    """What rank r holds at ``step`` (its tokens [r·s/t, (r+1)·s/t), its columns [r·F/t, (r+1)·F/t))."""
    s, F = ref["X"].shape[0], ref["W1"].shape[1]
    tok = slice(r * s // t, (r + 1) * s // t)
    col = slice(r * F // t, (r + 1) * F // t)
    partial_o = ref["Hd"][:, col] @ ref["W2"][col]
    partial_a = ref["G_Z"][:, col] @ ref["W1"][:, col].T
    return {
        "ln": [ref["X"][tok], ref["A"][tok]],
        "gather": [ref["A"][tok], ref["A"]],
        "tp": [ref["Hd"][:, col], partial_o],
        "scatter": [partial_o, ref["O"][tok]],
        "residual": [ref["O"][tok], ref["Y"][tok]],
        "grad-gather": [ref["G"][tok], ref["G_O"]],
        "grad-w": [ref["G_W2"][col], ref["G_W1"][:, col]],
        "grad-scatter": [partial_a, ref["G_A"][tok]],
        "grad-ln": [ref["G_A"][tok], ref["G_X"][tok]],
    }[step]


def inputs(seq: int) -> dict:
    return core.make_inputs(spv.SEED, spv.BATCH, seq, spv.HIDDEN, spv.FFN)


HALF_UNIT = 5.01e-4      # the tables show 3 decimals


@pytest.mark.parametrize("tp,seq", [(1, 4), (2, 4), (2, 8), (4, 4), (4, 8)])
@pytest.mark.parametrize("step", STEPS)
def test_every_step_table_equals_numpy(tp, seq, step):
    ref = block(inputs(seq))
    res = render("sp-layer", {"tp": str(tp), "seq": str(seq), "step": step})
    t = res["tables"]["sp-ranks"]
    assert len(t["rows"]) == tp
    s_l, f_l = seq // tp, spv.FFN // tp
    for r, row in enumerate(t["rows"]):
        assert rank_of(row[0]) == (f"R{r}", str(r))
        lo, width = (r * f_l, f_l) if step in ("tp", "grad-w") else (r * s_l, s_l)
        assert row[1] == (str(lo) if width == 1 else f"{lo}–{lo + width - 1}")
        for text, want in zip(row[2:], expected_step(ref, step, tp, r)):
            got = mat(text)
            assert got.shape == want.shape and np.max(np.abs(got - want)) <= HALF_UNIT, (step, r)
    one, merged, worst = t["foot"]
    whole = {"ln": ["X", "A"], "gather": ["A", "A"], "tp": ["Hd", "O"], "scatter": ["O", "O"], "residual": ["O", "Y"],
             "grad-gather": ["G", "G_O"], "grad-w": ["G_W2", "G_W1"], "grad-scatter": ["G_A", "G_A"],
             "grad-ln": ["G_A", "G_X"]}[step]
    for i, key in enumerate(whole):
        assert np.max(np.abs(mat(one[2 + i]) - ref[key])) <= HALF_UNIT
        assert np.max(np.abs(mat(merged[2 + i]) - ref[key])) <= HALF_UNIT
        assert err(worst[2 + i]) < 1e-12


def test_values_and_check_table_equal_numpy():
    ref = block(inputs(4))
    res = render("sp-layer", {})
    v = res["values"]
    assert abs(num(v["sp-loss"]) - ref["loss"]) <= 5e-5 and abs(num(v["sp-reference-loss"]) - ref["loss"]) <= 5e-5
    assert err(v["sp-max-err"]) < 1e-12
    rows = {row[0]: row for row in res["tables"]["sp-check"]["rows"]}
    assert set(rows) == {"Y", "ℒ", "G_X", "G_γ", "G_β", "G_W₁", "G_W₂"}
    assert rows["G_W₁"][1] == "4×8" and rows["Y"][1] == "1×4×4" and rows["ℒ"][1] == "1"
    for row in rows.values():
        assert err(row[2]) < err(row[3]) < 1e-10 and row[4] == "✓" and err(row[5]) < 1e-13


def measured(shown: str, independent: float, scale: float) -> bool:
    """Whether a readout is the measured error ``independent`` (max |sharded − this file's numpy
    block|) of values reaching ``scale``: two digits (or "< 1e−15" below that, fmt.err's rule, the
    same on every page), never the tolerance.  The core's reference and this one differ by rounding,
    a few ulps of ``scale``: the shown error may differ from ``independent`` by that much."""
    slack = 8 * np.finfo(float).eps * max(1.0, scale)
    if shown.startswith("<"):                    # a bound: only fmt.err's own floor, never a tolerance
        return shown == fmt.err(0.0) and independent < 1e-15 + slack
    return abs(err(shown) - independent) <= 0.06 * independent + slack


@pytest.mark.parametrize("tp, seq, mistake", [(2, 4, "none"), (4, 8, "none"), (2, 4, "ln-grad-not-reduced"),
                                              (2, 8, "gather-wrong-dim")])
def test_error_readouts_are_the_measured_errors_not_the_tolerance(tp, seq, mistake):
    """Issue 25 item 5: the check table and "largest error" printed the tolerance ("< 4e−12")."""
    ref = block(inputs(seq))
    res = render("sp-layer", {"tp": str(tp), "seq": str(seq), "mistake": mistake})
    run = spv.run(tp, seq, mistake, 0.0)
    rows = {row[0]: row for row in res["tables"]["sp-check"]["rows"]}
    worst, slack = 0.0, 0.0
    for key, sym in spv.QUANTITY.items():
        want = np.asarray(ref[key], dtype=float)
        got = np.asarray(getattr(run.sharded, key), dtype=float).reshape(want.shape)
        independent = float(np.max(np.abs(got - want)))
        scale = float(np.max(np.abs(want)))
        slack = max(slack, 8 * np.finfo(float).eps * max(1.0, scale))
        worst = max(worst, independent)
        assert measured(rows[sym][2], independent, scale), (sym, rows[sym], independent)
        assert rows[sym][3] == fmt.err(core.REL_TOL * max(1.0, float(np.max(np.abs(want))))), rows[sym]
    # the largest of the measured errors, not the largest tolerance
    assert measured(res["values"]["sp-max-err"], worst, slack / (8 * np.finfo(float).eps)), (res["values"], worst)
    if mistake == "none":
        assert err(res["values"]["sp-max-err"]) < 1e-13


@pytest.mark.parametrize("tp,seq", [(2, 4), (4, 8)])
def test_layernorm_table_partial_sums_equal_numpy(tp, seq):
    ref = block(inputs(seq))
    res = render("sp-layer", {"tp": str(tp), "seq": str(seq)})
    t = res["tables"]["sp-ln"]
    s_l = seq // tp
    partial_g = [(ref["G_A"] * ref["xhat"])[r * s_l:(r + 1) * s_l].sum(axis=0) for r in range(tp)]
    partial_b = [ref["G_A"][r * s_l:(r + 1) * s_l].sum(axis=0) for r in range(tp)]
    for r, row in enumerate(t["rows"]):
        assert np.max(np.abs(mat(row[2]) - partial_g[r])) <= 5.01e-5
        assert np.max(np.abs(mat(row[3]) - partial_b[r])) <= 5.01e-5
    assert max(np.max(np.abs(partial_g[0] - p)) for p in partial_g) > 1e-3      # the partials differ
    summed, one, worst = t["foot"]
    assert cell_key(summed[0]) == "label.sp_ln_sum"
    for i, key in ((2, "G_gamma"), (3, "G_beta")):
        assert np.max(np.abs(mat(summed[i]) - ref[key])) <= 5.01e-5
        assert np.max(np.abs(mat(one[i]) - ref[key])) <= 5.01e-5
        assert err(worst[i]) < 1e-12


def test_layernorm_mistake_leaves_each_rank_its_own_row():
    ref = block(inputs(8))
    res = render("sp-layer", {"tp": "4", "seq": "8", "mistake": "ln-grad-not-reduced"})
    summed, _, worst = res["tables"]["sp-ln"]["foot"]
    assert cell_key(summed[0]) == "label.sp_ln_none" and summed[2:] == ["—", "—"]
    # each rank steps with its own partial sum: the error is the worst |partial − full|
    s_l = 2
    want = max(float(np.max(np.abs((ref["G_A"] * ref["xhat"])[r * s_l:(r + 1) * s_l].sum(axis=0) - ref["G_gamma"])))
               for r in range(4))
    assert abs(err(worst[2]) - want) <= 0.06 * want
    rows = {row[0]: row for row in res["tables"]["sp-check"]["rows"]}
    assert rows["G_γ"][4] == "✗" and rows["Y"][4] == "✓" and rows["G_X"][4] == "✓"
    assert not any(c.collective == "all-reduce" for c in core.run_sp_layer(tp=4, seq=8, batch=1, mistake="ln-grad-not-reduced").comm)


@pytest.mark.parametrize("backward_input", ["regather", "keep"])
@pytest.mark.parametrize("tp,seq", [(2, 4), (4, 8)])
def test_comm_table_bytes_against_plain_tp(tp, seq, backward_input):
    res = render("sp-layer", {"tp": str(tp), "seq": str(seq), "backward_input": backward_input})
    t = res["tables"]["sp-comm"]
    n = seq * spv.BATCH * spv.HIDDEN                        # the whole s × b × h tensor
    half, full = (tp - 1) / tp * n, 2 * (tp - 1) / tp * n   # nccl-tests: AG / RS (n−1)/n, AR 2(n−1)/n
    regather = [("label.sp_sp_backward", "g", "AllGather", n, half)] if backward_input == "regather" else []
    want = [("label.sp_sp_forward", "g", "AllGather", n, half), ("label.sp_sp_forward", "ḡ", "ReduceScatter", n, half),
            ("label.sp_sp_backward", "ḡ", "AllGather", n, half), *regather,
            ("label.sp_sp_backward", "g", "ReduceScatter", n, half),
            ("label.sp_sp_backward", "γ, β", "AllReduce", 2 * spv.HIDDEN, (tp - 1) / tp * 4 * spv.HIDDEN),
            ("label.sp_tp_forward", "f̄", "AllReduce", n, full), ("label.sp_tp_backward", "f", "AllReduce", n, full)]
    for row, (key, op, coll, elements, sent) in zip(t["rows"], want, strict=True):
        assert (cell_key(row[0]), row[1], row[2]) == (key, op, coll)
        assert int(row[4].translate(SPACES)) == elements and abs(num(row[5]) - sent) < 1e-9
    sp_total, tp_total, ln = (num(r[-1]) for r in t["foot"])
    assert tp_total == 4 * half
    # keeping the gathered input: the same bytes; Megatron's re-gather: one more half, +25 %
    assert sp_total == (5 if backward_input == "regather" else 4) * half
    assert num(res["values"]["sp-sent"]) == sp_total and num(res["values"]["tp-sent"]) == tp_total
    note = res["notes"]["sp-bytes"]
    assert note["key"] == f"note.sp_bytes_{backward_input}"
    assert note["args"]["extra"].startswith("25" if backward_input == "regather" else "0")
    assert ln == pytest.approx((tp - 1) / tp * 4 * spv.HIDDEN)


def test_one_rank_disables_the_backward_input_choice():
    res = render("sp-layer", {"tp": "1", "seq": "4"})
    assert res["control_state"]["backward_input"]["disabled"]
    assert "sp-bytes" not in res["notes"]


@pytest.mark.parametrize("tp,seq,p", [(2, 4, 0.25), (4, 8, 0.5), (2, 8, 0.1)])
def test_masks_are_blocks_of_the_one_device_masks_from_their_counters(tp, seq, p):
    o = core.validate_options(tp=tp, seq=seq, batch=1, hidden=4, ffn=8, dropout=p)
    one = core.reference_masks(o)                             # the one-device masks (an input here)
    res = render("sp-layer", {"tp": str(tp), "seq": str(seq), "dropout": str(p), "step": "tp"})
    t = res["tables"]["sp-masks"]
    s, h, F = seq, 4, 8
    s_l, f_l = s // tp, F // tp
    for r, row in enumerate(t["rows"]):
        # counters typed from the page's rule: H over [r·s·F/t, …), O after the s·F of H, in token order
        assert row[1] == f"{r * s * f_l}–{(r + 1) * s * f_l - 1}"
        assert row[3] == f"{s * F + r * s_l * h}–{s * F + (r + 1) * s_l * h - 1}"
        assert np.array_equal(mat(row[2]), one["H"][0][:, r * f_l:(r + 1) * f_l].astype(float))
        assert np.array_equal(mat(row[4]), one["O"][0][r * s_l:(r + 1) * s_l].astype(float))
        assert row[5] == "✓"
    # and the block with these masks equals the numpy block with the same masks
    ref = block(inputs(seq), one["H"], one["O"], p)
    res_r = render("sp-layer", {"tp": str(tp), "seq": str(seq), "dropout": str(p), "step": "residual"})
    for r, row in enumerate(res_r["tables"]["sp-ranks"]["rows"]):
        assert np.max(np.abs(mat(row[3]) - expected_step(ref, "residual", tp, r)[1])) <= HALF_UNIT


def test_same_dropout_seed_repeats_one_mask_on_every_rank():
    res = render("sp-layer", {"tp": "4", "seq": "8", "mistake": "same-dropout-seed", "step": "tp"})
    assert res["controls"]["dropout"] == "0.25"                       # p = 0 raised to the demo's p
    dropout_state = res["control_state"]["dropout"]
    assert {k: dropout_state[k] for k in ("disabled", "value")} == {"disabled": False, "value": "0.25"}
    assert list(dropout_state["options"]) == ["0"]                    # p = 0 offered disabled, with why
    rows = res["tables"]["sp-masks"]["rows"]
    for col in (2, 4):                                                # the same mask everywhere
        assert all(np.array_equal(mat(r[col]), mat(rows[0][col])) for r in rows)
    assert len({r[1] for r in rows}) == 1                             # from the same counters
    assert all(r[5] == "✗" for r in rows)
    check = {row[0]: row for row in res["tables"]["sp-check"]["rows"]}
    assert check["Y"][4] == "✗" and err(check["Y"][2]) > 1e-3


def test_gather_on_the_hidden_dim_puts_rows_in_the_wrong_order():
    ref = block(inputs(8))
    res = render("sp-layer", {"tp": "2", "seq": "8", "mistake": "gather-wrong-dim", "step": "gather"})
    t, s_l = 2, 4
    for row in res["tables"]["sp-ranks"]["rows"]:
        # concatenated along h and read as tokens: row k holds token (k mod t)·s/t + ⌊k/t⌋
        want = ref["A"][[(k % t) * s_l + k // t for k in range(8)]]
        assert np.max(np.abs(mat(row[3]) - want)) <= HALF_UNIT
    assert err(res["tables"]["sp-ranks"]["foot"][2][3]) > 0.1
    assert "sp-noop" not in res["notes"]
    same = render("sp-layer", {"tp": "4", "seq": "4", "mistake": "gather-wrong-dim"})   # one token per rank
    assert cell_key(same["notes"]["sp-noop"]) == "note.sp_gather_noop"
    assert err(same["values"]["sp-max-err"]) < 1e-12


def test_matrices_are_grids_and_rank_rows_rank_tags():
    """Matrices and vectors are grid cells (no "[[…]]" text), tinted by the rank holding them; the
    rank rows are headed by rank tags of the same rank."""
    res = render("sp-layer", {"tp": "4", "seq": "8", "dropout": "0.25", "step": "tp"})
    for name, t in res["tables"].items():
        for row in t["rows"] + t["foot"]:
            assert not any(isinstance(c, str) and c.startswith("[") for c in row), (name, row)
    for name in ("sp-ranks", "sp-ln", "sp-masks"):
        for r, row in enumerate(res["tables"][name]["rows"]):
            assert rank_of(row[0]) == (f"R{r}", str(r))
            grids = [c["el"] for c in row if isinstance(c, dict) and c.get("el", {}).get("t") == "table"]
            assert grids and all(g["a"]["data-rank"] == str(r) for g in grids), name
        for row in res["tables"][name]["foot"]:
            assert all("data-rank" not in c["el"]["a"] for c in row if isinstance(c, dict) and "el" in c)


# ------------------------------------------------------------------ controls and errors

SP_VALUES = {"tp": ("1", "2", "4"), "seq": ("4", "8"), "mistake": core.MISTAKES, "dropout": ("0", "0.1", "0.25", "0.5"),
             "backward_input": core.BACKWARD_INPUTS}


def test_every_setting_renders_with_the_right_state():
    """Every combination of tp, s, mistake and dropout (the step only picks which table and which
    part of the figure; it cycles through all nine here and every step is rendered in full above)."""
    for i, combo in enumerate(itertools.product(*SP_VALUES.values())):
        c = dict(zip(SP_VALUES, combo), step=STEPS[i % len(STEPS)])
        res = render("sp-layer", c)
        assert len(res["tables"]["sp-ranks"]["rows"]) == int(c["tp"])
        state = res["control_state"]
        if c["tp"] == "1":
            assert state["mistake"]["disabled"] and state["mistake"]["value"] == "none"
            assert cell_key(state["mistake"]["why"]) == "note.sp_why_one_rank" and res["controls"]["mistake"] == "none"
        else:
            assert "mistake" not in state and res["controls"]["mistake"] == c["mistake"]
        dropped = res["controls"]["dropout"] != "0"
        assert ("sp-masks" in res["tables"]) == dropped
        expect_ok = res["controls"]["mistake"] == "none" or (c["mistake"] == "gather-wrong-dim" and c["seq"] == c["tp"])
        assert (err(res["values"]["sp-max-err"]) < 1e-12) == expect_ok, c
        assert res["real"][0]["command"].startswith(f"torchrun --standalone --nproc-per-node {c['tp']} -m tpmath.real sp-layer")


@pytest.mark.parametrize("controls,field", [
    ({"tp": "3"}, "tp"), ({"tp": "8"}, "tp"), ({"tp": ""}, "tp"), ({"seq": "6"}, "seq"), ({"seq": "x"}, "seq"),
    ({"mistake": "oops"}, "mistake"), ({"dropout": "0.3"}, "dropout"), ({"dropout": "NaN"}, "dropout"),
    ({"step": "shards"}, "step"), ({"step": ""}, "step"), ({"backward_input": "store"}, "backward_input"),
])
def test_bad_sp_controls_name_the_control(controls, field):
    with pytest.raises(TPMathError) as exc:
        render("sp-layer", controls)
    assert exc.value.field == field
    assert exc.value.message("zh") and exc.value.message("en")


def test_real_ranks_block_follows_the_controls():
    res = render("sp-layer", {"tp": "4", "seq": "8", "mistake": "same-dropout-seed", "step": "grad-w"})
    cmd = res["real"][0]["command"]
    assert cmd == ("torchrun --standalone --nproc-per-node 4 -m tpmath.real sp-layer --tp 4 --stage backward --seq 8 "
                   "--batch 1 --mistake same-dropout-seed --dropout 0.25")
    out = res["real"][0]["output"]
    assert "[rank 3]" in out and "G_W1[:, 6:8]" in out and "max|Δ| Y" in out


# ------------------------------------------------------------------ memory

def sbh_formula(name: str, s, b, h, a, t) -> float:
    """Korthikanti et al. 2022, Table 2 (bytes per layer), typed in; full + SP = 2sbh/t (§5)."""
    return {"none": s * b * h * (34 + 5 * a * s / h), "tp": s * b * h * (10 + 24 / t + 5 * a * s / (h * t)),
            "tp-sp": s * b * h * (34 / t + 5 * a * s / (h * t)), "tp-selective": s * b * h * (10 + 24 / t),
            "tp-sp-selective": s * b * h * 34 / t, "full": 2 * s * b * h, "full-sp": 2 * s * b * h / t}[name]


def test_memory_defaults_are_llama_2_7b_with_typed_in_counts():
    res = render("memory", {})
    s, b, h, a, L, t, v, F = 4096, 1, 4096, 32, 32, 8, 32000, 11008
    vp = 32768                                                  # 32000 padded to a multiple of 128·t
    n = L * (4 * h * h + 3 * h * F) // t + L * 2 * h + 2 * vp * h // t + h   # Llama: no biases, RMSNorm γ, untied head
    assert res["values"]["mem-params"] == fmt.integer(n)
    per_layer = sbh_formula("tp", s, b, h, a, t)
    extra = s * b * h + 2 * s * b * h + 2 * s * b * h + 4 * s * b * vp / t   # §4.3 without SP, p = 1
    acts = L * per_layer + extra
    rows = {cell_key(r[0]): r for r in res["tables"]["mem-rank"]["rows"]}
    assert rows["label.mem_parameters"][2] == fmt.integer(2 * n)
    assert rows["label.mem_gradients"][2] == fmt.integer(4 * n)       # Megatron bf16: fp32 gradients
    assert rows["label.mem_optimizer"][2] == fmt.integer(12 * n)
    assert rows["label.mem_activations"][2] == fmt.integer(round(acts))
    assert res["tables"]["mem-rank"]["foot"][0][2] == fmt.integer(round(18 * n + acts))
    assert res["values"]["mem-per-layer"] == fmt.nbytes(per_layer)
    assert res["values"]["mem-total"] == fmt.nbytes(18 * n + acts)


@pytest.mark.parametrize("preset,seq,tp", [("llama-2-7b", 4096, 8), ("gpt-3-175b", 2048, 8), ("custom", 1024, 4),
                                           ("llama-2-70b", 8192, 4)])
def test_table_2_rows_equal_the_papers_formulas(preset, seq, tp):
    c = {"preset": preset, "seq": str(seq), "tp": str(tp)}
    res = render("memory", c)
    s, b, h, a, L = seq, 1, int(res["controls"]["hidden"]), int(res["controls"]["heads"]), int(res["controls"]["layers"])
    rows = res["tables"]["mem-table2"]["rows"]
    names = ("none", "tp", "tp-sp", "tp-selective", "tp-sp-selective", "full", "full-sp")
    assert len(rows) == len(names)
    for row, name in zip(rows, names):
        t = 1 if name == "none" else tp
        want = sbh_formula(name, s, b, h, a, t)
        assert row[1] == spv.FORMULA[name]
        assert row[2] == fmt.nbytes(want) and row[3] == fmt.nbytes(want * L)
        share = 100 * want / sbh_formula("tp", s, b, h, a, tp)
        assert abs(num(row[4]) - share) <= 0.05 + 1e-9
    this = [r for r in rows if cell_key(r[0]) == "label.mem_this"]
    assert len(this) == 1 and cell_key(this[0][0]["args"]["name"]) == "label.mem_cfg_tp"


def test_the_papers_own_numbers():
    gpt3 = render("memory", {"preset": "gpt-3-175b", "seq": "2048"})
    rows = {cell_key(r[0]): r for r in gpt3["tables"]["mem-paper"]["rows"]}
    assert rows["label.mem_p_5ash"][2:] == ["80", "80"]                 # §5: 5as/h = 80
    assert rows["label.mem_p_selective_saves"][2] == "70\u00a0%"
    assert abs(num(rows["label.mem_p_selective_saves"][3]) - 100 * (1 - 34 / 114)) < 0.05   # 70.2 %
    assert "mem-paper" not in render("memory", {"preset": "gpt-3-175b", "seq": "4096"})["tables"]
    p22 = render("memory", {"preset": "paper-22b"})
    rows = {cell_key(r[0]): r for r in p22["tables"]["mem-paper"]["rows"]}
    s, b, h, a, t, L, v = 2048, 4, 6144, 64, 8, 48, 51200
    base = sbh_formula("tp", s, b, h, a, t)
    for key, name in (("label.mem_p_sp_half", "tp-sp"), ("label.mem_p_sel_half", "tp-selective"),
                      ("label.mem_p_both", "tp-sp-selective"), ("label.mem_p_full", "full")):
        assert abs(num(rows[key][3]) - 100 * sbh_formula(name, s, b, h, a, t) / base) < 0.05
    assert num(rows["label.mem_p_both"][3]) < 20 and num(rows["label.mem_p_full"][3]) <= 10
    extra = s * b * h * L / t * (1 / L + 4 / L * (1 + v / h))        # §4.3, p = 1, with SP
    share = 100 * extra / (L * sbh_formula("tp-sp", s, b, h, a, t))
    assert rows["label.mem_p_extra"][3] == fmt.num(share, 2) + "\u00a0%" and abs(share - 0.57) < 0.005
    mtnlg = render("memory", {"preset": "paper-530b"})
    rows = {cell_key(r[0]): r for r in mtnlg["tables"]["mem-paper"]["rows"]}
    assert rows["label.mem_p_5ash"][2:] == ["64", "64"]


def test_presets_fill_and_disable_their_fields_custom_frees_them():
    res = render("memory", {"preset": "paper-175b", "seq": "999", "tp": "3", "hidden": "7"})
    st = res["control_state"]
    assert {k for k, v in st.items() if v["disabled"]} == {"hidden", "heads", "layers", "vocab", "seq", "batch", "tp", "pp"}
    assert st["seq"]["value"] == "2048" and st["tp"]["value"] == "8" and st["pp"]["value"] == "8"
    assert st["hidden"]["value"] == "12288" and cell_key(st["hidden"]["why"]) == "note.mem_set_by_preset"
    llama = render("memory", {"preset": "llama-2-70b", "seq": "999", "tp": "8"})
    assert set(llama["control_state"]) == {"hidden", "heads", "layers", "vocab"}
    assert llama["control_state"]["heads"]["value"] == "64"
    # s = 999 cannot be split over 8 ranks: without SP the setting is fine, the SP rows are left out
    assert cell_key(llama["notes"]["mem-sp-split"]) == "note.mem_sp_split"
    assert [cell_key(r[0]) for r in llama["tables"]["mem-table2"]["rows"]] == [
        "label.mem_cfg_none", "label.mem_this", "label.mem_cfg_tp_selective", "label.mem_cfg_full"]
    custom = render("memory", {"preset": "custom", "hidden": "1024", "heads": "16", "layers": "4", "tp": "2",
                               "seq": "512", "vocab": "1000"})
    assert custom["control_state"] == {} and custom["controls"]["hidden"] == "1024"
    one = render("memory", {"tp": "1", "sp": "on"})
    assert one["control_state"]["sp"]["disabled"] and one["controls"]["sp"] == "off"
    bars = [n for n in walk(one["figures"]["memory"]) if n.get("a", {}).get("data-part", "").startswith("bar-")]
    assert len(bars) == 2 * 3                              # two drawings; at t = 1 the SP rows equal the others


# ------------------------------------------------- presets: what the page does (js/demo.js), in Python

def _answer(values: dict) -> dict:
    from tpmath.views import render_json
    return json.loads(render_json("memory", json.dumps(values), "en"))


def _form_after(sent: dict, payload: dict) -> tuple[dict, set]:
    """The form once an answer is applied (applyControlState): the view's values, and the fields it
    set (greyed with a value: data-set)."""
    state = (payload["result"] if payload["ok"] else payload).get("control_state") or {}
    form = {k: state[k]["value"] if isinstance(state.get(k, {}).get("value"), str) else v for k, v in sent.items()}
    return form, {k for k, st in state.items() if st.get("disabled") and isinstance(st.get("value"), str)}


def _choose(form: dict, owned: set, static: dict, preset: str) -> tuple[dict, dict, set]:
    """The reader picks ``preset``: the page sends the form; a refusal of a field the view had set
    sends it again with those fields as the static page has them (demo.js release)."""
    sent = {**form, "preset": preset}
    payload = _answer(sent)
    if not payload["ok"] and payload["field"] in owned:
        sent = {**sent, **{k: static[k] for k in owned}}
        payload = _answer(sent)
    return (payload, *_form_after(sent, payload))


def _static_memory() -> tuple[dict, set]:
    defaults = {c.name: str(c.default) for c in sections()["memory"].controls}
    return _form_after(defaults, _answer(defaults))


@pytest.mark.parametrize("first", spv.PRESET_CHOICES)
def test_every_preset_to_every_preset_sets_the_fields_it_owns(first):
    """Issue 25 item 20: "Paper's 1T" then "Llama-2-7B" was refused (pp=64 does not divide 32) and
    the greyed fields kept 1T's values.  Every transition must answer, with the second preset's
    own values in the fields it owns, and the form must be the setting the tables show."""
    static, static_owned = _static_memory()
    payload, form, owned = _choose(static, static_owned, static, first)
    assert payload["ok"], (first, payload)
    for second in spv.PRESET_CHOICES:
        payload2, form2, owned2 = _choose(form, owned, static, second)
        assert payload2["ok"], (first, second, payload2)
        mine = spv._preset_values(second) if second != spv.CUSTOM else {}
        assert owned2 == set(mine), (first, second)
        assert {k: form2[k] for k in mine} == {k: str(v) for k, v in mine.items()}
        # the form is what the tables show: rendering it again gives the same answer
        again = _answer(form2)
        assert again["ok"] and again["result"]["values"] == payload2["result"]["values"], (first, second)
        assert again["result"]["controls"] == payload2["result"]["controls"] == form2


def test_a_refused_preset_change_says_which_fields_the_preset_owns():
    """Custom with 64 layers in 64 stages, then Llama-2-7B (32 layers): refused for pp (the reader's
    own field, left editable), with 7B's values in the greyed fields, not Custom's."""
    static, _ = _static_memory()
    custom = {**static, "preset": "custom", "layers": "64", "pp": "64"}
    assert _answer(custom)["ok"]
    payload = _answer({**custom, "preset": "llama-2-7b"})
    assert not payload["ok"] and payload["field"] == "pp"
    form, owned = _form_after({**custom, "preset": "llama-2-7b"}, payload)
    assert owned == set(spv.MODEL_FIELDS) and form["layers"] == "32" and "pp" not in owned


@pytest.mark.parametrize("controls,field", [
    ({"preset": "llama-2-7b", "tp": "3"}, "tp"),                       # 3 does not divide 32 heads
    ({"preset": "llama-2-7b", "tp": "8", "sp": "on", "seq": "4100"}, "tp"),   # the sequence must split
    ({"preset": "custom", "hidden": "1000", "heads": "16"}, "heads"),   # heads must divide h
    ({"preset": "llama-2-7b", "pp": "5"}, "pp"),                        # stages must divide the layers
    ({"seq": "0"}, "seq"), ({"seq": ""}, "seq"), ({"batch": "1e9"}, "batch"), ({"tp": "0.5"}, "tp"),
    ({"preset": "gpt-4"}, "preset"), ({"sp": "maybe"}, "sp"), ({"recompute": "half"}, "recompute"),
    ({"optimizer": "sgd"}, "optimizer"),
])
def test_bad_memory_controls_name_the_control(controls, field):
    with pytest.raises(TPMathError) as exc:
        render("memory", controls)
    assert exc.value.field == field


def test_every_memory_select_combination_renders():
    sec = sections()["memory"]
    selects = [c for c in sec.controls if c.kind == "select"]
    for combo in itertools.product(*[c.options for c in selects]):
        res = render("memory", {c.name: v for c, v in zip(selects, combo)})
        per = res["tables"]["mem-rank"]
        assert num(per["foot"][0][2].translate(SPACES)) > 0
        lit = [n for n in walk(res["figures"]["memory"]) if "hl" in n.get("a", {}).get("class", "").split()]
        assert lit, combo                                          # the chosen configuration is lit


# ------------------------------------------------------------------ strings

def _keys(obj):
    if isinstance(obj, dict):
        if isinstance(obj.get("key"), str):
            yield obj["key"]
        for k, v in obj.items():
            if k not in ("t", "a"):
                yield from _keys(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _keys(v)


def test_every_string_the_sections_use_exists_in_both_languages():
    from tpsite.content import flatten, load_strings
    import tomllib
    strings = {lang: load_strings(ROOT / "content" / "i18n", lang)[0] for lang in ("en", "zh")}
    used = set()
    settings = [dict(zip(SP_VALUES, combo), step=step) for combo, step in
                zip(itertools.product(*SP_VALUES.values()), itertools.cycle(STEPS))]
    settings += [{"step": s, "mistake": m, "dropout": "0.25"} for s in STEPS for m in core.MISTAKES]
    for name, runs in (("sp-layer", settings), ("memory", [{"preset": p, "tp": t, "sp": sp, "recompute": rc}
                                                           for p in spv.PRESET_CHOICES for t in ("1", "8")
                                                           for sp in ("on", "off") for rc in ("none", "full")]
                                                          + [{"seq": "999", "pp": "2"}]
                                                          + [{"attention": "flash", "recompute": rc}
                                                             for rc in ("none", "selective", "full")]),
                       ("dropout", [{"tp": t, "seq": "8"} for t in ("2", "4")])):
        sec = sections()[name]
        used |= {c.label_key for c in sec.controls}
        opts = {f"opt.{c.name}.{str(o).replace('-', '_')}": str(o) for c in sec.controls for o in c.options}
        used |= {k for k, o in opts.items() if not o.replace(".", "").isdigit() or k in strings["en"]}
        for controls in runs:
            res = render(name, controls)
            used |= set(_keys([res["tables"], res["notes"], res["figures"], res["control_state"]]))
            used |= {t["caption"] for t in res["tables"].values()} | {c for t in res["tables"].values() for c in t["columns"]}
            used |= {"value." + k.replace("-", "_") for k in res["values"]}
    for lang in ("en", "zh"):
        missing = sorted(k for k in used if k not in strings[lang])
        assert missing == [], (lang, missing)
    mine = {lang: flatten(tomllib.loads((ROOT / "content" / "i18n" / f"{lang}.sp.toml").read_text("utf-8")))
            for lang in ("en", "zh")}
    assert set(mine["en"]) == set(mine["zh"])
    assert sorted(set(mine["en"]) - used) == []                     # no dead strings
    cjk = re.compile(r"[\u4e00-\u9fff]")
    prose = [k for k in mine["zh"] if k.startswith(("note.", "cap."))]
    assert all(cjk.search(mine["zh"][k]) for k in prose)             # the Chinese sentences are Chinese
    for k in mine["en"]:                                             # the same placeholders in both
        assert set(re.findall(r"{(\w+)}", mine["en"][k])) == set(re.findall(r"{(\w+)}", mine["zh"][k])), k


# ------------------------------------------------------------------ the built page

PAGE4_IDS = ("replicated", "block", "ln-grads", "dropout", "gather-output", "mistakes", "memory", "practice",
             "interview", "notation", "references")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_builds_in_both_languages(built_site, lang):
    from html_tree import parse
    html = (built_site / lang / "sequence-parallel.html").read_text(encoding="utf-8")
    doc = parse(html)
    ids = [h.attrs["id"] for h in doc.iter("h2")]
    assert tuple(i for i in ids if i in PAGE4_IDS) == PAGE4_IDS
    demos = [d.attrs["data-section"] for d in doc.find_all("div", class_="demo")]
    assert demos == ["sp-layer", "dropout", "memory"]
    figures = [f.attrs["data-figure"] for f in doc.iter("figure") if "data-figure" in f.attrs]
    assert figures == ["sp-layer", "sp-ln", "dropout", "memory", "memory-layer"]
    for name in ("sp-ranks", "sp-comm", "sp-ln", "sp-check", "dr-masks", "mem-rank", "mem-table2", "mem-breakdown"):
        assert doc.find("table", data_table=name) is not None, name
    assert doc.find("details", data_real="sp-layer") is not None and doc.find("details", data_real="memory") is None
    assert doc.find("details", data_real="dropout") is None
    # Table 2 in MathML: seven rows of the page's table carry a formula each
    table2 = [t for t in doc.iter("table") if "data-table" not in t.attrs and any(
        "sbh" in m.text() or "34" in m.text() for m in t.iter("math"))]
    assert len(table2) == 1 and len(list(table2[0].iter("math"))) == 7
    nav = [a.text() for a in doc.find_all("a") if a.attrs.get("href") == "sequence-parallel.html"]
    assert ("Sequence parallel" if lang == "en" else "序列并行") in nav
    assert "0.01%" not in html and "0.01 %" not in html           # the paper's figure is not quoted (§4.3 gives 0.57 %)


@pytest.mark.parametrize("sp", ["off", "on"])
def test_memory_flash_attention_drops_the_score_rows(sp):
    """Llama-2-7B at t = 8: eager stores sbh(10 + 3 + 20) per layer without SP, flash sbh·13 + 4asb/t."""
    base = {"preset": "llama-2-7b", "tp": "8", "sp": sp}
    eager, flash = render("memory", base), render("memory", {**base, "attention": "flash"})
    assert flash["controls"]["attention"] == "flash" and eager["controls"]["attention"] == "eager"
    s, h, a, t = 4096, 4096, 32, 8
    sbh = s * h
    want = (34 * sbh / t if sp == "on" else 13 * sbh) + 4 * a * s / t
    r = spv.memory_result(spv.memory_controls({**base, "attention": "flash"})[0])
    assert r.activation_bytes_per_layer == want
    def name(cell):          # "this configuration" wraps the row's name
        return cell_key(cell["args"]["name"]) if cell_key(cell) == "label.mem_this" else cell_key(cell)
    rows = {name(row[0]): row for row in flash["tables"]["mem-table2"]["rows"]}
    eager_rows = {name(row[0]): row for row in eager["tables"]["mem-table2"]["rows"]}
    assert rows["label.mem_cfg_tp"][1] == "sbh(10+24/t)+4asb/t" and eager_rows["label.mem_cfg_tp"][1] == "sbh(10+24/t+5as/(ht))"
    # flash ≈ selective recomputation: the TP row with flash is the selective row to the digits shown
    assert rows["label.mem_cfg_tp"][2] == eager_rows["label.mem_cfg_tp_selective"][2]
    assert rows["label.mem_cfg_tp_selective"][2] == eager_rows["label.mem_cfg_tp_selective"][2]
    items = [cell_key(row[0]) for row in flash["tables"]["mem-breakdown"]["rows"]]
    assert "label.mem_item_softmax_lse" in items and "label.mem_item_softmax_output" not in items
    assert cell_key(flash["notes"]["mem-flash"]) == "note.mem_flash" and "mem-flash" not in eager["notes"]
    assert cell_key(render("memory", {**base, "attention": "flash", "recompute": "selective"})["notes"]["mem-flash"]) \
        == "note.mem_flash_recomputed"


def test_the_llama_2_7b_numbers_the_page_quotes():
    """content/*/sequence-parallel.md: 16.5 → 2.1 GiB eager, 10 GiB of score tensors, 6.5 GiB with
    FlashAttention, unchanged by selective recomputation, 2.1 GiB with SP (32 layers, t = 8)."""
    def layers_gib(**kw):
        c = spv.memory_controls({"preset": "llama-2-7b", "tp": "8", **kw})[0]
        return spv.memory_result(c).activation_layers_bytes / 2**30
    assert round(layers_gib(), 1) == 16.5
    assert round(layers_gib(sp="on", recompute="selective"), 1) == 2.1
    assert layers_gib() - layers_gib(attention="flash") == pytest.approx(10, abs=0.01)
    assert round(layers_gib(attention="flash"), 1) == 6.5
    assert layers_gib(attention="flash", recompute="selective") == pytest.approx(layers_gib(attention="flash"), rel=1e-3)
    assert round(layers_gib(attention="flash", sp="on"), 1) == 2.1
    for lang in ("en", "zh"):
        text = (ROOT / "content" / lang / "sequence-parallel.md").read_text("utf-8")
        assert all(q in text for q in ("16.5 GiB", "2.1 GiB", "10 GiB", "6.5 GiB")), lang


def test_the_dropout_mistake_offers_p_zero_disabled_with_its_reason():
    """Issue 25 item 26: with the same-seed mistake on, p_d = 0 (no mask: nothing to get wrong)
    is offered disabled with the reason, in both languages, instead of being taken and undone."""
    from test_controls import _on_page, CONTENT
    strings = CONTENT.strings
    res = render("sp-layer", {"tp": "2", "mistake": "same-dropout-seed", "dropout": "0.1"})
    why = res["control_state"]["dropout"]["options"]
    assert list(why) == ["0"]
    for lang in ("en", "zh"):
        text = _on_page(why["0"], lang)
        assert strings[lang]["opt.mistake.same_dropout_seed"] in text and "p_d = 0" in text
    off = render("sp-layer", {"tp": "2", "mistake": "none", "dropout": "0.1"})
    assert "options" not in off["control_state"].get("dropout", {})
    # a link or the command line that still gives p = 0 with the mistake: raised, and said so
    raised = render("sp-layer", {"tp": "2", "mistake": "same-dropout-seed", "dropout": "0"})
    assert raised["controls"]["dropout"] != "0" and "sp-dropout-set" in raised["notes"]
