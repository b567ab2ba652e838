"""Mismatch checker: every scenario's verdict (who hangs, where, why), hand-built cases, validation, CLI.

Expected verdicts are worked out by hand from the blocking-collective model in
the module docstring (the k-th call on a group meets the k-th call of every
other member), not read back from the checker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from tpmath import TPMathError
from tpmath.i18n import text
from tpmath.mismatch import SCENARIOS, check_calls

SRC = str(Path(__file__).resolve().parents[1] / "src")


def c(name="all-reduce", shape=(4,), dtype="float32", group=(0, 1)):
    return {"name": name, "shape": list(shape), "dtype": dtype, "group": list(group)}


def verdict(res):
    return sorted((h.rank, h.call_index, h.code, h.peer) for h in res.hangs)


@pytest.mark.parametrize("name, ok, matched, expected", [
    ("ok", True, 2, []),
    ("order_swapped", False, 0, [(0, 0, "order", 1), (1, 0, "order", 0)]),
    ("early_exit", False, 1, [(0, 1, "early_exit", 1)]),
    ("shape_mismatch", False, 0, [(0, 0, "shape_mismatch", 1), (1, 0, "shape_mismatch", 0)]),
    ("dtype_mismatch", False, 0, [(0, 0, "dtype_mismatch", 1), (1, 0, "dtype_mismatch", 0)]),
    ("group_mismatch", False, 0, [(0, 0, "group_mismatch", 2), (1, 0, "group_mismatch", 2),
                                  (2, 0, "group_mismatch", 0)]),
    ("cross_group_deadlock", False, 0, [(0, 0, "order", 1), (1, 0, "order", 3), (2, 0, "order", 0),
                                        (3, 0, "order", 2)]),
])
def test_scenarios(name, ok, matched, expected):
    res = check_calls(SCENARIOS[name])
    assert res.ok is ok and res.matched == matched
    assert verdict(res) == expected
    for h in res.hangs:
        en, zh = text(h.message, "en"), text(h.message, "zh")
        assert f"rank {h.rank}" in en and f"rank {h.rank}" in zh
        assert zh != en


def test_early_exit_names_the_exited_rank_and_call_count():
    res = check_calls(SCENARIOS["early_exit"])
    assert res.exited == [1]
    msg = text(res.hangs[0].message, "en")
    assert "rank 1 already exited after its 1 call" in msg and "call 1" in msg
    assert "提前退出" in text(res.hangs[0].message, "zh")


def test_same_count_different_shape_is_fine():
    # NCCL sees a pointer and a count: (2, 2) and (4,) are the same AllReduce
    assert check_calls([[c(shape=(2, 2))], [c(shape=(4,))]]).ok


def test_independent_groups_interleave():
    # TP groups {0,1},{2,3} then DP groups {0,2},{1,3}, same order on every rank: fine
    tp = [(0, 1), (0, 1), (2, 3), (2, 3)]
    dp = [(0, 2), (1, 3), (0, 2), (1, 3)]
    calls = [[c(group=tp[r]), c(group=dp[r])] for r in range(4)]
    res = check_calls(calls)
    assert res.ok and res.matched == 4 and res.exited == [0, 1, 2, 3]


def test_stuck_peer_blocks_a_third_rank():
    # ranks 0 and 1 disagree on shape; rank 2 then waits on group {1,2} for rank 1 forever
    calls = [[c(shape=(4,))], [c(shape=(3,)), c(group=(1, 2))], [c(group=(1, 2))]]
    res = check_calls(calls)
    assert verdict(res) == [(0, 0, "shape_mismatch", 1), (1, 0, "shape_mismatch", 0), (2, 0, "blocked_peer", 1)]


def test_mismatch_later_in_sequence():
    calls = [[c(), c(), c(dtype="bfloat16")], [c(), c(), c(dtype="float32")]]
    res = check_calls(calls)
    assert res.matched == 2
    assert verdict(res) == [(0, 2, "dtype_mismatch", 1), (1, 2, "dtype_mismatch", 0)]


def test_different_names_not_a_reordering():
    res = check_calls([[c("all-reduce")], [c("broadcast")]])
    assert [h.code for h in res.hangs] == ["name_mismatch", "name_mismatch"]


def test_not_in_group():
    res = check_calls([[c(group=(1, 2))], [c(group=(1, 2))], [c(group=(1, 2))]])
    assert ("not_in_group" in [h.code for h in res.hangs if h.rank == 0])
    assert res.matched == 1  # ranks 1 and 2 complete theirs


def test_group_order_inside_list_does_not_matter():
    assert check_calls([[c(group=(1, 0))], [c(group=(0, 1))]]).ok


@pytest.mark.parametrize("calls, match", [
    ("[[{\"name\": \"allreduce\"}], []]", "'allreduce' is not a collective"),
    ([[c(group=(0, 5))], [c()]], "group must be"),
    ([[c(shape=(-1,))], [c()]], "shape must be"),
    ([[c(dtype="float8")], [c()]], "'float8' is not a dtype"),
    ([], "non-empty list"),
    ("not json", "not valid JSON"),
    ([["all-reduce"], []], "must be an object"),
])
def test_validation(calls, match):
    with pytest.raises(TPMathError, match=match) as info:
        check_calls(calls)
    assert info.value.field == "calls"


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 4), k=st.integers(0, 4), seed=st.integers(0, 1000))
def test_property_identical_sequences_never_hang(n, k, seed):
    import random
    rnd = random.Random(seed)
    seq = [c(rnd.choice(["all-reduce", "all-gather", "broadcast"]), (rnd.randint(1, 5),), "float32",
             tuple(range(n))) for _ in range(k)]
    res = check_calls([list(seq) for _ in range(n)])
    assert res.ok and res.matched == k
    if n > 1 and k > 0:  # dropping the last call of one rank always hangs the others there
        cut = [list(seq) for _ in range(n)]
        cut[n - 1] = cut[n - 1][:-1]
        res = check_calls(cut)
        assert not res.ok and {h.code for h in res.hangs} == {"early_exit"}
        assert sorted(h.rank for h in res.hangs) == list(range(n - 1))


def cli(*args):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_scenario_and_calls():
    out = cli("mismatch", "--scenario", "order_swapped", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["ok"] is False and {"rank", "call_index", "code", "message"} <= set(data["hangs"][0])
    assert "is stuck at call 0" in data["hangs"][0]["message"]          # the sentence, in English
    out = cli("mismatch", "--calls", json.dumps([[c()], [c()]]), "--json")
    assert json.loads(out.stdout)["ok"] is True


@pytest.mark.parametrize("args, word", [
    (("mismatch", "--scenario", "nope"), "nope"),
    (("mismatch",), "exactly one"),
    (("mismatch", "--calls", "[[{\"name\": \"x\"}]]"), "'x'"),
])
def test_cli_errors(args, word):
    out = cli(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and word in lines[0], out.stderr
