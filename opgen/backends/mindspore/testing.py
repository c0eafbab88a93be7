"""``opgen test`` on MindSpore: the package's paths, run through ``ms.grad`` and Cells.

:class:`MindSporePackage` holds a generated package's ``custom`` module (the ``ops.Custom`` aot
path) and its ``function`` module (the ``Function<T>`` path, imported on first use: that builds
the extension); :class:`MindSporeRunner` runs one op on one path, forward and ``ms.grad``
gradients, in PyNative or GRAPH_MODE. The checks themselves are the neutral ones of
:mod:`opgen.testing`.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import mindspore as ms
import numpy as np
from mindspore import nn

from ...model import Op
from ...testing import BFLOAT16, Array, CheckError, OpRunner, Package, dtype_name, group, import_package, written_slots
from .facts import TARGET, TEST_PATHS

PATHS: tuple[str, ...] = tuple(TEST_PATHS)
"""The paths an op is checked on: ``custom-graph``, ``custom-pynative``, ``function`` (PyNative
only, as MindSpore allows)."""


def to_tensor(a: Array) -> ms.Tensor:
    """A check's numpy array as a tensor of its dtype (a copy): a :data:`~opgen.testing.BFLOAT16`
    array (float32 storage, bfloat16 values) as ``ms.bfloat16``, exactly."""
    if dtype_name(a) == "bfloat16":
        return ms.Tensor(np.asarray(a, dtype=np.float32), dtype=ms.bfloat16)
    return ms.Tensor(np.array(a, copy=True))


def to_array(t: Any) -> Array:
    """A tensor (or the Python scalar GRAPH_MODE gives for a 0-d output) as a check's numpy array:
    ``ms.bfloat16`` (whose ``asnumpy()`` is MindSpore's own numpy bfloat16 type) as a
    :data:`~opgen.testing.BFLOAT16` array."""
    a = t.asnumpy() if isinstance(t, ms.Tensor) else np.asarray(t)
    if a.dtype.name == "bfloat16":
        return a.astype(np.float32).astype(BFLOAT16)
    return a


class MindSporePackage(Package):
    """A generated MindSpore package under test: its ``custom`` and ``reference`` modules, and its
    ``function`` module imported on first use (that builds the extension)."""

    paths = PATHS
    target = TARGET

    def __init__(self, module: str, directory: Path):
        super().__init__(module, directory)
        self.custom: ModuleType = importlib.import_module(f"{module}.custom")
        self._function: ModuleType | None = None
        self._function_error: str | None = None

    def function(self) -> ModuleType:
        """The ``function`` module (imported, and the extension built, on first call).

        Raises:
            CheckError: the extension does not build or import (the same message every call).
        """
        if self._function is None and self._function_error is None:
            try:
                self._function = importlib.import_module(f"{self.module}.function")
            except Exception as exc:  # a build or import failure fails the function checks only
                self._function_error = f"cannot import {self.module}.function: {type(exc).__name__}: {exc}"
        if self._function is None:
            raise CheckError(self._function_error or "function path unavailable")
        return self._function

    def runner(self, op: Op, path: str, attrs: Mapping[str, Any]) -> OpRunner:
        return MindSporeRunner(self, op, path, attrs)


def load(pkg_dir: Path) -> MindSporePackage:
    """Import the generated MindSpore package in ``pkg_dir`` for testing (importing builds its aot
    library when stale).

    Raises:
        opgen.build.BuildError: the aot kernels do not compile.
        FileNotFoundError: ``pkg_dir`` holds no generated package.
    """
    pkg_dir = pkg_dir.resolve()
    if not (pkg_dir / "custom.py").is_file() or not (pkg_dir / "__init__.py").is_file():
        raise FileNotFoundError(f"{pkg_dir} is not a generated package (no __init__.py/custom.py)")
    return MindSporePackage(import_package(pkg_dir), pkg_dir)


class _Call(nn.Cell):  # type: ignore[misc]
    """The op's functional API applied to flat tensors (one per slot, see :class:`Case`),
    regrouped per input; usable in GRAPH_MODE (the loop unrolls over constant kinds/layout)."""

    def __init__(self, fn: Any, attrs: Mapping[str, Any], kinds: tuple[str, ...], layout: tuple[int, ...]):
        super().__init__()
        self.fn = fn
        self.attrs = dict(attrs)
        self.kinds = kinds
        self.layout = layout

    def call(self, flat):  # type: ignore[no-untyped-def]
        args = ()
        p = 0
        for i in range(len(self.kinds)):
            n = self.layout[i]
            if self.kinds[i] == "dynamic":
                args = args + (flat[p:p + n],)  # type: ignore[assignment]
            elif n == 0:
                args = args + (None,)  # type: ignore[assignment]
            else:
                args = args + (flat[p],)  # type: ignore[assignment]
            p = p + n
        return self.fn(*args, **self.attrs)

    def construct(self, *flat):  # type: ignore[no-untyped-def]
        return self.call(flat)  # type: ignore[no-untyped-call]


class _Loss(_Call):
    """``sum_k sum(out_k * w_k)`` over the differentiable outputs; the ``w_k`` follow the ``n_in``
    flat input tensors."""

    def __init__(self, fn: Any, attrs: Mapping[str, Any], kinds: tuple[str, ...], layout: tuple[int, ...],
                 n_in: int, pairs: tuple[tuple[int, int], ...], single: bool):
        super().__init__(fn, attrs, kinds, layout)
        self.n_in = n_in
        self.pairs = pairs
        self.single = single

    def construct(self, *args):  # type: ignore[no-untyped-def]
        outs = self.call(args[: self.n_in])  # type: ignore[no-untyped-call]
        if self.single:
            outs = (outs,)
        loss = 0.0
        for i, j in self.pairs:
            # summed in float64: MindSpore's CPU ReduceSum has no bfloat16 kernel ("Reduce does not
            # support this kernel data type"); the gradient reaching out_k is w_k either way
            loss = loss + (outs[i] * args[j]).astype(ms.float64).sum()
        return loss


@contextlib.contextmanager
def _mode(graph: bool) -> Iterator[None]:
    old = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE if graph else ms.PYNATIVE_MODE)
    try:
        yield
    finally:
        ms.set_context(mode=old)


class MindSporeRunner(OpRunner):
    """Runs one op on one MindSpore path (see :data:`PATHS`) through its functional API: as a
    user calls it, in the path's mode (GRAPH_MODE through a Cell for ``custom-graph``)."""

    grad_api: ClassVar[str] = "ms.grad"

    def __init__(self, pkg: MindSporePackage, op: Op, path: str, attrs: Mapping[str, Any]):
        super().__init__(op, path, attrs)
        self.pkg = pkg
        self.graph = path == "custom-graph"
        if path == "custom-graph":  # a graph compiles the Custom path of the public op
            self.fn: Any = getattr(pkg.custom, op.name)
        elif path == "custom-pynative":  # what the public op runs in PyNative without the Function<T> path
            self.fn = getattr(pkg.custom, f"_{op.name}_custom")
        elif path == "function":
            self.fn = getattr(pkg.function(), op.name)
        else:
            raise CheckError(f"unknown path '{path}'; expected one of {', '.join(PATHS)}")

    def finite_differences_runner(self) -> OpRunner:
        """The PyNative twin of the graph path (the same kernels; no graph compile per call)."""
        return MindSporeRunner(self.pkg, self.op, "custom-pynative", self.attrs) if self.graph else self

    def _outs(self, result: Any) -> list[Array]:
        items = list(result) if isinstance(result, (tuple, list)) else [result]
        # GRAPH_MODE hands a 0-d bool output back as a Python bool, not a Tensor
        return [to_array(t) for t in items]

    def forward(self, arrays: Sequence[Array], layout: Sequence[int]) -> list[Array]:
        """The op's outputs for the flat ``arrays``, then the inputs it writes in place and returns
        not (``writes: true``), after the call."""
        tensors = [to_tensor(a) for a in arrays]  # copies: the op may write them in place
        with _mode(self.graph):
            if self.graph:
                result = _Call(self.fn, self.attrs, self.kinds, tuple(layout))(*tensors)
            else:
                result = self.fn(*group(self.op, tensors, layout), **self.attrs)
            outs = self._outs(result) if self.op.outputs else []
            return outs + [to_array(tensors[slot]) for _, slot in written_slots(self.op, layout)]

    def grads(self, arrays: Sequence[Array], weights: Sequence[Array], layout: Sequence[int],
              positions: Sequence[int]) -> list[Array]:
        """Gradients of ``sum_k sum(out_k * weights[k])`` for the flat slots ``positions`` (``ms.grad``)."""
        n_in = len(arrays)
        pairs = tuple((k, n_in + j) for j, k in enumerate(self.diff_out))
        loss = _Loss(self.fn, self.attrs, self.kinds, tuple(layout), n_in, pairs, len(self.op.outputs) == 1)
        tensors = [to_tensor(a) for a in list(arrays) + list(weights)]
        with _mode(self.graph):
            result = ms.grad(loss, grad_position=tuple(positions))(*tensors)
            return self._outs(result)
