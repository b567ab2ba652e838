"""Sequence-parallel block: sharded == one device, gradients == complex step and finite
differences, collective layouts == the collectives core, the mistakes leave the reference,
bad input is one error line.

Independent references (none of them is tpmath.sp_layer's code): a forward written with Python
loops and ``math`` only, complex-step derivatives of a numpy forward written here (exact to
rounding), central finite differences, a pure-Python SplitMix64, and
:func:`tpmath.collectives.collective` for the layouts.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tpmath import TPMathError
from tpmath.collectives import collective
from tpmath.sp_layer import (DEMO_DROPOUT, MISTAKES, MP_SEED_OFFSET, RESULT_KEYS, all_gather_seq, keep_mask, make_inputs,
                             reduce_scatter_seq, run_sp_layer, uniforms)

SRC = str(Path(__file__).resolve().parents[1] / "src")
KEYS = ("Y", "G_X", "G_gamma", "G_beta", "G_W1", "G_W2")


# ------------------------------------------------------------------ independent references

def forward_np(X, gamma, beta, W1, W2, keep_h=None, keep_o=None, p=0.0):
    """The block's forward in plain numpy (works on complex inputs for the complex step)."""
    mu = X.mean(axis=-1, keepdims=True)
    var = ((X - mu) ** 2).mean(axis=-1, keepdims=True)
    A = (X - mu) / np.sqrt(var + 1e-5) * gamma + beta
    H = np.tanh(np.einsum("bsd,df->bsf", A, W1))
    if keep_h is not None:
        H = H * keep_h / (1 - p)
    O = np.einsum("bsf,fd->bsd", H, W2)
    if keep_o is not None:
        O = O * keep_o / (1 - p)
    return X + O


def loss_np(inp, masks=None, p=0.0, **override):
    args = {k: override.get(k, inp[k]) for k in ("X", "gamma", "beta", "W1", "W2")}
    masks = masks or {}
    return np.sum(forward_np(**args, keep_h=masks.get("H"), keep_o=masks.get("O"), p=p) * inp["G"])


def loops_forward(X, gamma, beta, W1, W2):
    """Y with Python lists and math only (no numpy): the seed-free ground truth for small cases."""
    B, S, D, F = len(X), len(X[0]), len(X[0][0]), len(W1[0])
    Y = []
    for b in range(B):
        rows = []
        for s in range(S):
            x = X[b][s]
            mu = sum(x) / D
            var = sum((v - mu) ** 2 for v in x) / D
            a = [(x[d] - mu) / math.sqrt(var + 1e-5) * gamma[d] + beta[d] for d in range(D)]
            h = [math.tanh(sum(a[d] * W1[d][f] for d in range(D))) for f in range(F)]
            rows.append([x[d] + sum(h[f] * W2[f][d] for f in range(F)) for d in range(D)])
        Y.append(rows)
    return Y


def complex_step(inp, masks=None, p=0.0, h=1e-30):
    """dL/d(each entry) of X, γ, β, W1, W2 by the complex step: f'(x) = Im f(x + ih) / h."""
    out = {}
    for name in ("X", "gamma", "beta", "W1", "W2"):
        base = inp[name].astype(complex)
        grad = np.empty(base.size)
        for i in range(base.size):
            probe = base.copy().ravel()
            probe[i] += 1j * h
            grad[i] = loss_np(inp, masks, p, **{name: probe.reshape(base.shape)}).imag / h
        out["G_" + name] = grad.reshape(base.shape)
    return out


def central_differences(inp, masks=None, p=0.0, h=1e-6):
    out = {}
    for name in ("X", "gamma", "beta", "W1", "W2"):
        base = inp[name]
        grad = np.empty(base.size)
        for i in range(base.size):
            up, down = base.copy().ravel(), base.copy().ravel()
            up[i] += h
            down[i] -= h
            grad[i] = (loss_np(inp, masks, p, **{name: up.reshape(base.shape)})
                       - loss_np(inp, masks, p, **{name: down.reshape(base.shape)})) / (2 * h)
        out["G_" + name] = grad.reshape(base.shape)
    return out


def splitmix_uniform(key: int, counter: int) -> float:
    """SplitMix64's finaliser in Python integers (the generator the core claims to use)."""
    m = (1 << 64) - 1
    z = (counter * 0x9E3779B97F4A7C15 + key * 0xD1B54A32D192ED03) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    z ^= z >> 31
    return (z >> 11) * 2.0 ** -53


