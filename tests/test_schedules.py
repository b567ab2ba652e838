"""Ring and tree AllReduce schedules: executed on data they equal AllReduce; byte counts vs closed forms.

Independent references: numpy's ``np.sum/np.max/...`` over the stacked buffers
for the result; the closed-form 2(n−1)/n · S of a ring AllReduce; counting
arguments written here (each chunk is forwarded n−1 times per phase; a binary
tree has n−1 edges, each used once up and once down); nccl-tests' factors typed
in from doc/PERFORMANCE.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tpmath import TPMathError
from tpmath.schedules import (bus_bandwidth_factor, chunk_sizes, ring_all_reduce, simulate_ring_all_reduce,
                              simulate_tree_all_reduce, tree_all_reduce)

SRC = str(Path(__file__).resolve().parents[1] / "src")
NUMPY_OP = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod,
            "avg": lambda a, axis: np.sum(a, axis=axis) / a.shape[0]}
COUNTS = (1, 2, 3, 5, 7, 8, 13, 24)  # include counts smaller than n and not divisible by n


def data(n, count, seed=0):
    return list(np.random.default_rng(seed).uniform(0.5, 1.5, (n, count)))


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod", "avg"])
@pytest.mark.parametrize("n", range(1, 9))
def test_ring_executes_to_all_reduce(n, op):
    for count in COUNTS:
        xs = data(n, count, seed=n * 100 + count)
        ref = NUMPY_OP[op](np.stack(xs), axis=0)
        sim = simulate_ring_all_reduce(xs, op)
        assert len(sim.steps) == 2 * (n - 1)
        for out in sim.outputs:
            np.testing.assert_allclose(out, ref, rtol=1e-13, atol=0)


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod", "avg"])
@pytest.mark.parametrize("n", range(1, 9))
def test_tree_executes_to_all_reduce(n, op):
    for count in (1, 4, 7):
        xs = data(n, count, seed=n + count)
        ref = NUMPY_OP[op](np.stack(xs), axis=0)
        for out in simulate_tree_all_reduce(xs, op).outputs:
            np.testing.assert_allclose(out, ref, rtol=1e-13, atol=0)


@pytest.mark.parametrize("n", range(2, 9))
def test_ring_reduce_scatter_phase_leaves_block_r_on_rank_r(n):
    count = 3 * n + 1  # uneven: the first chunk is one longer
    xs = data(n, count, seed=n)
    total = np.sum(np.stack(xs), axis=0)
    sim = simulate_ring_all_reduce(xs)
    after_rs = sim.steps[n - 2]
    sizes = chunk_sizes(count, n)
    start = 0
    for r in range(n):
        np.testing.assert_allclose(after_rs[r][start:start + sizes[r]], total[start:start + sizes[r]], rtol=1e-13)
        start += sizes[r]


@pytest.mark.parametrize("n", range(1, 9))
def test_ring_structure(n):
    sched = ring_all_reduce(n, 4 * n, 2)
    for step in sched.steps:
        assert sorted(t.src for t in step.transfers) == list(range(n))  # each rank sends once
        assert sorted(t.dst for t in step.transfers) == list(range(n))  # and receives once
        assert all(t.dst == (t.src + 1) % n for t in step.transfers)
    phases = [s.phase for s in sched.steps]
    assert phases == ["reduce-scatter"] * (n - 1) + ["all-gather"] * (n - 1)
    for r in range(n):  # in each phase a rank forwards every chunk but one
        rs = [t.chunk for s in sched.steps[: n - 1] for t in s.transfers if t.src == r]
        ag = [t.chunk for s in sched.steps[n - 1:] for t in s.transfers if t.src == r]
        assert sorted(rs + [r]) == list(range(n))
        assert sorted(ag + [(r + 1) % n]) == list(range(n))


@pytest.mark.parametrize("elem_bytes", [1, 2, 4])
@pytest.mark.parametrize("n", range(1, 9))
def test_ring_bytes_closed_form_when_divisible(n, elem_bytes):
    count = 6 * n
    S = count * elem_bytes
    sched = ring_all_reduce(n, count, elem_bytes)
    for row in sched.per_rank:
        assert row.bytes_sent == row.bytes_received == 2 * (n - 1) * S // n
        assert row.messages_sent == row.messages_received == 2 * (n - 1)
        assert row.bytes_sent == pytest.approx(bus_bandwidth_factor("all-reduce", n) * S)


@pytest.mark.parametrize("n", range(2, 9))
def test_ring_bytes_uneven_counts(n):
    for count in (n + 1, 2 * n - 1, 5 * n + 3):
        sched = ring_all_reduce(n, count, 4)
        sent = [r.bytes_sent for r in sched.per_rank]
        # every chunk is forwarded n−1 times in each phase
        assert sum(sent) == 2 * (n - 1) * count * 4
        assert sum(r.bytes_received for r in sched.per_rank) == sum(sent)
        assert max(sent) - min(sent) <= 2 * 4  # chunk sizes differ by at most one element
        sizes = chunk_sizes(count, n)
        assert max(sizes) - min(sizes) <= 1 and sum(sizes) == count


def test_ring_example_n3_count7():
    # chunks [3, 2, 2]; rank r sends all chunks but r (RS) and all but r+1 (AG)
    sched = ring_all_reduce(3, 7, 4)
    assert [c.elements for c in sched.chunks] == [3, 2, 2]
    assert [r.bytes_sent for r in sched.per_rank] == [(14 - 3 - 2) * 4, (14 - 2 - 2) * 4, (14 - 2 - 3) * 4]
    first = sched.steps[0].transfers
    assert [(t.src, t.dst, t.chunk) for t in first] == [(0, 1, 2), (1, 2, 0), (2, 0, 1)]


def test_ring_count_smaller_than_n_skips_empty_chunks():
    sched = ring_all_reduce(4, 2, 4)
    assert sum(r.bytes_sent for r in sched.per_rank) == 2 * 3 * 2 * 4
    assert all(r.messages_sent < 6 for r in sched.per_rank)


@pytest.mark.parametrize("n", range(1, 9))
def test_tree_messages_and_bytes(n):
    count, k = 10, 4
    sched = tree_all_reduce(n, count, k)
    total_msgs = sum(r.messages_sent for r in sched.per_rank)
    assert total_msgs == 2 * (n - 1)  # n−1 edges, used once up and once down
    for row in sched.per_rank:
        r = row.rank
        children = len([c for c in (2 * r + 1, 2 * r + 2) if c < n])
        up = 1 if r else 0
        assert row.messages_sent == row.messages_received == up + children
        assert row.bytes_sent == (up + children) * count * k
    depth = int(np.floor(np.log2(n)))
    assert len(sched.steps) == 2 * depth
    assert [t.parent for t in sched.tree] == [None] + [(r - 1) // 2 for r in range(1, n)]


@pytest.mark.parametrize("n, factors", [
    (8, {"all-reduce": 1.75, "reduce-scatter": 0.875, "all-gather": 0.875, "all-to-all": 0.875,
         "broadcast": 1.0, "reduce": 1.0}),
    (2, {"all-reduce": 1.0, "reduce-scatter": 0.5, "all-gather": 0.5, "broadcast": 1.0}),
    (1, {"all-reduce": 0.0, "all-gather": 0.0, "reduce": 1.0}),
])
def test_bus_factors(n, factors):
    for name, value in factors.items():
        assert bus_bandwidth_factor(name, n) == value


@pytest.mark.parametrize("call, match", [
    (lambda: ring_all_reduce(0, 4), "Number of ranks must be between 1 and 256, not 0"),
    (lambda: ring_all_reduce(2, 0), "Elements per rank must be at least 1, not 0"),
    (lambda: tree_all_reduce(2, 4, 0), "Bytes per element must be between 1 and 64, not 0"),
    (lambda: bus_bandwidth_factor("allreduce", 2), "must be one of .*, not allreduce"),
    (lambda: simulate_ring_all_reduce([[1, 2], [3]]), "Rank 1.s buffer has shape"),
])
def test_bad_input(call, match):
    with pytest.raises(TPMathError, match=match):
        call()


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 8), count=st.integers(1, 30), seed=st.integers(0, 2**32 - 1))
def test_property_ring_and_tree_equal_sum(n, count, seed):
    xs = list(np.random.default_rng(seed).integers(-50, 50, (n, count)).astype(np.float64))
    ref = np.sum(np.stack(xs), axis=0)  # integers: exact in any order
    for sim in (simulate_ring_all_reduce(xs), simulate_tree_all_reduce(xs)):
        for out in sim.outputs:
            np.testing.assert_array_equal(out, ref)
    sched = ring_all_reduce(n, count, 2)
    assert sum(r.bytes_sent for r in sched.per_rank) == 2 * (n - 1) * count * 2


def cli(*args):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_ring_and_tree():
    out = cli("ring", "--ranks", "4", "--count", "8", "--elem-bytes", "2", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"algorithm", "n", "count", "elem_bytes", "steps", "per_rank", "bus_factor"} <= set(data)
    assert data["algorithm"] == "ring" and data["bus_factor"] == 1.5
    assert [r["bytes_sent"] for r in data["per_rank"]] == [24] * 4  # 2·3/4 · 16 bytes
    out = cli("ring", "--ranks", "4", "--count", "8", "--algorithm", "tree", "--json")
    assert json.loads(out.stdout)["algorithm"] == "tree"


@pytest.mark.parametrize("args, word", [
    (("ring", "--ranks", "0", "--count", "8"), "Number of ranks must be between 1 and 256, not 0"),
    (("ring", "--ranks", "2", "--count", "x"), "must be a whole number, not x"),
    (("ring", "--ranks", "2", "--count", "8", "--algorithm", "mesh"), "mesh"),
])
def test_cli_ring_errors(args, word):
    out = cli(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and word in lines[0], out.stderr


# ------------------------------------------------------------ the lower bound the page argues (item 14)

def _fewest_messages_for_all_reduce(n: int) -> int:
    """Breadth-first search over every schedule of one element: a message from i to j gives j all
    that i knows (a partial sum can carry no more), done when every rank knows all n inputs."""
    start = tuple(1 << r for r in range(n))
    full = (1 << n) - 1
    seen, frontier, depth = {start}, [start], 0
    while frontier:
        if any(all(k == full for k in s) for s in frontier):
            return depth
        nxt = []
        for s in frontier:
            for i in range(n):
                for j in range(n):
                    if i != j and s[i] | s[j] != s[j]:
                        t = s[:j] + (s[i] | s[j],) + s[j + 1:]
                        if t not in seen:
                            seen.add(t); nxt.append(t)
        frontier, depth = nxt, depth + 1
    raise AssertionError("unreachable")


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_all_reduce_needs_2n_minus_2_messages_per_element_and_the_ring_sends_that(n):
    """Page 1's argument: every element crosses at least 2(n−1) links in any AllReduce whose ranks
    do the additions, so the busiest rank sends at least 2(n−1)/n of the buffer; the ring sends
    exactly that on every rank (Patarasuk & Yuan 2009)."""
    fewest = _fewest_messages_for_all_reduce(n)
    assert fewest == 2 * (n - 1)
    count = 12 * n
    sched = ring_all_reduce(n, count, elem_bytes=1)
    assert sum(r.bytes_sent for r in sched.per_rank) == fewest * count          # the total the bound allows
    assert {r.bytes_sent for r in sched.per_rank} == {fewest * count // n}      # evenly: 2(n−1)/n · S each
