"""Page 2 (row parallelism): views against independent numpy references, the pairing
counts against an executed simulation, bad controls, the Python demo, and the built pages.

Independent references: every per-rank shard, partial and gradient is recomputed here
with plain numpy slicing and matrix products (not through tpmath.row_linear) and compared
with the numbers its grid cell shows (and the rank that tints it, grid_cells.py), and the
collective counts of the pairing table are measured by running each pairing with
explicit collectives and checking it against the unsharded MLP.
"""

from __future__ import annotations

import ast
import html
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tpmath import TPMathError, views
from tpmath.row_linear import random_inputs
from tpmath import fmt
from tpmath.i18n import text
from tpmath.views import row_linear as row_views

from grid_cells import printed, rank_row, shown, tint
from html_tree import as_tree, parse

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "content" / "demos" / "row_parallel.py"
SECTION_IDS = ("concept", "math", "forward", "backward", "communication", "pairing", "cost",
               "practice", "applications", "python-demo", "misconceptions", "interview")
PAGE2_TABLES = ("row-inputs", "row-ranks", "col-ranks", "row-bwd-ranks", "col-bwd-ranks", "row-comm",
                "row-pairing", "comm-layer", "comm-time", "collective")


def ring_factor(name: str, n: int) -> float:
    """nccl-tests bus-bandwidth factors, written out here independently of tpmath.schedules."""
    return {"all-reduce": 2 * (n - 1) / n, "all-gather": (n - 1) / n, "reduce-scatter": (n - 1) / n}[name]


def cells(table: dict) -> list[list]:
    return table["rows"]


def seen(row: list) -> list:
    """A row as shown (grids as their printed numbers, rank tags as R0 …)."""
    return [shown(c) for c in row]


def tints(row: list) -> list:
    return [tint(c) for c in row if isinstance(c, dict) and "el" in c]


# ---------------------------------------------------------------- row-linear / row-backward

LINEAR_CASES = [
    {"tp": 1, "batch": 1, "d_in": 3, "d_out": 5, "seed": 1},
    {"tp": 2, "batch": 2, "d_in": 4, "d_out": 4, "seed": 0},
    {"tp": 2, "batch": 3, "d_in": 6, "d_out": 2, "seed": 7},
    {"tp": 4, "batch": 4, "d_in": 8, "d_out": 4, "seed": 123},
    {"tp": 4, "batch": 2, "d_in": 4, "d_out": 8, "seed": 2**32 - 1},
]


def _inputs(c):
    inp = random_inputs(c["seed"], c["batch"], c["d_in"], c["d_out"])
    out = []
    for k in ("X", "A", "dY"):                 # the view shows 1-decimal inputs without zeros
        r = np.round(inp[k], 1)
        r[r == 0] = 0.1 * np.sign(inp[k][r == 0])
        assert np.all(r != 0)
        out.append(r)
    return tuple(out)


@pytest.mark.parametrize("c", LINEAR_CASES)
def test_row_linear_tables_equal_numpy(c):
    out = views.render("row-linear", dict(c), "en")
    X, A, _ = _inputs(c)
    tp, D, O = c["tp"], c["d_in"], c["d_out"]
    kd, ko = D // tp, O // tp
    Y = X @ A
    # Row parallel: X's column block r times A's row block r; partials ADD to Y.
    rows = cells(out["tables"]["row-ranks"])
    assert len(rows) == tp
    partial_sum = np.zeros_like(Y)
    for r in range(tp):
        Xr, Ar = X[:, r * kd:(r + 1) * kd], A[r * kd:(r + 1) * kd, :]
        assert seen(rows[r]) == rank_row(r, Xr, Ar, Xr @ Ar)
        assert tints(rows[r]) == [r] * 4
        assert (Xr @ Ar).shape == Y.shape            # a partial has the full output shape
        partial_sum += Xr @ Ar
    assert np.max(np.abs(partial_sum - Y)) < 1e-12
    foot = out["tables"]["row-ranks"]["foot"]
    assert shown(foot[1][-1]) == printed(Y)
    assert shown(foot[0][-1]) in (printed(partial_sum), printed(Y))   # equal up to summation order
    assert tint(foot[0][-1]) is None and tint(foot[1][-1]) is None   # the whole Y: untinted
    assert foot[2][-1] == fmt.err(np.max(np.abs(partial_sum - Y)))
    # Column parallel: full X times A's column block r; slices CONCATENATE to Y.
    crow = cells(out["tables"]["col-ranks"])
    for r in range(tp):
        Ar = A[:, r * ko:(r + 1) * ko]
        assert seen(crow[r]) == rank_row(r, Ar, X @ Ar) and tints(crow[r]) == [r] * 3
    assert shown(out["tables"]["col-ranks"]["foot"][1][-1]) == printed(Y)
    inputs = cells(out["tables"]["row-inputs"])
    assert [seen(row) for row in inputs] == [["X", f"({c['batch']}, {D})", printed(X)],
                                             ["A", f"({D}, {O})", printed(A)]]
    assert [tints(row) for row in inputs] == [[None], [None]]
    assert out["values"]["row-max-abs-err"] in ("<\u00a01e\u221215", fmt.err(np.max(np.abs(partial_sum - Y))))
    note = out["notes"]["row-linear-comm"]["args"]
    assert note == {"tp": str(tp), "row_fwd": fmt.integer(c["batch"] * O),
                    "col_fwd": fmt.integer(c["batch"] * O), "col_bwd": fmt.integer(c["batch"] * D)}


