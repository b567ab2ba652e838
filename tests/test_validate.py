"""Validation helpers: every bad input becomes a TPMathError naming the input."""

import re
import math

import numpy as np
import pytest

from tpmath import TPMathError
from tpmath.validate import as_array, as_choice, as_dtype, as_float, as_int, check_divides, check_shape


@pytest.mark.parametrize("value", ["[[1,2],[3]]", [[1, 2], [3]], [[1, [2]], [3, 4]]])
def test_ragged_rejected(value):
    with pytest.raises(TPMathError, match="ragged") as info:
        as_array("X", value)
    assert info.value.field == "X"


@pytest.mark.parametrize("value, needle", [
    ([[1, float("nan")]], "nan"), ([[1, float("inf")]], "inf"), ("[[1, \"a\"]]", "'a'"),
    ([[True, 1]], "True"), ("[]", "empty"), ("{not json", "JSON"), (None, "None"),
])
def test_bad_matrix_quotes_value(value, needle):
    with pytest.raises(TPMathError) as info:
        as_array("W1", value)
    assert needle in str(info.value)
    assert re.search(r"[\u4e00-\u9fff]", info.value.message("zh")) and info.value.field == "W1"


def test_good_matrix_from_json_and_lists():
    a = as_array("X", "[[1,2],[3,-1]]")
    b = as_array("X", [[1, 2], [3, -1]])
    assert a.dtype == np.float64 and np.array_equal(a, b) and a.shape == (2, 2)
    assert as_array("v", [1, 2, 3], ndim=(1, 2)).shape == (3,)
    with pytest.raises(TPMathError, match="2-D"):
        as_array("v", [1, 2, 3], ndim=2)


@pytest.mark.parametrize("value, ok", [(2, 2), ("4", 4), (3.0, 3), ("8", 8)])
def test_int_ok(value, ok):
    assert as_int("tp", value, 1, 8) == ok


@pytest.mark.parametrize("value", ["", "abc", "2.5", 2.5, True, None, "nan", float("inf"), 0, 9, "-1"])
def test_int_bad(value):
    with pytest.raises(TPMathError) as info:
        as_int("tp", value, 1, 8)
    assert info.value.field == "tp"


@pytest.mark.parametrize("value", ["", "x", "nan", "inf", "1e308", float("nan"), True, None])
def test_float_bad(value):
    with pytest.raises(TPMathError) as info:
        as_float("shift", value, -1e4, 1e4)
    assert info.value.field == "shift"


def test_float_ok():
    assert as_float("shift", "2.5", -1e4, 1e4) == 2.5
    assert math.isclose(as_float("shift", -1e4, -1e4, 1e4), -1e4)


def test_choice_dtype_divides_shape():
    assert as_choice("stage", "forward", ("forward", "backward")) == "forward"
    with pytest.raises(TPMathError, match="sideways"):
        as_choice("stage", "sideways", ("forward", "backward"))
    assert as_dtype("dtype", "float16") == np.float16
    with pytest.raises(TPMathError, match="bfloat16"):
        as_dtype("dtype", "bfloat16")
    check_divides(4, 8)
    with pytest.raises(TPMathError, match="tp=3 does not divide d_ff=8"):
        check_divides(3, 8)
    check_shape("W1", np.zeros((2, 4)), (2, None))
    with pytest.raises(TPMathError, match=r"\(2, 4\)"):
        check_shape("W1", np.zeros((2, 4)), (4, None))


def test_zh_message_differs_and_is_chinese():
    with pytest.raises(TPMathError) as info:
        as_int("shards", 0, 1, 6)
    assert info.value.message("zh") == "分片数：须在 1 到 6 之间，当前为 0"
    assert info.value.message("en") == "Number of shards must be between 1 and 6, not 0"


@pytest.mark.parametrize("value, shown", [("1e308", "1e308"), (1e308, "1e+308"), ("  12 ", "12")])
def test_int_out_of_range_quotes_what_was_typed(value, shown):
    with pytest.raises(TPMathError) as info:
        as_int("count", value, 1, 8)
    assert str(info.value) == f"Elements per rank must be between 1 and 8, not {shown}"
