"""The Function<T> path (compiled pybind11 extension) on real MindSpore, PyNative.

Numbers come from the pyboost tutorial in shared/seeds (op_custom_pyboost_en.md) and numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn


@pytest.fixture(scope="module")
def F(ms):  # type: ignore[no-untyped-def]
    ms.set_context(mode=ms.PYNATIVE_MODE)
    from generated.opgen_ops import function

    return function


def test_pyboost_seed(F, ms) -> None:  # type: ignore[no-untyped-def]
    class MyNet(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.p = Parameter(2.0, requires_grad=True)

        def construct(self, x, y):  # type: ignore[no-untyped-def]
            z = F.mul(x, y)
            return F.mul(z, self.p)

    x = Tensor(1.0, ms.float32) * 2
    y = Tensor(1.0, ms.float32) * 3
    net = MyNet()
    out, grads = ms.value_and_grad(net, grad_position=(0, 1), weights=net.trainable_params())(x, y)
    assert float(out.asnumpy()) == 12.0
    (gx, gy), (gp,) = grads
    assert (float(gx.asnumpy()), float(gy.asnumpy())) == (6.0, 4.0)
    assert float(gp.asnumpy()) == 6.0
    assert gx.shape == () and gp.shape == ()


def test_mul_broadcast_forward_and_grads(F, ms) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = rng.standard_normal((3,)).astype(np.float32)
    np.testing.assert_allclose(F.mul(Tensor(x), Tensor(y)).asnumpy(), x * y, rtol=1e-6)
    gx, gy = ms.grad(F.mul, grad_position=(0, 1))(Tensor(x), Tensor(y))
    assert gx.shape == (2, 3) and gy.shape == (3,)
    np.testing.assert_allclose(gx.asnumpy(), np.broadcast_to(y, (2, 3)), rtol=1e-6)
    np.testing.assert_allclose(gy.asnumpy(), x.sum(axis=0), rtol=1e-6)


def test_square_grad_seed(F, ms) -> None:  # type: ignore[no-untyped-def]
    x = Tensor(np.array([1.0, 4.0, 9.0], np.float32))
    np.testing.assert_array_equal(F.square(x).asnumpy(), [1.0, 16.0, 81.0])
    np.testing.assert_array_equal(ms.grad(F.square)(x).asnumpy(), [2.0, 8.0, 18.0])
    twice = ms.grad(lambda t: F.square(F.square(t)))(x).asnumpy()
    np.testing.assert_array_equal(twice, [4.0, 256.0, 2916.0])


def test_add_rows_and_grad(F, ms) -> None:  # type: ignore[no-untyped-def]
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    b = np.ones((2, 1))
    out = F.add(Tensor(a), Tensor(b)).asnumpy()
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, a + b)
    ga, gb = ms.grad(F.add, grad_position=(0, 1))(Tensor(a), Tensor(b))
    np.testing.assert_array_equal(ga.asnumpy(), np.ones((2, 3)))
    np.testing.assert_array_equal(gb.asnumpy(), np.full((2, 1), 3.0))
    ai = np.arange(4, dtype=np.int32)
    np.testing.assert_array_equal(F.add(Tensor(ai), Tensor(ai)).asnumpy(), ai * 2)


def test_unsupported_dtype_is_a_type_error(F, ms) -> None:  # type: ignore[no-untyped-def]
    x = Tensor(np.ones(3, np.int16))  # float16 and bfloat16 are rows of mul
    with pytest.raises(TypeError) as info:
        F.mul(x, x)
    msg = str(info.value)
    assert "mul()" in msg and "x=int16" in msg and "(x=float32, y=float32, out=float32)" in msg


def test_incompatible_broadcast_is_a_value_error(F) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError) as info:
        F.mul(Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones((4,), np.float32)))
    assert "mul()" in str(info.value) and "(2, 3) (4,)" in str(info.value)


def test_attr_checks_are_cached_but_never_skipped(F, ms) -> None:  # type: ignore[no-untyped-def]
    """The wrapper checks an attr tuple once and then only compares objects or keys; a value
    equal to a checked one but of another type (True == 1), or a list mutated since, is still
    checked."""
    from generated.opgen_ops import custom

    x = Tensor(np.array([-1.0, 0.5, 2.0], np.float32))
    for path in (F, custom):
        for _ in range(2):  # the second round runs from the caches
            np.testing.assert_array_equal(path.clip(x, 0, 1).asnumpy(), [0.0, 0.5, 1.0])
            with pytest.raises(TypeError, match="attr 'min' must be a float"):
                path.clip(x, True, 1)
            with pytest.raises(TypeError, match="attr 'approximate' must be a str"):
                path.gelu(x, ["tanh"])  # unhashable: checked in full
        axis = [0]
        np.testing.assert_allclose(path.reduce_sum(x, axis).asnumpy(), 1.5)
        axis[0] = 5  # the same list object, now out of range
        with pytest.raises(ValueError, match="out of range|outside"):
            path.reduce_sum(x, axis)
        # list attrs are remembered by value (axis == a copy of the last): elements equal to checked ones
        # but of another type are still refused (on the Function path by the extension itself)
        x2 = Tensor(np.ones((2, 3), np.float32))
        for _ in range(2):
            np.testing.assert_allclose(path.reduce_sum(x2, [1]).asnumpy(), [3.0, 3.0])
            np.testing.assert_allclose(path.reduce_sum(x2, (1,)).asnumpy(), [3.0, 3.0])
            np.testing.assert_allclose(path.reduce_sum(x2, [np.int64(1)]).asnumpy(), [3.0, 3.0])
            with pytest.raises(TypeError, match=r"reduce_sum\(\): attr 'axis' must be a list\[int\], got bool True"):
                path.reduce_sum(x2, [True])
            with pytest.raises(TypeError, match=r"reduce_sum\(\): attr 'axis' must be a list\[int\], got float 1.0"):
                path.reduce_sum(x2, [1.0])
            np.testing.assert_allclose(path.reduce_sum(x2, [0]).asnumpy(), [2.0, 2.0, 2.0])
            with pytest.raises(TypeError, match="reduce_sum"):
                path.reduce_sum(x2, 1)
            y = Tensor(np.ones((2, 3), np.float32))
            np.testing.assert_allclose(path.scale_add(x2, y, 1.0, [1.0]).asnumpy(), np.full((2, 3), 3.0))
            with pytest.raises(TypeError, match=r"scale_add\(\): attr 'paddings' must be a list\[float\], got bool"):
                path.scale_add(x2, y, 1.0, [True])
            # elements outside int64 / float32: the extension's own check on the Function path
            # (a list attr without range or choices is not checked in Python there), the same words
            with pytest.raises(ValueError, match=r"reduce_sum\(\): attr 'axis' = 36893488147419103232 does not "
                                                 r"fit an int attr \(int64"):
                path.reduce_sum(x2, [1, 2**65])
            with pytest.raises(ValueError, match=r"scale_add\(\): attr 'paddings' = 1e\+39 does not fit a float attr"):
                path.scale_add(x2, y, 1.0, [1e39])
            np.testing.assert_allclose(path.scale_add(x2, y, 1.0, [float("inf")]).asnumpy().shape, (2, 3))


def test_grad_views_are_views_of_dout_with_the_right_values(F, ms) -> None:  # type: ignore[no-untyped-def]
    """concat and reduce_sum declare kernel.grad_views: their Function<T> Backward returns slices
    / a broadcast of dout (MindSpore view ops, no kernel, no copy), as MindSpore's own bprops do.
    The values match numpy, a weighted dout reaches each slice, and the views feed later ops."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    w = rng.standard_normal((3, 6)).astype(np.float32)
    ga, gb = ms.grad(lambda p, q: F.mul(F.concat([p, q], axis=1), Tensor(w)), grad_position=(0, 1))(
        Tensor(a), Tensor(b))
    np.testing.assert_array_equal(ga.asnumpy(), w[:, :2])
    np.testing.assert_array_equal(gb.asnumpy(), w[:, 2:])
    ones = ms.grad(lambda p, q: F.concat([p, q], axis=-1), grad_position=(0, 1))(Tensor(a), Tensor(b))
    assert [g.shape for g in ones] == [(3, 2), (3, 4)]
    assert not ones[0].is_contiguous() and not ones[1].is_contiguous()  # columns of dout: views
    np.testing.assert_array_equal(F.square(ones[1]).asnumpy(), np.ones((3, 4), np.float32))

    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    v = rng.standard_normal((2, 4)).astype(np.float32)
    for keep in (False, True):
        wv = v[:, None, :] if keep else v
        gx = ms.grad(lambda t, k=keep, w=wv: F.mul(F.reduce_sum(t, [1], k), Tensor(w)))(Tensor(x))
        assert gx.shape == (2, 3, 4) and not gx.is_contiguous()  # dout broadcast with stride 0
        np.testing.assert_array_equal(gx.asnumpy(), np.broadcast_to(v[:, None, :], (2, 3, 4)))
        np.testing.assert_array_equal(F.add(gx, gx).asnumpy(), 2 * np.broadcast_to(v[:, None, :], (2, 3, 4)))
    g_all = ms.grad(lambda t: F.mul(F.reduce_sum(t), Tensor(np.float32(3.0))))(Tensor(x))
    np.testing.assert_array_equal(g_all.asnumpy(), np.full((2, 3, 4), 3.0, np.float32))
    g64 = ms.grad(lambda t: F.reduce_sum(t, [0]))(Tensor(x.astype(np.float64)))
    assert g64.dtype == ms.float64
    np.testing.assert_array_equal(g64.asnumpy(), np.ones((2, 3, 4)))
