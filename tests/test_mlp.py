"""Column→row MLP: sharded == unsharded, gradients == finite differences, validation, CLI.

Independent references used here (none of them is tpmath's own reference code):
pure-Python loops with math.tanh for the seed numbers, a plain-numpy unsharded
implementation written in this file, and complex-step derivatives
(f'(x) = Im f(x + ih) / h, exact to rounding, no subtraction error).
"""

from __future__ import annotations

import re
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tpmath import TPMathError
from tpmath.mlp import default_inputs, random_inputs, run_mlp, tolerances

TPS = (1, 2, 3, 4, 6, 8)
SRC = str(Path(__file__).resolve().parents[1] / "src")


# ------------------------------------------------------------ independent references

def loops_forward_backward(X, W1, W2, G):
    """Unsharded MLP with Python lists and math.tanh only (no numpy)."""
    B, D, F = len(X), len(X[0]), len(W1[0])
    Z = [[sum(X[b][d] * W1[d][f] for d in range(D)) for f in range(F)] for b in range(B)]
    H = [[math.tanh(z) for z in row] for row in Z]
    Y = [[sum(H[b][f] * W2[f][d] for f in range(F)) for d in range(D)] for b in range(B)]
    loss = sum(Y[b][d] * G[b][d] for b in range(B) for d in range(D))
    GH = [[sum(G[b][d] * W2[f][d] for d in range(D)) for f in range(F)] for b in range(B)]
    GZ = [[GH[b][f] * (1 - H[b][f] ** 2) for f in range(F)] for b in range(B)]
    GW1 = [[sum(X[b][d] * GZ[b][f] for b in range(B)) for f in range(F)] for d in range(D)]
    GW2 = [[sum(H[b][f] * G[b][d] for b in range(B)) for d in range(D)] for f in range(F)]
    GX = [[sum(GZ[b][f] * W1[d][f] for f in range(F)) for d in range(D)] for b in range(B)]
    return {"Y": Y, "loss": loss, "G_X": GX, "G_W1": GW1, "G_W2": GW2}


def numpy_reference(X, W1, W2, G):
    """Unsharded MLP written independently of tpmath (einsum, float64)."""
    H = np.tanh(np.einsum("bd,df->bf", X, W1))
    Y = np.einsum("bf,fd->bd", H, W2)
    GZ = np.einsum("bd,fd->bf", G, W2) * (1 - H**2)
    return {"Y": Y, "loss": float(np.einsum("bd,bd->", Y, G)), "G_X": np.einsum("bf,df->bd", GZ, W1),
            "G_W1": np.einsum("bd,bf->df", X, GZ), "G_W2": np.einsum("bf,bd->fd", H, G)}


def complex_step_grads(X, W1, W2, G, h=1e-30):
    """dL/d(each entry) by the complex step: exact to float64 rounding."""
    def loss(X, W1, W2):
        return np.sum((np.tanh(X @ W1) @ W2) * G)
    args = {"X": X.astype(complex), "W1": W1.astype(complex), "W2": W2.astype(complex)}
    out = {}
    for name, base in args.items():
        grad = np.empty(base.shape)
        for idx in np.ndindex(base.shape):
            pert = base.copy()
            pert[idx] += 1j * h
            grad[idx] = loss(**{**args, name: pert}).imag / h
        out["G_" + name] = grad
    return out


def maxdiff(a, b):
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


# ------------------------------------------------------------------------ defaults

def test_default_inputs_are_the_seed_numbers_and_have_no_zeros():
    d = default_inputs()
    assert d["X"].tolist() == [[1, 2], [3, -1]]
    assert d["G"].tolist() == [[0.2, -0.4], [0.6, 0.1]]
    assert d["W1"].shape == (2, 4) and d["W2"].shape == (4, 2)
    r = run_mlp(tp=2)
    for rank in r.ranks:
        for key in ("W1", "W2", "Z", "H", "Y_partial", "G_H", "G_Z", "G_W1", "G_W2", "G_X_partial"):
            assert np.all(np.abs(getattr(rank, key)) > 1e-2), (rank.rank, key, getattr(rank, key))


