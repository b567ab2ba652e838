"""Collectives with NCCL layouts: laws, the seed example, independent index-by-index references, CLI.

Independent references: the seed page's AllToAll example (R0=[1,2,3,4],
R1=[10,20,30,40] → R0=[1,2,10,20], R1=[3,4,30,40]), and element-by-element
definitions written in this file from NCCL's documented layouts (offsets
i·count, blocks), never calling tpmath to get an expected value.
"""

from __future__ import annotations

import re
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tpmath import TPMathError, collectives
from tpmath.collectives import NAMES, OPS, collective, run_collective

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")
RNG = np.random.default_rng(20261129)


def bufs(n, count, lo=0.5, hi=1.5, rng=RNG):
    """n random float64 buffers (positive, so prod stays tame)."""
    return [rng.uniform(lo, hi, count) for _ in range(n)]


def ref_reduce(xs, op):
    """Element-by-element reduction with Python floats, rank order."""
    count = len(xs[0])
    out = []
    for e in range(count):
        vals = [float(x[e]) for x in xs]
        if op in ("sum", "avg"):
            v = 0.0
            for a in vals:
                v += a
            v = v / len(vals) if op == "avg" else v
        elif op == "prod":
            v = 1.0
            for a in vals:
                v *= a
        elif op == "max":
            v = max(vals)
        else:
            v = min(vals)
        out.append(v)
    return out


# ------------------------------------------------------------ the seed example
def test_seed_all_to_all():
    out = collective("all-to-all", [np.array([1, 2, 3, 4.0]), np.array([10, 20, 30, 40.0])])
    assert out[0].tolist() == [1, 2, 10, 20]
    assert out[1].tolist() == [3, 4, 30, 40]


def test_seed_reduce_scatter_then_all_gather_is_all_reduce():
    x = [[1, 2, 3, 4], [10, 20, 30, 40]]
    rs = collective("reduce-scatter", x)
    assert [r.tolist() for r in rs] == [[11, 22], [33, 44]]  # block i of the sum on rank i
    ag = collective("all-gather", rs)
    assert all(a.tolist() == [11, 22, 33, 44] for a in ag)


# ------------------------------------------------------------ layouts, element by element
@pytest.mark.parametrize("n", range(1, 9))
def test_layouts_index_by_index(n):
    count = 3 * n
    xs = bufs(n, count)
    blk = count // n
    ag = collective("all-gather", xs)
    for r in range(n):
        for i in range(n):
            for e in range(count):
                assert ag[r][i * count + e] == xs[i][e]  # rank i's data at offset i·count
    summed = ref_reduce(xs, "sum")
    rs = collective("reduce-scatter", xs)
    for i in range(n):
        assert rs[i].shape == (blk,)
        np.testing.assert_allclose(rs[i], summed[i * blk:(i + 1) * blk], rtol=1e-15, atol=0)
    a2a = collective("all-to-all", xs)
    for j in range(n):
        for i in range(n):
            for e in range(blk):  # block j of rank i lands on rank j at block i
                assert a2a[j][i * blk + e] == xs[i][j * blk + e]
    for root in {0, n - 1}:
        sc = collective("scatter", xs, root=root)
        for i in range(n):
            assert sc[i].tolist() == xs[root][i * blk:(i + 1) * blk].tolist()
        ga = collective("gather", xs, root=root)
        for r in range(n):
            if r == root:
                assert ga[r].tolist() == [v for x in xs for v in x.tolist()]
            else:
                assert ga[r] is None
        bc = collective("broadcast", xs, root=root)
        assert all(b.tolist() == xs[root].tolist() for b in bc)
        red = collective("reduce", xs, root=root)
        assert all((red[r] is None) == (r != root) for r in range(n))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", range(1, 9))
def test_all_reduce_against_python_loop(n, op):
    xs = bufs(n, 5)
    ref = ref_reduce(xs, op)
    for out in collective("all-reduce", xs, op=op):
        np.testing.assert_allclose(out, ref, rtol=1e-14, atol=0)


# ------------------------------------------------------------ laws
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", range(1, 9))
def test_reduce_scatter_then_all_gather_equals_all_reduce(n, op):
    xs = bufs(n, 2 * n)
    ar = collective("all-reduce", xs, op=op)
    ag = collective("all-gather", collective("reduce-scatter", xs, op=op))
    for a, b in zip(ar, ag):
        np.testing.assert_array_equal(a, b)  # same fold order per element: bit-identical


@pytest.mark.parametrize("n", range(1, 9))
def test_all_to_all_twice_is_identity(n):
    xs = bufs(n, 4 * n)
    back = collective("all-to-all", collective("all-to-all", xs))
    for a, b in zip(xs, back):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n", range(1, 9))
