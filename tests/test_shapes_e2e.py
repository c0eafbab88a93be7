"""Shapes on real MindSpore: GRAPH_MODE with dynamic shape and dynamic rank through one compiled
graph (the aot library's InferShape), contracts on every path and mode, the new ops of the
shape language against MindSpore's builtins, and int64 overflow of shape arithmetic."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mindspore import Tensor, nn

from generated import opgen_ops as G


class _Op(nn.Cell):
    def __init__(self, fn: Any, **attrs: Any):
        super().__init__()
        self.fn = fn
        self.attrs = attrs

    def construct(self, *xs):  # type: ignore[no-untyped-def]
        return self.fn(*xs, **self.attrs)


def _numpy(result: Any) -> Any:
    """A graph's output as numpy: GRAPH_MODE hands a 0-d output of a graph back as a Python float."""
    return result.asnumpy() if isinstance(result, Tensor) else np.asarray(result, np.float32)


def _dynamic(ms: Any, cell: nn.Cell, n: int, rank: bool) -> nn.Cell:
    shape = None if rank else [None, None]
    cell.set_inputs(*[ms.Tensor(shape=shape, dtype=ms.float32) for _ in range(n)])
    return cell


@pytest.mark.parametrize("rank", [False, True], ids=["dynamic-shape", "dynamic-rank"])
def test_dynamic_graph_broadcast_same_reduce(ms: Any, rank: bool) -> None:
    """One compiled graph per op, called at two input shapes, forward and gradient."""
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        rng = np.random.default_rng(0)
        add = _dynamic(ms, _Op(G.add), 2, rank)
        relu = _dynamic(ms, _Op(G.relu), 1, rank)
        total = _dynamic(ms, _Op(G.reduce_sum, axis=[-1]), 1, rank)
        grad_add = ms.grad(add, grad_position=(0, 1))
        for shape in [(2, 3), (4, 5)]:
            a = rng.standard_normal(shape).astype(np.float32)
            b = rng.standard_normal((1, shape[1])).astype(np.float32)
            np.testing.assert_allclose(add(Tensor(a), Tensor(b)).asnumpy(), a + b, rtol=1e-6)
            da, db = grad_add(Tensor(a), Tensor(b))
            np.testing.assert_array_equal(da.asnumpy(), np.ones(shape, np.float32))
            np.testing.assert_array_equal(db.asnumpy(), np.full((1, shape[1]), shape[0], np.float32))
            np.testing.assert_array_equal(relu(Tensor(a)).asnumpy(), np.maximum(a, 0))
            np.testing.assert_allclose(total(Tensor(a)).asnumpy(), a.sum(-1), rtol=1e-5)
        if rank:  # another rank through the same graph
            c = rng.standard_normal((2, 3, 4)).astype(np.float32)
            np.testing.assert_array_equal(relu(Tensor(c)).asnumpy(), np.maximum(c, 0))
            np.testing.assert_allclose(total(Tensor(c)).asnumpy(), c.sum(-1), rtol=1e-5)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


def test_dynamic_graph_of_a_new_shape_expression(ms: Any) -> None:
    """swiglu's output halves the last axis: InferShape computes it from unknown dims."""
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        net = _dynamic(ms, _Op(G.swiglu), 1, rank=False)
        for shape in [(2, 4), (3, 6)]:
            x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
            h = shape[1] // 2
            a, b = x[:, :h], x[:, h:]
            np.testing.assert_allclose(net(Tensor(x)).asnumpy(), a / (1 + np.exp(-a)) * b, rtol=1e-5, atol=1e-6)
        # a contract undecided at compile time is checked when the real shapes are known
        with pytest.raises(RuntimeError, match=r"swiglu\(\): contract 'x.shape\[-1\] % 2 == 0' does not hold: "
                                               r"x has shape \(2, 5\)"):
            _dynamic(ms, _Op(G.swiglu), 1, rank=False)(Tensor(np.ones((2, 5), np.float32)))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


MISMATCH = "smooth_l1_loss(): contract 'target.shape == pred.shape' does not hold: pred has shape (2, 3), " \
           "target has shape (3,)"


