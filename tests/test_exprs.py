"""The elementwise expression language: comparisons are 0/1 values of the compute type in both
translations, and ``a if c else b`` keeps a comparison condition boolean. The C++ side runs
for real in tests/test_ops.py (relu, maximum, clip use these forms)."""

from __future__ import annotations

import numpy as np
import pytest

from opgen.exprs import ExprError, parse_expr


def _numpy(text: str, **values: object) -> np.ndarray:
    expr = parse_expr(text, lambda n: n in values)
    return np.asarray(eval(expr.numpy, {"np": np}, dict(values)))  # the generated reference does the same


def test_comparison_is_one_or_zero_of_the_compute_type() -> None:
    e = parse_expr("dout * (x > 0)", lambda n: True)
    assert e.cpp == "(dout * C(x > C(0.0)))"
    x = np.array([-1.5, 0.0, 2.0])
    np.testing.assert_array_equal(_numpy("dout * (x > 0)", x=x, dout=np.full(3, 3.0)), [0.0, 0.0, 3.0])
    # arithmetic on comparisons means the same as in C++ (numpy bools would fail or saturate)
    np.testing.assert_array_equal(_numpy("(x > 0) - (x < 0)", x=x), [-1.0, 0.0, 1.0])
    np.testing.assert_array_equal(_numpy("(x >= 0) + (x <= 0)", x=x), [1.0, 2.0, 1.0])
    np.testing.assert_array_equal(_numpy("-(x == 0)", x=x), [-0.0, -1.0, -0.0])


def test_conditional_keeps_its_comparison_boolean() -> None:
    e = parse_expr("dout if x > 0 else alpha * dout", lambda n: True)
    assert e.cpp == "opgen::select((x > C(0.0)), C(dout), C((alpha * dout)))"
    assert e.numpy == "np.where((x > 0), dout, (alpha * dout))"
    x = np.array([-2.0, 3.0])
    np.testing.assert_array_equal(_numpy("dout if x > 0 else alpha * dout", x=x, dout=np.ones(2), alpha=0.25),
                                  [0.25, 1.0])
    # any value as the condition: true when non-zero (a bool attr, or a comparison value)
    np.testing.assert_array_equal(_numpy("x if flag else -x", x=x, flag=False), [2.0, -3.0])
    assert parse_expr("x if flag else -x", lambda n: True).cpp == "opgen::select(flag, C(x), C((-x)))"
    # an arm that may divide by zero is evaluated only when chosen
    assert parse_expr("x / y if y != 0 else x", lambda n: True).cpp.startswith("((y != C(0.0)) ? C(")


def test_chained_comparison_is_an_error_at_its_column() -> None:
    with pytest.raises(ExprError) as info:
        parse_expr("dout * (0 < x < 1)", lambda n: True)
    assert "chained comparisons" in str(info.value) and info.value.col == 9


@pytest.mark.parametrize(("text", "bound"), [
    ("x + y", True), ("dout * (x > 0)", True), ("dout if x > 0 else alpha * dout", True),
    ("maximum(x, y) - abs(x) / sign(y)", True), ("-x * 2.5", True),
    ("exp(x)", False), ("x ** 2", False), ("dout * sigmoid(x)", False), ("maximum(x, erf(y))", False),
])
def test_memory_bound_is_arithmetic_without_computing_functions(text: str, bound: bool) -> None:
    """Expr.memory_bound (the AVX2 cap of the generated loop, kernel.h kMemoryBoundIsa): only
    arithmetic, comparisons, if/else and abs/sign/maximum/minimum; any other function or ``**``
    computes."""
    assert parse_expr(text, lambda n: True).memory_bound is bound