@pytest.mark.parametrize("tp", (1, 2, 4))
def test_seed_numbers_match_pure_python_loops(tp):
    d = default_inputs()
    ref = loops_forward_backward(*(d[k].tolist() for k in ("X", "W1", "W2", "G")))
    r = run_mlp(tp=tp)
    for key in ("Y", "G_X", "G_W1", "G_W2"):
        assert maxdiff(getattr(r.sharded, key), ref[key]) < 1e-15, key
        assert maxdiff(getattr(r.reference, key), ref[key]) < 1e-15, key
    assert abs(r.sharded.loss - ref["loss"]) < 1e-15
    assert r.max_abs_err["Y"] < 1e-15 and r.within_tolerance


# -------------------------------------------------------------- sharded == reference

@pytest.mark.parametrize("tp", TPS)
@pytest.mark.parametrize("seed", (0, 1, 2))
def test_sharded_equals_reference_random_d_ff_24(tp, seed):
    inp = random_inputs(seed, batch=3, d_model=5, d_ff=24)
    r = run_mlp(**inp, tp=tp)
    ref = numpy_reference(inp["X"], inp["W1"], inp["W2"], inp["G"])
    for key in ("Y", "G_X", "G_W1", "G_W2"):
        assert maxdiff(getattr(r.sharded, key), ref[key]) < 1e-13, key
        assert r.max_abs_err[key] <= r.tolerances[key]
    assert abs(r.sharded.loss - ref["loss"]) < 1e-13
    assert len(r.ranks) == tp


@pytest.mark.parametrize("tp", TPS)
def test_per_rank_shards_and_collectives(tp):
    inp = random_inputs(7, batch=2, d_model=3, d_ff=24)
    r = run_mlp(**inp, tp=tp)
    w = 24 // tp
    for rk in r.ranks:
        s = slice(rk.rank * w, (rk.rank + 1) * w)
        assert np.array_equal(rk.W1, inp["W1"][:, s])          # column parallel: W1 columns
        assert np.array_equal(rk.W2, inp["W2"][s, :])          # row parallel: W2 rows
        assert rk.Z.shape == (2, w) and rk.Y_partial.shape == (2, 3)
        assert np.allclose(rk.H, np.tanh(inp["X"] @ inp["W1"][:, s]), atol=1e-15)
        assert np.allclose(rk.G_Z, rk.G_H * (1 - rk.H ** 2), atol=1e-15)
        assert np.allclose(rk.G_H, inp["G"] @ inp["W2"][s, :].T, atol=1e-15)  # G_Y = G, used once
    # forward AllReduce (g) and backward AllReduce (f) are sums of the partials
    assert maxdiff(sum(rk.Y_partial for rk in r.ranks), r.sharded.Y) < 1e-14
    assert maxdiff(sum(rk.G_X_partial for rk in r.ranks), r.sharded.G_X) < 1e-14


def test_replicated_gy_not_double_counted():
    """Summing the replicated G_Y across ranks would scale weight grads by tp: they must equal the reference."""
    inp = random_inputs(3, batch=2, d_model=2, d_ff=24)
    for tp in (2, 4, 8):
        r = run_mlp(**inp, tp=tp)
        ref = numpy_reference(inp["X"], inp["W1"], inp["W2"], inp["G"])
        ratio = np.sum(r.sharded.G_W2 * ref["G_W2"]) / np.sum(ref["G_W2"] ** 2)
        assert abs(ratio - 1) < 1e-12


# ------------------------------------------------------------- finite differences

@pytest.mark.parametrize("tp", (1, 2, 3, 4, 6, 8))
def test_gradients_against_complex_step_and_reported_fd(tp):
    inp = random_inputs(11, batch=2, d_model=3, d_ff=24)
    r = run_mlp(**inp, tp=tp)
    cs = complex_step_grads(inp["X"], inp["W1"], inp["W2"], inp["G"])
    for key in ("G_X", "G_W1", "G_W2"):
        assert maxdiff(getattr(r.sharded, key), cs[key]) < 1e-13, key
        # the core's own central differences (h = 1e-6): truncation ~h², rounding ~eps·|L|/h
        assert 0 <= r.finite_difference[key] < 1e-8, key


