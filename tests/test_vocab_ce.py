"""Vocab-parallel cross-entropy against an independent unsharded reference and finite differences."""

import re
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tpmath import TPMathError
from tpmath.record import fields_of
from tpmath.vocab_ce import (DEFAULT_LOGITS, megatron_padded_vocab, run_vocab_ce,
                             run_vocab_parallel_head, vocab_pad_table)

SRC = str(Path(__file__).resolve().parents[1] / "src")


# --- an independent reference, written here from the textbook definition -----------------------

def ce_reference(Z, y, eps=0.0, ignore_index=-100):
    """PyTorch-style CE (mean over non-ignored) and its gradient, per position with math.fsum."""
    Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
    y = np.atleast_1d(y)
    N, V = Z.shape
    keep = [i for i in range(N) if y[i] != ignore_index]
    total, grad = 0.0, np.zeros_like(Z)
    for i in keep:
        row = Z[i]
        lse = max(row) + math.log(math.fsum(math.exp(z - max(row)) for z in row))
        logp = [z - lse for z in row]
        total += (1 - eps) * -logp[y[i]] + eps * math.fsum(-lp for lp in logp) / V
        for k in range(V):
            grad[i, k] = (math.exp(logp[k]) - (1 - eps) * (k == y[i]) - eps / V) / len(keep)
    return total / len(keep), grad


def random_case(rng, N, V):
    Z = rng.normal(scale=3.0, size=(N, V))
    y = rng.integers(0, V, size=N)
    return Z, y


# --- the seed's example -------------------------------------------------------------------------

def test_seed_example_two_shards():
    r = run_vocab_ce(shards=2)
    z = DEFAULT_LOGITS
    expected = math.log(sum(math.exp(v) for v in z)) - z[2]
    assert r.loss == pytest.approx(expected, abs=1e-15)
    assert r.global_max == 2.0
    assert r.global_sum_exp == pytest.approx(sum(math.exp(v - 2.0) for v in z), abs=1e-15)
    assert r.target_rank == 0
    assert [rk.vocab_range for rk in r.ranks] == [[0, 3], [3, 6]]
    assert [rk.local_max for rk in r.ranks] == [2.0, 1.4]
    # only the owner of token 2 contributes z_y − m (= 2 − 2 = 0 here); the other gives exactly 0
    assert [rk.target_shifted for rk in r.ranks] == [0.0, 0.0]
    probs = [math.exp(v) / sum(math.exp(u) for u in z) for v in z]
    for tok in r.tokens:
        j = tok.token
        assert tok.rank == (0 if j < 3 else 1)
        assert tok.prob == pytest.approx(probs[j], abs=1e-15)
        assert tok.grad == pytest.approx(probs[j] - (j == 2), abs=1e-15)


def test_target_shifted_lives_on_owner_only():
    r = run_vocab_ce(DEFAULT_LOGITS, 4, shards=3)     # token 4 (z=1.4) on rank 2
    vals = [rk.target_shifted for rk in r.ranks]
    assert vals[0] == 0.0 and vals[1] == 0.0
    assert vals[2] == pytest.approx(1.4 - 2.0, abs=1e-15)
    assert r.target_rank == 2


# --- sharded equals unsharded for every shard count, dividing or not -----------------------------

@pytest.mark.parametrize("V", [5, 6, 7, 12, 13])
@pytest.mark.parametrize("shards", [1, 2, 3, 4, 5, 6])
def test_sharded_equals_reference(V, shards):
    rng = np.random.default_rng(100 * V + shards)
    Z, y = random_case(rng, 4, V)
    r = run_vocab_ce(Z.tolist(), y.tolist(), shards=shards)
    loss, grad = ce_reference(Z, y)
    assert r.loss == pytest.approx(loss, abs=1e-13)
    np.testing.assert_allclose(r.grad, grad, atol=1e-15, rtol=0)
    assert r.padded_vocab % shards == 0 and r.padded_vocab >= V
    assert r.padded_vocab - V < shards
    # 1-D input: one position
    r1 = run_vocab_ce(Z[0].tolist(), int(y[0]), shards=shards)
    l1, g1 = ce_reference(Z[:1], y[:1])
    assert r1.loss == pytest.approx(l1, abs=1e-13)
    np.testing.assert_allclose(r1.grad, g1[0], atol=1e-15, rtol=0)


