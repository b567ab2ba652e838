"""Precision: per-dtype sharded vs unsharded within the stated tolerance; one SGD step."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tpmath import TPMathError
from tpmath.mlp import default_inputs, random_inputs
from tpmath.precision import ce_tolerance, run_precision

SRC = str(Path(__file__).resolve().parents[1] / "src")
EPS = {"float64": 2.0**-52, "float32": 2.0**-23, "float16": 2.0**-10}


@pytest.mark.parametrize("tp", (1, 2, 4))
def test_every_dtype_within_its_tolerance(tp):
    r = run_precision(tp=tp)
    assert [row.dtype for row in r.dtypes] == ["float64", "float32", "float16"]
    for row in r.dtypes:
        assert set(row.max_abs_err) == {"Y", "loss", "G_X", "G_W1", "G_W2"}
        for key, err in row.max_abs_err.items():
            assert 0 <= err <= row.tolerances[key], (row.dtype, key)
        assert row.ce_abs_diff <= row.ce_tolerance
        assert row.within_tolerance is True
        # each side is within a few ulps of its dtype: far inside the worst-case bound
        assert row.max_abs_err["Y"] <= 8 * EPS[row.dtype]
    tols = [row.tolerance for row in r.dtypes]
    assert tols[0] < tols[1] < tols[2]


def test_random_inputs_float16_and_float32():
    inp = random_inputs(9, batch=4, d_model=4, d_ff=24)
    r = run_precision(tp=6, **inp)
    assert all(row.within_tolerance for row in r.dtypes)
    f64 = r.dtypes[0].max_abs_err
    assert max(f64.values()) < 1e-14


def test_ce_tolerance_formula():
    # V = 6, s = 2, z_y − m = −0.5, loss = log 2 + 0.5, float32: 2(γ/(1−γ) + u(|log s| + 0.5 + loss))
    u = 2.0**-24
    g = 8 * u / (1 - 8 * u)
    want = 2 * (g / (1 - g) + u * (math.log(2) + 0.5 + math.log(2) + 0.5))
    assert ce_tolerance(6, 2.0, -0.5, math.log(2) + 0.5, "float32") == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("tp", (1, 2, 4))
@pytest.mark.parametrize("lr", (0.1, 0.5))
def test_sgd_step_sharded_equals_unsharded(tp, lr):
    r = run_precision(tp=tp, lr=lr)
    sgd = r.sgd
    d = default_inputs()
    X, W1, W2, G = d["X"], d["W1"], d["W2"], d["G"]
    # independent formulas (einsum)
    H = np.tanh(np.einsum("bd,df->bf", X, W1))
    gw2 = np.einsum("bf,bd->fd", H, G)
    gw1 = np.einsum("bd,bf->df", X, np.einsum("bd,fd->bf", G, W2) * (1 - H**2))
    assert np.max(np.abs(sgd.W1_sharded - (W1 - lr * gw1))) < 1e-15
    assert np.max(np.abs(sgd.W2_sharded - (W2 - lr * gw2))) < 1e-15
    assert sgd.max_abs_err["W1"] < 1e-15 and sgd.max_abs_err["W2"] < 1e-15
    loss = lambda a, b: float(np.sum((np.tanh(X @ a) @ b) * G))  # noqa: E731
    assert sgd.loss_before == pytest.approx(loss(W1, W2), abs=1e-15)
    assert sgd.loss_after == pytest.approx(loss(W1 - lr * gw1, W2 - lr * gw2), abs=1e-14)
    assert sgd.loss_after < sgd.loss_before          # a descent step on this loss
    assert sgd.lr == lr


def test_bad_input():
    with pytest.raises(TPMathError) as exc:
        run_precision(tp=3)
    assert exc.value.field == "tp" and "tp=3" in str(exc.value)
    with pytest.raises(TPMathError) as exc:
        run_precision(lr="fast")
    assert exc.value.field == "lr" and "not fast" in str(exc.value)


def cli(*args):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_precision_json():
    out = cli("precision", "--tp", "2", "--lr", "0.1", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["tp"] == 2
    for row in data["dtypes"]:
        assert {"dtype", "tolerance", "max_abs_err", "ce_abs_diff", "within_tolerance"} <= set(row)
    assert {"lr", "W1_sharded", "W1_reference", "W2_sharded", "W2_reference", "max_abs_err",
            "loss_before", "loss_after"} <= set(data["sgd"])


def test_cli_precision_bad_input():
    out = cli("precision", "--lr", "nan", "--json")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "nan" in lines[0]
