"""Spec-language features end to end, with MindSpore's own custom-op test numbers.

Each feature is used by an op in ops/ and checked here on the generated code, on the Custom
(aot) path in GRAPH_MODE and PyNative and on the Function<T> path: attrs of every type
(scale_add: float + list[float]; reduce_sum: list[int] + bool; gelu: str with choices),
optional inputs (layer_norm's gamma/beta as None), dynamic inputs (concat), multi-output ops with
non-differentiable outputs (layer_norm's mean/rstd), non-differentiable inputs (where's bool
cond), matmul with transpose attrs. Numbers from MindSpore's tests/st/ops/graph_kernel/custom
aot tests (add_with_attr, reduce) and the bprop tutorial (square twice: [4, 256, 2916]).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mindspore import Tensor, nn

from generated import opgen_ops as G

RNG = np.random.default_rng(7)
X45 = RNG.standard_normal((4, 5)).astype(np.float32)
Y45 = RNG.standard_normal((4, 5)).astype(np.float32)


class _Call(nn.Cell):
    """``fn(*args, **kwargs)`` as a Cell, so GRAPH_MODE compiles it."""

    def __init__(self, fn: Any, **kwargs: Any):
        super().__init__()
        self.fn = fn
        self.kwargs = kwargs

    def construct(self, *args):  # type: ignore[no-untyped-def]
        return self.fn(*args, **self.kwargs)


@pytest.fixture(params=["custom-graph", "custom-pynative", "function"])
def path(request: pytest.FixtureRequest, ms) -> Any:  # type: ignore[no-untyped-def]
    """(functional API module, wrap) for each path; wrap(fn, **attrs) gives a callable."""
    if request.param == "function":
        ms.set_context(mode=ms.PYNATIVE_MODE)
        import generated.opgen_ops.function as F

        yield lambda fn, **kw: (lambda *a: getattr(F, fn)(*a, **kw))
    else:
        ms.set_context(mode=ms.GRAPH_MODE if request.param == "custom-graph" else ms.PYNATIVE_MODE)
        yield lambda fn, **kw: _Call(getattr(G, fn), **kw)
    ms.set_context(mode=ms.PYNATIVE_MODE)


def test_scale_add_with_attr_numbers(path: Any) -> None:
    """MindSpore's aot ``add_with_attr`` test: scale 0.7, paddings [2, 2] -> x + 1.4 y + 4."""
    out = path("scale_add", scale=0.7, paddings=[2.0, 2.0])(Tensor(X45), Tensor(Y45)).asnumpy()
    np.testing.assert_allclose(out, X45 + np.float32(0.7) * 2 * Y45 + 4, rtol=1e-6, atol=1e-6)


def test_reduce_sum_numbers(path: Any, ms) -> None:  # type: ignore[no-untyped-def]
    """MindSpore's aot ``reduce`` test: axis 1, keep_dims false on (4, 5) is np.sum(x, 1)."""
    out = path("reduce_sum", axis=[1], keep_dims=False)(Tensor(X45)).asnumpy()
    np.testing.assert_allclose(out, np.sum(X45, 1), rtol=1e-6)
    kept = path("reduce_sum", axis=[0, -1], keep_dims=True)(Tensor(X45)).asnumpy()
    assert kept.shape == (1, 1)
    np.testing.assert_allclose(kept, X45.sum(keepdims=True), rtol=1e-5)
    g = ms.grad(path("reduce_sum", axis=[1]))(Tensor(X45)).asnumpy()
    np.testing.assert_array_equal(g, np.ones_like(X45))


class _Twice(nn.Cell):
    def __init__(self, fn: Any):
        super().__init__()
        self.fn = fn

    def construct(self, x):  # type: ignore[no-untyped-def]
        return self.fn(self.fn(x))


def test_square_twice_grad_numbers(path: Any, ms) -> None:  # type: ignore[no-untyped-def]
    """The bprop tutorial: square(square(x)) at [1, 4, 9] has gradient 4 x^3 = [4, 256, 2916]."""
    dx = ms.grad(_Twice(path("square")))(Tensor(np.array([1.0, 4.0, 9.0], np.float32))).asnumpy()
    np.testing.assert_array_equal(dx, [4.0, 256.0, 2916.0])


def test_gelu_str_attr(path: Any) -> None:
    from math import erf

    x = np.linspace(-3, 3, 13).astype(np.float64)
    exact = path("gelu")(Tensor(x)).asnumpy()
    np.testing.assert_allclose(exact, [0.5 * v * (1 + erf(v / np.sqrt(2))) for v in x], rtol=1e-12, atol=1e-15)
    tanh = path("gelu", approximate="tanh")(Tensor(x)).asnumpy()
    np.testing.assert_allclose(tanh, 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
                               rtol=1e-12, atol=1e-15)
    assert np.abs(exact - tanh).max() > 1e-5  # the attr really reached the kernel


def test_gelu_rejects_an_unknown_choice(path: Any) -> None:
    with pytest.raises(ValueError, match=r"gelu\(\): attr 'approximate' = 'erf' is not one of"):
        path("gelu", approximate="erf")(Tensor(X45))


def _layer_norm(x: np.ndarray, gamma: np.ndarray | None, beta: np.ndarray | None, eps: float = 1e-5) -> Any:
    m = x.mean(-1, keepdims=True)
    s = 1 / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps)
    y = (x - m) * s
    return y * (1 if gamma is None else gamma) + (0 if beta is None else beta), m, s