@pytest.mark.parametrize("shards", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("eps", [0.1, 0.3, 1.0])
def test_label_smoothing_matches_global_formula(shards, eps):
    rng = np.random.default_rng(7 + shards)
    Z, y = random_case(rng, 3, 7)
    y[1] = -100
    r = run_vocab_ce(Z, y.tolist(), shards=shards, label_smoothing=eps)
    loss, grad = ce_reference(Z, y, eps=eps)
    assert r.loss == pytest.approx(loss, abs=1e-13)
    np.testing.assert_allclose(r.grad, grad, atol=1e-15, rtol=0)


def megatron_reference(Z, y, tp, eps, pad_logit=0.0, ignore_index=-100):
    """Megatron's _VocabParallelCrossEntropy.forward (megatron/core/tensor_parallel/cross_entropy.py)
    transcribed rank by rank: each rank holds K = Vp/tp columns of the padded logits, padding
    included and not masked (here the padded logits are ``pad_logit``); the all-reduces are sums /
    maxima over the ranks' lists.  Per position, per rank; averaged over the non-ignored positions.
    With eps > 0 and K = 1 Megatron divides by zero: None."""
    Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
    y = np.atleast_1d(y)
    N, V = Z.shape
    Vp = -(-V // tp) * tp
    K = Vp // tp
    keep = [i for i in range(N) if y[i] != ignore_index]
    totals = [0.0] * tp
    for i in keep:
        row = list(Z[i]) + [pad_logit] * (Vp - V)
        shards = [row[r * K:(r + 1) * K] for r in range(tp)]                    # vocab_parallel_logits
        logits_max = max(max(sh) for sh in shards)                              # all_reduce(MAX)
        shifted = [[v - logits_max for v in sh] for sh in shards]
        predicted = sum(shifted[r][y[i] - r * K] if r * K <= y[i] < (r + 1) * K else 0.0
                        for r in range(tp))                                     # all_reduce(SUM)
        sum_exp = math.fsum(math.exp(v) for sh in shifted for v in sh)          # all_reduce(SUM)
        loss = math.log(sum_exp) - predicted
        for r in range(tp):
            if eps == 0:
                totals[r] += loss
                continue
            if K == 1:
                totals[r] = None
                continue
            smoothing = eps * K / (K - 1)                # vocab_size = exp_logits.size(-1) = K
            log_probs = [math.log(math.exp(v) / sum_exp) for v in shifted[r]]
            totals[r] += (1.0 - smoothing) * loss - smoothing * math.fsum(log_probs) / K
    return [None if t is None else t / len(keep) for t in totals], K


@pytest.mark.parametrize("tp", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5])
def test_megatron_loss_rank_by_rank(tp, eps):
    z = np.array(DEFAULT_LOGITS)
    r = run_vocab_ce(z, 2, shards=tp, label_smoothing=eps)
    want, K = megatron_reference(z, 2, tp, eps)
    meg = r.megatron
    assert meg.K == K == -(-6 // tp) and meg.padded_vocab == K * tp and meg.pad_logit == 0.0
    for got, exp in zip(meg.loss_per_rank, want):
        assert (got is None) == (exp is None)
        if exp is not None:
            assert got == pytest.approx(exp, abs=1e-14)
    tp1, _ = megatron_reference(z, 2, 1, eps)
    assert meg.loss_tp1 == pytest.approx(tp1[0], abs=1e-14)


def test_megatron_smoothing_differs_across_ranks_and_from_pytorch():
    z = np.array(DEFAULT_LOGITS)
    eps = 0.1
    r = run_vocab_ce(z, 2, shards=2, label_smoothing=eps)
    per = r.megatron.loss_per_rank
    lse = math.log(sum(math.exp(v) for v in z))
    logp = z - lse
    nll = -logp[2]
    for rank, ids in ((0, [0, 1, 2]), (1, [3, 4, 5])):         # no padding: K = 3 real ids per rank
        s = eps * 3 / 2                                         # ε·K/(K−1)
        assert per[rank] == pytest.approx((1 - s) * nll - s * np.mean(logp[ids]), abs=1e-14)
    assert abs(per[0] - per[1]) > 0.05                          # the ranks disagree on "the" loss
    assert all(abs(p - r.loss) > 0.01 for p in per)          # and neither equals PyTorch's value
    s = eps * 6 / 5                                             # tp = 1: K = V, still not PyTorch's convention
    assert r.megatron.loss_tp1 == pytest.approx((1 - s) * nll - s * np.mean(logp), abs=1e-14)


def test_megatron_padded_width_includes_the_padding():
    """tp = 4 does not divide V = 6: Vp = 8, K = 2 (not the 2, 2, 2, 0 real ids); the padded logits
    (0) enter the softmax of every rank and the mean of the last rank, which holds only padding."""
    z = np.array(DEFAULT_LOGITS)
    eps = 0.1
    r = run_vocab_ce(z, 2, shards=4, label_smoothing=eps)
    zp = np.concatenate([z, [0.0, 0.0]])                        # the padded logits, unmasked
    logp = zp - zp.max() - np.log(np.exp(zp - zp.max()).sum())
    s = eps * 2 / 1
    want = [(1 - s) * -logp[2] - s * logp[2 * q:2 * q + 2].mean() for q in range(4)]
    assert r.megatron.K == 2
    assert r.megatron.loss_per_rank == pytest.approx(want, abs=1e-14)
    # without smoothing Megatron's loss still differs from ours: its softmax includes the padding
    plain = run_vocab_ce(z, 2, shards=4)
    assert plain.megatron.loss_per_rank == pytest.approx([-logp[2]] * 4, abs=1e-14)
    assert abs(-logp[2] - plain.loss) > 0.05


def test_megatron_smoothing_undefined_for_width_one():
    r = run_vocab_ce(DEFAULT_LOGITS, 2, shards=6, label_smoothing=0.1)   # K = 1: Megatron divides by 0
    assert r.megatron.K == 1 and r.megatron.loss_per_rank == [None] * 6


@pytest.mark.parametrize("tp", [2, 3, 4, 5])
def test_megatron_two_d_with_ignore_index(tp):
    rng = np.random.default_rng(tp)
    Z, y = random_case(rng, 4, 7)
    y[2] = -100
    r = run_vocab_ce(Z, y.tolist(), shards=tp, label_smoothing=0.2)
    want, _ = megatron_reference(Z, y, tp, 0.2)
    got = r.megatron.loss_per_rank
    assert [g is None for g in got] == [w is None for w in want]
    assert [g for g in got if g is not None] == pytest.approx([w for w in want if w is not None], abs=1e-13)


# --- finite differences -------------------------------------------------------------------------

@pytest.mark.parametrize("shards,eps", [(1, 0.0), (2, 0.0), (4, 0.0), (3, 0.2), (5, 0.1)])
def test_gradient_matches_finite_differences(shards, eps):
    rng = np.random.default_rng(shards)
    Z, y = random_case(rng, 3, 7)
    y[2] = -100
    r = run_vocab_ce(Z, y.tolist(), shards=shards, label_smoothing=eps)
    h = 1e-5  # rounding error ≈ 1e-16·|L|/h, truncation ≈ h²·|L'''|/6: both ≈ 1e-11
    fd = np.zeros_like(Z)
    for idx in np.ndindex(Z.shape):
        Zp, Zm = Z.copy(), Z.copy()
        Zp[idx] += h
        Zm[idx] -= h
        lp = run_vocab_ce(Zp, y.tolist(), shards=shards, label_smoothing=eps).loss
        lm = run_vocab_ce(Zm, y.tolist(), shards=shards, label_smoothing=eps).loss
        fd[idx] = (lp - lm) / (2 * h)
    assert np.max(np.abs(fd - r.grad)) < 1e-9
    assert np.all(r.grad[2] == 0.0)                     # ignored position: no gradient


# --- shift invariance and overflow ---------------------------------------------------------------

@pytest.mark.parametrize("shift", [-1e4, -123.456, 0.0, 37.5, 1e4])
@pytest.mark.parametrize("shards", [1, 2, 3, 4])
def test_shift_changes_nothing(shift, shards):
    base = run_vocab_ce(DEFAULT_LOGITS, 2, shards=shards)
    r = run_vocab_ce(DEFAULT_LOGITS, 2, shards=shards, shift=shift)
    # float64 spacing at 1e4 is 1.8e-12: the shifted inputs themselves round at that level
    assert r.loss == pytest.approx(base.loss, abs=1e-11)
    np.testing.assert_allclose(r.grad, base.grad, atol=1e-11, rtol=0)
    assert r.global_sum_exp == pytest.approx(base.global_sum_exp, abs=1e-11)
    assert r.global_max == pytest.approx(2.0 + shift, abs=1e-11)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_large_shift_no_overflow_in_low_precision(dtype):
    for shift in (-1e4, 1e4):
        r = run_vocab_ce(DEFAULT_LOGITS, 2, shards=3, shift=shift, dtype=dtype)
        assert math.isfinite(r.loss) and math.isfinite(r.reference_loss)
        assert np.all(np.isfinite(r.grad))
        assert abs(float(np.sum(r.grad))) < 1e-2       # softmax − onehot sums to 0


def test_float16_rounds_the_shifted_logits_themselves():
    """No overflow at shift 1e4 in float16, sharded = unsharded, but z + 1e4 is stored with
    spacing 8, so the logits (and the loss) are not the float64 ones."""
    r = run_vocab_ce(DEFAULT_LOGITS, 2, shards=3, shift=1e4, dtype="float16")
    assert r.abs_diff == 0.0
    stored = (np.array(DEFAULT_LOGITS) + 1e4).astype(np.float16).astype(np.float64)
    assert np.all(stored % 8 == 0)
    loss, _ = ce_reference(stored, [2])
    assert r.loss == pytest.approx(loss, abs=2e-3)
    assert abs(r.loss - r.reference_loss_float64) > 0.5


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-6), ("float16", 5e-3)])
def test_low_precision_close_to_float64(dtype, tol):
    rng = np.random.default_rng(3)
    Z, y = random_case(rng, 4, 9)
    exact, grad = ce_reference(Z, y)
    for shards in (1, 2, 3, 4):
        r = run_vocab_ce(Z, y.tolist(), shards=shards, dtype=dtype)
        assert r.dtype == dtype
        assert abs(r.loss - exact) < tol * 10
        assert r.abs_diff < tol * 10                    # sharded vs unsharded, same dtype
        assert np.max(np.abs(np.asarray(r.grad, dtype=np.float64) - grad)) < tol