def maxdiff(a, b):
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


# ------------------------------------------------------------------------------- forward

def test_forward_matches_python_loops():
    r = run_sp_layer(tp=2, seq=4, batch=2, hidden=3, ffn=4, seed=5)
    inp = r.inputs
    want = loops_forward(*(inp[k].tolist() for k in ("X", "gamma", "beta", "W1", "W2")))
    assert maxdiff(r.reference.Y, want) < 1e-14
    assert maxdiff(r.sharded.Y, want) < 1e-14
    assert abs(r.sharded.loss - float(np.sum(np.array(want) * inp["G"]))) < 1e-13


@pytest.mark.parametrize("tp", (1, 2, 3, 4))
@pytest.mark.parametrize("dropout", (0.0, 0.3))
def test_sharded_equals_the_one_device_block(tp, dropout):
    r = run_sp_layer(tp=tp, seq=12, batch=2, hidden=5, ffn=12, seed=tp, dropout=dropout)
    assert r.within_tolerance, r.max_abs_err
    for key in KEYS:
        assert maxdiff(getattr(r.sharded, key), getattr(r.reference, key)) < 1e-13, key
        assert maxdiff(getattr(r.plain_tp, key), getattr(r.reference, key)) < 1e-13, key
    # the numpy forward written here, with the core's one-device masks
    masks = None
    if dropout:
        B, S, D, F = 2, 12, 5, 12
        key = tp + MP_SEED_OFFSET
        masks = {"H": keep_mask(key, 0, (B, S, F), 2, dropout), "O": keep_mask(key, B * S * F, (B, S, D), 1, dropout)}
    Y = forward_np(*(r.inputs[k] for k in ("X", "gamma", "beta", "W1", "W2")),
                   keep_h=None if masks is None else masks["H"], keep_o=None if masks is None else masks["O"],
                   p=dropout)
    assert maxdiff(r.sharded.Y, Y) < 1e-13


@settings(max_examples=40, deadline=None)
@given(tp=st.integers(1, 4), per=st.integers(1, 3), batch=st.integers(1, 3), hidden=st.integers(2, 6),
       fcols=st.integers(1, 3), seed=st.integers(0, 2**32 - 1), dropout=st.sampled_from([0.0, 0.1, 0.5]))
def test_random_shapes_sharded_equals_reference(tp, per, batch, hidden, fcols, seed, dropout):
    r = run_sp_layer(tp=tp, seq=tp * per, batch=batch, hidden=hidden, ffn=tp * fcols, seed=seed, dropout=dropout)
    assert r.within_tolerance, r.max_abs_err
    assert r.ln_grads_agree


# ------------------------------------------------------------------------------ backward

@pytest.mark.parametrize("dropout", (0.0, 0.4))
def test_gradients_equal_the_complex_step(dropout):
    r = run_sp_layer(tp=2, seq=4, batch=2, hidden=3, ffn=4, seed=11, dropout=dropout)
    key = 11 + MP_SEED_OFFSET
    masks = None if not dropout else {"H": keep_mask(key, 0, (2, 4, 4), 2, dropout),
                                      "O": keep_mask(key, 32, (2, 4, 3), 1, dropout)}
    cs = complex_step(r.inputs, masks, dropout)
    for name in ("X", "gamma", "beta", "W1", "W2"):
        assert maxdiff(getattr(r.sharded, "G_" + name), cs["G_" + name]) < 1e-12, name


def test_gradients_equal_central_finite_differences():
    r = run_sp_layer(tp=2, seq=4, batch=1, hidden=4, ffn=6, seed=3)
    fd = central_differences(r.inputs)
    for name in ("X", "gamma", "beta", "W1", "W2"):
        assert maxdiff(getattr(r.sharded, "G_" + name), fd["G_" + name]) < 1e-7, name