def test_fd_of_seed_numbers():
    r = run_mlp()
    d = default_inputs()
    cs = complex_step_grads(d["X"], d["W1"], d["W2"], d["G"])
    for key in ("G_X", "G_W1", "G_W2"):
        assert maxdiff(getattr(r.sharded, key), cs[key]) < 1e-15
        assert r.finite_difference[key] < 1e-9


# ------------------------------------------------------------------------- dtypes

@pytest.mark.parametrize("dtype", ("float64", "float32", "float16"))
@pytest.mark.parametrize("tp", TPS)
def test_dtypes_within_stated_tolerance(dtype, tp):
    inp = random_inputs(5, batch=4, d_model=4, d_ff=24)
    r = run_mlp(**inp, tp=tp, dtype=dtype)
    assert r.dtype == dtype
    assert r.sharded.Y.dtype == np.dtype(dtype) and r.reference.G_W1.dtype == np.dtype(dtype)
    for key, err in r.max_abs_err.items():
        assert err <= r.tolerances[key], (key, err, r.tolerances[key])
    assert r.within_tolerance is True
    # the low-precision result is still close to the exact (float64) gradient
    exact = numpy_reference(inp["X"], inp["W1"], inp["W2"], inp["G"])
    assert maxdiff(r.sharded.G_W1, exact["G_W1"]) < {"float64": 1e-13, "float32": 1e-5, "float16": 2e-2}[dtype]


def test_tolerance_scales_with_eps_and_size():
    inp = random_inputs(0, batch=2, d_model=2, d_ff=4)
    t64, t32, t16 = (tolerances(*(inp[k] for k in ("X", "W1", "W2", "G")), dt)["Y"]
                     for dt in ("float64", "float32", "float16"))
    assert t64 < t32 < t16
    assert t32 / t64 == pytest.approx(np.finfo(np.float32).eps / np.finfo(np.float64).eps, rel=1e-3)
    big = random_inputs(0, batch=2, d_model=2, d_ff=48)
    small = tolerances(*(inp[k] for k in ("X", "W1", "W2", "G")), "float32")
    large = tolerances(*(big[k] for k in ("X", "W1", "W2", "G")), "float32")
    assert large["Y"] > small["Y"]


# --------------------------------------------------------------------- hypothesis

DIVISORS = {f: [t for t in range(1, f + 1) if f % t == 0] for f in range(1, 25)}


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.sampled_from([4, 6, 8, 12, 24]), st.integers(0, 10_000),
       st.data())
def test_property_sharded_equals_unsharded(batch, d_model, d_ff, seed, data):
    tp = data.draw(st.sampled_from(DIVISORS[d_ff]))
    inp = random_inputs(seed, batch, d_model, d_ff)
    r = run_mlp(**inp, tp=tp)
    ref = numpy_reference(inp["X"], inp["W1"], inp["W2"], inp["G"])
    for key in ("Y", "G_X", "G_W1", "G_W2"):
        assert maxdiff(getattr(r.sharded, key), ref[key]) <= r.tolerances[key]
    for key in ("G_X", "G_W1", "G_W2"):
        assert r.finite_difference[key] < 1e-7
    # linearity in the upstream gradient: G -> 2G doubles every gradient, leaves Y alone
    r2 = run_mlp(**{**inp, "G": 2 * inp["G"]}, tp=tp)
    assert maxdiff(r2.sharded.G_W1, 2 * r.sharded.G_W1) < 1e-13
    assert maxdiff(r2.sharded.Y, r.sharded.Y) == 0


# --------------------------------------------------------------------- validation

