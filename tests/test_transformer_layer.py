"""Page 3 (the transformer layer): the sections attention, layer and qkv-layout against
independent references, their controls, strings, and the built pages.

Independent references, written here without tpmath.attention / tpmath.layer: attention with
one loop per head (query head h reads KV head ⌊h·K/H⌋, scale 1/√E, causal mask), the pre-LN
layer with numpy LayerNorm and tanh-GeLU, gradients by central finite differences, the
mistakes as the bug each one describes, and the fused QKV layouts as explicit column labels.
"""

from __future__ import annotations

import html
import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest

from tpmath import TPMathError, attention as att, i18n, views
from tpmath.views import attention as page3
from tpmath import fmt
from tpmath.views import tree

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("attention", "layer", "qkv-layout")
HEADING_IDS = ("attention", "gqa", "qkv-layout", "layer", "recap", "mistakes", "interview", "notation", "references")


# ------------------------------------------------------------------------------ helpers

def num(text: str) -> float:
    return float(text.replace("\u2212", "-"))


def err_value(text: str) -> float:
    """The number behind an fmt.err string ("< 1e−15" counts as 1e-15)."""
    return 1e-15 if text.startswith("<") else num(text)


def grid_values(cell) -> np.ndarray:
    """The numbers of a grid cell ({"el": table}), row by row."""
    node = cell["el"]
    assert node["t"] == "table" and "grid" in node["a"]["class"]
    rows = [[num(td["x"]) for td in tr["c"]] for tr in node["c"][0]["c"]]
    return np.array(rows)


def close(shown, want, tol=6e-5):
    want = np.asarray(want, dtype=float).reshape(np.shape(shown))
    assert np.all(np.abs(shown - want) <= tol * np.maximum(1, np.abs(want))), (shown, want)


