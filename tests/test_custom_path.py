"""The Custom (aot) path of the generated package, on real MindSpore, in both modes.

Numbers come from the MindSpore tutorials in shared/seeds (custom_operator_custom_r1.6_zh.md,
op_custom_adv_r2.2_en.md) and from numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from mindspore import Tensor, nn

from generated import opgen_ops as G
from generated.opgen_ops import reference as R


class _Add(nn.Cell):
    def construct(self, x, y):  # type: ignore[no-untyped-def]
        return G.add(x, y)


class _Square(nn.Cell):
    def construct(self, x):  # type: ignore[no-untyped-def]
        return G.square(x)


class _SquareTwice(nn.Cell):
    def construct(self, x):  # type: ignore[no-untyped-def]
        return G.square(G.square(x))


class _Mul(nn.Cell):
    def construct(self, x, y):  # type: ignore[no-untyped-def]
        return G.mul(x, y)


def test_add_seed(mode: str) -> None:
    x0 = np.array([[0.0, 0.0], [1.0, 1.0]], np.float32)
    x1 = np.array([[2.0, 2.0], [3.0, 3.0]], np.float32)
    out = _Add()(Tensor(x0), Tensor(x1)).asnumpy()
    np.testing.assert_array_equal(out, [[2.0, 2.0], [4.0, 4.0]])
    assert out.dtype == np.float32


def test_square_grad_seed(mode: str, ms) -> None:  # type: ignore[no-untyped-def]
    dx = ms.grad(_Square())(Tensor(np.array([1.0, 4.0, 9.0], np.float32))).asnumpy()
    np.testing.assert_array_equal(dx, [2.0, 8.0, 18.0])


def test_square_twice_grad(mode: str, ms) -> None:  # type: ignore[no-untyped-def]
    dx = ms.grad(_SquareTwice())(Tensor(np.array([1.0, 4.0, 9.0], np.float32))).asnumpy()
    np.testing.assert_array_equal(dx, [4.0, 256.0, 2916.0])


def test_mul_broadcast_forward_and_grads(mode: str, ms) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = rng.standard_normal((3,)).astype(np.float32)
    out = _Mul()(Tensor(x), Tensor(y)).asnumpy()
    np.testing.assert_allclose(out, x * y, rtol=1e-6)
    gx, gy = ms.grad(_Mul(), grad_position=(0, 1))(Tensor(x), Tensor(y))
    assert gx.shape == (2, 3) and gy.shape == (3,)
    np.testing.assert_allclose(gx.asnumpy(), np.broadcast_to(y, (2, 3)), rtol=1e-6)
    np.testing.assert_allclose(gy.asnumpy(), x.sum(axis=0), rtol=1e-6)
    # the generated numpy reference agrees with the hand-written numpy above
    rx, ry = R.mul_grad(x, y, x * y, np.ones((2, 3), np.float32))
    np.testing.assert_allclose(rx, gx.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(ry, gy.asnumpy(), rtol=1e-6)


def test_add_float64_and_int32_rows(mode: str) -> None:
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    b = np.array([0.5, 1.5, 2.5])
    out = _Add()(Tensor(a), Tensor(b)).asnumpy()
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, a + b)
    ai = np.arange(6, dtype=np.int32).reshape(2, 3)
    outi = _Add()(Tensor(ai), Tensor(ai)).asnumpy()
    assert outi.dtype == np.int32
    np.testing.assert_array_equal(outi, ai * 2)


def test_incompatible_broadcast_names_the_op(ms) -> None:  # type: ignore[no-untyped-def]
    ms.set_context(mode=ms.PYNATIVE_MODE)
    with pytest.raises(ValueError) as info:
        G.mul(Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones((4,), np.float32)))
    assert "mul(): shapes cannot be broadcast together: (2, 3) (4,)" in str(info.value)


def test_calls_in_turn_each_get_their_own_primitive(ms) -> None:  # type: ignore[no-untyped-def]
    """The wrapper reuses the last call's primitive only for an equal call: alternating attrs,
    dtypes and shapes each give their own result, and a bad call after a good one is checked."""
    ms.set_context(mode=ms.PYNATIVE_MODE)
    x = np.array([-2.0, -1.0, 0.5, 3.0], np.float32)
    for _ in range(2):
        for alpha in (0.1, 0.2, 0.1):
            got = G.leaky_relu(Tensor(x), alpha).asnumpy()
            np.testing.assert_allclose(got, np.where(x > 0, x, np.float32(alpha) * x), rtol=1e-6)
        for arr in (x, x.astype(np.float64), x.reshape(2, 2)):
            got = G.leaky_relu(Tensor(arr), 0.1).asnumpy()
            assert got.dtype == arr.dtype and got.shape == arr.shape
            np.testing.assert_allclose(got, np.where(arr > 0, arr, 0.1 * arr), rtol=1e-6)
    with pytest.raises(TypeError, match="leaky_relu.*alpha"):
        G.leaky_relu(Tensor(x), "0.1")
    with pytest.raises(TypeError, match="leaky_relu"):
        G.leaky_relu(Tensor(x.astype(np.int32)), 0.1)


class _Concat0(nn.Cell):
    def construct(self, p, q):  # type: ignore[no-untyped-def]
        return G.concat([p, q], axis=0)


class _ConcatWeighted(nn.Cell):
    def __init__(self, w: np.ndarray) -> None:
        super().__init__()
        self.w = Tensor(w)

    def construct(self, p, q):  # type: ignore[no-untyped-def]
        return G.mul(G.concat([p, q], axis=1), self.w)


class _SumWeighted(nn.Cell):
    def __init__(self, v: np.ndarray, keep: bool) -> None:
        super().__init__()
        self.v = Tensor(v)
        self.keep = keep

    def construct(self, t):  # type: ignore[no-untyped-def]
        return G.mul(G.reduce_sum(t, [-2], self.keep), self.v)


def test_grad_views(mode: str, ms) -> None:  # type: ignore[no-untyped-def]
    """concat and reduce_sum declare kernel.grad_views: in PyNative the bprop returns slices / a
    broadcast of dout (MindSpore view ops: no kernel, no copy); a graph runs the backward kernel.
    Same values either way."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    w = rng.standard_normal((3, 6)).astype(np.float32)
    ga, gb = ms.grad(_ConcatWeighted(w), grad_position=(0, 1))(Tensor(a), Tensor(b))
    np.testing.assert_array_equal(ga.asnumpy(), w[:, :2])
    np.testing.assert_array_equal(gb.asnumpy(), w[:, 2:])
    assert ga.is_contiguous() == (mode == "GRAPH")  # PyNative: columns of dout, a view
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    v = rng.standard_normal((2, 4)).astype(np.float32)
    for keep in (False, True):
        gx = ms.grad(_SumWeighted(v[:, None, :] if keep else v, keep))(Tensor(x))
        np.testing.assert_array_equal(gx.asnumpy(), np.broadcast_to(v[:, None, :], (2, 3, 4)))
        assert gx.is_contiguous() == (mode == "GRAPH")  # PyNative: dout broadcast with stride 0
    e = np.zeros((0, 2), np.float32)  # an empty input: its gradient is empty, the others slices
    ge, ga = ms.grad(_Concat0(), grad_position=(0, 1))(Tensor(e), Tensor(a))
    assert ge.shape == (0, 2)
    np.testing.assert_array_equal(ga.asnumpy(), np.ones((3, 2), np.float32))