# --- padding -------------------------------------------------------------------------------------

def test_padding_is_masked_and_reported():
    r = run_vocab_ce(DEFAULT_LOGITS, 5, shards=4)          # V=6 → Vp=8, K=2; rank 3 = ids 6,7
    assert r.padded_vocab == 8
    assert [rk.vocab_range for rk in r.ranks] == [[0, 2], [2, 4], [4, 6], [6, 8]]
    assert [rk.padding_range for rk in r.ranks] == [None, None, None, [6, 8]]
    last = r.ranks[3]
    assert last.local_max == -np.inf and last.local_sum_exp == 0.0
    assert np.all(last.grad == 0.0) and np.all(last.prob == 0.0)
    assert len(r.tokens) == 6 and len(r.grad) == 6
    loss, _ = ce_reference(DEFAULT_LOGITS, [5])
    assert r.loss == pytest.approx(loss, abs=1e-15)


def test_padding_never_produces_nan():
    rng = np.random.default_rng(11)
    for V in (2, 3, 7, 13):
        for shards in range(1, 9):
            Z, y = random_case(rng, 2, V)
            r = run_vocab_ce(Z, y.tolist(), shards=shards, label_smoothing=0.1)
            for rk in r.ranks:
                for key in ("local_sum_exp", "target_shifted", "prob", "grad", "local_sum_shifted"):
                    assert not np.any(np.isnan(getattr(rk, key))), (V, shards, key)
            assert np.all(np.isfinite(r.grad)) and math.isfinite(r.loss)
            assert r.loss == pytest.approx(ce_reference(Z, y, eps=0.1)[0], abs=1e-13)