def test_scatter_then_gather_returns_root_buffer(n):
    xs = bufs(n, 2 * n)
    root = n // 2
    sc = collective("scatter", xs, root=root)
    ga = collective("gather", sc, root=root)
    np.testing.assert_array_equal(ga[root], xs[root])


def test_reduce_equals_all_reduce_on_root():
    xs = bufs(4, 8)
    for op in OPS:
        red = collective("reduce", xs, op=op, root=2)
        np.testing.assert_array_equal(red[2], collective("all-reduce", xs, op=op)[0])


def test_avg_is_sum_over_n():
    xs = [np.array([1.0, 2.0]), np.array([3.0, 6.0]), np.array([5.0, 1.0])]
    assert collective("all-reduce", xs, op="avg")[0].tolist() == [3.0, 3.0]


def test_two_d_buffers_split_rows():
    xs = [np.arange(8.0).reshape(4, 2) + 10 * r for r in range(2)]
    ag = collective("all-gather", xs)
    assert ag[0].shape == (8, 2)
    np.testing.assert_array_equal(ag[0], np.vstack(xs))
    rs = collective("reduce-scatter", xs)
    np.testing.assert_array_equal(rs[1], (xs[0] + xs[1])[2:])
    with pytest.raises(TPMathError, match="3 rows per rank"):
        collective("reduce-scatter", [np.ones((3, 2)), np.ones((3, 2))])


def test_integer_dtype_kept():
    xs = [np.array([1, 2], dtype=np.int32), np.array([3, 4], dtype=np.int32)]
    out = collective("all-reduce", xs)
    assert out[0].dtype == np.int32 and out[0].tolist() == [4, 6]
    with pytest.raises(TPMathError, match="avg on integer"):
        collective("all-reduce", xs, op="avg")


def test_outputs_are_copies():
    xs = [np.array([1.0, 2.0]), np.array([3.0, 4.0])]
    out = collective("all-reduce", xs)
    out[0][0] = 99
    assert out[1][0] == 4.0 and xs[0][0] == 1.0


# ------------------------------------------------------------ validation
@pytest.mark.parametrize("kwargs, match", [
    (dict(name="allreduce"), "must be one of all-reduce, .*, not allreduce"),
    (dict(op="mean"), "must be one of sum, .*, not mean"),
    (dict(name="reduce", root=2), "Root rank must be between 0 and 1, not 2"),
    (dict(inputs=[[1, 2], [1, 2, 3]]), "Rank 1.s buffer has shape \\(3,\\) but rank 0.s has \\(2,\\)"),
    (dict(inputs=[np.ones(2), np.ones(3)]), "Rank 1.s buffer has shape \\(3,\\)"),
    (dict(inputs=[np.ones(2), np.ones(2), np.ones(2, dtype=np.float32)]), "Rank 2.s buffer is float32"),
    (dict(inputs=[[1, float("nan")], [1, 2]]), "not a finite number \\(nan\\)"),
    (dict(inputs=[]), "non-empty list"),
    (dict(name="reduce-scatter", inputs=[[1, 2, 3], [4, 5, 6]]), "3 elements per rank"),
    (dict(name="scatter", inputs=[[1, 2, 3], [4, 5, 6]]), "n=2 equal blocks"),
    (dict(name="all-to-all", inputs=[[1, 2, 3], [4, 5, 6]]), "3 % 2 = 1"),
])
def test_bad_input_raises_with_value(kwargs, match):
    args = dict(name="all-reduce", inputs=[[1.0, 2.0], [3.0, 4.0]], op="sum", root=0)
    args.update(kwargs)
    with pytest.raises(TPMathError, match=match) as info:
        collective(args["name"], args["inputs"], op=args["op"], root=args["root"])
    assert re.search(r"[\u4e00-\u9fff]", info.value.message("zh")) and info.value.message("zh") != str(info.value)


def test_run_collective_keys():
    res = run_collective("gather", [[1, 2], [3, 4]], root=1)
    assert res.name == "gather" and res.op == "sum" and res.root == 1 and res.n == 2
    assert [b.tolist() for b in res.inputs] == [[1, 2], [3, 4]]
    assert res.outputs[0] is None and res.outputs[1].tolist() == [1, 2, 3, 4]
    assert res.uses_root and not res.uses_op


# ------------------------------------------------------------ properties
counts = st.integers(1, 4)
ranks = st.integers(1, 6)


@settings(max_examples=40, deadline=None)
@given(n=ranks, k=counts, seed=st.integers(0, 2**32 - 1), op=st.sampled_from(OPS))
def test_property_rs_ag_is_ar_and_a2a_involution(n, k, seed, op):
    xs = bufs(n, n * k, rng=np.random.default_rng(seed))
    ar = collective("all-reduce", xs, op=op)
    ag = collective("all-gather", collective("reduce-scatter", xs, op=op))
    assert all(np.array_equal(a, b) for a, b in zip(ar, ag))
    back = collective("all-to-all", collective("all-to-all", xs))
    assert all(np.array_equal(a, b) for a, b in zip(xs, back))