@pytest.mark.parametrize("c", LINEAR_CASES)
def test_row_backward_tables_equal_numpy(c):
    out = views.render("row-backward", dict(c), "zh")
    X, A, dY = _inputs(c)
    tp, B, D, O = c["tp"], c["batch"], c["d_in"], c["d_out"]
    kd, ko = D // tp, O // tp
    dX, dA = dY @ A.T, X.T @ dY
    rows = cells(out["tables"]["row-bwd-ranks"])
    for r in range(tp):
        Xr, Ar = X[:, r * kd:(r + 1) * kd], A[r * kd:(r + 1) * kd, :]
        # Row parallel: the full, replicated dY; dX_r and dA_r are blocks of dX and dA.
        assert seen(rows[r]) == rank_row(r, dY, dY @ Ar.T, Xr.T @ dY) and tints(rows[r]) == [r] * 4
        assert np.allclose(dY @ Ar.T, dX[:, r * kd:(r + 1) * kd], atol=1e-12)
        assert np.allclose(Xr.T @ dY, dA[r * kd:(r + 1) * kd, :], atol=1e-12)
    foot = out["tables"]["row-bwd-ranks"]["foot"]
    assert seen(foot[1][2:]) == [printed(dX), printed(dA)]
    crows = cells(out["tables"]["col-bwd-ranks"])
    dX_sum = np.zeros_like(dX)
    for r in range(tp):
        Ar, gr = A[:, r * ko:(r + 1) * ko], dY[:, r * ko:(r + 1) * ko]
        assert seen(crows[r]) == rank_row(r, gr, gr @ Ar.T, X.T @ gr) and tints(crows[r]) == [r] * 4
        dX_sum += gr @ Ar.T
    assert np.max(np.abs(dX_sum - dX)) < 1e-12          # column parallel: partial dX ADD up
    assert seen(out["tables"]["col-bwd-ranks"]["foot"][1][2:]) == [printed(dX), printed(dA)]
    comm = cells(out["tables"]["row-comm"])
    n = tp
    expect = [
        ("label.row_layer_row", "label.row_phase_forward", "AllReduce", B * O, ring_factor("all-reduce", n) * B * O),
        ("label.row_layer_row", "label.row_phase_backward", None, 0, 0.0),
        ("label.row_layer_col", "label.row_phase_forward", "AllGather", B * O, ring_factor("all-gather", n) * B * O),
        ("label.row_layer_col", "label.row_phase_backward", "AllReduce", B * D, ring_factor("all-reduce", n) * B * D),
    ]
    assert len(comm) == len(expect)
    for got, (layer, phase, coll, elements, sent) in zip(comm, expect):
        assert got[0]["key"] == layer and got[1]["key"] == phase
        assert got[2] == (coll if coll else {"key": "label.row_no_comm"})
        assert got[3] == fmt.integer(elements) and got[4] == fmt.num(sent)


def test_tp1_needs_no_traffic():
    out = views.render("row-backward", {"tp": 1}, "en")
    assert all(row[4] == "0" for row in out["tables"]["row-comm"]["rows"])


# ---------------------------------------------------------------- row-pairing, executed

class Comm:
    """Explicit collectives over per-rank lists; logs (name, elements of the full tensor)."""

    def __init__(self):
        self.log: list[tuple[str, int]] = []

    def all_reduce(self, parts):
        self.log.append(("all-reduce", parts[0].size))
        return sum(parts[1:], parts[0].copy())

    def all_gather(self, parts, axis):
        full = np.concatenate(parts, axis=axis)
        self.log.append(("all-gather", full.size))
        return full

    def reduce_scatter(self, parts, axis):
        self.log.append(("reduce-scatter", parts[0].size))
        return np.split(sum(parts[1:], parts[0].copy()), len(parts), axis=axis)


