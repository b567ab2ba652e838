"""The attention and layer cores against independent numpy references (no torch needed).

* an explicit loop implementation of attention (per batch, head, query: the formulas written
  out, nothing shared with tpmath.attention) for the forward pass;
* central finite differences of that independent loss for every gradient;
* sharded (merged from the ranks) = unsharded for every valid head split;
* the head assignment, the collectives, the KV replication cost recomputed from their rules;
* each mistake leaves the reference, and the CLI's bad combinations are one error line.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tpmath import i18n
from tpmath import attention as att
from tpmath import layer as lay
from tpmath.errors import TPMathError
from tpmath.record import fields_of

ROOT = Path(__file__).resolve().parents[1]
FD_STEP = 1e-6


# ------------------------------------------------------------------ independent references

def loop_attention(X, W_q, W_k, W_v, W_o, H, K, causal):
    """Y by explicit loops: query head h reads KV head h·K//H; softmax over keys j ≤ i if causal."""
    B, S, D = X.shape
    E = W_q.shape[1] // H
    Y = np.zeros((B, S, W_o.shape[1]))
    for b in range(B):
        ctx = np.zeros((S, H * E))
        for h in range(H):
            kv = h * K // H
            q = X[b] @ W_q[:, h * E:(h + 1) * E]
            k = X[b] @ W_k[:, kv * E:(kv + 1) * E]
            v = X[b] @ W_v[:, kv * E:(kv + 1) * E]
            for i in range(S):
                keys = range(i + 1) if causal else range(S)
                s = np.array([q[i] @ k[j] / math.sqrt(E) for j in keys])
                w = np.exp(s - s.max())
                w /= w.sum()
                ctx[i, h * E:(h + 1) * E] = sum(w[n] * v[j] for n, j in enumerate(keys))
        Y[b] = ctx @ W_o
    return Y


def ln(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def gelu_tanh(z):
    return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))


def loop_layer(p, H, K, causal):
    """The pre-LN layer from the loop attention and plain numpy formulas."""
    X = p["X"]
    A1 = ln(X, p["gamma1"], p["beta1"])
    H1 = X + loop_attention(A1, p["W_q"], p["W_k"], p["W_v"], p["W_o"], H, K, causal) + p["b_o"]
    A2 = ln(H1, p["gamma2"], p["beta2"])
    return H1 + gelu_tanh(A2 @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]


def central_differences(loss, inputs, names):
    """dL/d(each entry) = (L(v+h) − L(v−h)) / 2h for the inputs named."""
    out = {}
    for name in names:
        base = inputs[name]
        grad = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            plus, minus = base.copy(), base.copy()
            plus[idx] += FD_STEP
            minus[idx] -= FD_STEP
            grad[idx] = (loss({**inputs, name: plus}) - loss({**inputs, name: minus})) / (2 * FD_STEP)
        out["G_" + name] = grad
    return out


def maxdiff(a, b):
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


# --------------------------------------------------------------------------- valid configs

def valid_splits(max_tp=8):
    """Every (tp, H, K) the rules allow, for H in 1..8."""
    for tp, H in itertools.product((1, 2, 4, 8), (1, 2, 4, 6, 8)):
        if tp > max_tp or H % tp:
            continue
        for K in range(1, H + 1):
            if H % K == 0 and (K % tp == 0 if K >= tp else tp % K == 0):
                yield tp, H, K


SPLITS = list(valid_splits())


@pytest.mark.parametrize("tp, H, K", SPLITS)
@pytest.mark.parametrize("causal", (False, True))
def test_sharded_equals_reference_and_loop_forward(tp, H, K, causal):
    E = 1 + (tp + H + K) % 3
    res = att.run_attention(tp=tp, heads=H, kv_heads=K, seq=3 + H % 3, batch=2, hidden=H * E,
                            seed=tp * 100 + H * 10 + K, causal=causal)
    assert res.matches_reference, res.max_abs_err
    for key, err in res.max_abs_err.items():
        assert err <= 1e-13 * max(1.0, float(np.max(np.abs(getattr(res.reference, key))))), (key, err)
    i = res.inputs
    Y = loop_attention(i["X"], i["W_q"], i["W_k"], i["W_v"], i["W_o"], H, K, causal)
    assert maxdiff(res.reference.Y, Y) < 1e-13
    assert abs(res.reference.loss - np.sum(Y * i["G"])) < 1e-12
    assert all(v == 0 for v in res.replica_spread.values()), res.replica_spread


