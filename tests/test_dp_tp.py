"""DP × TP coefficients: TP sums partials, DP averages replicas; the wrong variants are off by tp or dp.

The reference in these tests is written here: the gradient of the global mean loss
L = (1/N) Σ_i Σ_d Y_id G_id computed unsharded with einsum, and checked by the
complex step; the expected scale factors (1/tp, tp, dp) follow from the algebra,
not from tpmath's output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tpmath.i18n import text
from tpmath import TPMathError
from tpmath.dp_tp import run_dp_tp

SRC = str(Path(__file__).resolve().parents[1] / "src")


def global_mean_grads(Xs, Gs, W1, W2):
    """dL/dW1, dL/dW2 of the mean loss over the concatenated global batch (einsum, float64)."""
    X, G = np.concatenate(Xs), np.concatenate(Gs)
    N = X.shape[0]
    H = np.tanh(np.einsum("nd,df->nf", X, W1))
    GZ = np.einsum("nd,fd->nf", G / N, W2) * (1 - H**2)
    return {"G_W1": np.einsum("nd,nf->df", X, GZ), "G_W2": np.einsum("nf,nd->fd", H, G / N)}


def complex_step_w2(Xs, Gs, W1, W2, h=1e-30):
    X, G = np.concatenate(Xs), np.concatenate(Gs)
    out = np.empty(W2.shape)
    for idx in np.ndindex(W2.shape):
        W = W2.astype(complex)
        W[idx] += 1j * h
        out[idx] = np.mean(np.sum((np.tanh(X @ W1) @ W) * G, axis=1)).imag / h
    return out


@pytest.mark.parametrize("tp", (1, 2, 3, 4))
@pytest.mark.parametrize("dp", (1, 2, 3))
def test_correct_variant_is_gradient_of_global_mean_loss(tp, dp):
    r = run_dp_tp(tp=tp, dp=dp, seed=tp * 10 + dp)
    Xs = [rep.X for rep in r.replicas]
    Gs = [rep.G for rep in r.replicas]
    ref = global_mean_grads(Xs, Gs, r.W1, r.W2)
    correct = next(v for v in r.variants if v.name == "correct")
    for key in ("G_W1", "G_W2"):
        assert np.max(np.abs(getattr(correct, key) - ref[key])) < 1e-15
        assert np.max(np.abs(getattr(r.reference, key) - ref[key])) < 1e-15
    assert np.max(np.abs(complex_step_w2(Xs, Gs, r.W1, r.W2) - ref["G_W2"])) < 1e-15
    assert correct.max_abs_err < 1e-15 and correct.scale == pytest.approx(1, abs=1e-13)


@pytest.mark.parametrize("tp, dp", [(2, 2), (4, 2), (3, 3), (8, 2), (1, 4)])
def test_wrong_variants_scale_by_tp_or_dp(tp, dp):
    r = run_dp_tp(tp=tp, dp=dp, seed=1)
    v = {x.name: x for x in r.variants}
    assert set(v) == {"correct", "divide_by_tp_too", "double_count_gy", "dp_sum_no_mean"}
    ref = r.reference
    expected = {"divide_by_tp_too": 1 / tp, "double_count_gy": tp, "dp_sum_no_mean": dp}
    for name, s in expected.items():
        assert v[name].scale == pytest.approx(s, rel=1e-12), name
        for key in ("G_W1", "G_W2"):
            assert np.allclose(getattr(v[name], key), s * getattr(ref, key), rtol=1e-12, atol=1e-16)
        err = max(np.max(np.abs(getattr(v[name], k) - getattr(ref, k))) for k in ("G_W1", "G_W2"))
        assert v[name].max_abs_err == pytest.approx(err, rel=1e-12, abs=1e-17)
        if s != 1:
            assert v[name].max_abs_err > 1e-3   # visibly wrong
        assert text(v[name].description, "en") != text(v[name].description, "zh")   # both languages


def test_replicas_have_different_micro_batches_and_tp_sums_partial_gx():
    r = run_dp_tp(tp=4, dp=2, seed=5)
    a, b = r.replicas
    assert not np.array_equal(a.X, b.X) and not np.array_equal(a.G, b.G)
    for rep in r.replicas:
        assert len(rep.ranks) == 4
        # TP: the partial G_X are summed (AllReduce); summing them here must give the replica's G_X
        total = sum(rk.G_X_partial for rk in rep.ranks)
        assert np.max(np.abs(total - rep.G_X)) < 1e-15
        # unsharded gradient of the replica's micro-batch mean loss w.r.t. its X
        X, G = rep.X, rep.G / rep.X.shape[0]
        H = np.tanh(X @ r.W1)
        gx = ((G @ r.W2.T) * (1 - H**2)) @ r.W1.T
        assert np.max(np.abs(rep.G_X - gx)) < 1e-15
        # each TP rank owns a disjoint shard: shard r has F/tp columns of G_W1
        assert rep.ranks[0].G_W1.shape == (r.d_model, r.d_ff // 4)


@pytest.mark.parametrize("kwargs, field, needle", [
    ({"tp": 3, "d_ff": 4}, "tp", "tp=3 does not divide d_ff=4"),
    ({"dp": 0}, "dp", "dp must be between 1 and 8, not 0"),
    ({"tp": 9}, "tp", "tp must be between 1 and 8, not 9"),
    ({"seed": -1}, "seed", "Seed must be between 0 and "),
    ({"batch": "x"}, "batch", "must be a whole number, not x"),
])
def test_bad_input(kwargs, field, needle):
    with pytest.raises(TPMathError) as exc:
        run_dp_tp(**kwargs)
    assert exc.value.field == field and needle in str(exc.value)


def cli(*args):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_dp_tp_json():
    out = cli("dp-tp", "--tp", "2", "--dp", "2", "--json", "--lang", "zh")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"tp", "dp", "replicas", "reference", "variants"} <= set(data)
    assert {"G_W1", "G_W2"} <= set(data["reference"])
    assert [v["name"] for v in data["variants"]] == ["correct", "divide_by_tp_too", "double_count_gy",
                                                     "dp_sum_no_mean"]
    for v in data["variants"]:
        assert {"name", "description", "G_W1", "G_W2", "max_abs_err", "scale"} <= set(v)
    assert {"replica", "X", "G", "ranks"} <= set(data["replicas"][0])
    assert data["variants"][1]["description"].startswith("按全部 dp·tp 张卡")   # --lang zh: its sentences in Chinese


def test_cli_dp_tp_bad_input():
    out = cli("dp-tp", "--tp", "3", "--d-ff", "4", "--json")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "tp=3" in lines[0]


def test_first_optimizer_steps_against_torch_optim():
    """One step of torch.optim.SGD and torch.optim.Adam (defaults, lr 1e-3) on each variant's
    gradients from the same weights: SGD's step is the variant's scale times the correct step,
    Adam's the correct step (a shared factor cancels but for eps)."""
    import torch
    from tpmath.dp_tp import update_scales
    res = run_dp_tp(tp=4, dp=2)
    correct = res.variants[0]

    def step(opt_cls, v, **kw):
        w = [torch.zeros(v.G_W1.shape, dtype=torch.float64, requires_grad=True),
             torch.zeros(v.G_W2.shape, dtype=torch.float64, requires_grad=True)]
        for p, g in zip(w, (v.G_W1, v.G_W2)):
            p.grad = torch.tensor(g)
        opt_cls(w, lr=1e-3, **kw).step()
        return torch.cat([p.detach().ravel() for p in w]).numpy()

    for v in res.variants:
        got = update_scales(v, correct)
        for name, cls in (("sgd", torch.optim.SGD), ("adam", torch.optim.Adam)):
            a, b = step(cls, v), step(cls, correct)
            assert got[name] == pytest.approx(float(a @ b / (b @ b)), rel=1e-12), (v.name, name)
        assert got["sgd"] == pytest.approx(v.scale, rel=1e-12)
        assert got["adam"] == pytest.approx(1.0, abs=1e-5)
