"""Helpers that generated Custom-path code runs *inside* MindSpore graphs (bprops).

GRAPH_MODE compiles these functions from their source, so they import MindSpore at module
level (no imports inside functions) and use only graph-safe Python. Kept apart from
:mod:`opgen.runtime`, which must import without MindSpore.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mindspore import Tensor, ops
from mindspore.common import dtype as mstype


def scatter_grads(flat: Sequence[Any], grads: Sequence[Any], pick: Sequence[int]) -> tuple[Any, ...]:
    """One gradient per flattened input: ``grads[pick[i]]``, or zeros where ``pick[i] < 0``
    (inputs that are not differentiable). Graph-mode safe (used inside generated bprops)."""
    out: tuple[Any, ...] = ()
    for i in range(len(pick)):
        if pick[i] >= 0:
            out = out + (grads[pick[i]],)
        else:
            out = out + (ops.zeros_like(flat[i]),)
    return out


def output_grads(outs: Sequence[Any], douts: Sequence[Any], differentiable: Sequence[bool]) -> tuple[Any, ...]:
    """The incoming gradients the backward kernel takes, one tensor per output: ``douts[i]``, or
    zeros like ``outs[i]`` for an output that is not differentiable (its gradient is never
    read) or whose gradient is ``None``. MindSpore hands such outputs odd gradients: ``None``
    in PyNative and an int64 scalar in GRAPH_MODE for a 0-d bool mask. Graph-mode safe."""
    res: tuple[Any, ...] = ()
    for i in range(len(outs)):
        if differentiable[i] and douts[i] is not None:
            res = res + (douts[i],)
        elif isinstance(outs[i], Tensor):
            res = res + (ops.zeros_like(outs[i]),)
        elif isinstance(outs[i], bool):  # GRAPH_MODE folds a 0-d bool output into a Python bool
            res = res + (ops.scalar_to_tensor(False, mstype.bool_),)
        else:
            res = res + (ops.zeros_like(ops.scalar_to_tensor(outs[i])),)
    return res


def bprop_for(n: int, impl: Any) -> Any:
    """A bprop with ``n`` explicit input parameters (+ ``out``, ``dout``) calling
    ``impl(inputs_tuple, out, dout)``.

    MindSpore's GRAPH_MODE needs a bprop's parameters spelled out (``*args`` is rejected), and a
    flattened dynamic input makes their number vary by call site, hence one adapter per arity.

    Raises:
        ValueError: for more than 16 flattened tensor inputs.
    """
    if not 1 <= n <= len(_BPROPS):
        raise ValueError(f"the Custom path takes 1 to {len(_BPROPS)} tensors per call, got {n}")
    return _BPROPS[n - 1](impl)


def _b1(f: Any) -> Any:
    def bprop(a, out, dout):  # type: ignore[no-untyped-def]
        return f((a,), out, dout)
    return bprop


def _b2(f: Any) -> Any:
    def bprop(a, b, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b), out, dout)
    return bprop


def _b3(f: Any) -> Any:
    def bprop(a, b, c, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c), out, dout)
    return bprop


def _b4(f: Any) -> Any:
    def bprop(a, b, c, d, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d), out, dout)
    return bprop


def _b5(f: Any) -> Any:
    def bprop(a, b, c, d, e, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e), out, dout)
    return bprop


def _b6(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g), out, dout)
    return bprop


def _b7(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h), out, dout)
    return bprop


def _b8(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i), out, dout)
    return bprop


def _b9(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j), out, dout)
    return bprop


def _b10(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k), out, dout)
    return bprop


def _b11(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, m, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k, m), out, dout)
    return bprop


def _b12(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, m, n, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k, m, n), out, dout)
    return bprop


def _b13(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, m, n, o, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k, m, n, o), out, dout)
    return bprop


def _b14(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, m, n, o, p, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k, m, n, o, p), out, dout)
    return bprop


def _b15(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, m, n, o, p, q, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k, m, n, o, p, q), out, dout)
    return bprop


def _b16(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, m, n, o, p, q, r, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k, m, n, o, p, q, r), out, dout)
    return bprop


_BPROPS = (_b1, _b2, _b3, _b4, _b5, _b6, _b7, _b8, _b9, _b10, _b11, _b12, _b13, _b14, _b15, _b16)
