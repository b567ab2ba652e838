"""Row- and column-parallel linear against torch autograd through F.linear (weight = Aᵀ, (out, in))."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tpmath.row_linear import run_column_linear, run_row_linear

pytestmark = pytest.mark.torch

TPS = (1, 2, 3, 4, 6, 8)


def torch_linear(X, A, dY, b):
    """Y = F.linear(X, weight=Aᵀ, bias); backward with upstream dY; grads as numpy."""
    x = torch.tensor(X, requires_grad=True)
    weight = torch.tensor(A.T.copy(), requires_grad=True)   # nn.Linear layout: (out, in)
    bias = torch.tensor(b, requires_grad=True)
    y = F.linear(x, weight, bias)
    y.backward(torch.tensor(dY))
    return {"Y": y.detach().numpy(), "dX": x.grad.numpy(), "dA": weight.grad.numpy().T,
            "db": bias.grad.numpy(), "weight": weight.detach().numpy()}


def case(tp):
    rng = np.random.default_rng(tp)
    return (rng.normal(size=(5, 24)), rng.normal(size=(24, 48)), rng.normal(size=(5, 48)),
            rng.normal(size=48))


@pytest.mark.parametrize("tp", TPS)
def test_row_parallel_vs_autograd(tp):
    X, A, dY, b = case(tp)
    t = torch_linear(X, A, dY, b)
    r = run_row_linear(X, A, dY, tp=tp, bias=b)
    for key in ("Y", "dX", "dA", "db"):
        assert np.max(np.abs(getattr(r.sharded, key) - t[key])) < 1e-13, key
    # Megatron's row parallel splits A along its rows = nn.Linear's weight along dim 1
    k = 24 // tp
    for rank in r.ranks:
        s = slice(rank.rank * k, (rank.rank + 1) * k)
        np.testing.assert_array_equal(rank.A_shard.T, t["weight"][:, s])


@pytest.mark.parametrize("tp", TPS)
def test_column_parallel_vs_autograd(tp):
    X, A, dY, b = case(tp)
    t = torch_linear(X, A, dY, b)
    r = run_column_linear(X, A, dY, tp=tp, bias=b)
    for key in ("Y", "dX", "dA", "db"):
        assert np.max(np.abs(getattr(r.sharded, key) - t[key])) < 1e-13, key
    # Megatron's column parallel splits A along its columns = nn.Linear's weight along dim 0 (rows)
    k = 48 // tp
    for rank in r.ranks:
        s = slice(rank.rank * k, (rank.rank + 1) * k)
        np.testing.assert_array_equal(rank.A_shard.T, t["weight"][s, :])
