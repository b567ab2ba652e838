"""Vocab-parallel CE against PyTorch F.cross_entropy and autograd in float64 (with padding)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tpmath.vocab_ce import DEFAULT_LOGITS, run_vocab_ce, run_vocab_parallel_head

pytestmark = pytest.mark.torch

SHARDS = (1, 2, 3, 4, 8)


def torch_ce(Z, y, eps=0.0, ignore_index=-100):
    """(loss, dL/dZ) from F.cross_entropy(reduction="mean") and autograd, float64."""
    z = torch.tensor(np.atleast_2d(Z), dtype=torch.float64, requires_grad=True)
    t = torch.tensor(np.atleast_1d(y), dtype=torch.long)
    loss = F.cross_entropy(z, t, ignore_index=ignore_index, label_smoothing=eps, reduction="mean")
    loss.backward()
    return loss.item(), z.grad.numpy()


@pytest.mark.parametrize("shards", SHARDS)
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.25])
@pytest.mark.parametrize("V", [8, 13])
def test_matches_f_cross_entropy(shards, eps, V):
    rng = np.random.default_rng(1000 * V + 10 * shards + int(eps * 100))
    Z = rng.normal(scale=2.5, size=(6, V))
    y = rng.integers(0, V, size=6)
    y[[1, 4]] = -100
    r = run_vocab_ce(Z, y.tolist(), shards=shards, label_smoothing=eps)
    loss, grad = torch_ce(Z, y, eps)
    assert r.padded_vocab % shards == 0
    if V % shards:
        assert r.padded_vocab > V                       # this case really pads
    assert abs(r.loss - loss) < 1e-14
    assert np.max(np.abs(r.grad - grad)) < 1e-14
    assert np.all(r.grad[[1, 4]] == 0.0)


@pytest.mark.parametrize("shards", SHARDS)
def test_seed_example_one_position(shards):
    r = run_vocab_ce(DEFAULT_LOGITS, 2, shards=shards)
    loss, grad = torch_ce(np.array(DEFAULT_LOGITS), 2)
    assert abs(r.loss - loss) < 1e-14
    assert np.max(np.abs(r.grad - grad[0])) < 1e-14


@pytest.mark.parametrize("shards", SHARDS)
def test_shift_1e4_matches_torch_on_unshifted(shards):
    rng = np.random.default_rng(shards)
    Z = rng.normal(size=(3, 11))
    y = [0, 10, 5]
    loss, grad = torch_ce(Z, y, 0.1)
    for shift in (-1e4, 1e4):
        r = run_vocab_ce(Z, y, shards=shards, shift=shift, label_smoothing=0.1)
        assert abs(r.loss - loss) < 1e-11
        assert np.max(np.abs(r.grad - grad)) < 1e-11


def test_custom_ignore_index():
    Z = np.random.default_rng(0).normal(size=(4, 5))
    y = [3, 2, 3, 0]
    r = run_vocab_ce(Z, y, shards=2, ignore_index=3)
    loss, grad = torch_ce(Z, y, ignore_index=3)
    assert abs(r.loss - loss) < 1e-14 and np.max(np.abs(r.grad - grad)) < 1e-14


def test_all_ignored_torch_nan_ours_flagged_zero():
    Z = np.array([[1.0, 2.0, 3.0], [0.0, 1.0, -1.0]])
    loss, grad = torch_ce(Z, [-100, -100])
    assert math.isnan(loss)                                # PyTorch: 0 / 0
    r = run_vocab_ce(Z, [-100, -100], shards=2)
    assert r.all_ignored is True and r.loss == 0.0 and np.all(r.grad == 0.0)


def megatron_rank_losses(Z, y, shards, eps, pad_logit=0.0):
    """Megatron's _VocabParallelCrossEntropy.forward written with torch, rank by rank: the logits
    padded to a multiple of shards with ``pad_logit`` (not masked), each rank's K = Vp/shards
    columns, all-reduces as max / sum over the ranks, vocab_size = exp_logits.size(-1) = K."""
    z = torch.tensor(Z, dtype=torch.float64)
    N, V = z.shape
    K = -(-V // shards)
    z = torch.cat([z, torch.full((N, K * shards - V), pad_logit, dtype=torch.float64)], dim=1)
    parts = list(z.split(K, dim=1))                                  # vocab_parallel_logits per rank
    logits_max = torch.stack([p.max(dim=-1)[0] for p in parts]).max(dim=0)[0]
    parts = [p - logits_max.unsqueeze(-1) for p in parts]
    target = torch.tensor(y)
    predicted = sum(torch.where((target >= r * K) & (target < (r + 1) * K),
                                p.gather(1, (target - r * K).clamp(0, K - 1).unsqueeze(1)).squeeze(1),
                                torch.zeros(N, dtype=torch.float64)) for r, p in enumerate(parts))
    sum_exp = sum(p.exp().sum(dim=-1) for p in parts)
    loss = torch.log(sum_exp) - predicted
    out = []
    for p in parts:
        if K <= 1:
            out.append(None)
            continue
        smoothing = eps * K / (K - 1)
        log_probs = torch.log(p.exp() / sum_exp.unsqueeze(-1))
        out.append(((1.0 - smoothing) * loss - smoothing * log_probs.mean(dim=-1)).mean().item())
    return out


@pytest.mark.parametrize("shards", [2, 3, 4, 5])
def test_megatron_smoothing_is_not_pytorch(shards):
    rng = np.random.default_rng(shards)
    Z = rng.normal(size=(3, 12))
    y = [1, 7, 11]
    eps = 0.1
    r = run_vocab_ce(Z, y, shards=shards, label_smoothing=eps)
    expected = megatron_rank_losses(Z, y, shards, eps)          # 5 ranks: 12 padded to 15, K = 3
    for got, exp in zip(r.megatron.loss_per_rank, expected):
        assert got == pytest.approx(exp, abs=1e-14)
    loss, _ = torch_ce(Z, y, eps)
    assert abs(r.loss - loss) < 1e-14
    assert max(abs(v - loss) for v in expected) > 1e-3     # Megatron's per-rank value is not F.cross_entropy's
    assert max(expected) - min(expected) > 1e-4            # and the ranks disagree


def test_unmasked_padding_would_change_the_loss():
    """Why masking matters: padding columns with logit 0 (not −inf) enter the softmax."""
    Z = np.array([[1.2, -0.5, 2.0, 0.1, 1.4, -1.0, 0.3]])             # V = 7, shards 4 → Vp = 8
    padded_zero = np.concatenate([Z, np.zeros((1, 1))], axis=1)
    masked = np.concatenate([Z, np.full((1, 1), -np.inf)], axis=1)
    true_loss, _ = torch_ce(Z, [2])
    assert abs(torch_ce(padded_zero, [2])[0] - true_loss) > 0.05
    assert abs(torch_ce(masked, [2])[0] - true_loss) < 1e-14
    r = run_vocab_ce(Z, [2], shards=4)
    assert abs(r.loss - true_loss) < 1e-14


@pytest.mark.parametrize("shards", SHARDS)
def test_vocab_parallel_head_vs_autograd(shards):
    rng = np.random.default_rng(shards)
    hidden = rng.normal(size=(4, 5))
    W = rng.normal(size=(5, 13))
    y = [3, -100, 12, 0]
    h = torch.tensor(hidden, requires_grad=True)
    w = torch.tensor(W, requires_grad=True)
    loss = F.cross_entropy(h @ w, torch.tensor(y), ignore_index=-100)
    loss.backward()
    r = run_vocab_parallel_head(hidden, W, y, shards)
    assert abs(r.loss - loss.item()) < 1e-14
    assert np.max(np.abs(r.grad_hidden - h.grad.numpy())) < 1e-14
    assert np.max(np.abs(r.grad_W - w.grad.numpy())) < 1e-14


@pytest.mark.parametrize("dtype, big", [("float64", 1e300), ("float32", 3e38), ("float16", 6e4)])
def test_huge_finite_logits_match_f_cross_entropy(dtype, big):
    """Issue 12 item 21: any finite logit the dtype holds is accepted, as by F.cross_entropy."""
    logits = np.array([[big, 2.0, -big / 2, 3.0], [1.0, big, 0.5, -big]])
    res = run_vocab_ce(logits.tolist(), [1, 1], shards=3, dtype=dtype)
    z = torch.tensor(logits.astype(dtype))             # the logits as the dtype holds them
    loss = F.cross_entropy(z.double(), torch.tensor([1, 1]))
    assert math.isfinite(float(loss))
    assert res.loss == pytest.approx(float(loss), rel=1e-3 if dtype == "float16" else 1e-6)
