"""``torchrun -m tpmath.real attention`` on 2 and 4 gloo processes vs the simulated core.

As tests/test_real.py (whose launchers and parsers this reuses; the cases of one world size
run in one launch, test_real.together): every rank's printed
lines equal, character for character, what :func:`tpmath.ranks.expected` computes with the
numpy core; rank 0's comparison with the unsharded computation (PyTorch's
scaled_dot_product_attention with GQA, one process) passes, or, under a mistake, fails with
the same digits as the core's.  ``--json`` runs of random shapes are compared numerically.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from test_real import _argv, _num, _one_error_line, _plain_run, json_ranks, launch, rank_lines, together  # noqa: E402

from tpmath import i18n, ranks  # noqa: E402
from check_lines import assert_same_check  # noqa: E402

pytestmark = pytest.mark.torch


def _argv_flags(given: dict) -> list[str]:
    """The command line of ``given``: ``causal: True`` is the bare flag ``--causal``."""
    flags = {k: v for k, v in given.items() if v is not True}
    return _argv("attention", flags) + [f"--{k}" for k, v in given.items() if v is True]


TEXT_CASES = [
    (2, {}),                                                           # the defaults: 2 processes
    (2, {"tp": 2, "heads": 4, "kv_heads": 1, "causal": True, "stage": "backward"}),
    (4, {"tp": 4, "heads": 8, "kv_heads": 2, "causal": True}),
    (4, {"tp": 4, "heads": 4, "kv_heads": 4, "seq": 3, "batch": 2, "stage": "forward"}),
    (4, {"tp": 4, "heads": 8, "kv_heads": 8, "hidden": 16, "seed": 5}),
]
MISTAKE_CASES = [
    (2, {"mistake": "f-and-g-swapped"}),
    (4, {"tp": 4, "heads": 4, "kv_heads": 2, "mistake": "kv-not-replicated"}),
    (4, {"tp": 4, "heads": 8, "kv_heads": 1, "mistake": "kv-grad-not-summed", "stage": "backward"}),
    (2, {"mistake": "scale-local-width", "causal": True}),
]


def _id(n, given):
    return f"n{n}-" + "-".join(f"{k}={v}" for k, v in given.items())


def _cases_on(n: int) -> list[list[str]]:
    """This file's runs on n ranks, made in one launch (test_real.together)."""
    return ([_argv_flags(g) for m, g in TEXT_CASES + MISTAKE_CASES if m == n]
            + [_argv_flags(g) + ["--json"] for m, g in JSON_CASES if m == n])


def _run_and_compare(n: int, given: dict, run_dir) -> list[str]:
    p = ranks.plan("attention", given)
    assert p["world"] == n
    want_ranks, want_check = ranks.expected(p)
    run = together(run_dir, n, _cases_on(n), _argv_flags(given))
    assert run.returncode == 0, run.stderr[-3000:]
    got_ranks, got_check = rank_lines(run.stdout, n)
    for r in range(n):
        assert got_ranks[r] == ranks.format_rank(r, want_ranks[r]), f"rank {r}\n{run.stdout}"
    assert_same_check(got_check, ranks.format_check(want_check))   # measured digits are the run's own
    return got_check


@pytest.mark.parametrize("n, given", [pytest.param(n, g, id=_id(n, g)) for n, g in TEXT_CASES])
def test_every_rank_prints_what_the_core_computes(n, given, run_dir):
    check = _run_and_compare(n, given, run_dir)
    assert len(check) == 1 + len(ranks.attention.ATTENTION_CHECK)
    assert all(line.endswith(ranks.OK) for line in check[1:]), check


@pytest.mark.parametrize("n, given", [pytest.param(n, g, id=_id(n, g)) for n, g in MISTAKE_CASES])
def test_a_mistake_on_real_ranks_leaves_the_reference_as_the_core_says(n, given, run_dir):
    check = _run_and_compare(n, given, run_dir)
    assert any(ranks.BAD in line for line in check[1:]), check


JSON_CASES = [
    (2, {"tp": 2, "heads": 6, "kv_heads": 2, "seq": 5, "batch": 2, "hidden": 18, "seed": 11, "causal": True}),
    (4, {"tp": 4, "heads": 12, "kv_heads": 2, "seq": 3, "batch": 3, "hidden": 12, "seed": 12}),
    (4, {"tp": 4, "heads": 8, "kv_heads": 4, "seq": 6, "batch": 1, "hidden": 24, "seed": 13, "causal": True}),
]


@pytest.mark.parametrize("n, given", JSON_CASES, ids=["n2-gqa-6-2", "n4-kv2-replicated", "n4-kv4"])
def test_json_values_match_the_core(n, given, run_dir):
    p = ranks.plan("attention", given)
    want_ranks, want_check = ranks.expected(p)
    run = together(run_dir, n, _cases_on(n), _argv_flags(given) + ["--json"])
    assert run.returncode == 0, run.stderr[-3000:]
    got = json_ranks(run.stdout, n)
    for r in range(n):
        assert [name for name, _ in got[r]["records"]] == [i18n.text(name) for name, _ in want_ranks[r]], f"rank {r}"
        for (name, value), (_, want) in zip(got[r]["records"], want_ranks[r]):
            want = np.asarray(want, dtype=np.float64)
            scale = max(1.0, float(np.max(np.abs(want))))
            np.testing.assert_allclose(_num(value), want, rtol=0, atol=1e-13 * scale, err_msg=f"rank {r} {name}")
    assert [name for name, _ in got[0]["check"]] == [i18n.text(name) for name, _ in want_check]
    assert all(v.endswith(ranks.OK) for _, v in got[0]["check"]), got[0]["check"]


def test_the_command_hint_keeps_the_flags():
    line = _one_error_line(_plain_run(["attention", "--tp", "4", "--heads", "8", "--kv-heads", "2", "--causal"]))
    assert line.endswith("torchrun --standalone --nproc-per-node 4 -m tpmath.real attention --tp 4 --heads 8 "
                         "--kv-heads 2 --causal"), line
    assert ranks.command("attention", {"causal": False}) == "torchrun --standalone --nproc-per-node 2 -m tpmath.real attention"


@pytest.mark.parametrize("argv, needle", [
    (["attention", "--tp", "3"], "heads=4 is not divisible by tp=3"),
    (["attention", "--tp", "4", "--heads", "12", "--kv-heads", "3", "--hidden", "24"], "must divide tp"),
    (["attention", "--mistake", "kv-grad-not-summed"], "needs kv_heads < tp"),
    (["attention", "--stage", "grads"], "Stage must be one of"),
])
def test_bad_options_are_one_line_before_any_launch(argv, needle):
    assert needle in _one_error_line(_plain_run(argv))


def test_world_size_that_does_not_fit_is_one_clear_error():
    run = launch(2, ["attention", "--tp", "4"])
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert run.returncode != 0 and len(errors) == 1, run.stderr
    assert "needs 4 processes" in errors[0] and "--nproc-per-node 4" in errors[0]