@pytest.mark.parametrize("affine", [True, False], ids=["gamma-beta", "None-None"])
def test_layer_norm_optional_inputs_and_statistics(path: Any, affine: bool) -> None:
    x = RNG.standard_normal((3, 4))
    gamma, beta = (RNG.standard_normal(4), RNG.standard_normal(4)) if affine else (None, None)
    args = [Tensor(x)] + [Tensor(v) if v is not None else None for v in (gamma, beta)]
    y, mean, rstd = (t.asnumpy() for t in path("layer_norm", eps=1e-5)(*args))
    want = _layer_norm(x, gamma, beta)
    for got, exp in zip((y, mean, rstd), want):
        np.testing.assert_allclose(got, exp, rtol=1e-10, atol=1e-12)


def test_non_differentiable_outputs_give_zero_gradients(path: Any, ms) -> None:  # type: ignore[no-untyped-def]
    """Seed fact: a loss on outputs marked non-differentiable (mean, rstd) has zero gradients."""
    ln = path("layer_norm")

    def stats(x: Any) -> Any:
        _, mean, rstd = ln(x, None, None)
        return (mean * rstd).sum()

    g = ms.grad(stats)(Tensor(RNG.standard_normal((2, 3)))).asnumpy()
    np.testing.assert_array_equal(g, np.zeros((2, 3)))


def test_layer_norm_gradients_with_none_gamma(path: Any, ms) -> None:  # type: ignore[no-untyped-def]
    """d/dx sum(y * w) by central differences, gamma given, beta None."""
    x = RNG.standard_normal((2, 5))
    gamma = RNG.standard_normal(5)
    w = RNG.standard_normal((2, 5))
    ln = path("layer_norm")

    def loss(xt: Any, gt: Any) -> Any:
        return (ln(xt, gt, None)[0] * Tensor(w)).sum()

    gx, gg = (t.asnumpy() for t in ms.grad(loss, grad_position=(0, 1))(Tensor(x), Tensor(gamma)))

    def f(xv: np.ndarray, gv: np.ndarray) -> float:
        return float((_layer_norm(xv, gv, None)[0] * w).sum())

    h = 1e-6
    fx = np.array([(f(x + h * e, gamma) - f(x - h * e, gamma)) / (2 * h) for e in np.eye(10).reshape(10, 2, 5)])
    fg = np.array([(f(x, gamma + h * e) - f(x, gamma - h * e)) / (2 * h) for e in np.eye(5)])
    np.testing.assert_allclose(gx, fx.reshape(2, 5), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gg, fg, rtol=1e-6, atol=1e-8)


def test_where_bool_input_has_no_gradient(path: Any, ms) -> None:  # type: ignore[no-untyped-def]
    """A non-differentiable input (bool cond) gets no gradient; the others are still right."""
    cond = np.array([[True, False, True], [False, False, True]])
    x, y = RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal((3,)).astype(np.float32)
    fn = path("where")
    out = fn(Tensor(cond), Tensor(x), Tensor(y)).asnumpy()
    np.testing.assert_array_equal(out, np.where(cond, x, y))
    gx, gy = ms.grad(fn, grad_position=(1, 2))(Tensor(cond), Tensor(x), Tensor(y))
    np.testing.assert_array_equal(gx.asnumpy(), cond.astype(np.float32))
    np.testing.assert_array_equal(gy.asnumpy(), (~cond).sum(0).astype(np.float32))


@pytest.mark.parametrize("n", [1, 3])
def test_concat_dynamic_input(path: Any, ms, n: int) -> None:  # type: ignore[no-untyped-def]
    xs = [RNG.standard_normal((2, k + 1)).astype(np.float32) for k in range(n)]
    fn = path("concat", axis=1)
    out = fn([Tensor(a) for a in xs]).asnumpy()
    np.testing.assert_array_equal(out, np.concatenate(xs, axis=1))
    w = RNG.standard_normal(out.shape).astype(np.float32)

    def loss(*ts: Any) -> Any:
        return (fn(list(ts)) * Tensor(w)).sum()

    grads = ms.grad(loss, grad_position=tuple(range(n)))(*[Tensor(a) for a in xs])
    grads = grads if isinstance(grads, tuple) else (grads,)
    for g, piece in zip(grads, np.split(w, np.cumsum([a.shape[1] for a in xs])[:-1], axis=1)):
        np.testing.assert_array_equal(g.asnumpy(), piece)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_transpose_attrs(path: Any, ms, ta: bool, tb: bool) -> None:  # type: ignore[no-untyped-def]
    a = RNG.standard_normal((3, 2) if ta else (2, 3))
    b = RNG.standard_normal((4, 3) if tb else (3, 4))
    fn = path("matmul", transpose_a=ta, transpose_b=tb)
    out = fn(Tensor(a), Tensor(b)).asnumpy()
    A, B = (a.T if ta else a), (b.T if tb else b)
    np.testing.assert_allclose(out, A @ B, rtol=1e-12)
    ga, gb = ms.grad(fn, grad_position=(0, 1))(Tensor(a), Tensor(b))
    dA, dB = np.ones((2, 4)) @ B.T, A.T @ np.ones((2, 4))
    np.testing.assert_allclose(ga.asnumpy(), dA.T if ta else dA, rtol=1e-12)
    np.testing.assert_allclose(gb.asnumpy(), dB.T if tb else dB, rtol=1e-12)


def test_matmul_inner_dims_error_names_the_op(path: Any) -> None:
    with pytest.raises(ValueError, match=r"matmul\(\): matmul inner dimensions differ"):
        path("matmul")(Tensor(np.ones((2, 3))), Tensor(np.ones((2, 3))))
