"""Fuzzing the core, the views and the CLI with hypothesis.

Property everywhere: either a correct result (sharded equals the unsharded
reference within tolerance, every shown number finite) or a TPMathError whose
message names the bad value; never another exception, never a silent NaN.

Profiles: ``TP_FUZZ_PROFILE=ci`` (default, quick) or ``nightly`` (≥ 10 000
examples in total: ``TP_FUZZ_PROFILE=nightly python3 -m pytest tests/test_fuzz.py``).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpmath import TPMathError, collectives, mlp, row_linear, vocab_ce
from tpmath import views
from tpmath.views import tree
from tpmath.cli import main as cli_main

settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", max_examples=1500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("TP_FUZZ_PROFILE", "ci"))

# Numbers a hostile or careless reader can type: ordinary, huge, tiny, signed zero, NaN, inf.
NUMBERS = st.one_of(
    st.floats(-10, 10, allow_nan=False),
    st.sampled_from([0.0, -0.0, 1e-300, -1e-300, 1e4, -1e4, 1e200, -1e200, 1e308,
                     float("nan"), float("inf"), float("-inf")]),
)
SIZES = st.integers(1, 5)


def matrix(rows, cols, elems=NUMBERS):
    return st.lists(st.lists(elems, min_size=cols, max_size=cols), min_size=rows, max_size=rows)


def _finite_tree(obj) -> bool:
    """True if every float inside a result is finite (None allowed where documented)."""
    if isinstance(obj, dict):
        return all(_finite_tree(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(_finite_tree(v) for v in obj)
    if isinstance(obj, np.ndarray):
        return obj.dtype.kind not in "fc" or bool(np.all(np.isfinite(obj)))
    if isinstance(obj, (float, np.floating)):
        return math.isfinite(float(obj))
    return True


@given(B=SIZES, D=SIZES, F=st.integers(1, 12), tp=st.integers(-1, 9), data=st.data())
def test_mlp_fuzz(B, D, F, tp, data):
    X = data.draw(matrix(B, D))
    W1 = data.draw(matrix(D, F))
    W2 = data.draw(matrix(F, D))
    G = data.draw(matrix(B, D))
    try:
        out = mlp.run_mlp(X, W1, W2, G, tp=tp)
    except TPMathError as err:
        assert str(err) and err.message("zh")
        return
    assert 1 <= tp and F % tp == 0
    for key in ("Y", "G_X", "G_W1", "G_W2"):
        assert np.all(np.isfinite(getattr(out.sharded, key)))
        ref = getattr(out.reference, key)
        assert np.allclose(getattr(out.sharded, key), ref, rtol=1e-9, atol=1e-9 * (1 + np.max(np.abs(ref))))


@given(V=st.integers(1, 12), shards=st.integers(-1, 9), data=st.data())
def test_vocab_ce_fuzz(V, shards, data):
    logits = data.draw(st.lists(NUMBERS, min_size=V, max_size=V))
    target = data.draw(st.one_of(st.integers(-3, V + 2), st.just(-100), st.floats(-2, V + 2)))
    shift = data.draw(NUMBERS)
    eps = data.draw(st.one_of(st.just(0.0), st.floats(-0.5, 1.5), st.just(float("nan"))))
    try:
        out = vocab_ce.run_vocab_ce(logits, target, shards=shards, shift=shift, label_smoothing=eps)
    except TPMathError as err:
        assert str(err) and err.message("zh")
        return
    assert _finite_tree({k: getattr(out, k) for k in ("loss", "reference_loss", "abs_diff", "grad", "global_sum_exp")})
    assert abs(out.loss - out.reference_loss) <= 1e-9 * (1 + abs(out.reference_loss))


@given(V=st.integers(2, 9), shards=st.integers(1, 6), N=st.integers(1, 4), data=st.data())
def test_vocab_ce_shift_invariance(V, shards, N, data):
    """Shifting every logit by up to ±1e4 leaves the float64 loss unchanged (relative 1e-12 of the logit scale)."""
    logits = data.draw(matrix(N, V, st.floats(-500, 500)))
    targets = data.draw(st.lists(st.one_of(st.integers(0, V - 1), st.just(-100)), min_size=N, max_size=N))
    shift = data.draw(st.floats(-1e4, 1e4))
    base = vocab_ce.run_vocab_ce(logits, targets, shards=shards)
    moved = vocab_ce.run_vocab_ce(logits, targets, shards=shards, shift=shift)
    scale = 1 + abs(shift) + max(abs(x) for row in logits for x in row)
    assert abs(base.loss - moved.loss) <= 1e-12 * scale * 10
    assert np.all(np.isfinite(moved.grad))


@given(n=st.integers(0, 5), count=st.integers(0, 6), name=st.sampled_from(collectives.NAMES + ("all_reduce", "bogus")),
       op=st.sampled_from(collectives.OPS + ("mean",)), root=st.integers(-1, 5), data=st.data())
def test_collective_fuzz(n, count, name, op, root, data):
    inputs = [data.draw(st.lists(NUMBERS, min_size=count, max_size=count)) for _ in range(n)]
    try:
        out = collectives.run_collective(name, inputs, op=op, root=root)
    except TPMathError as err:
        assert str(err)
        return
    assert len(out.outputs) == n
    if name == "all-reduce" and op == "sum":
        ref = np.sum(np.array(inputs, dtype=float), axis=0)
        for o in out.outputs:
            assert np.allclose(o, ref)


@given(tp=st.integers(0, 9), B=SIZES, I=st.integers(1, 8), O=st.integers(1, 8), data=st.data())
def test_row_linear_fuzz(tp, B, I, O, data):
    X, A, dY = data.draw(matrix(B, I)), data.draw(matrix(I, O)), data.draw(matrix(B, O))
    for fn in (row_linear.run_row_linear, row_linear.run_column_linear):
        try:
            out = fn(X, A, dY, tp=tp)
        except TPMathError as err:
            assert str(err)
            continue
        for key in ("Y", "dX", "dA"):
            ref = getattr(out.reference, key)
            assert out.max_abs_err[key] <= 1e-9 * (1 + float(np.max(np.abs(ref))))


CLI_VALUES = st.one_of(
    st.sampled_from(["0", "1", "2", "3", "-1", "1e308", "nan", "inf", "", "abc", "[]", "[[1,2],[3]]",
                     "[[1,2],[3,4]]", "[1.2,-0.5,2,0.1,1.4,-1]", "[[1,2,3,4],[10,20,30,40]]", "2.5"]),
    st.text(max_size=8),
)
CLI_FLAGS = {
    "mlp": ["--tp", "--dtype", "--x", "--w1", "--w2", "--g", "--seed", "--batch", "--d-model", "--d-ff"],
    "row-linear": ["--tp", "--x", "--a", "--dy", "--seed", "--batch", "--d-in", "--d-out"],
    "vocab-ce": ["--logits", "--dtype", "--target", "--shards", "--shift", "--label-smoothing", "--ignore-index"],
    "comm-cost": ["--batch", "--seq", "--hidden", "--tp", "--dtype-bytes", "--layers"],
    "collective": ["--inputs", "--op", "--root"],
    "attention": ["--tp", "--heads", "--kv-heads", "--seq", "--batch", "--hidden", "--seed", "--mistake",
                  "--dtype-bytes"],
    "layer": ["--tp", "--heads", "--kv-heads", "--seq", "--batch", "--hidden", "--seed", "--ffn"],
}


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(cmd=st.sampled_from(sorted(CLI_FLAGS)), data=st.data())
def test_cli_fuzz(cmd, data):
    flags = data.draw(st.lists(st.sampled_from(CLI_FLAGS[cmd]), max_size=4, unique=True))
    argv = [cmd]
    if cmd == "collective":
        argv.append(data.draw(st.sampled_from(collectives.NAMES + ("bogus",))))
    for flag in flags:
        argv += [flag, data.draw(CLI_VALUES)]
    argv.append("--json")
    out, errs = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(errs):
        code = cli_main(argv)
    if code == 0:
        json.loads(out.getvalue())
        assert "NaN" not in out.getvalue() and "Infinity" not in out.getvalue()
    else:
        assert code == 2
        lines = errs.getvalue().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), errs.getvalue()


CONTROL_VALUES = st.one_of(
    st.sampled_from(["", "NaN", "nan", "-1", "0", "1e308", "-1e308", "abc", "9999", "2.5", "1", "2", "4", "<b>x</b>"]),
    st.text(max_size=6), st.integers(-10, 10), st.floats(allow_nan=True, allow_infinity=True),
)


def _texts(cell):
    """The verbatim texts of a cell: itself, or those inside its element tree (a grid's numbers)."""
    if isinstance(cell, str):
        yield cell
    elif isinstance(cell, dict) and "el" in cell:
        for node in tree.walk(cell["el"]):
            if isinstance(node.get("x"), str):
                yield node["x"]


def _cells_ok(result: dict) -> bool:
    """No NaN in any body or foot cell (the worker's tables are element trees: views/table.py)."""
    for table in result["tables"].values():
        for part in table["c"][0]["c"]:
            if part["t"] in ("tbody", "tfoot"):
                for row in part.get("c", []):
                    for cell in row.get("c", []):
                        texts = _texts({"el": cell}) if "c" in cell else _texts(cell.get("x"))
                        if any("NaN" in t or "nan" == t for t in texts):
                            return False
    return all("NaN" not in str(v) for v in result["values"].values())


def _trees_ok(result: dict) -> None:
    """Every figure and table (with its tree cells) keeps to the element-tree whitelist (the views
    do not check their own output on every control change: this is where it is checked, for any
    input)."""
    for fig in result.get("figures", {}).values():
        tree.check(fig)
    for table in result["tables"].values():
        tree.check(table)


@pytest.mark.parametrize("section", sorted(views.sections()))
def test_views_fuzz(section):
    controls = views.sections()[section].controls
    assert controls, f"section {section} has no controls"

    @settings(max_examples=max(20, settings.default.max_examples // 3))
    @given(st.data())
    def inner(data):
        values = {}
        for c in controls:
            if data.draw(st.booleans()):
                opts = [str(o) for o in c.options] if c.options else []
                values[c.name] = data.draw(st.one_of(CONTROL_VALUES, st.sampled_from(opts)) if opts else CONTROL_VALUES)
        for lang in ("en", "zh"):
            payload = json.loads(views.render_json(section, json.dumps(values), lang))
            if payload["ok"]:
                assert _cells_ok(payload["result"]), payload
                _trees_ok(payload["result"])
            else:
                assert payload["error"]
                assert payload["field"] is None or payload["field"] in {c.name for c in controls} | {"controls"}, payload

    inner()