def _mlp_reference(X, A1, A2, G):
    H = np.tanh(X @ A1)
    dZ = (G @ A2.T) * (1 - H ** 2)
    return {"Y": H @ A2, "dX": dZ @ A1.T, "dA1": X.T @ dZ, "dA2": H.T @ G}


def _column_row(X, A1, A2, G, n, fwd, bwd):
    Fs = np.split(np.arange(A1.shape[1]), n)
    H = [np.tanh(X @ A1[:, s]) for s in Fs]                       # (T, F/n) local activation
    Y = fwd.all_reduce([H[r] @ A2[Fs[r], :] for r in range(n)])    # g
    dZ = [(G @ A2[Fs[r], :].T) * (1 - H[r] ** 2) for r in range(n)]
    dX = bwd.all_reduce([dZ[r] @ A1[:, Fs[r]].T for r in range(n)])  # f
    return {"Y": Y, "dX": dX, "dA1": np.concatenate([X.T @ d for d in dZ], axis=1),
            "dA2": np.concatenate([H[r].T @ G for r in range(n)], axis=0)}


def _row_row(X, A1, A2, G, n, fwd, bwd):
    hs = np.split(np.arange(X.shape[1]), n)
    Fs = np.split(np.arange(A1.shape[1]), n)
    Z = fwd.all_reduce([X[:, hs[r]] @ A1[hs[r], :] for r in range(n)])   # partial sums before tanh
    H = np.tanh(Z)                                                       # replicated
    Y = fwd.all_reduce([H[:, Fs[r]] @ A2[Fs[r], :] for r in range(n)])
    dH = bwd.all_gather([G @ A2[Fs[r], :].T for r in range(n)], axis=1)  # backward of the local split
    dZ = dH * (1 - H ** 2)
    dX = bwd.all_gather([dZ @ A1[hs[r], :].T for r in range(n)], axis=1)
    return {"Y": Y, "dX": dX, "dA1": np.concatenate([X[:, hs[r]].T @ dZ for r in range(n)], axis=0),
            "dA2": np.concatenate([H[:, Fs[r]].T @ G for r in range(n)], axis=0)}


def _column_column(X, A1, A2, G, n, fwd, bwd):
    Fs = np.split(np.arange(A1.shape[1]), n)
    hs = np.split(np.arange(A2.shape[1]), n)
    Hr = [np.tanh(X @ A1[:, s]) for s in Fs]
    H = fwd.all_gather(Hr, axis=1)                                      # layer 2 needs all of H
    Y = fwd.all_gather([H @ A2[:, hs[r]] for r in range(n)], axis=1)    # residual needs all of Y
    Gr = [G[:, hs[r]] for r in range(n)]                                # backward of AllGather(Y): split
    dHr = bwd.reduce_scatter([Gr[r] @ A2[:, hs[r]].T for r in range(n)], axis=1)
    dZ = [dHr[r] * (1 - Hr[r] ** 2) for r in range(n)]
    dX = bwd.all_reduce([dZ[r] @ A1[:, Fs[r]].T for r in range(n)])
    return {"Y": Y, "dX": dX, "dA1": np.concatenate([X.T @ d for d in dZ], axis=1),
            "dA2": np.concatenate([H.T @ Gr[r] for r in range(n)], axis=1)}


SCHEMES = {"column-row": _column_row, "row-row": _row_row, "column-column": _column_column}


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_pairing_table_matches_executed_schemes(n):
    T, h, F = 3, 8, 16
    rng = np.random.default_rng(n)
    X, A1, A2, G = (rng.standard_normal(s) for s in ((T, h), (h, F), (F, h), (T, h)))
    ref = _mlp_reference(X, A1, A2, G)
    out = views.render("row-pairing", {"tp": n, "tokens": T, "hidden": h, "ffn": F}, "en")
    rows = out["tables"]["row-pairing"]["rows"]
    spec = {s["name"]: s for s in row_views.pairing_schemes(T, h, F)}
    sent = {}
    for i, (name, run) in enumerate(SCHEMES.items()):
        fwd, bwd = Comm(), Comm()
        got = run(X, A1, A2, G, n, fwd, bwd)
        for k in ref:                                     # the listed collectives suffice
            assert np.max(np.abs(got[k] - ref[k])) < 1e-12, (name, k)
        assert [(a, b) for a, b, _ in spec[name]["forward"]] == fwd.log
        assert [(a, b) for a, b, _ in spec[name]["backward"]] == bwd.log
        f = sum(ring_factor(a, n) * b for a, b in fwd.log)
        b_ = sum(ring_factor(a, n) * b for a, b in bwd.log)
        sent[name] = f + b_
        assert rows[i][0] == {"key": f"label.row_scheme_{name.replace('-', '_')}"}
        nccl = {"all-reduce": "AllReduce", "all-gather": "AllGather", "reduce-scatter": "ReduceScatter"}
        assert re.findall(r"[A-Za-z]+(?= T×)", rows[i][1]) == [nccl[a] for a, _ in fwd.log]
        assert re.findall(r"[A-Za-z]+(?= T×)", rows[i][2]) == [nccl[a] for a, _ in bwd.log]
        assert rows[i][3] == f"{fmt.integer(round(f))} + {fmt.integer(round(b_))}"
    for i, name in enumerate(SCHEMES):
        assert rows[i][4] == ("—" if n == 1 else "×" + fmt.num(sent[name] / sent["column-row"], 2))
    # Megatron: 1 + 1 AllReduce of T·h per MLP; a transformer layer has 2 + 2.
    assert rows[0][1] == rows[0][2] == "AllReduce T×h"
    one = ring_factor("all-reduce", n) * T * h
    foot = out["tables"]["row-pairing"]["foot"][0]
    assert foot[1] == foot[2] == "2 × AllReduce T×h"
    assert foot[3] == f"{fmt.integer(round(2 * one))} + {fmt.integer(round(2 * one))}"