@settings(max_examples=40, deadline=None)
@given(n=ranks, k=counts, seed=st.integers(0, 2**32 - 1))
def test_property_all_gather_then_split_recovers_inputs(n, k, seed):
    xs = bufs(n, k, rng=np.random.default_rng(seed))
    ag = collective("all-gather", xs)
    for i in range(n):
        np.testing.assert_array_equal(ag[n - 1][i * k:(i + 1) * k], xs[i])
    total = collective("all-reduce", xs)[0]
    np.testing.assert_allclose(total, np.sum(np.stack(xs), axis=0), rtol=1e-14)


# ------------------------------------------------------------ CLI
def cli(*args):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_collective_keys_and_nulls():
    out = cli("collective", "reduce", "--inputs", "[[1,2],[3,4],[5,6]]", "--root", "1", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"name", "op", "inputs", "outputs"} <= set(data)
    assert data["outputs"] == [None, [9.0, 12.0], None]
    out = cli("collective", "all-to-all", "--inputs", "[[1,2,3,4],[10,20,30,40]]", "--json")
    assert json.loads(out.stdout)["outputs"] == [[1, 2, 10, 20], [3, 4, 30, 40]]


@pytest.mark.parametrize("args, word", [
    (("collective", "all-mean", "--inputs", "[[1,2],[3,4]]"), "all-mean"),
    (("collective", "all-reduce", "--inputs", "[[1,2],[3]]"), "ragged"),
    (("collective", "all-reduce", "--inputs", "[[1,2],[3,4]]", "--op", "mean"), "mean"),
    (("collective", "reduce-scatter", "--inputs", "[[1,2,3],[3,4,5]]"), "3 elements"),
    (("collective", "broadcast", "--inputs", "[[1,2],[3,4]]", "--root", "5"), "Root rank must be between 0 and 1, not 5"),
    (("collective", "all-reduce", "--inputs", "[[1,2],[3,4]"), "not valid JSON"),
])
def test_cli_bad_input_one_error_line(args, word):
    out = cli(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and word in lines[0], out.stderr


# ---------------------------------------------------------------- the registry

def test_registry_is_the_one_table():
    """One record per collective; the names, NCCL spellings, bus factors, torch calls and i18n keys
    everyone else uses come from it, and a record cannot leave any of them out."""
    import dataclasses
    import tomllib

    from tpmath import ranks, schedules
    from tpmath.collectives import REGISTRY, Collective

    required = [f.name for f in dataclasses.fields(Collective)]
    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(Collective)), "no field may default"
    with pytest.raises(TypeError):
        Collective(**{k: getattr(REGISTRY["all-reduce"], k) for k in required if k != "bus_factor"})
    assert collectives.NAMES == tuple(REGISTRY)
    strings = {}
    for lang in ("en", "zh"):
        strings[lang] = {}
        for path in sorted((ROOT / "content" / "i18n").glob(f"{lang}*.toml")):
            def flat(d, pre=""):
                for k, v in d.items():
                    yield from flat(v, pre + k + ".") if isinstance(v, dict) else [(pre + k, v)]
            strings[lang].update(flat(tomllib.loads(path.read_text("utf-8"))))
    for name, spec in REGISTRY.items():
        assert spec.name == name and callable(spec.bus_factor) and callable(spec.run_torch)
        assert schedules.bus_bandwidth_factor(name, 4) == spec.bus_factor(4)
        assert ranks.collective_call(name, "sum", 1).startswith(spec.torch_call + "(")
        for lang in ("en", "zh"):
            assert spec.option_key in strings[lang] and spec.note_key in strings[lang], (name, lang)


@pytest.mark.parametrize("name", NAMES)
def test_record_facts_match_its_simulation(name):
    """``splits_input`` and ``reads_root_input_only`` (which the figure draws from) are what the
    simulation does: a wrong flag on a new record fails here, not as a silently wrong figure."""
    spec = collectives.REGISTRY[name]
    odd = [np.arange(1.0, 4.0) * 10.0 ** r for r in range(2)]       # 2 ranks × (3,): 2 does not divide 3
    if spec.splits_input:
        with pytest.raises(TPMathError):
            collective(name, odd)
    else:
        assert len(collective(name, odd)) == 2
    n, root = 3, 1
    base = collectives.example_inputs(n)
    for r in range(n):
        moved = [b.copy() for b in base]
        moved[r] = moved[r] + 7.0
        same = all((a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))
                   for a, b in zip(collective(name, base, root=root), collective(name, moved, root=root)))
        # rank r's input is read iff changing it changes some rank's output
        assert same == (spec.reads_root_input_only and r != root), (name, r)
