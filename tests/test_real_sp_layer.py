"""``torchrun -m tpmath.real sp-layer`` on 2 and 4 real gloo processes vs the simulated core.

Each rank's printed lines must equal, character for character, what :func:`tpmath.ranks.expected`
computes with the numpy core (the launch and comparison helpers are test_real.py's; the cases of
one world size run in one launch); rank 0's
comparison with one unsharded torch process must pass — or, for a mistake, fail exactly as the
core predicts.  ``--json`` runs compare the full-precision values.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from test_real import _argv, _num, json_ranks, rank_lines, together  # noqa: E402
from tpmath import i18n, ranks  # noqa: E402
from check_lines import assert_same_check  # noqa: E402

pytestmark = pytest.mark.torch


def _cases_on(n: int) -> list[list[str]]:
    """This file's runs on n ranks, made in one launch (test_real.together)."""
    return ([_argv("sp-layer", g) for m, g in CASES if m == n]
            + [_argv("sp-layer", g) + ["--json"] for m, g in JSON_CASES if m == n])


def _run(run_dir, n: int, given: dict, extra: tuple[str, ...] = ()):
    run = together(run_dir, n, _cases_on(n), _argv("sp-layer", given) + list(extra))
    assert run.returncode == 0, run.stderr[-3000:]
    return run


CASES = [
    (2, {}),                                                             # the defaults: 2 processes
    (2, {"stage": "backward", "dropout": 0.3}),
    (4, {"tp": 4, "seq": 8, "ffn": 8}),
    (4, {"tp": 4, "seq": 8, "batch": 1, "hidden": 3, "ffn": 12, "seed": 5, "dropout": 0.2}),
    (2, {"mistake": "ln-grad-not-reduced"}),
    (4, {"tp": 4, "seq": 8, "mistake": "same-dropout-seed"}),
    (2, {"mistake": "gather-wrong-dim"}),
    (4, {"tp": 4, "seq": 8, "ffn": 4, "mistake": "gather-wrong-dim", "stage": "backward"}),
]


@pytest.mark.parametrize("n, given", [pytest.param(n, g, id=f"n{n}-" + "-".join(f"{k}={v}" for k, v in g.items()))
                                      for n, g in CASES])
def test_every_rank_prints_what_the_core_computes(n, given, run_dir):
    p = ranks.plan("sp-layer", given)
    assert p["world"] == n
    want_ranks, want_check = ranks.expected(p)
    run = _run(run_dir, n, given)
    got_ranks, got_check = rank_lines(run.stdout, n)
    for r in range(n):
        assert got_ranks[r] == ranks.format_rank(r, want_ranks[r]), f"rank {r}\n{run.stdout}"
    assert_same_check(got_check, ranks.format_check(want_check))   # measured digits are the run's own
    mistake = given.get("mistake", "none")
    passed = [line.endswith(ranks.OK) for line in got_check[1:]]
    if mistake == "none":
        assert all(passed), got_check
    elif mistake == "ln-grad-not-reduced":   # only γ and β leave the reference
        assert [n for n, ok in zip(ranks.sp_layer.SP_CHECK, passed) if not ok] == ["G_gamma", "G_beta"], got_check
    else:
        assert not any(passed), got_check


JSON_CASES = [(2, {"seq": 6, "batch": 3, "hidden": 5, "ffn": 4, "seed": 9}),
              (4, {"tp": 4, "seq": 4, "ffn": 8, "dropout": 0.5, "seed": 2})]


@pytest.mark.parametrize("n, given", JSON_CASES)
def test_json_values_match_the_core(n, given, run_dir):
    p = ranks.plan("sp-layer", given)
    want_ranks, want_check = ranks.expected(p)
    got = json_ranks(_run(run_dir, n, given, ("--json",)).stdout, n)
    for r in range(n):
        assert [name for name, _ in got[r]["records"]] == [i18n.text(name) for name, _ in want_ranks[r]]
        for (name, value), (_, want) in zip(got[r]["records"], want_ranks[r]):
            want = np.asarray(want, dtype=np.float64)
            value = _num(value)
            assert value.shape == want.shape, (r, name)
            np.testing.assert_allclose(value, want, rtol=0, atol=1e-12 * max(1.0, float(np.max(np.abs(want)))),
                                       err_msg=f"rank {r} {name}")
    assert all(v.endswith(ranks.OK) for _, v in got[0]["check"]), got[0]["check"]


def test_seq_not_divisible_is_one_error_line_before_any_launch():
    from test_real import _one_error_line, _plain_run
    line = _one_error_line(_plain_run(["sp-layer", "--tp", "3"]))
    assert "seq=4" in line