def test_partial_layernorm_gradients_sum_to_the_full_ones():
    r = run_sp_layer(tp=4, seq=8, batch=2, hidden=4, ffn=8, seed=2)
    parts_g = [rk.G_gamma_partial for rk in r.ranks]
    parts_b = [rk.G_beta_partial for rk in r.ranks]
    assert maxdiff(sum(parts_g), r.reference.G_gamma) < 1e-13
    assert maxdiff(sum(parts_b), r.reference.G_beta) < 1e-13
    # each partial is the sum over the rank's own tokens only (written out independently)
    inp = r.inputs
    X = inp["X"]
    mu = X.mean(-1, keepdims=True)
    xhat = (X - mu) / np.sqrt(((X - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    for rk in r.ranks:
        a, b = rk.seq_range
        G_A = rk.G_A                                      # dL/dLN(X) of own tokens, after g's backward
        assert maxdiff(rk.G_beta_partial, G_A.sum(axis=(0, 1))) < 1e-13
        assert maxdiff(rk.G_gamma_partial, (G_A * xhat[:, a:b]).sum(axis=(0, 1))) < 1e-13


# ------------------------------------------------------------------- collectives, layouts

@pytest.mark.parametrize("tp", (2, 3, 4))
def test_sequence_collectives_are_nccl_layouts_on_the_seq_major_buffer(tp):
    """In Megatron's [s, b, h] layout the sequence is dim 0: the collectives core's AllGather
    and ReduceScatter (blocks along dim 0) must give the same tensors as the core's
    sequence-axis helpers on the (B, S, D) layout."""
    rng = np.random.default_rng(tp)
    B, Sl, D = 2, 3, 4
    shards = [rng.standard_normal((B, Sl, D)) for _ in range(tp)]
    seq_major = [np.swapaxes(x, 0, 1).reshape(Sl, B * D) for x in shards]     # (Sl, B·D)
    gathered = collective("all-gather", seq_major)[0].reshape(tp * Sl, B, D).swapaxes(0, 1)
    assert np.array_equal(all_gather_seq(shards), gathered)
    partials = [rng.standard_normal((B, tp * Sl, D)) for _ in range(tp)]
    seq_major = [np.swapaxes(x, 0, 1).reshape(tp * Sl, B * D) for x in partials]
    outs = collective("reduce-scatter", seq_major)
    for r, got in enumerate(reduce_scatter_seq(partials)):
        assert maxdiff(got, outs[r].reshape(Sl, B, D).swapaxes(0, 1)) < 1e-14


def test_rank_tensors_are_slices_of_the_one_device_tensors():
    r = run_sp_layer(tp=2, seq=6, batch=2, hidden=4, ffn=6, seed=9)
    inp, ref = r.inputs, r.reference
    for rk in r.ranks:
        (a, b), (c, d) = rk.seq_range, rk.ffn_range
        assert np.array_equal(rk.X, inp["X"][:, a:b])
        assert np.array_equal(rk.W1, inp["W1"][:, c:d]) and np.array_equal(rk.W2, inp["W2"][c:d])
        assert maxdiff(rk.Y, ref.Y[:, a:b]) < 1e-14
        assert maxdiff(rk.G_X, ref.G_X[:, a:b]) < 1e-14
        assert maxdiff(rk.G_W1, ref.G_W1[:, c:d]) < 1e-14
        assert rk.shapes["X"] == [2, 3, 4] and rk.shapes["A_full"] == [2, 6, 4]
        assert rk.shapes["Z"] == [2, 6, 3] and rk.shapes["G_W2"] == [3, 4]


def test_comm_list_and_bytes_keeping_the_gathered_input_equal_plain_tp():
    r = run_sp_layer(tp=4, seq=8, batch=2, hidden=4, ffn=8, backward_input="keep")
    n = 2 * 8 * 4
    assert [(c.phase, c.collective, c.elements) for c in r.comm] == [
        ("forward", "all-gather", n), ("forward", "reduce-scatter", n),
        ("backward", "all-gather", n), ("backward", "reduce-scatter", n), ("backward", "all-reduce", 2 * 4)]
    assert [(c.phase, c.collective, c.elements) for c in r.plain_tp.comm] == [
        ("forward", "all-reduce", n), ("backward", "all-reduce", n)]
    # ring: AllReduce 2(n−1)/n, AllGather and ReduceScatter (n−1)/n each: the same total
    assert r.comm_per_rank["block"] == r.plain_tp.comm_per_rank["block"] == 2 * 2 * 3 / 4 * n
    assert r.comm_per_rank["ln_grads"] == 2 * 3 / 4 * 8


# Megatron-core's backward of LinearWithGradAccumulationAndAsyncCommunication with
# sequence_parallel (tensor_parallel/layers.py at d98e8a6, lines 668-708): the saved input is the
# sequence shard, all_gather_into_tensor(input) is issued before grad_input = grad_output @ weight,
# then reduce_scatter(grad_input).  Written out by hand for one block, in issue order:
MEGATRON_BLOCK = [("forward", "all-gather", "g"), ("forward", "reduce-scatter", "ḡ"),
                  ("backward", "all-gather", "ḡ"),     # dL/dO shards for W2 (row parallel)
                  ("backward", "all-gather", "g"),     # the input of W1 gathered again
                  ("backward", "reduce-scatter", "g")]


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_megatron_regathers_the_linear_input_in_backward(tp):
    r = run_sp_layer(tp=tp, seq=8, batch=2, hidden=4, ffn=8)      # the default is Megatron's
    assert r.backward_input == "regather"
    assert [(c.phase, c.collective, c.operator) for c in r.comm if c.operator != "LN"] == MEGATRON_BLOCK
    elements = 2 * 8 * 4
    half = (tp - 1) / tp * elements          # one AllGather or ReduceScatter, ring, per rank
    assert r.comm_per_rank["block"] == pytest.approx(5 * half)
    assert r.plain_tp.comm_per_rank["block"] == pytest.approx(2 * 2 * half)
    assert r.comm_per_rank["block"] / r.plain_tp.comm_per_rank["block"] == pytest.approx(1.25)
    # the re-gathered A is the forward's A: every number is the same as when A is kept
    kept = run_sp_layer(tp=tp, seq=8, batch=2, hidden=4, ffn=8, backward_input="keep")
    for k in RESULT_KEYS:
        assert np.array_equal(getattr(r.sharded, k), getattr(kept.sharded, k))


def test_backward_input_is_checked():
    with pytest.raises(TPMathError) as e:
        run_sp_layer(backward_input="store")
    assert e.value.field == "backward_input"


# ---------------------------------------------------------------------------- dropout RNG

def test_generator_is_splitmix64():
    counters = np.array([0, 1, 2, 12345, 2**40 + 7], dtype=np.uint64)
    for key in (0, 2718, 2**31 + 5):
        want = [splitmix_uniform(key, int(c)) for c in counters]
        assert np.array_equal(uniforms(key, counters), np.array(want))


def test_correct_masks_are_blocks_of_the_one_device_masks_and_the_mistake_repeats_them():
    T, B, S, D, F, p = 4, 2, 8, 3, 8, 0.5
    ok = run_sp_layer(tp=T, seq=S, batch=B, hidden=D, ffn=F, seed=1, dropout=p)
    bad = run_sp_layer(tp=T, seq=S, batch=B, hidden=D, ffn=F, seed=1, dropout=p, mistake="same-dropout-seed")
    key = 1 + MP_SEED_OFFSET
    full_h = keep_mask(key, 0, (B, S, F), 2, p)
    full_o = keep_mask(key, B * S * F, (B, S, D), 1, p)
    for rk in ok.ranks:
        (a, b), (c, d) = rk.seq_range, rk.ffn_range
        assert np.array_equal(rk.keep_H, full_h[:, :, c:d])
        assert np.array_equal(rk.keep_O, full_o[:, a:b])
    first = bad.ranks[0]
    for rk in bad.ranks[1:]:                           # every rank drew the same numbers
        assert np.array_equal(rk.keep_H, first.keep_H)
        assert np.array_equal(rk.keep_O, first.keep_O)
    assert not np.array_equal(ok.ranks[1].keep_H, ok.ranks[0].keep_H)
    assert 0.3 < np.mean(full_h) < 0.7                 # p = 0.5 keeps about half


def test_same_dropout_seed_defaults_to_the_demo_probability():
    r = run_sp_layer(mistake="same-dropout-seed")
    assert r.dropout == DEMO_DROPOUT
    assert run_sp_layer().dropout == 0.0


# ------------------------------------------------------------------------------ mistakes

@pytest.mark.parametrize("mistake", [m for m in MISTAKES if m != "none"])
def test_each_mistake_visibly_leaves_the_reference(mistake):
    r = run_sp_layer(tp=2, seq=4, batch=2, hidden=4, ffn=8, mistake=mistake)
    assert not r.within_tolerance
    assert max(r.max_abs_err.values()) > 0.1, r.max_abs_err
    fine = run_sp_layer(tp=2, seq=4, batch=2, hidden=4, ffn=8, dropout=r.dropout)
    assert fine.within_tolerance


def test_ln_grad_not_reduced_changes_only_gamma_and_beta_and_ranks_disagree():
    r = run_sp_layer(tp=4, seq=8, mistake="ln-grad-not-reduced")
    errs = r.max_abs_err
    assert errs["G_gamma"] > 0.1 and errs["G_beta"] > 0.1
    assert all(errs[k] < 1e-13 for k in ("Y", "G_X", "G_W1", "G_W2"))
    assert not r.ln_grads_agree                       # replicas of γ, β would drift apart
    assert all(c.collective != "all-reduce" for c in r.comm)


def test_gather_wrong_dim_is_invisible_with_one_token_per_rank_only():
    assert run_sp_layer(tp=4, seq=4, mistake="gather-wrong-dim").within_tolerance   # (B,1,T·D) = (B,T,D)
    assert not run_sp_layer(tp=4, seq=8, mistake="gather-wrong-dim").within_tolerance


# ---------------------------------------------------------------------------- validation

@pytest.mark.parametrize("kwargs, field", [
    ({"tp": 3, "seq": 4}, "tp"), ({"tp": 2, "seq": 4, "ffn": 3}, "tp"), ({"tp": 0}, "tp"),
    ({"seq": 1000}, "seq"), ({"hidden": 1}, "hidden"), ({"mistake": "oops"}, "mistake"),
    ({"dropout": 1.0}, "dropout"), ({"dropout": -0.1}, "dropout"),
    ({"mistake": "same-dropout-seed", "dropout": 0}, "dropout"), ({"seed": -1}, "seed"),
    ({"batch": "two"}, "batch"),
])
def test_bad_options_name_the_field(kwargs, field):
    with pytest.raises(TPMathError) as exc:
        run_sp_layer(**kwargs)
    assert exc.value.field == field
    en, zh = exc.value.message("en"), exc.value.message("zh")     # a sentence in each language
    assert en and zh and en != zh and not en.startswith("error.")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})


def test_cli_json_has_the_contract_keys_and_shapes():
    out = cli("sp-layer", "--tp", "2", "--seq", "6", "--batch", "3", "--hidden", "4", "--ffn", "6", "--seed", "7",
              "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    shapes = {"X": [3, 6, 4], "gamma": [4], "beta": [4], "W1": [4, 6], "W2": [6, 4], "G": [3, 6, 4]}
    for k, shape in shapes.items():
        assert list(np.shape(data["inputs"][k])) == shape, k
    full = {"Y": [3, 6, 4], "G_X": [3, 6, 4], "G_gamma": [4], "G_beta": [4], "G_W1": [4, 6], "G_W2": [6, 4]}
    for part in ("reference", "sharded"):
        for k, shape in full.items():
            assert list(np.shape(data[part][k])) == shape, (part, k)
        assert isinstance(data[part]["loss"], float)
    assert set(data["max_abs_err"]) == {"Y", "loss", "G_X", "G_gamma", "G_beta", "G_W1", "G_W2"}
    assert len(data["ranks"]) == 2 and {c["collective"] for c in data["comm"]} == {
        "all-gather", "reduce-scatter", "all-reduce"}
    direct = run_sp_layer(tp=2, seq=6, batch=3, hidden=4, ffn=6, seed=7)
    assert data["sharded"]["Y"] == direct.sharded.Y.tolist()


@pytest.mark.parametrize("args, needle", [
    (("--tp", "3", "--seq", "4"), "seq=4"),
    (("--tp", "2", "--ffn", "5"), "ffn=5"),
    (("--mistake", "gather"), "Mistake must be one of"),
    (("--dropout", "nan"), "Dropout probability"),
    (("--mistake", "same-dropout-seed", "--dropout", "0"), "needs dropout > 0"),
])
def test_cli_bad_input_is_one_error_line(args, needle):
    out = cli("sp-layer", *args, "--json")
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], out.stderr


def test_inputs_are_deterministic_from_the_seed():
    a, b = make_inputs(4, 2, 4, 3, 6), make_inputs(4, 2, 4, 3, 6)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["X"], make_inputs(5, 2, 4, 3, 6)["X"])
