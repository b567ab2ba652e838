"""PyTorch cross-check of the MLP, the DP×TP reference and one SGD step (float64 autograd).

Selected with ``-m torch``.  torch is a test dependency (installed by scripts/setup.sh),
so a missing torch is an error here, not a skip.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tpmath.dp_tp import run_dp_tp
from tpmath.mlp import default_inputs, random_inputs, run_mlp
from tpmath.precision import run_precision

pytestmark = pytest.mark.torch

TPS = (1, 2, 3, 4, 6, 8)


def torch_mlp(X, W1, W2, G):
    """Unsharded forward + autograd backward in float64: Y, loss and the three gradients."""
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    w1 = torch.tensor(W1, dtype=torch.float64, requires_grad=True)
    w2 = torch.tensor(W2, dtype=torch.float64, requires_grad=True)
    y = torch.tanh(x @ w1) @ w2
    loss = (y * torch.tensor(G, dtype=torch.float64)).sum()
    loss.backward()
    return {"Y": y.detach().numpy(), "loss": loss.item(), "G_X": x.grad.numpy(),
            "G_W1": w1.grad.numpy(), "G_W2": w2.grad.numpy()}


def maxdiff(a, b):
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


@pytest.mark.parametrize("tp", (1, 2, 4))
def test_seed_numbers_against_torch_autograd(tp):
    d = default_inputs()
    t = torch_mlp(d["X"], d["W1"], d["W2"], d["G"])
    r = run_mlp(tp=tp)
    for key in ("Y", "G_X", "G_W1", "G_W2"):
        assert maxdiff(getattr(r.sharded, key), t[key]) < 1e-15, key
    assert abs(r.sharded.loss - t["loss"]) < 1e-15


@pytest.mark.parametrize("tp", TPS)
@pytest.mark.parametrize("seed", (0, 1))
def test_random_sharded_against_torch_autograd(tp, seed):
    inp = random_inputs(seed, batch=4, d_model=6, d_ff=24)
    t = torch_mlp(inp["X"], inp["W1"], inp["W2"], inp["G"])
    r = run_mlp(**inp, tp=tp)
    for key in ("Y", "G_X", "G_W1", "G_W2"):
        assert maxdiff(getattr(r.sharded, key), t[key]) < 1e-13, key
    assert abs(r.sharded.loss - t["loss"]) < 1e-13


@pytest.mark.parametrize("tp", (1, 2, 4))
@pytest.mark.parametrize("lr", (0.1, 0.5))
def test_one_sgd_step_against_torch_optim_sgd(tp, lr):
    d = default_inputs()
    w1 = torch.nn.Parameter(torch.tensor(d["W1"], dtype=torch.float64))
    w2 = torch.nn.Parameter(torch.tensor(d["W2"], dtype=torch.float64))
    opt = torch.optim.SGD([w1, w2], lr=lr)
    x = torch.tensor(d["X"], dtype=torch.float64)
    g = torch.tensor(d["G"], dtype=torch.float64)
    opt.zero_grad()
    loss_before = ((torch.tanh(x @ w1) @ w2) * g).sum()
    loss_before.backward()
    opt.step()
    with torch.no_grad():
        loss_after = ((torch.tanh(x @ w1) @ w2) * g).sum().item()
    sgd = run_precision(tp=tp, lr=lr).sgd
    assert maxdiff(sgd.W1_sharded, w1.detach().numpy()) < 1e-15
    assert maxdiff(sgd.W2_sharded, w2.detach().numpy()) < 1e-15
    assert abs(sgd.loss_before - loss_before.item()) < 1e-15
    assert abs(sgd.loss_after - loss_after) < 1e-15


@pytest.mark.parametrize("tp, dp", [(2, 2), (4, 2), (3, 3)])
def test_dp_tp_reference_against_torch_mean_loss(tp, dp):
    r = run_dp_tp(tp=tp, dp=dp, seed=2)
    X = torch.tensor(np.concatenate([rep.X for rep in r.replicas]), dtype=torch.float64)
    G = torch.tensor(np.concatenate([rep.G for rep in r.replicas]), dtype=torch.float64)
    w1 = torch.tensor(r.W1, dtype=torch.float64, requires_grad=True)
    w2 = torch.tensor(r.W2, dtype=torch.float64, requires_grad=True)
    # mean over the global batch of the per-sample loss Σ_d Y_d G_d
    ((torch.tanh(X @ w1) @ w2) * G).sum(dim=1).mean().backward()
    correct = next(v for v in r.variants if v.name == "correct")
    assert maxdiff(correct.G_W1, w1.grad.numpy()) < 1e-15
    assert maxdiff(correct.G_W2, w2.grad.numpy()) < 1e-15


@pytest.mark.parametrize("dtype, tdtype", [("float32", torch.float32), ("float16", torch.float16)])
def test_low_precision_forward_close_to_torch(dtype, tdtype):
    """Same dtype in torch: our sharded Y is within the stated tolerance of torch's Y."""
    d = default_inputs()
    r = run_mlp(tp=2, dtype=dtype)
    x, w1, w2 = (torch.tensor(d[k], dtype=tdtype) for k in ("X", "W1", "W2"))
    y = (torch.tanh(x @ w1) @ w2).numpy()
    assert maxdiff(r.sharded.Y, y) <= r.tolerances["Y"]