def test_partial_padding_rank_range():
    r = run_vocab_ce([0.1 * k for k in range(7)], 6, shards=2)   # V=7 → Vp=8; rank 1 owns 4..7, 7 is padding
    assert r.ranks[1].vocab_range == [4, 8]
    assert r.ranks[1].padding_range == [7, 8]
    assert r.ranks[1].padding == 1
    assert r.ranks[1].logits[-1] == -np.inf


def test_megatron_padded_vocab_documented_values():
    assert megatron_padded_vocab(50257, 1) == 50304
    assert megatron_padded_vocab(50257, 8) == 51200
    t = vocab_pad_table(50257, 8)
    assert t.padded_vocab == 51200 and t.per_rank == 6400 and t.padding == 943
    assert t.ranks[7].padding_range == [50257, 51200]
    assert all(rk.padding_range is None for rk in t.ranks[:7])
    with pytest.raises(TPMathError):
        megatron_padded_vocab(50257, 0)


# --- ignore_index --------------------------------------------------------------------------------

def test_ignore_index_positions_have_no_loss_and_no_gradient():
    rng = np.random.default_rng(5)
    Z, y = random_case(rng, 5, 6)
    y[[1, 3]] = -100
    r = run_vocab_ce(Z, y.tolist(), shards=4)
    assert r.counted == 3
    assert r.target_rank[1] is None and r.target_rank[3] is None
    assert np.all(r.grad[[1, 3]] == 0.0)
    keep = [0, 2, 4]
    loss, grad = ce_reference(Z[keep], y[keep])
    assert r.loss == pytest.approx(loss, abs=1e-14)
    np.testing.assert_allclose(r.grad[keep], grad, atol=1e-15, rtol=0)