def test_pairing_default_ratios():
    """With F = 4h the naive pairings send 15/4 and 11/4 times Megatron's bytes (any n > 1)."""
    out = views.render("row-pairing", None, "en")
    rows = out["tables"]["row-pairing"]["rows"]
    assert [r[4] for r in rows] == ["×1", "×3.75", "×2.75"]
    assert out["values"]["pairing-ring-factor"] == fmt.num(2 * 3 / 4)


# ---------------------------------------------------------------- comm-cost

def _by_hand(B, L, H, n, K, N, gbps, tflops):
    elements = B * L * H
    one = 2 * (n - 1) / n * elements * K                  # ring AllReduce, bytes sent per rank
    layer = 4 * one
    flops = N * 3 * (24 * B * L * H ** 2 + 4 * B * L ** 2 * H) / n
    t_comm = N * layer / (gbps * 1e9 / 8)
    t_calc = flops / (tflops * 1e12)
    return elements, one, layer, N * layer, t_calc, t_comm


@pytest.mark.parametrize("c", [
    {"preset": "custom", "batch": 8, "seq": 2048, "hidden": 4096, "heads": 32, "tp": 8, "dtype_bytes": 2,
     "layers": 1, "link_gbps": 3600, "tflops": 400},
    {"preset": "custom", "batch": 2, "seq": 1024, "hidden": 1536, "heads": 12, "tp": 4, "dtype_bytes": 4,
     "layers": 24, "link_gbps": 400, "tflops": 100},
    {"preset": "gpt-3-175b", "batch": 1, "seq": 1, "hidden": 1, "heads": 7, "tp": 8, "dtype_bytes": 2, "layers": 1,
     "link_gbps": 3600, "tflops": 400},
])
def test_comm_cost_equals_hand_count(c):
    out = views.render("comm-cost", dict(c), "en")
    B, L, H, N = c["batch"], c["seq"], c["hidden"], c["layers"]
    if c["preset"] == "gpt-3-175b":                   # Brown et al. 2020, Table 2.1
        L, H, N = 2048, 12288, 96
    elements, one, layer, step, t_calc, t_comm = _by_hand(B, L, H, c["tp"], c["dtype_bytes"], N,
                                                          c["link_gbps"], c["tflops"])
    rows = out["tables"]["comm-layer"]["rows"]
    assert [r[0]["key"] for r in rows] == ["label.row_phase_forward"] * 2 + ["label.row_phase_backward"] * 2
    assert [r[2] for r in rows] == ["AllReduce (f̄)", "AllReduce (f̄)", "AllReduce (f)", "AllReduce (f)"]
    for r in rows:
        assert r[3] == fmt.integer(elements)
        assert r[4] == fmt.num(2 * (c["tp"] - 1) / c["tp"])
        assert r[5] == fmt.nbytes(one)
    foot = out["tables"]["comm-layer"]["foot"]
    assert [f[0]["key"] for f in foot] == ["label.row_pass_forward", "label.row_pass_backward",
                                           "label.row_per_layer", "label.row_per_step"]
    assert foot[0][0]["args"] == foot[1][0]["args"] == {"count": "2"}     # g twice forward, f twice backward
    assert foot[0][-1] == foot[1][-1] == fmt.nbytes(2 * one)
    assert foot[2][-1] == fmt.nbytes(layer) and foot[3][-1] == fmt.nbytes(step)
    assert foot[3][0]["args"] == {"layers": fmt.integer(N)}
    times = [r[1] for r in out["tables"]["comm-time"]["rows"]]
    ms = lambda s: fmt.num(s * 1e3, 3) + " ms"  # noqa: E731
    assert times == [ms(t_calc), ms(t_comm), ms(max(t_calc, t_comm)), ms(t_calc + t_comm)]
    assert out["values"]["cost-step-bytes"] == fmt.nbytes(step)
    assert out["values"]["cost-comm-fraction"] == fmt.num(100 * t_comm / (t_calc + t_comm), 1) + " %"


