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
from tpmath.precision import ARITH, PRECISION_DTYPES, REDUCED, ce_tolerance, round_bf16, run_precision

SRC = str(Path(__file__).resolve().parents[1] / "src")
EPS = {"float64": 2.0**-52, "float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


@pytest.mark.parametrize("tp", (1, 2, 4))
def test_every_dtype_within_its_tolerance(tp):
    r = run_precision(tp=tp)
    assert [row.dtype for row in r.dtypes] == ["float64", "float32", "float16", "bfloat16"]
    for row in r.dtypes:
        assert set(row.max_abs_err) == {"Y", "loss", "G_X", "G_W1", "G_W2"}
        for key, err in row.max_abs_err.items():
            assert 0 <= err <= row.tolerances[key], (row.dtype, key)
        assert row.ce_abs_diff <= row.ce_tolerance
        assert row.within_tolerance is True
        # each side is within a few ulps of its dtype: far inside the worst-case bound
        assert row.max_abs_err["Y"] <= 8 * EPS[row.dtype]
    tols = [row.tolerance for row in r.dtypes]
    assert tols[0] < tols[1] < tols[2] < tols[3]


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


# ------------------------------------------------------ the claim the page makes
# content/*/index.md#precision and note.precision_*: with one rank every difference is exactly 0;
# with more, Y, the loss, G_X and the cross-entropy differ, the more the fewer mantissa bits the
# dtype has (float64 53, float32 24, float16 11, bfloat16 8), and G_W1, G_W2 do not differ.

@pytest.mark.parametrize("tp", (1, 2, 4))
def test_the_page_claim_holds_at_every_setting_of_the_demo(tp):
    from tpmath.views import render, sections
    assert {c.name: c.options for c in sections()["precision"].controls}["dtype"] == PRECISION_DTYPES
    assert tp in {int(t) for t in {c.name: c.options for c in sections()["precision"].controls}["tp"]}
    r = run_precision(tp=tp)
    by = {row.dtype: row for row in r.dtypes}
    order = ["float64", "float32", "float16", "bfloat16"]          # mantissa bits 53 > 24 > 11 > 8
    for q in REDUCED + ("ce",):
        errs = [by[d].ce_abs_diff if q == "ce" else by[d].max_abs_err[q] for d in order]
        if tp == 1:
            assert errs == [0, 0, 0, 0], q
        else:
            assert 0 < errs[0] < errs[1] < errs[2] < errs[3], (q, errs)
    for d in order:
        assert by[d].max_abs_err["G_W1"] == 0 and by[d].max_abs_err["G_W2"] == 0
        shown = render("precision", {"dtype": d, "tp": str(tp)})
        cells = [row[1] for row in shown["tables"]["precision"]["rows"]]
        assert cells[3] == cells[4] == "0"                          # G_W₁, G_W₂
        if tp == 1:
            assert set(cells) == {"0"}
        assert shown["notes"]["order"]["key"] == ("note.precision_one_rank" if tp == 1 else "note.precision_order")


def bf16_reference(x: np.ndarray) -> np.ndarray:
    """Round to nearest even by hand, from the value (not the bits): for checking round_bf16."""
    out = np.empty_like(x, dtype=np.float64)
    for i, v in enumerate(np.asarray(x, dtype=np.float64).ravel()):
        if not math.isfinite(v) or v == 0:
            out.flat[i] = v
            continue
        e = max(math.frexp(abs(v))[1] - 1, -126)                  # binade; subnormals below 2^-126
        step = 2.0 ** (e - 7)                                      # 8 significand bits
        q = v / step
        lo = math.floor(q)
        pick = lo + 1 if q - lo > 0.5 or (q - lo == 0.5 and lo % 2) else lo
        y = pick * step
        out.flat[i] = math.copysign(math.inf, v) if abs(y) >= 2.0 ** 128 else y
    return out


def test_round_bf16_is_round_to_nearest_even():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.integers(-40, 38, 2000),
                        [1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1 + 2**-8 + 2**-20, 3.3895e38, -3.4e38,
                         1e-40, -1e-41, 0.0, -0.0, np.inf, -np.inf]]).astype(np.float32)
    got = round_bf16(x)
    assert got.dtype == np.float32
    want = bf16_reference(x.astype(np.float64))
    assert np.array_equal(got.astype(np.float64), want)
    assert round_bf16(np.float32(1 + 2**-8)) == 1.0 and round_bf16(np.float32(1 + 3 * 2**-8)) == 1 + 2**-6
    assert np.isnan(round_bf16(np.array([np.nan], dtype=np.float32)))[0]
    bf = ARITH["bfloat16"]
    assert bf.u == 2.0**-8 and np.array_equal(bf.add(np.float32(1), np.float32(2**-9)), np.float32(1))


@pytest.mark.torch
def test_round_bf16_equals_torch_bfloat16():
    import torch
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(20000) * 10.0 ** rng.integers(-42, 39, 20000),
                        (1 + np.arange(512) * 2**-16), [3.3895e38, 3.40282e38, -3.40282e38, 1e-45, np.inf, -np.inf]]
                       ).astype(np.float32)
    mine = round_bf16(x)
    theirs = torch.from_numpy(x).to(torch.bfloat16).to(torch.float32).numpy()
    assert np.array_equal(mine, theirs)
    # elementwise products and sums: PyTorch on the CPU computes in float32 and rounds, as ARITH does
    a, b = round_bf16(x[:5000]), round_bf16(x[5000:10000])
    ta, tb = (torch.from_numpy(v).to(torch.bfloat16) for v in (a, b))
    bf = ARITH["bfloat16"]
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.array_equal(bf.mul(a, b), (ta * tb).to(torch.float32).numpy(), equal_nan=True)
        assert np.array_equal(bf.add(a, b), (ta + tb).to(torch.float32).numpy(), equal_nan=True)


def test_ieee_only_tanh_exp_log_agree_with_the_c_library():
    """The demo's functions (same bits on every platform) are the C library's to about one ulp."""
    from tpmath.precision import exp64, log64, tanh64
    x = np.linspace(-30, 30, 20001)
    assert np.max(np.abs(exp64(x) / np.exp(x) - 1)) <= 4e-16
    y = np.exp(np.linspace(-20, 20, 20001))
    assert np.max(np.abs(log64(y) - np.log(y))) <= 4e-16
    z = np.linspace(-10, 10, 20001)
    assert np.max(np.abs(tanh64(z) - np.tanh(z))) <= 4e-16
    assert exp64(np.array([0.0]))[0] == 1.0 and log64(np.array([1.0]))[0] == 0.0 and tanh64(np.array([0.0]))[0] == 0.0