@pytest.mark.parametrize("H, K, causal", [(2, 2, False), (4, 2, True), (4, 1, False), (2, 1, True)])
def test_gradients_against_central_differences(H, K, causal):
    cfg = att.validate_config(tp=1, heads=H, kv_heads=K, seq=3, batch=2, hidden=2 * H, causal=causal)
    inputs = att.example_inputs(5, cfg)
    ref = att.reference_attention(inputs, H, K, causal)

    def loss(p):
        return float(np.sum(loop_attention(p["X"], p["W_q"], p["W_k"], p["W_v"], p["W_o"], H, K, causal) * p["G"]))

    fd = central_differences(loss, inputs, ("X",) + att.WEIGHTS)
    for key, num in fd.items():
        assert maxdiff(getattr(ref, key), num) < 1e-8, key


@pytest.mark.parametrize("tp, H, K", [(2, 4, 1), (4, 4, 2), (2, 2, 2)])
def test_layer_gradients_against_central_differences(tp, H, K):
    res = lay.run_layer(tp=tp, heads=H, kv_heads=K, seq=3, batch=1, hidden=H, ffn=2 * tp, seed=2, causal=K < H)
    p, causal = res.inputs, K < H

    def loss(q):
        return float(np.sum(loop_layer(q, H, K, causal) * q["G"]))

    assert maxdiff(res.reference.Y, loop_layer(p, H, K, causal)) < 1e-13
    fd = central_differences(loss, p, ("X",) + lay.PARAMS)
    for key, num in fd.items():
        assert maxdiff(getattr(res.sharded, key), num) < 2e-8, key
        assert maxdiff(getattr(res.reference, key), num) < 2e-8, key


@pytest.mark.parametrize("tp, H, K", [s for s in SPLITS if s[1] >= 2][::3])
def test_layer_sharded_equals_reference(tp, H, K):
    res = lay.run_layer(tp=tp, heads=H, kv_heads=K, seq=4, batch=2, hidden=2 * H, ffn=4 * tp, seed=tp + K,
                        causal=True)
    assert res.matches_reference, res.max_abs_err
    assert set(fields_of(res.sharded)) == set(lay.RESULT_KEYS)
    # LayerNorm and row-parallel bias gradients: each rank computed its own, all identical
    for name in lay.REPLICATED:
        copies = [getattr(rk, "G_" + name) for rk in res.ranks]
        assert all(np.array_equal(c, copies[0]) for c in copies), name
        assert res.replica_spread[name] == 0
    collectives = [(c.phase, c.operator) for c in res.comm if c.operator in ("f", "f̄")]
    assert collectives == ([] if tp == 1 else [("forward", "f̄")] * 2 + [("backward", "f")] * 2)


# ----------------------------------------------------------------------- heads and comm