@pytest.mark.parametrize("kwargs, field, quoted", [
    ({"tp": 3}, "tp", ["tp=3", "d_ff=4"]),
    ({"tp": 5, **random_inputs(0, 2, 2, 24)}, "tp", ["tp=5", "d_ff=24"]),
    ({"tp": 0}, "tp", ["tp must be between 1 and", "not 0"]),
    ({"X": [[1, 2], [3]]}, "X", ["[[1, 2], [3]]"]),
    ({"X": [[1, float("nan")], [3, 4]]}, "X", ["nan"]),
    ({"W1": [[1, 2, 3, 4]]}, "W1", ["(1, 4)", "2"]),
    ({"W2": [[1, 2], [3, 4], [5, 6]]}, "W2", ["(3, 2)", "(4, 2)"]),
    ({"G": [[1, 2, 3], [4, 5, 6]]}, "G", ["(2, 3)", "(2, 2)"]),
    ({"X": [[1, 2, 3], [4, 5, 6]]}, "W1", ["(2, 4)", "3"]),
    ({"dtype": "bfloat16"}, "dtype", ["bfloat16"]),
    ({"X": [[1e5, 1], [1, 1]], "dtype": "float16"}, "X", ["100000.0", "float16"]),
    ({"X": "[[1,2],[3,"}, "X", ["JSON"]),
])
def test_bad_input_raises_tpmatherror_quoting_values(kwargs, field, quoted):
    with pytest.raises(TPMathError) as exc:
        run_mlp(**kwargs)
    assert exc.value.field == field
    for q in quoted:
        assert q in str(exc.value), (q, str(exc.value))
    assert re.search(r"[\u4e00-\u9fff]", exc.value.message("zh"))


def test_float16_overflow_in_results_is_reported():
    with pytest.raises(TPMathError, match="overflows in float16"):
        run_mlp(X=[[300, 300], [1, 1]], W2=[[300, 300]] * 4, G=[[300, 300], [1, 1]], dtype="float16")


# ---------------------------------------------------------------------------- CLI

def cli(*args):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_mlp_json_keys():
    out = cli("mlp", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data["inputs"]) == {"X", "W1", "W2", "G"}
    assert data["tp"] == 2 and len(data["ranks"]) == 2
    assert set(data["ranks"][0]) >= {"rank", "W1", "W2", "Z", "H", "Y_partial", "G_H", "G_Z", "G_W1",
                                     "G_W2", "G_X_partial"}
    assert set(data["sharded"]) >= {"Y", "G_X", "G_W1", "G_W2"}
    assert set(data["reference"]) >= {"Y", "loss", "G_X", "G_W1", "G_W2"}
    assert set(data["max_abs_err"]) >= {"Y", "G_X", "G_W1", "G_W2"}
    assert set(data["finite_difference"]) == {"G_X", "G_W1", "G_W2"}
    assert data["inputs"]["X"] == [[1, 2], [3, -1]]


def test_cli_mlp_random_and_explicit_inputs():
    out = cli("mlp", "--seed", "3", "--batch", "2", "--d-model", "3", "--d-ff", "24", "--tp", "6",
              "--dtype", "float32", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["tp"] == 6 and data["dtype"] == "float32" and np.array(data["inputs"]["W1"]).shape == (3, 24)
    out = cli("mlp", "--x", "[[1,0.5]]", "--g", "[[1,-1]]", "--tp", "4", "--json")
    data = json.loads(out.stdout)
    assert data["inputs"]["X"] == [[1, 0.5]] and len(data["ranks"]) == 4


@pytest.mark.parametrize("args, needle", [
    (("--tp", "3"), "tp=3"),
    (("--x", "[[1,2],[3]]"), "ragged"),
    (("--g", "[[1,2,3]]"), "(1, 3)"),
    (("--x", "[[1,NaN],[1,2]]"), "nan"),
    (("--dtype", "int8"), "int8"),
    (("--seed", "1", "--d-ff", "7", "--tp", "2"), "d_ff=7"),
])
def test_cli_mlp_bad_input_one_error_line(args, needle):
    out = cli("mlp", *args, "--json")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), out.stderr
    assert needle in lines[0]
    assert out.stdout == ""