def test_custom_ignore_index_inside_vocab():
    Z = np.array([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0]])
    r = run_vocab_ce(Z, [1, 0], shards=2, ignore_index=1)
    loss, _ = ce_reference(Z[1:], [0])
    assert r.counted == 1 and r.loss == pytest.approx(loss, abs=1e-15)


def test_all_ignored_returns_zero_with_flag_not_nan():
    r = run_vocab_ce([[1.0, 2.0, 3.0], [0.0, 1.0, -1.0]], [-100, -100], shards=2)
    assert r.all_ignored is True and r.counted == 0
    assert r.loss == 0.0 and r.reference_loss == 0.0
    assert np.all(r.grad == 0.0) and not np.any(np.isnan(r.grad))
    one = run_vocab_ce(DEFAULT_LOGITS, -100, shards=3)
    assert one.all_ignored and one.loss == 0.0 and one.target_rank is None


# --- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,field,quoted", [
    ({"target": 6}, "target", "6"),
    ({"target": -1}, "target", "-1"),
    ({"target": 2.5}, "target", "2.5"),
    ({"target": "x"}, "target", "x"),
    ({"target": [1, 2]}, "target", "[1, 2]"),
    ({"target": 1, "shards": 0}, "shards", "0"),
    ({"target": 1, "shift": 1e308}, "shift", "1e+308"),
    ({"target": 1, "shift": float("nan")}, "shift", "nan"),
    ({"target": 1, "label_smoothing": 1.5}, "label_smoothing", "1.5"),
    ({"target": 1, "dtype": "int8"}, "dtype", "int8"),
])
def test_bad_input_raises(kwargs, field, quoted):
    with pytest.raises(TPMathError) as exc:
        run_vocab_ce(DEFAULT_LOGITS, **kwargs)
    assert exc.value.field == field
    assert quoted in str(exc.value)
    assert re.search(r"[\u4e00-\u9fff]", exc.value.message("zh"))