def softmax_rows(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ref_heads(X, Wq, Wk, Wv, H, K, causal, heads=None, scale=None, kv_of=None):
    """Per-head loop: P (B, H, S, S) and the heads' outputs side by side C (B, S, H·E)."""
    B, S, D = X.shape
    E = Wq.shape[1] // H
    scale = 1 / math.sqrt(E) if scale is None else scale
    P = np.zeros((B, H, S, S))
    C = np.zeros((B, S, H * E))
    for b in range(B):
        for h in (range(H) if heads is None else heads):
            j = h * K // H if kv_of is None else kv_of(h)
            q = X[b] @ Wq[:, h * E:(h + 1) * E]
            k = X[b] @ Wk[:, j * E:(j + 1) * E]
            v = X[b] @ Wv[:, j * E:(j + 1) * E]
            s = q @ k.T * scale
            if causal:
                s = np.where(np.tri(S, dtype=bool), s, -np.inf)
            P[b, h] = softmax_rows(s)
            C[b, :, h * E:(h + 1) * E] = P[b, h] @ v
    return P, C


def ref_attention(inp, H, K, causal):
    P, C = ref_heads(inp["X"], inp["W_q"], inp["W_k"], inp["W_v"], H, K, causal)
    return P, C @ inp["W_o"]


def finite_diff(f, x, h=1e-6):
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        g[idx] = (f(xp) - f(xm)) / (2 * h)
    return g


def rows2(a):
    a = np.asarray(a)
    return a.reshape(-1, a.shape[-1])


def keys_of(obj):
    """Every i18n key a result uses: cells {"key"} and the caption / column strings."""
    if isinstance(obj, dict):
        if isinstance(obj.get("key"), str):
            yield obj["key"]
        for k, v in obj.items():
            if k in ("caption",) and isinstance(v, str):
                yield v
            elif k == "columns":
                yield from (c for c in v if isinstance(c, str))
            if k not in ("t", "a"):
                yield from keys_of(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from keys_of(v)


def settings(section: str):
    """Every combination of the section's select options (the seed stays at its default)."""
    sec = views.sections()[section]
    selects = [c for c in sec.controls if c.kind == "select"]
    for combo in itertools.product(*[c.options for c in selects]):
        yield {c.name: v for c, v in zip(selects, combo)}


ATT_SMALL = {"seq": ("4",), "hidden": ("8",)}      # the full grid of sizes runs below on fewer mistakes


# ------------------------------------------------------------------------- every combination

def test_every_attention_combination_renders_or_names_its_control():
    names = {c.name for c in views.sections()["attention"].controls}
    ok = bad = 0
    for tp, H, K, causal, mistake in itertools.product(page3.TP_OPTIONS, page3.HEAD_OPTIONS, page3.HEAD_OPTIONS,
                                                       page3.SWITCH, att.MISTAKES):
        c = {"tp": tp, "heads": H, "kv_heads": K, "causal": causal, "mistake": mistake}
        try:
            res = views.render("attention", c)
        except TPMathError as err:
            assert err.field in names, (c, err.field)
            assert err.field in ("heads", "kv_heads"), (c, err)     # only the head split can be impossible
            bad += 1
            continue
        ok += 1
        assert res["controls"]["mistake"] in (mistake, "none")
        assert set(res["tables"]) == set(views.sections()["attention"].tables)
    assert ok and bad


@pytest.mark.parametrize("seq, hidden", itertools.product(page3.SEQ_OPTIONS, page3.HIDDEN_OPTIONS))
def test_attention_sizes_render(seq, hidden):
    for tp, H, K in ((2, 4, 2), (4, 8, 2), (8, 8, 1), (1, 2, 1)):
        res = views.render("attention", {"tp": str(tp), "heads": str(H), "kv_heads": str(K), "seq": seq,
                                         "hidden": hidden, "causal": "off"})
        assert err_value(res["values"]["max-abs-err"]) < 1e-13      # a measured error, not the tolerance


@pytest.mark.parametrize("section", ["layer", "qkv-layout"])
def test_every_combination_renders_or_names_its_control(section):
    names = {c.name for c in views.sections()[section].controls}
    ok = 0
    for c in settings(section):
        try:
            views.render(section, c)
            ok += 1
        except TPMathError as err:
            assert err.field in names, (c, err.field)
    assert ok


@pytest.mark.parametrize("section, controls, field", [
    ("attention", {"tp": "4", "heads": "2"}, "heads"),
    ("attention", {"heads": "4", "kv_heads": "8"}, "kv_heads"),
    ("attention", {"tp": "4", "heads": "8", "kv_heads": "2", "seq": "9"}, "seq"),
    ("attention", {"tp": "3"}, "tp"),
    ("attention", {"mistake": "typo"}, "mistake"),
    ("attention", {"causal": "maybe"}, "causal"),
    ("attention", {"seed": "-1"}, "seed"),
    ("attention", {"seed": "x"}, "seed"),
    ("layer", {"tp": "4", "heads": "2"}, "heads"),
    ("layer", {"tp": "8"}, "tp"),
    ("layer", {"kv_heads": "8"}, "kv_heads"),
    ("layer", {"pass": "sideways"}, "pass"),
    ("qkv-layout", {"tp": "8", "heads": "4"}, "heads"),
    ("qkv-layout", {"tp": "4", "heads": "8", "kv_heads": "8", "head_dim": "3"}, "head_dim"),
])
def test_bad_controls_name_the_control(section, controls, field):
    with pytest.raises(TPMathError) as info:
        views.render(section, controls)
    assert info.value.field == field
    out = views.render_json(section, __import__("json").dumps(controls), "zh")
    assert '"ok": false' in out and f'"field": "{field}"' in out


# ------------------------------------------------------------------------------ attention

ATT_CASES = [
    {"tp": 2, "heads": 4, "kv_heads": 2, "causal": "on", "seq": 4, "hidden": 8, "seed": 0},
    {"tp": 4, "heads": 8, "kv_heads": 2, "causal": "off", "seq": 3, "hidden": 16, "seed": 5},
    {"tp": 4, "heads": 4, "kv_heads": 1, "causal": "on", "seq": 5, "hidden": 8, "seed": 11},
    {"tp": 1, "heads": 2, "kv_heads": 1, "causal": "off", "seq": 2, "hidden": 8, "seed": 2},
    {"tp": 8, "heads": 8, "kv_heads": 8, "causal": "on", "seq": 6, "hidden": 16, "seed": 3},
]


def _render(c):
    return views.render("attention", {k: str(v) for k, v in c.items()})


def _inputs(c):
    cfg = att.validate_config(c["tp"], c["heads"], c["kv_heads"], c["seq"], 1, c["hidden"])
    return att.example_inputs(c["seed"], cfg)


@pytest.mark.parametrize("c", ATT_CASES)
def test_attention_tables_equal_the_loop_reference(c):
    res = _render(c)
    inp = _inputs(c)
    H, K, tp, causal = c["heads"], c["kv_heads"], c["tp"], c["causal"] == "on"
    E, Hr = c["hidden"] // H, H // tp
    P, Y = ref_attention(inp, H, K, causal)
    G = inp["G"]

    # what each rank holds: its query heads' columns, the KV head its queries read
    for r, row in enumerate(res["tables"]["att-shards"]["rows"]):
        q = list(range(r * Hr, (r + 1) * Hr))
        kv = sorted({h * K // H for h in q}) if K < tp else list(range(r * K // tp, (r + 1) * K // tp))
        close(grid_values(row[1]), inp["W_q"][:, q[0] * E:(q[-1] + 1) * E])
        close(grid_values(row[2]), inp["W_k"][:, kv[0] * E:(kv[-1] + 1) * E])
        close(grid_values(row[3]), inp["W_v"][:, kv[0] * E:(kv[-1] + 1) * E])
        close(grid_values(row[4]), inp["W_o"][q[0] * E:(q[-1] + 1) * E, :])
    for r, row in enumerate(res["tables"]["att-heads"]["rows"]):
        assert row[1] == ", ".join(str(h) for h in range(r * Hr, (r + 1) * Hr))

    # probabilities, one local head per row, and the KV head it read
    rows = res["tables"]["att-probs"]["rows"]
    assert len(rows) == H
    for h, row in enumerate(rows):
        assert row[0]["el"]["a"]["data-rank"] == str(h // Hr)
        assert row[1] == str(h) and row[2] == row[3] == str(h * K // H)
        close(grid_values(row[4]), P[0, h])

    # Y and G_X (finite differences of L = Σ Y⊙G) against the rank's copy and the reference
    def loss(X):
        return float(np.sum(ref_attention({**inp, "X": X}, H, K, causal)[1] * G))
    G_X = finite_diff(loss, inp["X"])
    ytab = {(r[0], r[1]["key"]): r for r in res["tables"]["att-y"]["rows"]}
    for who in ("label.att_tp_result", "label.reference"):
        close(grid_values(ytab[("Y", who)][2]), rows2(Y))
        close(grid_values(ytab[("G_X", who)][2]), rows2(G_X), tol=2e-4)
    assert all(r[-1]["key"] == "label.att_ok" for r in res["tables"]["att-check"]["rows"])
    assert res["values"]["loss"] == fmt.num(np.sum(Y * G)) == res["values"]["reference-loss"]
    assert res["values"]["softmax-scale"] == fmt.num(1 / math.sqrt(E))


def measured(shown: str, independent: float, scale: float) -> bool:
    """Whether a readout is the measured error ``independent`` (max |sharded − unsharded numpy|) of
    values reaching ``scale``: its two digits (or "< 1e−15" below that, fmt.err's rule, the same on
    every page), never the tolerance.  The core's reference and this file's differ by rounding, a
    few ulps of ``scale``: the shown error may differ from ``independent`` by that much."""
    slack = 8 * np.finfo(float).eps * max(1.0, scale)
    if shown.startswith("<"):                    # a bound: only fmt.err's own floor, never a tolerance
        return shown == fmt.err(0.0) and independent < 1e-15 + slack
    return abs(err_value(shown) - independent) <= 0.06 * independent + slack


@pytest.mark.parametrize("c, mistake", [(c, "none") for c in ATT_CASES]
                         + [(ATT_CASES[0], "scale-local-width"), (ATT_CASES[0], "f-and-g-swapped")])
def test_attention_error_readouts_are_the_measured_error_not_the_tolerance(c, mistake):
    """Issue 25 item 5: "Max abs error" printed the tolerance (< 7e−12) while the error was 4e−16."""
    c = {**c, "mistake": mistake}
    res = _render(c)
    assert res["controls"]["mistake"] == mistake       # the case really runs the mistake it names
    core = att.cached_run(c["tp"], c["heads"], c["kv_heads"], c["seq"], 1, c["hidden"], c["seed"],
                          c["causal"] == "on", mistake)
    _, Y = ref_attention(_inputs(c), c["heads"], c["kv_heads"], c["causal"] == "on")
    independent = float(np.max(np.abs(core.sharded.Y - Y)))
    check = {r[0]: r for r in res["tables"]["att-check"]["rows"]}
    scale = float(np.max(np.abs(Y)))
    assert measured(check["Y"][3], independent, scale), (check["Y"], independent)
    assert check["Y"][4] == fmt.err(att.REL_TOL * max(1.0, float(np.max(np.abs(Y))))), check["Y"]   # its own column
    ytab = {(r[0], r[1]["key"]): r for r in res["tables"]["att-y"]["rows"]}
    assert measured(ytab[("Y", "label.att_tp_result")][3], independent, scale)
    assert err_value(check["Y"][3]) < err_value(check["Y"][4]) / 10 or mistake != "none"   # far below the tolerance
    worst = err_value(res["values"]["max-abs-err"])        # the largest of the results' errors, Y among them
    assert worst >= min(independent, 1e-15) and worst == max(err_value(r[3]) for r in check.values())
    if mistake == "none":
        assert worst < 1e-13 and all(err_value(r[3]) < err_value(r[4]) for r in check.values())


@pytest.mark.parametrize("tp, H, K", [(2, 4, 2), (4, 4, 1)])
def test_layer_error_readout_is_the_measured_error(tp, H, K):
    from tpmath import layer
    res = views.render("layer", {"tp": str(tp), "heads": str(H), "kv_heads": str(K), "causal": "on"})
    cfg, F = layer.validate_layer(tp, H, K, 4, 1, 8, None, True)
    Y = ref_layer(layer.example_inputs(0, cfg, F), H, K, True)
    core = page3.run_layer_view({"tp": tp, "heads": H, "kv_heads": K, "causal": True})
    independent = float(np.max(np.abs(core.sharded.Y - Y)))
    out = {(r[0], r[1]["key"]): r for r in res["tables"]["layer-out"]["rows"]}
    assert measured(out[("Y", "label.att_tp_result")][3], independent, float(np.max(np.abs(Y))))
    assert err_value(res["values"]["max-abs-err"]) < 1e-13        # the tolerances are 8e−12


@pytest.mark.parametrize("c", ATT_CASES)
def test_attention_comm_table_lists_the_collectives(c):
    res = _render(c)
    H, K, tp, S, D = c["heads"], c["kv_heads"], c["tp"], c["seq"], c["hidden"]
    rows = res["tables"]["att-comm"]["rows"]
    if tp == 1:
        assert len(rows) == 1 and rows[0][0]["key"] == "label.att_none"
        return
    ops = [(r[0]["key"], r[2] if isinstance(r[2], str) else r[2]["key"], r[3], r[4]) for r in rows]
    assert ops[:2] == [("label.att_forward", "f̄", "Y", str(S * D)), ("label.att_backward", "f", "G_X", str(S * D))]
    if K < tp:   # replica groups: ranks reading the same KV head ⌊r·K/tp⌋
        groups = {}
        for r in range(tp):
            groups.setdefault(r * K // tp, []).append(f"R{r}")
        want = " | ".join(", ".join(g) for g in groups.values())
        E = D // H
        assert [(o[2], o[3]) for o in ops[2:]] == [("G_W_k", str(D * E)), ("G_W_v", str(D * E))]
        assert all(r[5] == want for r in rows[2:])
    else:
        assert len(rows) == 2


def _kv_cost_by_hand(c):
    """Per rank: replicated (one whole KV head when K < tp) against Megatron's even split."""
    H, K, tp, S, D = c["heads"], c["kv_heads"], c["tp"], c["seq"], c["hidden"]
    E, Hr = D // H, H // tp
    Kr = K // tp if K >= tp else 1
    fused = (H + 2 * K) * E
    gather = S * fused if K < tp else 0
    return {
        "replicated": [D * (Hr + 2 * Kr) * E, 2 * D * Kr * E, 2 * S * D * (Hr + 2 * Kr) * E, S * (Hr + 2 * Kr) * E,
                       0, 0, 2 * D * E if K < tp else 0],
        "megatron": [D * fused / tp, 2 * D * K * E / tp, 2 * S * D * fused / tp,
                     S * fused if K < tp else S * (Hr + 2 * Kr) * E, gather, gather, 0],
    }


@pytest.mark.parametrize("c", ATT_CASES)
def test_kv_cost_table_equals_a_hand_count(c):
    rows = _render(c)["tables"]["att-kv-cost"]["rows"]
    want = _kv_cost_by_hand(c)
    for i, row in enumerate(rows):
        for col, who in ((1, "replicated"), (2, "megatron")):
            assert abs(num(row[col].replace("\u202f", "")) - want[who][i]) < 1e-9, (i, who, row)


def test_kv_strategy_cost_llama2_70b_by_hand():
    """Llama 2 70B (H 64, K 8, E 128, D 8192) on 16 ranks, per token (B = S = 1), counted by hand."""
    cfg = att.Config(16, 64, 8, 1, 1, 8192)
    cost = att.kv_strategy_cost(cfg)
    assert cost["replicated"]["kv_weight_elements"] == 2 * 8192 * 128            # one whole KV head: 2 097 152
    assert cost["megatron"]["kv_weight_elements"] == 1_048_576                    # half a head's columns
    assert cost["replicated"]["qkv_weight_elements"] == 8192 * (4 + 2) * 128      # 4 query heads + k + v
    assert cost["megatron"]["qkv_weight_elements"] == 8192 * 80 * 128 // 16       # (64 + 16)·128 / 16 columns
    assert cost["megatron"]["forward_allgather_elements"] == 10_240               # (H + 2K)·E per token
    assert cost["replicated"]["kv_grad_allreduce_elements"] == 2 * 8192 * 128
    even = att.kv_strategy_cost(att.Config(8, 64, 8, 1, 1, 8192))                 # K = tp: the same split
    assert even["replicated"] == {**even["megatron"]}


@pytest.mark.parametrize("tp, H, K", [(2, 4, 2), (4, 8, 2), (4, 4, 1), (8, 8, 2), (2, 2, 1)])
def test_mistakes_are_the_bugs_they_name(tp, H, K):
    c = {"tp": tp, "heads": H, "kv_heads": K, "causal": "on", "seq": 4, "hidden": 8, "seed": 0}
    inp = _inputs(c)
    E, Hr = 8 // H, H // tp
    P, Y = ref_attention(inp, H, K, True)
    off = page3.mistake_options({"tp": tp, "heads": H, "kv_heads": K, "seq": 4, "hidden": 8, "causal": True})
    for mistake in att.MISTAKES[1:]:
        res = _render({**c, "mistake": mistake})
        ytab = {(r[0], r[1]["key"]): grid_values(r[2]) for r in res["tables"]["att-y"]["rows"]}
        shown = ytab[("Y", "label.att_tp_result")]
        close(ytab[("Y", "label.reference")], rows2(Y))
        if mistake in off:          # nothing to show: reset to the correct computation, with the reason
            assert res["controls"]["mistake"] == "none"
            assert res["control_state"]["mistake"]["value"] == "none"
            assert res["notes"]["att-reset"]["args"]["why"]["key"] == f"note.att_needs_{mistake.replace('-', '_')}"
            close(shown, rows2(Y))
            continue
        assert res["controls"]["mistake"] == mistake
        if mistake == "f-and-g-swapped":     # rank 0's partial of attention on tp·X, never summed
            _, C0 = ref_heads(tp * inp["X"], inp["W_q"], inp["W_k"], inp["W_v"], H, K, True, heads=range(Hr))
            close(shown, rows2(C0 @ inp["W_o"]))
        elif mistake == "scale-local-width":
            _, C = ref_heads(inp["X"], inp["W_q"], inp["W_k"], inp["W_v"], H, K, True, scale=1 / math.sqrt(Hr * E))
            close(shown, rows2(C @ inp["W_o"]))
            assert res["values"]["softmax-scale"] == fmt.num(1 / math.sqrt(Hr * E))
        elif mistake == "kv-not-replicated":   # rank r reads KV head r mod K
            _, C = ref_heads(inp["X"], inp["W_q"], inp["W_k"], inp["W_v"], H, K, True, kv_of=lambda h: (h // Hr) % K)
            close(shown, rows2(C @ inp["W_o"]))
        elif mistake == "kv-grad-not-summed":  # forward right, replicas' gradients apart
            close(shown, rows2(Y))
            assert not res["values"]["kv-grad-spread"].startswith("<")
            verdicts = {r[0]: r[-1]["key"] for r in res["tables"]["att-check"]["rows"]}
            assert verdicts["Y"] == "label.att_ok" and verdicts["G_W_k"] == "label.att_bad"
        if mistake != "kv-grad-not-summed":
            assert not np.allclose(shown, rows2(Y), atol=1e-3)
            assert any(r[-1]["key"] == "label.att_bad" for r in res["tables"]["att-check"]["rows"])


def test_disabled_mistakes_are_exactly_those_that_change_nothing():
    for tp, H, K in itertools.product((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)):
        try:
            res = views.render("attention", {"tp": str(tp), "heads": str(H), "kv_heads": str(K)})
        except TPMathError:
            continue
        off = set(res["control_state"]["mistake"]["options"])
        want = {m for m, bad in (("f-and-g-swapped", tp == 1), ("kv-not-replicated", not 1 < K < tp),
                                 ("kv-grad-not-summed", not K < tp), ("scale-local-width", H // tp == 1)) if bad}
        assert off == want, (tp, H, K)
        assert "none" not in off and res["control_state"]["mistake"]["disabled"] is False


# ----------------------------------------------------------------------------------- layer

def ln(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def gelu(z):
    return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))


def ref_layer(p, H, K, causal):
    a = {**p, "X": ln(p["X"], p["gamma1"], p["beta1"])}
    U = p["X"] + ref_attention(a, H, K, causal)[1] + p["b_o"]
    return U + gelu(ln(U, p["gamma2"], p["beta2"]) @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]


@pytest.mark.parametrize("tp, H, K, causal", [(2, 4, 2, "on"), (4, 4, 1, "off"), (1, 8, 2, "on"), (4, 8, 8, "on")])
def test_layer_tables_equal_the_numpy_layer_and_finite_differences(tp, H, K, causal):
    res = views.render("layer", {"tp": str(tp), "heads": str(H), "kv_heads": str(K), "causal": causal})
    from tpmath import layer
    cfg, F = layer.validate_layer(tp, H, K, 4, 1, 8, None, causal == "on")
    p = layer.example_inputs(0, cfg, F)
    Y = ref_layer(p, H, K, causal == "on")
    ytab = {(r[0], r[1]["key"]): grid_values(r[2]) for r in res["tables"]["layer-out"]["rows"]}
    close(ytab[("Y", "label.att_tp_result")], rows2(Y))
    # every replicated parameter: rank 0's gradient = the finite-difference gradient, identical on all ranks
    rows = res["tables"]["layer-replicated"]["rows"]
    assert [r[1]["key"] for r in rows] == ["label.att_tp_result", "label.reference"] * len(layer.REPLICATED)
    for row in rows:                   # rank 0's gradient and the reference, each = finite differences
        name = {v: k for k, v in page3.SYMBOL.items()}[row[0]]

        def loss(v, name=name):
            return float(np.sum(ref_layer({**p, name: v}, H, K, causal == "on") * p["G"]))
        close(grid_values(row[2]), finite_diff(loss, p[name]), tol=2e-4)
        # the ranks' copies agree to the last bit (rank 0's row); the reference row has no spread
        assert row[3] == ("<\u00a01e\u221215" if row[1]["key"] == "label.att_tp_result" else "—")
    params = {r[0]: r for r in res["tables"]["layer-params"]["rows"]}
    assert list(params) == [page3.SYMBOL[k] for k in layer.PARAMS]
    for k in layer.PARAMS:
        row = params[page3.SYMBOL[k]]
        assert err_value(row[4]) < err_value(row[5]) < 1e-10, (k, row)   # measured error below its tolerance
        full = p[k].shape
        if page3.HOLD[k] == "rep":
            assert row[3] == "×".join(map(str, full)) and row[6] == "<\u00a01e\u221215"
    assert params["W₁"][3] == f"8×{32 // tp}" and params["W₂"][3] == f"{32 // tp}×8" and params["b₁"][3] == f"{32 // tp}"
    assert params["W_o"][3] == f"{8 // tp}×8"
    comm = res["tables"]["layer-comm"]["rows"]
    if tp > 1:
        assert [(r[0]["key"], r[2]) for r in comm[:4]] == [("label.att_forward", "f̄")] * 2 + [("label.att_backward", "f")] * 2
        assert len(comm) == 4 + (2 if K < tp else 0)
        assert res["values"]["layer-allreduces"]["args"] == {"fwd": "2", "bwd": "2"}


# ------------------------------------------------------------------------------ qkv-layout

def column_labels(H, K, E, layout):
    """Each output column of the fused weight as (part, head, column within the head)."""
    if layout == "megatron":    # as Megatron's loader builds linear_qkv: per group, q heads, k, v
        heads = []
        for g in range(K):
            heads += [("q", g * (H // K) + i) for i in range(H // K)] + [("k", g), ("v", g)]
    else:
        heads = [("q", h) for h in range(H)] + [("k", k) for k in range(K)] + [("v", k) for k in range(K)]
    return [(part, h, e) for part, h in heads for e in range(E)]


def pieces_text(cols, E):
    out, i = [], 0
    while i < len(cols):
        part, h, a = cols[i]
        j = i
        while j + 1 < len(cols) and cols[j + 1][:2] == (part, h):
            j += 1
        b = cols[j][2] + 1
        out.append(f"{part}{h}" if (a, b) == (0, E) else f"{part}{h}[{a}:{b}]")
        i = j + 1
    return " ".join(out)


@pytest.mark.parametrize("tp, H, K, E", [(2, 4, 2, 2), (4, 8, 2, 1), (2, 8, 8, 4), (4, 4, 1, 2), (8, 8, 2, 4),
                                         (4, 8, 4, 1), (1, 2, 1, 1)])
def test_qkv_layout_table_equals_explicit_column_labels(tp, H, K, E):
    res = views.render("qkv-layout", {"tp": str(tp), "heads": str(H), "kv_heads": str(K), "head_dim": str(E)})
    rows = res["tables"]["qkv-ranks"]["rows"]
    Hr = H // tp
    for layout, col in (("megatron", 2), ("concatenated", 4)):
        labels = column_labels(H, K, E, layout)
        if len(labels) % tp:
            assert all(r[col + 1]["key"] == "label.qkv_uneven" for r in rows)
            continue
        w = len(labels) // tp
        for r, row in enumerate(rows):
            mine = labels[r * w:(r + 1) * w]
            assert row[col] == f"[{r * w}, {(r + 1) * w}) " + pieces_text(mine, E), (layout, r)
            q = set(range(r * Hr, (r + 1) * Hr))
            kv = {h * K // H for h in q}
            need = {("q", h) for h in q} | {(x, k) for k in kv for x in "kv"}
            whole = {(p_, h) for p_, h, _ in mine}
            usable = whole == need and len(mine) == E * len(need)
            assert row[col + 1]["key"] == ("label.qkv_usable" if usable else "label.qkv_not_usable"), (layout, r)
        if layout == "megatron" and tp <= K and K % tp == 0:
            assert all(r[col + 1]["key"] == "label.qkv_usable" for r in rows)


# ------------------------------------------------------------------------------- strings

def _strings(lang):
    from tpsite.content import load_strings
    return load_strings(ROOT / "content" / "i18n", lang)[0]


def test_every_key_exists_in_both_languages():
    en, zh = _strings("en"), _strings("zh")
    used = set()
    for section in SECTIONS:
        sec = views.sections()[section]
        used |= {c.label_key for c in sec.controls}
        used |= {f"value.{v.replace('-', '_')}" for v in sec.values}
        for c in sec.controls:
            for o in c.options:
                key = f"opt.{c.name.replace('-', '_')}.{str(o).replace('-', '_')}"
                if c.name in ("mistake", "causal", "pass"):
                    used.add(key)
        combos = list(settings(section))
        for c in combos[:: max(1, len(combos) // 150)]:
            try:
                res = views.render(section, c)
            except TPMathError:
                continue
            used |= set(keys_of(res["tables"])) | set(keys_of(res["values"])) | set(keys_of(res["notes"]))
            used |= set(keys_of(res["figures"])) | set(keys_of(res.get("control_state", {})))
    for m in att.MISTAKES:      # every mistake's note, figure title and reset text
        res = views.render("attention", {"tp": "4", "heads": "8", "kv_heads": "2", "mistake": m})
        used |= set(keys_of(res))
    missing = {lang: sorted(k for k in used if k not in s) for lang, s in (("en", en), ("zh", zh))}
    assert missing == {"en": [], "zh": []}


def test_page3_string_files_have_the_same_keys():
    import tomllib
    from tpsite.content import flatten
    en = flatten(tomllib.loads((ROOT / "content/i18n/en.attention.toml").read_text(encoding="utf-8")))
    zh = flatten(tomllib.loads((ROOT / "content/i18n/zh.attention.toml").read_text(encoding="utf-8")))
    assert set(en) == set(zh)
    for k in en:      # the same placeholders in both languages
        assert set(re.findall(r"\{(\w+)\}", en[k])) == set(re.findall(r"\{(\w+)\}", zh[k])), k
    cjk = re.compile(r"[\u4e00-\u9fff]")
    assert sum(bool(cjk.search(v)) for v in zh.values()) > 0.8 * len(zh)


# ---------------------------------------------------------------------------- the built site

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from tpsite.build import build
    out = tmp_path_factory.mktemp("site") / "site"
    build(out, runtime="none")
    return out


def _h2_ids(page: str) -> list[str]:
    return re.findall(r'<h2[^>]*\bid="([^"]+)"', page)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_built_page(site, lang):
    page = (site / lang / "transformer-layer.html").read_text(encoding="utf-8")
    assert [i for i in _h2_ids(page) if i != "toc-title"] == list(HEADING_IDS)
    for section in SECTIONS:
        assert f'<div class="demo" id="demo-{section}" data-section="{section}">' in page
        for name in views.sections()[section].tables:
            assert f'data-table="{name}"' in page, name
    for fig in ("attention", "attention-grads", "layer", "qkv-layout"):
        assert f'data-figure="{fig}"' in page
    assert 'href="index.html' in page and 'href="row-parallel.html' in page
    assert "{{" not in page and "$$" not in page
    for ref in range(1, 11):
        assert f'id="ref-{ref}"' in page and f'href="#ref-{ref}"' in page, ref
    assert len(re.findall(r"<details", page)) >= 7 + 3          # interview questions + real-ranks blocks
    nav = "Transformer layer" if lang == "en" else "Transformer 层"
    assert re.search(rf'<nav class="site-nav".*?>{re.escape(nav)}<', page, re.S)
    if lang == "zh":
        prose = html.unescape(re.sub(r"<[^>]+>", "", page.split("<main", 1)[1]))
        assert len(re.findall(r"[\u4e00-\u9fff]", prose)) > 4000


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_built_tables_are_the_view_results(site, lang):
    from tpsite.content import load_strings      # noqa: F401  (the builder's own strings)
    page = (site / lang / "transformer-layer.html").read_text(encoding="utf-8")
    for section in SECTIONS:
        res = views.render(section, None, lang)
        for name, spec in res["tables"].items():
            m = re.search(rf'<table data-table="{name}">(.*?)</table></div>', page, re.S)
            assert m, name
            body = m.group(1).split("<tbody>", 1)[1].rsplit("</tbody>", 1)[0]
            n_rows = len(re.findall(r"<tr><th scope=\"row\">", body))
            assert n_rows == len(spec["rows"]), name
            for row in spec["rows"]:
                for cell in row:
                    if isinstance(cell, str):
                        assert html.escape(cell, quote=False) in body or cell in html.unescape(body), (name, cell)


# ------------------------------------------------------------------------------ real ranks

@pytest.mark.parametrize("controls", [{}, {"tp": "4", "heads": "4", "kv_heads": "1", "pass": "backward"},
                                      {"tp": "1", "causal": "off"}])
def test_layer_real_block_prints_the_tables_numbers(controls):
    """The layer's real-ranks block: the command parses back to the same plan, and what every
    rank prints for its replicated gradients is the page's R0 grid (identical on all ranks)."""
    import shlex

    from tpmath import ranks
    from tpmath.real.__main__ import build_parser
    res = views.render("layer", controls)
    (block,) = res["real"]
    argv = shlex.split(block["command"])
    args = build_parser().parse_args(argv[6:])
    p = ranks.plan("layer", {o.dest: getattr(args, o.dest) for o in ranks.options("layer")})
    assert int(argv[3]) == p["world"] == int(res["controls"]["tp"])
    assert ranks.format_output(*ranks.expected(p)) == block["output"]
    if res["controls"]["pass"] == "backward":
        per_rank, _ = ranks.expected(p)
        table = {r[0]: grid_values(r[2]) for r in res["tables"]["layer-replicated"]["rows"]
                 if r[1]["key"] == "label.att_tp_result"}
        for recs in per_rank:
            got = {i18n.text(n): v for n, v in recs}       # names as the English run prints them
            for key, symbol in (("gamma1", "γ₁"), ("b_o", "b_o"), ("b2", "b₂")):
                close(table[symbol], got[f"G_{key} (local, no collective)"])


@pytest.mark.parametrize("section, controls", [("attention", {}), ("attention", {"tp": "4", "kv_heads": "1"}),
                                               ("qkv-layout", {"tp": "4", "heads": "8", "head_dim": "1"})])
def test_attention_real_blocks_are_the_runs_of_the_controls(section, controls):
    from tpmath import ranks
    res = views.render(section, controls)
    (block,) = res["real"]
    assert block["command"].startswith(f"torchrun --standalone --nproc-per-node {res['controls']['tp']} ")
    if section == "attention":
        c = res["controls"]
        p = ranks.plan("attention", {"tp": c["tp"], "heads": c["heads"], "kv_heads": c["kv_heads"], "seq": c["seq"],
                                     "hidden": c["hidden"], "causal": c["causal"] == "on", "seed": c["seed"]})
        assert block["output"] == ranks.format_output(*ranks.expected(p))