def test_tied_inputs_custom_path(mode: str) -> None:
    pred, target = Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones(3, np.float32))
    with pytest.raises(ValueError) as info:
        _Op(G.smooth_l1_loss)(pred, target)
    assert MISMATCH in str(info.value)


def test_tied_inputs_function_path(ms: Any) -> None:
    from generated.opgen_ops import function as F

    with pytest.raises(ValueError) as info:
        F.smooth_l1_loss(Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones(3, np.float32)))
    assert str(info.value) == MISMATCH
    with pytest.raises(ValueError, match=r"rms_norm\(\): contract 'weight.shape == \[x.shape\[-1\]\]' does not hold: "
                                         r"x has shape \(2, 3\), weight has shape \(2,\)"):
        F.rms_norm(Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones(2, np.float32)))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_smooth_l1_loss_against_mindspore(ms: Any, mode: str, reduction: str) -> None:
    from generated.opgen_ops import function as F

    rng = np.random.default_rng(2)
    p, t = (Tensor(rng.standard_normal((3, 4)).astype(np.float32)) for _ in range(2))
    want = ms.ops.smooth_l1_loss(p, t, beta=0.5, reduction=reduction).asnumpy()
    got = _numpy(_Op(G.smooth_l1_loss, beta=0.5, reduction=reduction)(p, t))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if mode == "PYNATIVE":
        np.testing.assert_allclose(F.smooth_l1_loss(p, t, beta=0.5, reduction=reduction).asnumpy(), want,
                                   rtol=1e-5, atol=1e-6)


def test_topk_and_broadcast_to_against_mindspore(ms: Any, mode: str) -> None:
    rng = np.random.default_rng(3)
    x = Tensor(rng.standard_normal((2, 3, 6)).astype(np.float32))
    values, indices = _Op(G.topk, k=3)(x)
    want_v, want_i = ms.ops.topk(x, 3)
    np.testing.assert_array_equal(values.asnumpy(), want_v.asnumpy())
    np.testing.assert_array_equal(indices.asnumpy(), want_i.asnumpy())
    assert indices.dtype == ms.int64
    y = Tensor(rng.standard_normal((3, 1)).astype(np.float32))
    got = _Op(G.broadcast_to, shape=[2, 3, 4])(y)
    np.testing.assert_array_equal(got.asnumpy(), ms.ops.broadcast_to(y, (2, 3, 4)).asnumpy())
    with pytest.raises(ValueError, match=r"topk\(\): contract 'k <= x.shape\[-1\]' does not hold: "
                                         r"x has shape \(2, 3, 6\), k = 7"):
        _Op(G.topk, k=7)(x)
    with pytest.raises(ValueError, match=r"broadcast_to\(\): contract 'broadcast\(x, shape\) == shape' does not hold"):
        _Op(G.broadcast_to, shape=[2, 4])(y)


def test_shape_arithmetic_overflow_is_an_error(ms: Any) -> None:
    """Zero-size tensors whose joined axis exceeds int64 (issue 16, item 3), on both paths."""
    from generated.opgen_ops import function as F

    x = Tensor(np.zeros((2**60, 0), np.float32))  # numpy refuses larger dims for float32
    message = r"concat\(\): concat: the joined axis 0 would have more than 2\*\*63 - 1 entries"
    for n in (8, 12):
        with pytest.raises(ValueError, match=message):
            F.concat([x] * n)
        with pytest.raises(ValueError, match=message):
            G.concat([x] * n)
    y = Tensor(np.zeros((2**20, 0), np.float32))
    assert F.concat([y, y, y]).shape == (3 * 2**20, 0)


def test_output_element_count_overflow_is_an_error(ms: Any) -> None:
    from generated.opgen_ops import function as F

    with pytest.raises(ValueError, match=r"broadcast_to\(\): output 'out' would have shape \(1099511627776, "
                                         r"1099511627776\), more elements than int64 can count"):
        F.broadcast_to(Tensor(np.zeros((1, 1), np.float32)), shape=[2**40, 2**40])
    with pytest.raises(ValueError, match=r"broadcast_to\(\): output 'out' would have shape"):
        G.broadcast_to(Tensor(np.zeros((1, 1), np.float32)), shape=[2**40, 2**40])