@pytest.mark.parametrize("logits,quoted", [
    ([1.0, float("nan")], "nan"), ([-1e308, 1e308], "loss overflows in float64"), ([[1, 2], [3]], "ragged"), ([3.0], "V=1"),
])
def test_bad_logits_raise(logits, quoted):
    with pytest.raises(TPMathError) as exc:
        run_vocab_ce(logits, 0)
    assert quoted in str(exc.value) and exc.value.field == "logits"


def test_two_d_target_length_checked():
    with pytest.raises(TPMathError, match="need 2 targets"):
        run_vocab_ce([[1, 2], [3, 4]], [0, 1, 1])


# --- output head: gradient of the shared hidden state ---------------------------------------------

@pytest.mark.parametrize("shards", [1, 2, 3, 4, 5])
def test_vocab_parallel_head_hidden_gradient(shards):
    rng = np.random.default_rng(shards)
    hidden = rng.normal(size=(3, 4))
    W = rng.normal(size=(4, 7))
    y = [1, 6, -100]
    r = run_vocab_parallel_head(hidden, W, y, shards)
    _, g = ce_reference(hidden @ W, y)
    np.testing.assert_allclose(r.grad_hidden, g @ W.T, atol=1e-15, rtol=0)
    np.testing.assert_allclose(r.grad_W, hidden.T @ g, atol=1e-15, rtol=0)
    # no single rank has the whole hidden gradient when shards > 1: it is a sum of partials
    parts = [np.asarray(rk.grad_hidden_partial) for rk in r.ranks]
    np.testing.assert_allclose(sum(parts), r.grad_hidden, atol=1e-15)
    if shards > 1:
        assert all(np.max(np.abs(p - r.grad_hidden)) > 1e-6 for p in parts if np.any(p))
    # finite differences on the hidden state
    h = 1e-5  # rounding error ≈ 1e-16·|L|/h, truncation ≈ h²·|L'''|/6: both ≈ 1e-11
    fd = np.zeros_like(hidden)
    for idx in np.ndindex(hidden.shape):
        hp, hm = hidden.copy(), hidden.copy()
        hp[idx] += h
        hm[idx] -= h
        fd[idx] = (run_vocab_parallel_head(hp, W, y, shards).loss
                   - run_vocab_parallel_head(hm, W, y, shards).loss) / (2 * h)
    assert np.max(np.abs(fd - r.grad_hidden)) < 1e-9
    assert fields_of(r.comm[-1]) == {"phase": "backward", "collective": "all-reduce (sum)", "elements": 12}


def test_head_defaults_and_shape_error():
    r = run_vocab_parallel_head()
    assert r.max_abs_err["grad_hidden"] < 1e-15
    with pytest.raises(TPMathError) as exc:
        run_vocab_parallel_head(np.ones((2, 3)), np.ones((4, 5)), [0, 1], 2)
    assert exc.value.field == "W_out"


# --- command line --------------------------------------------------------------------------------

