"""The fixed-order float64 kernels (tpmath.kernels.*_fixed) against numpy and the math library.

They exist so that CPython and Pyodide compute the same bits (tests/test_fixed_order_browser.py);
here: they are the functions they claim to be, within a few units in the last place."""

from __future__ import annotations

import numpy as np
import pytest

from tpmath.kernels import exp_fixed, matmul_fixed, tanh_fixed, total_fixed

EPS = np.finfo(np.float64).eps


def test_exp_is_the_math_librarys_within_two_ulp():
    x = np.concatenate([np.linspace(-700, 700, 100_001), np.linspace(-1e-6, 1e-6, 2001), [0.0, -0.0]])
    rel = np.abs(exp_fixed(x) - np.exp(x)) / np.exp(x)
    assert rel.max() <= 2 * EPS, rel.max()


def test_exp_of_a_masked_score_is_exactly_zero_and_overflow_is_infinite():
    with np.errstate(over="ignore"):
        got = exp_fixed(np.array([-np.inf, -800.0, 800.0, np.inf]))
    assert got[0] == 0.0 and got[1] == 0.0 and np.isinf(got[2]) and np.isinf(got[3])


def test_tanh_is_the_math_librarys_within_four_ulp_and_odd():
    z = np.concatenate([np.linspace(-30, 30, 200_001), np.geomspace(1e-300, 1e-2, 2001)])
    want = np.tanh(z)
    rel = np.abs(tanh_fixed(z) - want) / np.abs(np.where(want == 0, 1.0, want))
    assert rel.max() <= 4 * EPS, rel.max()
    assert np.array_equal(tanh_fixed(-z), -tanh_fixed(z))
    assert tanh_fixed(np.array([0.0]))[0] == 0.0 and tanh_fixed(np.array([50.0]))[0] == 1.0


@pytest.mark.parametrize("a_shape, b_shape", [((3, 5), (5, 4)), ((2, 3, 4, 6), (2, 3, 6, 5)), ((2, 4, 7), (7, 3))])
def test_matmul_is_numpys_product_added_in_index_order(a_shape, b_shape):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    got = matmul_fixed(a, b)
    assert got.shape == (a @ b).shape
    np.testing.assert_allclose(got, a @ b, rtol=0, atol=1e-13)
    # the order itself: ((a0 b0 + a1 b1) + a2 b2) + ..., one rounding per operation
    a2, b2 = a.reshape(-1, a_shape[-1])[:1], b.reshape(-1, *b_shape[-2:])[0]
    want = a2[0, 0] * b2[0, 0]
    for k in range(1, a_shape[-1]):
        want = want + a2[0, k] * b2[k, 0]
    assert matmul_fixed(a2, b2)[0, 0] == want


def test_total_adds_in_c_order_one_element_at_a_time():
    x = np.array([[1e16, 1.0], [-1e16, 1.0]])
    assert total_fixed(x) == ((1e16 + 1.0) + -1e16) + 1.0 == 1.0   # a compensated sum (3.12 sum()) gives 2.0