@pytest.mark.parametrize("controls", [
    None,                                                   # the default: Llama-2-7B, B = 4, L = 4096
    {"preset": "custom", "batch": 8, "seq": 2048, "hidden": 4096, "heads": 32, "tp": 8, "dtype_bytes": 2,
     "layers": 1},                                          # the question's own numbers
])
def test_interview_question_4_numbers(controls):
    """The page's question 4: B=8, L=2048, h=4096, bf16, TP=8: each AllReduce carries 128 MiB, each rank
    sends 224 MiB of it; 448 MiB forward, 448 MiB backward, 896 MiB per layer.  The default calculator
    (Llama-2-7B: h = 4096, L = 4096 from its config.json; B = 4) has the same B·L·h and shows them as rows."""
    MiB = 2 ** 20
    S = 8 * 2048 * 4096
    assert S == 4 * 4096 * 4096 == 67_108_864
    per_allreduce = 2 * 7 * S * 2 // 8                      # 2(n−1)/n · S · k bytes
    assert per_allreduce == 224 * MiB
    out = views.render("comm-cost", controls, "en")
    assert out["values"]["cost-activation"] == fmt.nbytes(S * 2) == "128\u00a0MiB"
    assert [r[5] for r in out["tables"]["comm-layer"]["rows"]] == ["224\u00a0MiB"] * 4
    foot = [f[-1] for f in out["tables"]["comm-layer"]["foot"]]
    assert foot[:3] == ["448\u00a0MiB", "448\u00a0MiB", "896\u00a0MiB"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_question_4_quotes_the_default_calculator(lang):
    """The answer's MiB figures are the calculator's default rows (per AllReduce, forward, backward,
    per layer), not numbers typed by hand that could drift from the core."""
    md = (ROOT / "content" / lang / "row-parallel.md").read_text(encoding="utf-8")
    answer = re.search(r"<summary>4\..*?</details>", md, re.S).group(0)
    out = views.render("comm-cost", None, lang)
    rows = out["tables"]["comm-layer"]["rows"]
    foot = out["tables"]["comm-layer"]["foot"]
    shown = {r[5] for r in rows} | {f[-1] for f in foot[:3]} | {out["values"]["cost-activation"]}
    quoted = set(re.findall(r"(\d+) MiB", answer))
    assert quoted == {"128", "224", "448", "896"}
    assert {q + "\u00a0MiB" for q in quoted} == shown
    assert "B = 4" in answer and "L = 4096" in answer       # the default it names


def test_heads_rule_quoted_in_text():
    """The tp values the text allows GPT-2 XL are the core's (divisors of its 25 heads)."""
    from tpmath.comm_cost import PRESETS, tp_choices
    p = PRESETS["gpt2-xl"]
    assert tp_choices(p["heads"], p["kv_heads"]) == [1, 5, 25] == [t for t in range(1, 26) if 25 % t == 0]
    en = (ROOT / "content" / "en" / "row-parallel.md").read_text(encoding="utf-8")
    zh = (ROOT / "content" / "zh" / "row-parallel.md").read_text(encoding="utf-8")
    assert "GPT-2 XL has 25" in en and "TP can be 1, 5 or 25" in en and "refuses TP = 8" in en
    assert "GPT-2 XL 有 25 个头" in zh and "1、5 或 25" in zh


def test_ring_factors_quoted_in_text():
    """The misconception about 'communication does not shrink': 1, 1.5, 1.75 for n = 2, 4, 8."""
    for lang in ("en", "zh"):
        text = (ROOT / "content" / lang / "row-parallel.md").read_text(encoding="utf-8")
        assert [2 * (n - 1) / n for n in (2, 4, 8)] == [1, 1.5, 1.75]
        assert "1.75" in text and "1.5" in text


def test_comm_cost_preset_overrides_fields_and_says_so():
    out = views.render("comm-cost", {"preset": "llama-2-70b", "hidden": 5, "seq": 7, "layers": 3, "heads": 3}, "zh")
    # Llama-2-70B's config.json: hidden_size 8192, 80 layers, 64 attention heads, 8 key/value heads
    assert out["controls"]["hidden"] == 8192 and out["controls"]["layers"] == 80
    assert out["controls"]["heads"] == 64 and out["controls"]["kv_heads"] == 8
    assert out["notes"]["comm-preset"]["args"]["hidden"] == fmt.integer(8192)
    assert out["notes"]["comm-preset"]["args"]["heads"] == "64" and out["notes"]["comm-preset"]["args"]["kv_heads"] == "8"
    fields = {k: v for k, v in out["control_state"].items() if k != "preset"}
    assert {k: v["value"] for k, v in fields.items()} == {"hidden": "8192", "seq": "4096", "layers": "80", "heads": "64"}
    assert all(v["disabled"] for v in fields.values())


@pytest.mark.parametrize("tp", [1, 2, 5, 8, 16])
def test_presets_tp_cannot_split_are_offered_disabled_with_the_reason(tp):
    """Issue 25 item 26: GPT-2 XL (25 heads) at the default tp = 8 was accepted, then refused."""
    from tpmath import comm_cost as cc
    out = views.render("comm-cost", {"preset": "custom", "hidden": 4000, "heads": 80, "tp": tp}, "en")
    off = out["control_state"]["preset"]["options"]
    assert out["control_state"]["preset"]["disabled"] is False
    for name, p in cc.PRESETS.items():
        fits = p["heads"] % tp == 0 and (p["kv_heads"] % tp == 0 or tp % p["kv_heads"] == 0)
        assert (name not in off) == fits, (name, tp)
        if fits:      # an enabled preset renders at this tp
            views.render("comm-cost", {"preset": name, "tp": tp}, "en")
        else:         # a disabled one would be refused; the reason names the heads it cannot split
            with pytest.raises(TPMathError):
                views.render("comm-cost", {"preset": name, "tp": tp}, "en")
            args = off[name]["args"]
            assert args["tp"] == str(tp) and str(p["heads"] if "heads" in args else p["kv_heads"]) in args.values()
    assert ("gpt2-xl" in off) == (tp in (2, 8, 16))
    assert text(out["notes"]["comm-convention"], "zh").startswith("bytes_per_rank = 使用 Ring")


# ---------------------------------------------------------------- bad controls

@pytest.mark.parametrize("section", ["row-linear", "row-backward"])
@pytest.mark.parametrize("tp, d_in, d_out, refused", [(4, 6, 4, "d_in"), (4, 4, 6, "d_out"), (2, 3, 8, "d_in"),
                                                      (2, 8, 5, "d_out")])
def test_a_size_one_layer_cannot_split_leaves_the_other_layers_result(section, tp, d_in, d_out, refused):
    """Issue 25 item 6: the layers are validated separately; the valid one is computed (equal to
    numpy), the other's parts are named as stale (the page keeps them dimmed) with its refusal."""
    c = {"tp": tp, "batch": 2, "d_in": d_in, "d_out": d_out, "seed": 0}
    payload = json.loads(views.render_json(section, json.dumps(c), "zh"))
    assert payload["ok"], payload
    res = payload["result"]
    assert res["refused"]["field"] == refused and res["refused"]["error"]["key"] == "error.size_not_divisible"
    assert res["refused"]["error"]["args"]["size"] == str(c[refused])
    sec = views.sections()[section]
    bad, good = ("row", "col") if refused == "d_in" else ("col", "row")
    stale = res["stale"]
    for kind in ("tables", "values", "notes", "figures"):     # recomputed or named stale, never both
        assert set(res.get(kind, {})).isdisjoint(stale[kind]), kind
    assert set(sec.tables) <= set(res["tables"]) | set(stale["tables"])
    assert set(sec.values) <= set(res["values"]) | set(stale["values"])
    assert stale["figures"] == [section] and stale["real"] is True and "real" not in res
    names = set(res["tables"]) | set(res["values"])
    assert names.isdisjoint({f"{bad}-ranks", f"{bad}-max-abs-err", f"{bad}-bwd-ranks", f"{bad}-bwd-max-abs-err"})
    X, A, dY = _inputs(c)
    records = views.render(section, c, "zh")["tables"]   # the records the payload's table trees are made from
    assert set(records) == set(res["tables"])
    tp_rows = cells(records[f"{good}-ranks" if section == "row-linear" else f"{good}-bwd-ranks"])
    k = (d_out if good == "col" else d_in) // tp
    for r in range(tp):
        if section == "row-linear" and good == "col":
            Ar = A[:, r * k:(r + 1) * k]
            assert seen(tp_rows[r]) == rank_row(r, Ar, X @ Ar)
        elif section == "row-linear":
            Xr, Ar = X[:, r * k:(r + 1) * k], A[r * k:(r + 1) * k, :]
            assert seen(tp_rows[r]) == rank_row(r, Xr, Ar, Xr @ Ar)
        elif good == "col":             # column parallel backward: dY's block, its partial dX, its dA block
            dYr, Ar = dY[:, r * k:(r + 1) * k], A[:, r * k:(r + 1) * k]
            assert seen(tp_rows[r]) == rank_row(r, dYr, dYr @ Ar.T, X.T @ dYr)
        else:                           # row parallel backward: the whole dY, dX's block, dA's block
            Ar = A[r * k:(r + 1) * k, :]
            assert seen(tp_rows[r])[2:] == rank_row(r, dY @ Ar.T, X[:, r * k:(r + 1) * k].T @ dY)[1:]
    both = {**c, refused: 8 if tp == 2 else 4}            # a size both layers split: nothing stale
    full = json.loads(views.render_json(section, json.dumps(both), "zh"))["result"]
    assert "stale" not in full and "refused" not in full and "real" in full


@pytest.mark.parametrize("section, controls, field", [
    ("row-linear", {"tp": 3}, "tp"),
    ("row-linear", {"tp": "abc"}, "tp"),
    ("row-linear", {"tp": 2, "d_in": 3, "d_out": 3}, "d_in"),         # neither layer can split: refused
    ("row-linear", {"tp": 4, "d_in": 6, "d_out": 6}, "d_in"),
    ("row-linear", {"batch": 0}, "batch"),
    ("row-linear", {"d_in": 9}, "d_in"),
    ("row-linear", {"seed": -1}, "seed"),
    ("row-linear", {"seed": "1.5"}, "seed"),
    ("row-backward", {"tp": 4, "d_in": 6, "d_out": 2}, "d_in"),
    ("row-backward", {"batch": "x"}, "batch"),
    ("row-pairing", {"tp": 3}, "tp"),
    ("row-pairing", {"tp": 4, "hidden": 4095}, "hidden"),
    ("row-pairing", {"tp": 8, "ffn": 100}, "ffn"),
    ("row-pairing", {"tokens": 0}, "tokens"),
    ("comm-cost", {"preset": "gpt-5"}, "preset"),
    ("comm-cost", {"preset": "custom", "hidden": 4096, "tp": 3}, "tp"),
    ("comm-cost", {"preset": "gpt2-xl", "tp": 8}, "tp"),                          # 25 heads
    ("comm-cost", {"preset": "custom", "hidden": 48, "heads": 12, "tp": 8}, "tp"),
    ("comm-cost", {"preset": "custom", "hidden": 4096, "heads": 7, "tp": 1}, "heads"),
    ("comm-cost", {"dtype_bytes": 3}, "dtype_bytes"),
    ("comm-cost", {"link_gbps": 0}, "link_gbps"),
    ("comm-cost", {"tflops": "fast"}, "tflops"),
    ("comm-cost", {"batch": ""}, "batch"),
])
def test_bad_controls_raise_with_field(section, controls, field):
    with pytest.raises(TPMathError) as exc:
        views.render(section, controls, "en")
    assert exc.value.field == field
    bad = str(controls[field])
    assert bad in exc.value.message("en") and bad in exc.value.message("zh")   # the offending value is quoted
    payload = json.loads(views.render_json(section, json.dumps(controls), "zh"))
    assert payload == {"ok": False, "error": exc.value.cell, "field": field}   # the page translates the cell


# ---------------------------------------------------------------- the Python demo

def run_demo(path: Path = DEMO) -> str:
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60,
                          check=True, env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8"})
    return proc.stdout


def demo_for(lang: str) -> Path:
    """content/demos/<lang>/row_parallel.py (comments and labels translated), else the shared one."""
    own = DEMO.parent / lang / DEMO.name
    return own if own.is_file() else DEMO


def test_demo_is_numpy_only_and_correct():
    tree = ast.parse(DEMO.read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported == {"numpy"}
    out = run_demo()
    assert run_demo() == out                                    # deterministic
    assert "max |Y  - ref|  = 0.0" in out and "max |dX - ref|  = 0.0" in out and "max |dA - ref|  = 0.0" in out
    assert "concatenated partials have shape (2, 6) but Y has shape (2, 3)" in out


# ---------------------------------------------------------------- the built site

@pytest.fixture(scope="module")
def site(static_site):
    return static_site          # conftest.py: one --runtime none build of the real content per run


def _sections(page: str) -> dict[str, str]:
    """h2 id -> the HTML from that heading to the next h2."""
    parts = re.split(r"(<h2[^>]*\bid=\"([^\"]+)\"[^>]*>)", page)
    out = {}
    for i in range(1, len(parts) - 2, 3):
        out[parts[i + 1]] = parts[i + 2].split("<h2", 1)[0]
    return out


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_built_page_sections_tables_links(site, lang):
    page = (site / lang / "row-parallel.html").read_text(encoding="utf-8")
    sections = _sections(page)
    for sid in SECTION_IDS:
        assert sid in sections, sid
        assert len(_text(sections[sid]).split()) > 20 or len(_text(sections[sid])) > 200, sid
    for name in PAGE2_TABLES:
        assert f'data-table="{name}"' in page, name
    assert len(re.findall(r"<details", sections["interview"])) >= 8
    assert len(re.findall(r"<li", sections["misconceptions"])) >= 6
    assert 'href="index.html' in page                           # back to page 1
    index = (site / lang / "index.html").read_text(encoding="utf-8")
    assert 'href="row-parallel.html' in index                    # page 1 links here
    assert "{{" not in page and "$$" not in page
    for ref in range(1, 9):
        assert f'id="ref-{ref}"' in page and f'href="#ref-{ref}"' in page


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_built_tables_are_the_view_results(site, lang):
    doc = parse((site / lang / "row-parallel.html").read_text(encoding="utf-8"))
    for section, table in (("row-linear", "row-ranks"), ("row-linear", "col-ranks"),
                           ("row-backward", "row-bwd-ranks"), ("row-pairing", "row-pairing"),
                           ("comm-cost", "comm-layer")):
        built = doc.find("table", data_table=table)
        assert built is not None, table
        got = [tr.element_children() for tr in built.find("tbody").element_children()]
        want = views.render(section, None, lang)["tables"][table]["rows"]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert len(g) == len(w)
            for cell_el, cell in zip(g, w):
                if isinstance(cell, str):
                    assert cell_el.text() == cell
                elif "el" in cell:          # a grid or rank tag: the same elements, attributes, numbers
                    assert [as_tree(k) for k in cell_el.element_children()] == [cell["el"]]


def test_built_pydemo_output_is_the_program_output(site):
    for lang in ("en", "zh"):
        expected = run_demo(demo_for(lang))
        page = (site / lang / "row-parallel.html").read_text(encoding="utf-8")
        m = re.search(r'<pre class="pydemo-output" data-demo="row_parallel"[^>]*>(.*?)</pre>', page, re.S)
        assert m, lang
        assert html.unescape(m.group(1)) == expected


# ---------------------------------------------------------------- issue 25, items 9 and 10

def _md_section(lang: str, anchor: str) -> str:
    md = (ROOT / "content" / lang / "row-parallel.md").read_text(encoding="utf-8")
    start = md.index("{#" + anchor + "}")
    return md[start:md.find("\n## ", start)]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_recomputation_cost_says_which_kind_adds_allreduces(lang):
    """Full recomputation reruns a layer's forward AllReduces (4 + 2 per layer: 1.5 times the bytes);
    selective recomputation (Megatron's default core_attn) reruns only the attention core, which has no
    collective. The factor is derived from the layer's collectives, not typed."""
    from tpmath.comm_cost import TP_COLLECTIVES
    fwd = sum(1 for phase, *_ in TP_COLLECTIVES if phase == "forward")
    total = len(TP_COLLECTIVES)
    factor = (total + fwd) / total
    cost = _md_section(lang, "cost")
    assert "--recompute-granularity full" in cost and "--recompute-granularity selective" in cost
    assert "core_attn" in cost and f"{factor:g}" in cost and f"{total + fwd}" in cost
    words = {"en": ("*Full*", "*Selective*", "adds none"), "zh": ("*完全*", "*选择性*", "不增加任何通信")}[lang]
    assert all(w in cost for w in words)
    assert "a second time" not in cost and "再做一遍" not in cost      # the old, unqualified claim


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_gqa_with_fewer_kv_heads_than_ranks_matches_page3(lang):
    """Megatron replicates no weight for K < tp (it all-gathers the fused QKV output, as page 3 says);
    vLLM replicates KV heads; the AllGather list of the communication section includes that path."""
    practice, comm = _md_section(lang, "practice"), _md_section(lang, "communication")
    assert "KV heads are then replicated" not in practice and "KV 头会被复制" not in practice
    assert "num_query_groups" in practice and "num_kv_head_replicas" in practice
    assert "AllGather" in practice and "transformer-layer.html#gqa" in practice
    assert "$K < t$" in comm and "transformer-layer.html#gqa" in comm
    page3 = (ROOT / "content" / lang / "transformer-layer.md").read_text(encoding="utf-8")
    assert "num_kv_head_replicas" in page3 and "AllGather" in page3[page3.index("{#gqa"):page3.index("{#qkv-layout")]
    refs = (ROOT / "content" / lang / "row-parallel.md").read_text(encoding="utf-8")
    assert "transformer/attention.py#L1851-L1870" in refs and "0036d38de46c5d48fdedeb658dedc0fc0f95677d" in refs