def cli(*args):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_default_keys():
    out = cli("vocab-ce", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in ("loss", "reference_loss", "abs_diff", "global_max", "global_sum_exp", "target_rank",
                "ranks", "tokens", "grad", "vocab", "padded_vocab"):
        assert key in data
    for key in ("rank", "vocab_range", "logits", "local_max", "local_sum_exp", "target_shifted"):
        assert key in data["ranks"][0]
    assert set(data["tokens"][0]) >= {"token", "rank", "prob", "grad"}
    z = DEFAULT_LOGITS
    assert data["loss"] == pytest.approx(math.log(sum(math.exp(v) for v in z)) - z[2], abs=1e-15)


def test_cli_two_d_with_smoothing_and_padding():
    out = cli("vocab-ce", "--logits", "[[1,2,3,0.5,-1],[0.2,0.1,-0.3,2,1]]", "--target", "[4,-100]",
              "--shards", "3", "--label-smoothing", "0.2", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    loss, grad = ce_reference([[1, 2, 3, 0.5, -1], [0.2, 0.1, -0.3, 2, 1]], [4, -100], eps=0.2)
    assert data["loss"] == pytest.approx(loss, abs=1e-14)
    assert data["padded_vocab"] == 6 and data["ranks"][2]["padding_range"] == [5, 6]
    assert np.asarray(data["grad"]).shape == (2, 5)
    assert len(data["megatron"]["loss_per_rank"]) == 3 and data["megatron"]["K"] == 2


def test_cli_vocab_pad():
    out = cli("vocab-pad", "--vocab", "50257", "--tp", "8", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["padded_vocab"] == 51200


@pytest.mark.parametrize("args,quoted", [
    (("--target", "9"), "Target 9 is not a token ID"),
    (("--shards", "0"), "Number of shards must be between 1 and 64, not 0"),
    (("--logits", "[1, NaN, 2]", "--target", "0"), "nan"),
    (("--shift", "1e308"), "not 1e308"),
    (("--logits", "[1e5, 1]", "--target", "0", "--dtype", "float16"), "100000.0 is beyond the range of float16"),
    (("--logits", "[[1,2],[3]]", "--target", "[0,1]"), "ragged"),
    (("--target", "1.5"), "1.5"),
    (("--dtype", "float8"), "float8"),
])
def test_cli_bad_input_one_error_line(args, quoted):
    out = cli("vocab-ce", *args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and quoted in lines[0], out.stderr
    assert out.stdout == ""


# --- issue 12 item 21: every finite logit the dtype can hold ----------------------------------------

@pytest.mark.parametrize("dtype, big", [("float64", 1e300), ("float32", 3e38), ("float16", 6e4)])
def test_any_finite_logit_the_dtype_holds_is_accepted(dtype, big):
    """F.cross_entropy and Megatron accept any finite logits; the algorithm only ever exponentiates
    z − m ≤ 0.  Reference: log-sum-exp of the dtype-rounded logits, in float64, unsharded."""
    logits = [big, 2.0, -big / 2, 3.0]
    for target in (0, 1):
        res = run_vocab_ce(logits, target, shards=3, dtype=dtype)
        z = np.asarray(logits).astype(dtype).astype(np.float64)
        m = z.max()
        want = m + np.log(np.sum(np.exp(z - m))) - z[target]
        assert res.loss == pytest.approx(want, rel=1e-3 if dtype == "float16" else 1e-6)
        assert res.abs_diff <= abs(want) * (1e-3 if dtype == "float16" else 1e-12)


@pytest.mark.parametrize("dtype, value", [("float16", 65520.0), ("float32", 3.5e38)])
def test_a_logit_beyond_the_dtype_is_a_clear_error(dtype, value):
    with pytest.raises(TPMathError) as exc:
        run_vocab_ce([value, 1.0], 0, dtype=dtype)
    assert exc.value.field == "logits" and f"beyond the range of {dtype}" in str(exc.value)
    assert repr(value) in str(exc.value)
