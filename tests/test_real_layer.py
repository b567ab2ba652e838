"""``torchrun -m tpmath.real layer`` on 2 and 4 gloo processes vs the simulated core.

As tests/test_real_attention.py (the cases of one world size in one launch): every rank's printed lines equal, character for character,
what :func:`tpmath.ranks.expected` computes with the numpy core; rank 0's comparison with the
unsharded layer (PyTorch autograd in one process: layer_norm, scaled_dot_product_attention with
GQA, tanh GeLU) passes for every parameter, including the replicated LayerNorm weights and
row-parallel biases whose gradients every rank computed without a collective.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from test_real import _argv, _num, _one_error_line, _plain_run, json_ranks, rank_lines, together  # noqa: E402

from tpmath import i18n, ranks  # noqa: E402
from check_lines import assert_same_check  # noqa: E402

pytestmark = pytest.mark.torch


def _argv_flags(given: dict) -> list[str]:
    flags = {k: v for k, v in given.items() if v is not True}
    return _argv("layer", flags) + [f"--{k}" for k, v in given.items() if v is True]


CASES = [
    (2, {}),                                                             # the defaults: 2 processes
    (2, {"kv_heads": 2, "causal": True, "stage": "backward"}),           # the page's default section
    (4, {"tp": 4, "heads": 4, "kv_heads": 1, "causal": True}),           # MQA, KV head on 4 ranks
    (4, {"tp": 4, "heads": 8, "kv_heads": 8, "seq": 3, "batch": 2, "ffn": 16, "seed": 7, "stage": "forward"}),
]


def _id(n, given):
    return f"n{n}-" + "-".join(f"{k}={v}" for k, v in given.items())


def _cases_on(n: int) -> list[list[str]]:
    """This file's runs on n ranks, made in one launch (test_real.together)."""
    return ([_argv_flags(g) for m, g in CASES if m == n]
            + [_argv_flags(g) + ["--json"] for m, g in JSON_CASES if m == n])


@pytest.mark.parametrize("n, given", [pytest.param(n, g, id=_id(n, g)) for n, g in CASES])
def test_every_rank_prints_what_the_core_computes(n, given, run_dir):
    p = ranks.plan("layer", given)
    assert p["world"] == n
    want_ranks, want_check = ranks.expected(p)
    run = together(run_dir, n, _cases_on(n), _argv_flags(given))
    assert run.returncode == 0, run.stderr[-3000:]
    got_ranks, got_check = rank_lines(run.stdout, n)
    for r in range(n):
        assert got_ranks[r] == ranks.format_rank(r, want_ranks[r]), f"rank {r}\n{run.stdout}"
    assert_same_check(got_check, ranks.format_check(want_check))   # measured digits are the run's own
    assert len(got_check) == 1 + len(ranks.layer.LAYER_CHECK)
    assert all(line.endswith(ranks.OK) for line in got_check[1:]), got_check


JSON_CASES = [
    (2, {"tp": 2, "heads": 6, "kv_heads": 2, "seq": 5, "batch": 2, "hidden": 18, "ffn": 10, "seed": 11, "causal": True}),
    (4, {"tp": 4, "heads": 8, "kv_heads": 2, "seq": 3, "batch": 1, "hidden": 16, "seed": 12}),
]


@pytest.mark.parametrize("n, given", JSON_CASES, ids=["n2-gqa-6-2", "n4-kv2-replicated"])
def test_json_values_match_the_core(n, given, run_dir):
    p = ranks.plan("layer", given)
    want_ranks, want_check = ranks.expected(p)
    run = together(run_dir, n, _cases_on(n), _argv_flags(given) + ["--json"])
    assert run.returncode == 0, run.stderr[-3000:]
    got = json_ranks(run.stdout, n)
    for r in range(n):
        assert [name for name, _ in got[r]["records"]] == [i18n.text(name) for name, _ in want_ranks[r]], f"rank {r}"
        for (name, value), (_, want) in zip(got[r]["records"], want_ranks[r]):
            want = np.asarray(want, dtype=np.float64)
            scale = max(1.0, float(np.max(np.abs(want))))
            np.testing.assert_allclose(_num(value), want, rtol=0, atol=1e-12 * scale, err_msg=f"rank {r} {name}")
    assert [name for name, _ in got[0]["check"]] == [i18n.text(name) for name, _ in want_check]
    assert all(v.endswith(ranks.OK) for _, v in got[0]["check"]), got[0]["check"]


@pytest.mark.parametrize("argv, needle", [
    (["layer", "--tp", "3"], "heads=4 is not divisible by tp=3"),
    (["layer", "--ffn", "6", "--tp", "4"], "ffn"),
    (["layer", "--stage", "grads"], "Stage must be one of"),
])
def test_bad_options_are_one_line_before_any_launch(argv, needle):
    assert needle in _one_error_line(_plain_run(argv))
