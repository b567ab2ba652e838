"""Row- and column-parallel linear (Megatron Y = X A) against the unsharded layer and finite differences."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tpmath import TPMathError
from tpmath.record import fields_of
from tpmath.row_linear import default_inputs, random_inputs, run_column_linear, run_row_linear

SRC = str(Path(__file__).resolve().parents[1] / "src")
TPS = (1, 2, 3, 4, 6, 8)


def loss(X, A, b, dY):
    """L = Σ (X A + b) ⊙ dY, so ∂L/∂Y = dY."""
    return float(np.sum((X @ A + b) * dY))


def central_fd(f, M, h=1e-3):
    """Central finite differences of f at M; L is linear in each input, so a large h is exact
    up to rounding (rounding error ≈ eps·|L|/h)."""
    g = np.zeros_like(M)
    for idx in np.ndindex(M.shape):
        P, Q = M.copy(), M.copy()
        P[idx] += h
        Q[idx] -= h
        g[idx] = (f(P) - f(Q)) / (2 * h)
    return g


def case(tp, seed=0):
    rng = np.random.default_rng(seed + tp)
    X = rng.normal(size=(3, 24))
    A = rng.normal(size=(24, 24))
    dY = rng.normal(size=(3, 24))
    b = rng.normal(size=24)
    return X, A, dY, b


@pytest.mark.parametrize("tp", TPS)
def test_row_parallel_matches_unsharded_and_fd(tp):
    X, A, dY, b = case(tp)
    r = run_row_linear(X, A, dY, tp=tp, bias=b)
    np.testing.assert_allclose(r.Y, X @ A + b, atol=1e-13, rtol=0)
    np.testing.assert_allclose(r.sharded.dX, central_fd(lambda M: loss(M, A, b, dY), X), atol=1e-10)
    np.testing.assert_allclose(r.sharded.dA, central_fd(lambda M: loss(X, M, b, dY), A), atol=1e-10)
    np.testing.assert_allclose(r.sharded.db, central_fd(lambda M: loss(X, A, M, dY), b), atol=1e-10)
    assert max(r.max_abs_err.values()) < 1e-13
    k = 24 // tp
    for rank in r.ranks:
        s = slice(rank.rank * k, (rank.rank + 1) * k)
        np.testing.assert_array_equal(rank.X_shard, X[:, s])          # X split along its last dim
        np.testing.assert_array_equal(rank.A_shard, A[s, :])          # A split along its rows
        np.testing.assert_allclose(rank.Y_partial, X[:, s] @ A[s, :], atol=1e-13)
        np.testing.assert_allclose(rank.dX_shard, (dY @ A.T)[:, s], atol=1e-13)
        np.testing.assert_allclose(rank.dA_shard, (X.T @ dY)[s, :], atol=1e-13)
    # the partial sums are partial: no single rank holds Y when tp > 1
    if tp > 1:
        assert all(np.max(np.abs(rk.Y_partial - (X @ A))) > 1e-3 for rk in r.ranks)
    assert [fields_of(c) for c in r.comm] == [{"phase": "forward", "collective": "all-reduce", "elements": 3 * 24},
                                              {"phase": "backward", "collective": "none", "elements": 0}]


def test_row_parallel_bias_added_once():
    X, A, dY, b = case(4)
    r = run_row_linear(X, A, dY, tp=4, bias=b)
    # adding the bias on each rank before the reduce would give X A + tp·b
    assert np.max(np.abs(r.Y - (X @ A + 4 * b))) > 1e-3
    np.testing.assert_allclose(r.Y - X @ A, np.broadcast_to(b, r.Y.shape), atol=1e-13)


@pytest.mark.parametrize("tp", TPS)
@pytest.mark.parametrize("gather", [True, False])
def test_column_parallel_matches_unsharded_and_fd(tp, gather):
    X, A, dY, b = case(tp, seed=50)
    r = run_column_linear(X, A, dY, tp=tp, gather_output=gather, bias=b)
    np.testing.assert_allclose(r.Y, X @ A + b, atol=1e-13, rtol=0)
    np.testing.assert_allclose(r.sharded.dX, central_fd(lambda M: loss(M, A, b, dY), X), atol=1e-10)
    np.testing.assert_allclose(r.sharded.dA, central_fd(lambda M: loss(X, M, b, dY), A), atol=1e-10)
    np.testing.assert_allclose(r.sharded.db, central_fd(lambda M: loss(X, A, M, dY), b), atol=1e-10)
    assert max(r.max_abs_err.values()) < 1e-13
    k = 24 // tp
    for rank in r.ranks:
        s = slice(rank.rank * k, (rank.rank + 1) * k)
        np.testing.assert_array_equal(rank.A_shard, A[:, s])          # A split along its columns
        np.testing.assert_allclose(rank.Y_shard, X @ A[:, s] + b[s], atol=1e-13)
        np.testing.assert_allclose(rank.dA_shard, X.T @ dY[:, s], atol=1e-13)
        np.testing.assert_allclose(rank.dX_partial, dY[:, s] @ A[:, s].T, atol=1e-13)
    if tp > 1:   # dX needs the AllReduce: every partial is incomplete
        assert all(np.max(np.abs(rk.dX_partial - dY @ A.T)) > 1e-3 for rk in r.ranks)
    first = {"phase": "forward", "collective": "all-gather", "elements": 72} if gather else \
        {"phase": "forward", "collective": "none", "elements": 0}
    assert [fields_of(c) for c in r.comm] == [first, {"phase": "backward", "collective": "all-reduce", "elements": 3 * 24}]


def test_defaults_have_no_zeros_in_inputs():
    d = default_inputs()
    for M in d.values():
        assert np.all(M != 0)
    r = run_row_linear()
    X, A, dY = d["X"], d["A"], d["dY"]
    np.testing.assert_allclose(r.Y, X @ A, atol=1e-15)
    assert r.tp == 2 and len(r.ranks) == 2
    c = run_column_linear(tp=4)
    np.testing.assert_allclose(c.Y, X @ A, atol=1e-15)


def test_random_inputs_shapes_and_determinism():
    a, b = random_inputs(3, 2, 6, 4), random_inputs(3, 2, 6, 4)
    assert a["X"].shape == (2, 6) and a["A"].shape == (6, 4) and a["dY"].shape == (2, 4)
    np.testing.assert_array_equal(a["A"], b["A"])


def test_given_x_and_a_without_dy():
    r = run_row_linear([[1, 2, 3]], [[1], [2], [3]], tp=3)
    assert r.inputs["dY"].shape == (1, 1) and r.inputs["dY"][0, 0] != 0
    assert r.Y[0, 0] == 14.0


@pytest.mark.parametrize("fn,tp,quoted", [(run_row_linear, 3, "d_in=4"), (run_column_linear, 3, "d_out=4"),
                                          (run_row_linear, 0, "tp must be between 1 and 64, not 0"), (run_column_linear, 8, "d_out=4")])
def test_tp_must_divide(fn, tp, quoted):
    with pytest.raises(TPMathError) as exc:
        fn(tp=tp)
    assert exc.value.field == "tp" and quoted in str(exc.value)


@pytest.mark.parametrize("kwargs,field", [
    ({"X": [[1, 2], [3]]}, "x"),
    ({"A": [[1, 2], [3, 4]]}, "a"),                      # 2 rows, X has 4 columns
    ({"dY": [[1, 2]]}, "dy"),
    ({"bias": [1, 2]}, "bias"),
    ({"X": [[1, float("nan"), 1, 1]]}, "x"),
])
def test_bad_shapes_raise(kwargs, field):
    with pytest.raises(TPMathError) as exc:
        run_row_linear(**kwargs)
    assert exc.value.field == field


def cli(*args):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_row_linear_keys():
    out = cli("row-linear", "--tp", "4", "--seed", "1", "--batch", "3", "--d-in", "8", "--d-out", "5",
              "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in ("ranks", "Y", "reference", "max_abs_err", "comm"):
        assert key in data
    assert set(data["ranks"][0]) >= {"rank", "X_shard", "A_shard", "Y_partial", "dX_shard", "dA_shard"}
    assert set(data["reference"]) >= {"Y", "dX", "dA"}
    assert np.asarray(data["Y"]).shape == (3, 5)
    d = random_inputs(1, 3, 8, 5)
    np.testing.assert_allclose(data["reference"]["Y"], d["X"] @ d["A"], atol=1e-12)
    assert data["comm"][0] == {"phase": "forward", "collective": "all-reduce", "elements": 15}


def test_cli_column_linear_with_bias():
    out = cli("column-linear", "--x", "[[1,2],[3,4]]", "--a", "[[1,0.5],[2,-1]]", "--bias", "[0.5,1]",
              "--no-gather-output", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["gather_output"] is False
    np.testing.assert_allclose(data["Y"], np.array([[1, 2], [3, 4]]) @ np.array([[1, 0.5], [2, -1]]) + [0.5, 1])
    assert data["comm"][0]["collective"] == "none"


@pytest.mark.parametrize("args,quoted", [
    (("row-linear", "--tp", "3"), "tp=3"),
    (("row-linear", "--x", "[[1,2],[3]]"), "ragged"),
    (("column-linear", "--tp", "0"), "tp must be between 1 and 64, not 0"),
    (("row-linear", "--seed", "1", "--x", "[[1]]"), "seed"),
    (("row-linear", "--a", "[[1, NaN]]"), "nan"),
])
def test_cli_errors(args, quoted):
    out = cli(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and quoted in lines[0], out.stderr