@pytest.mark.parametrize("tp, H, K", SPLITS)
def test_each_rank_holds_the_kv_heads_its_queries_read(tp, H, K):
    cfg = att.validate_config(tp=tp, heads=H, kv_heads=K, hidden=H)
    seen_q = []
    for r in range(tp):
        q, kv = att.rank_heads(cfg, r)
        assert q == list(range(r * H // tp, (r + 1) * H // tp))
        assert sorted({h * K // H for h in q}) == kv          # exactly the KV heads read, nothing else
        seen_q += q
    assert seen_q == list(range(H))


@pytest.mark.parametrize("tp, H, K, seq, batch, hidden", [(2, 4, 4, 4, 1, 8), (4, 8, 2, 3, 2, 16), (4, 4, 1, 5, 1, 8),
                                                          (1, 2, 1, 2, 1, 4)])
def test_comm_lists_the_allreduces_with_their_sizes(tp, H, K, seq, batch, hidden):
    res = att.run_attention(tp=tp, heads=H, kv_heads=K, seq=seq, batch=batch, hidden=hidden)
    full = batch * seq * hidden
    want = [] if tp == 1 else [("forward", "f̄", "Y", full, [list(range(tp))]),
                                ("backward", "f", "G_X", full, [list(range(tp))])]
    if K < tp:
        groups = [list(range(k * tp // K, (k + 1) * tp // K)) for k in range(K)]
        want += [("backward", "kv-replicas", t, hidden * (hidden // H), groups) for t in ("G_W_k", "G_W_v")]
    got = [(c.phase, c.operator, c.tensor, c.elements, c.groups) for c in res.comm]
    assert got == want
    assert all(c.collective == "all-reduce" for c in res.comm)


def test_kv_replication_cost():
    res = att.run_attention(tp=4, heads=8, kv_heads=1, seq=4, batch=2, hidden=16, dtype_bytes=2)
    c = res.kv_replication
    D, E, B, S = 16, 2, 2, 4
    assert c["kv_heads_per_rank"] == 1 and c["replicas"] == 4
    assert c["weight_elements_per_rank"] == 2 * D * E                   # W_k and W_v of one head
    assert c["weight_elements_per_rank_unreplicated"] == 2 * D * E / 4
    assert c["weight_bytes_per_rank"] == 2 * 2 * D * E
    assert c["activation_elements_per_rank"] == 2 * B * S * E
    assert c["activation_bytes_per_rank_unreplicated"] == 2 * 2 * B * S * E / 4
    assert c["overhead_factor"] == 4
    # the shards the ranks really hold have that many elements
    assert all(rk.W_k.size + rk.W_v.size == c["weight_elements_per_rank"] for rk in res.ranks)
    assert all(rk.K.size + rk.V.size == c["activation_elements_per_rank"] for rk in res.ranks)
    even = att.run_attention(tp=2, heads=4, kv_heads=2, hidden=8).kv_replication
    assert even["overhead_factor"] == 1 and even["replicas"] == 1


def test_rank_records_have_the_documented_shapes():
    res = att.run_attention(tp=2, heads=4, kv_heads=2, seq=3, batch=2, hidden=8)
    B, S, D, Hr, Kr, E = 2, 3, 8, 2, 1, 2
    want = {"W_q": (D, Hr * E), "W_k": (D, Kr * E), "W_v": (D, Kr * E), "W_o": (Hr * E, D), "Q": (B, S, Hr * E),
            "K": (B, S, Kr * E), "V": (B, S, Kr * E), "scores": (B, Hr, S, S), "probs": (B, Hr, S, S),
            "context": (B, S, Hr * E), "Y_partial": (B, S, D), "Y": (B, S, D), "G_X_partial": (B, S, D),
            "G_W_q": (D, Hr * E), "G_W_k": (D, Kr * E), "G_W_o": (Hr * E, D)}
    for rk in res.ranks:
        for key, shape in want.items():
            assert getattr(rk, key).shape == shape and tuple(rk.shapes[key]) == shape, key
        np.testing.assert_allclose(rk.probs.sum(-1), 1.0, rtol=0, atol=1e-15)
    shapes = {"Y": (B, S, D), "G_X": (B, S, D), "G_W_q": (D, D), "G_W_k": (D, 2 * E), "G_W_v": (D, 2 * E),
              "G_W_o": (D, D)}
    for key, shape in shapes.items():
        assert getattr(res.sharded, key).shape == shape == getattr(res.reference, key).shape


def test_causal_probabilities_are_zero_above_the_diagonal():
    res = att.run_attention(tp=2, heads=2, kv_heads=1, seq=5, hidden=4, causal=True)
    for rk in res.ranks:
        assert np.all(np.triu(rk.probs, k=1) == 0)
        assert np.all(rk.probs[..., 0, 0] == 1)                 # the first query sees only itself


def test_inputs_are_deterministic_readable_and_share_heads_across_k():
    a = att.run_attention(seed=7, kv_heads=4).inputs
    b = att.run_attention(seed=7, kv_heads=2).inputs
    c = att.run_attention(seed=8, kv_heads=4).inputs
    assert all(np.array_equal(a[k], att.run_attention(seed=7, kv_heads=4).inputs[k]) for k in a)
    assert np.array_equal(a["W_k"][:, :4], b["W_k"]) and np.array_equal(a["W_q"], b["W_q"])
    assert not np.array_equal(a["X"], c["X"])
    for k, v in a.items():
        assert np.all(v != 0), k
        decimals = 1 if k in ("X", "G") else 2
        assert np.array_equal(v, np.round(v, decimals)), k


# ----------------------------------------------------------------------------- mistakes

MISTAKE_CASES = [("f-and-g-swapped", 2, 4, 4), ("f-and-g-swapped", 4, 8, 2), ("kv-not-replicated", 4, 4, 2),
                 ("kv-not-replicated", 8, 8, 2), ("kv-grad-not-summed", 4, 8, 1), ("kv-grad-not-summed", 4, 4, 2),
                 ("scale-local-width", 2, 4, 4), ("scale-local-width", 1, 4, 2)]


@pytest.mark.parametrize("mistake, tp, H, K", MISTAKE_CASES)
@pytest.mark.parametrize("causal", (False, True))
def test_each_mistake_leaves_the_reference(mistake, tp, H, K, causal):
    res = att.run_attention(tp=tp, heads=H, kv_heads=K, hidden=2 * H, seq=4, causal=causal, mistake=mistake)
    assert not res.matches_reference
    assert max(res.max_abs_err.values()) > 1e-2, res.max_abs_err
    ok = att.run_attention(tp=tp, heads=H, kv_heads=K, hidden=2 * H, seq=4, causal=causal)
    assert ok.matches_reference
    assert all(np.array_equal(getattr(res.reference, k), getattr(ok.reference, k)) for k in fields_of(ok.reference))


def test_f_and_g_swapped_is_the_partial_of_tp_times_x():
    """Rank r's Y is its heads' partial output of tp·X, not summed; G_X is its partial for tp·G."""
    tp = 2
    res = att.run_attention(tp=tp, heads=4, kv_heads=4, hidden=8, mistake="f-and-g-swapped")
    i = res.inputs
    for rk in res.ranks:
        cols = slice(rk.q_heads[0] * 2, (rk.q_heads[-1] + 1) * 2)
        only_mine = {"W_q": i["W_q"][:, cols], "W_k": i["W_k"][:, cols], "W_v": i["W_v"][:, cols],
                     "W_o": i["W_o"][cols, :], "X": tp * i["X"], "G": tp * i["G"]}
        sub = att.reference_attention(only_mine, 2, 2, False)
        assert maxdiff(rk.Y, sub.Y) < 1e-13
        assert maxdiff(rk.G_X, sub.G_X) < 1e-13
    assert res.replica_spread["Y"] > 1e-2
    assert [c.tensor for c in res.comm] == ["X", "G_Y"]


def test_kv_grad_not_summed_keeps_each_replicas_part():
    res = att.run_attention(tp=4, heads=4, kv_heads=1, hidden=8, mistake="kv-grad-not-summed")
    ref = res.reference
    parts = [rk.G_W_k for rk in res.ranks]
    assert maxdiff(sum(parts), ref.G_W_k) < 1e-13                # the parts add up to the gradient
    assert maxdiff(res.sharded.G_W_k, parts[0]) == 0             # but rank 0 keeps only its own
    assert res.replica_spread["G_W_k"] > 1e-2                    # and the replicas drift apart
    assert maxdiff(res.sharded.G_W_q, ref.G_W_q) < 1e-13         # everything else is right
    assert not any(c.operator == "kv-replicas" for c in res.comm)


def test_kv_not_replicated_reads_the_wrong_head():
    res = att.run_attention(tp=4, heads=4, kv_heads=2, hidden=8, mistake="kv-not-replicated")
    assert [rk.kv_heads for rk in res.ranks] == [[0], [1], [0], [1]]      # right: 0 0 1 1
    assert maxdiff(res.sharded.Y, res.reference.Y) > 1e-2


def test_scale_local_width_uses_the_rank_width():
    res = att.run_attention(tp=2, heads=4, kv_heads=4, hidden=8, mistake="scale-local-width")
    assert res.config["scale"] == 1 / math.sqrt(2 * 2)
    assert att.run_attention(tp=2, heads=4, hidden=8).config["scale"] == 1 / math.sqrt(2)


@pytest.mark.parametrize("mistake, tp, H, K", [("f-and-g-swapped", 1, 4, 4), ("kv-not-replicated", 4, 4, 4),
                                                ("kv-not-replicated", 4, 4, 1), ("kv-grad-not-summed", 2, 4, 2),
                                                ("scale-local-width", 4, 4, 4)])
def test_a_mistake_that_changes_nothing_is_refused(mistake, tp, H, K):
    with pytest.raises(TPMathError) as exc:
        att.run_attention(tp=tp, heads=H, kv_heads=K, hidden=2 * H, mistake=mistake)
    assert exc.value.field == "mistake" and mistake in str(exc.value)
    cfg = att.Config(tp, H, K, 4, 1, 2 * H, False, mistake)
    assert att.mistake_needs(cfg) is not None


# -------------------------------------------------------------------------------- CLI

def cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=ROOT)


@pytest.mark.parametrize("args, needle", [
    (("--tp", "3"), "heads=4 is not divisible by tp=3"),
    (("--heads", "4", "--kv-heads", "3", "--tp", "1"), "kv_heads=3 does not divide heads=4"),
    (("--tp", "4", "--heads", "12", "--kv-heads", "6", "--hidden", "24"), "kv_heads=6 ≥ tp=4 must be divisible by tp"),
    (("--tp", "4", "--heads", "12", "--kv-heads", "3", "--hidden", "24"), "kv_heads=3 < tp=4 must divide tp"),
    (("--hidden", "10"), "hidden=10 is not divisible by heads=4"),
    (("--seq", "0"), "Sequence length must be between 1 and 16, not 0"),
    (("--seq", "1000"), "Sequence length must be between 1 and 16, not 1000"),
    (("--batch", "1e9"), "Batch size must be between 1 and 4"),
    (("--tp", "64", "--heads", "64"), "tp must be between 1 and 8, not 64"),
    (("--hidden", "1.5"), "Hidden size must be a whole number, not 1.5"),
    (("--seed", "-1"), "Seed must be between 0 and"),
    (("--mistake", "typo"), "typo"),
    (("--tp", "1", "--mistake", "f-and-g-swapped"), "it needs tp > 1"),
    (("--kv-heads", "x"), "KV heads must be a whole number, not x"),
])
def test_cli_bad_combinations_are_one_error_line(args, needle):
    out = cli("attention", *args, "--json")
    assert out.returncode == 2 and out.stdout == "", out.stdout[:200]
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("args, needle", [(("--ffn", "7"), "ffn=7"), (("--tp", "3"), "tp=3"),
                                          (("--kv-heads", "3"), "kv_heads=3"), (("--mistake", "none"), "mistake")])
def test_cli_layer_bad_values_are_one_error_line(args, needle):
    out = cli("layer", *args, "--json")
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], out.stderr


def test_cli_attention_json_matches_the_core():
    out = cli("attention", "--tp", "4", "--heads", "8", "--kv-heads", "2", "--seq", "3", "--batch", "2",
              "--hidden", "16", "--seed", "9", "--causal", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    core = att.run_attention(tp=4, heads=8, kv_heads=2, seq=3, batch=2, hidden=16, seed=9, causal=True)
    assert set(data["inputs"]) == {"X", "W_q", "W_k", "W_v", "W_o", "G"}
    for part in ("reference", "sharded"):
        assert set(data[part]) == set(att.RESULT_KEYS)
        for k in att.RESULT_KEYS:
            assert np.array_equal(np.asarray(data[part][k]), getattr(getattr(core, part), k)), (part, k)
    assert [(r["rank"], r["q_heads"], r["kv_heads"]) for r in data["ranks"]] == \
        [(0, [0, 1], [0]), (1, [2, 3], [0]), (2, [4, 5], [1]), (3, [6, 7], [1])]
    assert {"phase", "collective", "elements"} <= set(data["comm"][0])
    assert data["max_abs_err"]["Y"] < 1e-13 and data["config"]["causal"] is True


def test_cli_defaults_and_help():
    out = cli("attention", "--json")
    data = json.loads(out.stdout)
    assert data["config"] == {"tp": 2, "heads": 4, "kv_heads": 4, "head_dim": 2, "seq": 4, "batch": 1, "hidden": 8,
                              "causal": False, "mistake": "none", "seed": 0, "scale": 1 / math.sqrt(2)}
    for cmd, keys in (("attention", ("max_abs_err", "kv_replication", "--mistake")),
                      ("layer", ("gamma1", "replica_spread", "--ffn", "tanh"))):
        text = cli(cmd, "--help").stdout
        assert all(k in text for k in keys), (cmd, text)
    layer = json.loads(cli("layer", "--tp", "2", "--kv-heads", "1", "--json").stdout)
    assert set(layer["sharded"]) == set(lay.RESULT_KEYS) and layer["matches_reference"]
    assert layer["config"]["ffn"] == 32 and layer["config"]["activation"] == "gelu-tanh"


# ------------------------------------------------------------------- real-ranks registry

@pytest.mark.parametrize("given", [{}, {"tp": 4, "heads": 8, "kv_heads": 2, "causal": True},
                                   {"tp": 4, "heads": 4, "kv_heads": 1, "stage": "backward", "seed": 3},
                                   {"mistake": "f-and-g-swapped", "causal": "true"}])
def test_real_ranks_command_parses_back_to_the_same_plan(given):
    """The command the page will show, given to tpmath.real's own parser, is the same run."""
    import shlex

    from tpmath import ranks
    from tpmath.real.__main__ import build_parser
    cmd = ranks.command("attention", given)
    argv = shlex.split(cmd)
    args = build_parser().parse_args(argv[6:])
    again = ranks.plan("attention", {o.dest: getattr(args, o.dest) for o in ranks.options("attention")})
    p = ranks.plan("attention", given)
    assert int(argv[3]) == p["world"] == again["world"]
    assert ("--causal" in argv) == att.validate_config(causal=given.get("causal", False)).causal
    assert ranks.format_output(*ranks.expected(again)) == ranks.format_output(*ranks.expected(p))


def test_real_ranks_records_follow_the_core():
    """What rank r prints are the core's values for rank r, as (B·S, ·) matrices."""
    from tpmath import ranks
    p = ranks.plan("attention", {"tp": 2, "heads": 4, "kv_heads": 1, "batch": 2, "seq": 3})
    per_rank, check = ranks.expected(p)
    for r, recs in enumerate(per_rank):
        rk = p["core"].ranks[r]
        got = {i18n.text(n): v for n, v in recs}           # names as the English run prints them
        assert np.array_equal(got["Q"], rk.Q.reshape(6, -1))
        assert np.array_equal(got[f"P (head {2 * r + 1})"], rk.probs[:, 1].reshape(6, 3))
        assert np.array_equal(got["G_W_k[:, 0:2] ← all_reduce(SUM, ranks 0,1)"], rk.G_W_k)
        assert np.array_equal(got["Y ← all_reduce(SUM)"], p["core"].sharded.Y.reshape(6, -1))
    assert [n for n, _ in check] == [f"max|Δ| {k}" for k in ranks.attention.ATTENTION_CHECK]


# -------------------------------------------------------------------- fused QKV layout

@pytest.mark.parametrize("tp, H, K", SPLITS)
@pytest.mark.parametrize("E", (1, 2))
def test_fused_qkv_split_megatron_layout_is_usable_exactly_when_k_ge_tp(tp, H, K, E):
    """Megatron's per-group layout [q… k v | q… k v] split into tp column blocks gives every rank
    whole heads it needs iff tp | K; the concatenated [Q | K | V] layout only on one rank."""
    for layout in att.QKV_LAYOUTS:
        res = att.fused_qkv_split(tp=tp, heads=H, kv_heads=K, head_dim=E, layout=layout)
        assert res["columns"] == (H + 2 * K) * E
        if res["ranks"] is None:
            assert res["columns"] % tp and K < tp
            continue
        widths = [p["cols"][1] - p["cols"][0] for rk in res["ranks"] for p in rk["pieces"]]
        assert sum(widths) == res["columns"] and all(w > 0 for w in widths)
        usable = all(rk["usable"] for rk in res["ranks"])
        if layout == "megatron":
            assert usable == (K >= tp), res
        else:
            assert usable == (tp == 1), res


def test_fused_qkv_split_matches_megatrons_own_example():
    """Megatron-core's comment: q1 q2 q3 q4 k1 v1 | q5 … k2 v2 over 4 ranks (heads 8, groups 2)."""
    res = att.fused_qkv_split(tp=4, heads=8, kv_heads=2, head_dim=1, layout="megatron")
    names = [[p["part"] + str(p["head"]) for p in rk["pieces"]] for rk in res["ranks"]]
    assert names == [["q0", "q1", "q2"], ["q3", "k0", "v0"], ["q4", "q5", "q6"], ["q7", "k1", "v1"]]
