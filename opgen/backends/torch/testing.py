"""``opgen test`` on PyTorch: the package's ops eager and under ``torch.compile``, with autograd.

:class:`TorchPackage` holds a generated torch package (importing it builds and loads its operator
library; with ``OPGEN_CHECK=1`` the checked variant); :class:`TorchRunner` runs one op on one path,
forward and ``torch.autograd.grad`` gradients:

- ``eager``: the package's documented function, called as a user calls it.
- ``compiled``: the same function under ``torch.compile(fullgraph=True, dynamic=True)`` (one
  compiled function per op and attr set; the fake kernel gives the output shapes, AOTAutograd the
  backward). Dynamo wraps an error the op raises while tracing (its fake kernel's ``ValueError``,
  a ``TypeError`` for a dtype outside the rows) in its own exception; the runner raises the op's
  original error, which Dynamo keeps as the ``__cause__``, so the ``dtypes`` and ``contracts``
  checks see what eager raises.
- ``eager-cuda``, ``compiled-cuda`` (``opgen test --device cuda``): the same on CUDA tensors
  (the inputs copied to the current GPU, the outputs and gradients back), the ``GPU`` rows, the
  CUDA dispatch key's kernels; ``n/a`` for an op without ``GPU`` rows.

The checks themselves are the neutral ones of :mod:`opgen.testing`.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from ...model import Op
from ...testing import BFLOAT16, Array, CheckError, OpRunner, Package, dtype_name, group, import_package, written_slots
from . import facts

PATHS: tuple[str, ...] = tuple(facts.TEST_PATHS)
"""The paths an op is checked on: ``eager`` and ``compiled``."""
CUDA_PATHS: tuple[str, ...] = tuple(facts.DEVICE_TEST_PATHS["cuda"])
"""The same paths on CUDA tensors (``opgen test --device cuda``): ``eager-cuda``, ``compiled-cuda``."""

RECOMPILE_LIMIT = 256
"""Dynamo's recompile limit while testing one op: each dtype row, attr set and 0-d/0-size/1-size
shape style is a graph of its own (guards on dtype and on sizes 0 and 1), more than the default 8
(past which ``fullgraph=True`` fails with ``FailOnRecompileLimitHit``)."""


def to_tensor(a: Array) -> torch.Tensor:
    """A check's numpy array as a tensor of its dtype (a copy): a :data:`~opgen.testing.BFLOAT16`
    array (float32 storage, bfloat16 values) as ``torch.bfloat16``, exactly."""
    t = torch.from_numpy(np.array(a, copy=True))
    return t.to(torch.bfloat16) if dtype_name(a) == "bfloat16" else t


def to_array(t: torch.Tensor) -> Array:
    """A tensor as a check's numpy array: ``torch.bfloat16`` as a :data:`~opgen.testing.BFLOAT16`
    array (numpy has no bfloat16; every bfloat16 value is exact in float32)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.to(torch.float32).numpy().astype(BFLOAT16)
    return t.numpy()


class TorchPackage(Package):
    """A generated PyTorch package under test: the package module itself (its documented functions)
    and its ``reference`` module."""

    paths = PATHS
    device_paths = CUDA_PATHS
    target = facts.TARGET
    float_attr = facts.FLOAT_ATTR

    def __init__(self, module: str, directory: Path):
        super().__init__(module, directory)
        self.ops: Any = importlib.import_module(module)

    def runner(self, op: Op, path: str, attrs: Mapping[str, Any]) -> OpRunner:
        return TorchRunner(self, op, path, attrs)

    def target_of(self, path: str) -> str:
        return "GPU" if path in CUDA_PATHS else self.target


def load(pkg_dir: Path) -> TorchPackage:
    """Import the generated PyTorch package in ``pkg_dir`` for testing (importing builds its
    operator library when stale).

    Raises:
        opgen.build.BuildError: the kernels do not compile.
        FileNotFoundError: ``pkg_dir`` holds no generated torch package.
    """
    pkg_dir = pkg_dir.resolve()
    if not facts.owns(pkg_dir):
        raise FileNotFoundError(f"{pkg_dir} is not a generated PyTorch package (no __init__.py, csrc/*_torch.cc)")
    return TorchPackage(import_package(pkg_dir), pkg_dir)


_CODES: dict[str, types.CodeType] = {}


def _per_op(fn: Callable[..., Any], op: str) -> Callable[..., Any]:
    """``fn`` with a code object of its own per op (the same one for every runner of ``op``).
    Dynamo counts graphs against the recompile limit per code object: with one code object for
    every op, a whole ops/ run hit the limit at the 8th op (``FailOnRecompileLimitHit`` on every
    later compiled check); a reset per runner instead recompiled every runner's graphs (the
    cross-framework test, a runner per case: 322 s instead of ~70 s)."""
    code = _CODES.setdefault(op, fn.__code__.replace(co_name=f"opgen_test_{op}"))
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)


def _original(exc: BaseException) -> BaseException:
    """The op's own TypeError/ValueError: from a fake kernel, passed on by Dynamo
    (:func:`opgen.runtime.pytorch.traced`, without the text Dynamo appends), or behind a
    Dynamo error (an attr check in the traced wrapper: its ``__cause__`` chain, or the
    exception it was raised while handling: Dynamo's ``TorchRuntimeError`` comes from its
    ``Unsupported`` whose cause is the op's error), else ``exc``."""
    seen: BaseException | None = exc
    for _ in range(16):  # a chain is short; a cycle is not followed
        if seen is None:
            break
        message = getattr(seen, "op_message", None)  # runtime.traced(): the op's error as Dynamo passed it on
        if message is not None:
            return (ValueError if isinstance(seen, ValueError) else TypeError)(message)
        if isinstance(seen, (TypeError, ValueError)) and not type(seen).__module__.startswith("torch"):
            return seen
        seen = seen.__cause__ or seen.__context__
    return exc


class TorchRunner(OpRunner):
    """Runs one op on one PyTorch path (see :data:`PATHS`) through the package's function."""

    grad_api: ClassVar[str] = "torch.autograd.grad"

    def __init__(self, pkg: TorchPackage, op: Op, path: str, attrs: Mapping[str, Any]):
        super().__init__(op, path, attrs)
        self.pkg = pkg
        self.device = torch.device("cpu")
        if path in CUDA_PATHS:
            if not torch.cuda.is_available():
                raise CheckError(f"path '{path}' needs a CUDA device; torch {torch.__version__} sees none "
                                 f"(torch.version.cuda: {torch.version.cuda})")
            self.device = torch.device("cuda")
            path = path[: -len("-cuda")]
        fn = getattr(pkg.ops, op.name)
        fixed = dict(attrs)

        def call(layout: tuple[int, ...], *flat: torch.Tensor) -> Any:
            return fn(*group(op, list(flat), layout), **fixed)

        if path == "eager":
            self.call: Callable[..., Any] = call
        elif path == "compiled":
            dynamo = importlib.import_module("torch._dynamo")
            dynamo.config.recompile_limit = max(dynamo.config.recompile_limit, RECOMPILE_LIMIT)
            dynamo.config.accumulated_recompile_limit = max(
                dynamo.config.accumulated_recompile_limit, 4 * RECOMPILE_LIMIT)
            self.call = torch.compile(_per_op(call, op.name), fullgraph=True, dynamic=True)
        else:
            raise CheckError(f"unknown path '{path}'; expected one of {', '.join(PATHS + CUDA_PATHS)}")

    def finite_differences_runner(self) -> OpRunner:
        """The eager twin of the compiled path (the same kernels; no compile per perturbed input)."""
        if self.path in ("compiled", "compiled-cuda"):
            return TorchRunner(self.pkg, self.op, self.path.replace("compiled", "eager"), self.attrs)
        return self

    def _run(self, tensors: Sequence[torch.Tensor], layout: Sequence[int]) -> list[torch.Tensor]:
        try:
            result = self.call(tuple(layout), *tensors)
        except Exception as exc:
            original = _original(exc)
            if original is exc:
                raise
            raise original from exc
        return list(result) if isinstance(result, (tuple, list)) else [result]

    def forward(self, arrays: Sequence[Array], layout: Sequence[int]) -> list[Array]:
        """The op's outputs for the flat ``arrays``, then the inputs it writes in place and returns
        not (``writes: true``), after the call."""
        tensors = [to_tensor(a).to(self.device) for a in arrays]
        with torch.no_grad():
            outs = self._run(tensors, layout)
            return ([to_array(t.cpu()) for t in (outs if self.op.outputs else [])]
                    + [to_array(tensors[slot].cpu()) for _, slot in written_slots(self.op, layout)])

    def grads(self, arrays: Sequence[Array], weights: Sequence[Array], layout: Sequence[int],
              positions: Sequence[int]) -> list[Array]:
        """Gradients of ``sum_k sum(out_k * weights[k])`` for the flat slots ``positions``
        (``torch.autograd.grad``; an input the loss does not reach gets zeros)."""
        tensors = [to_tensor(a).to(self.device) for a in arrays]
        for p in positions:
            tensors[p].requires_grad_(True)
        outs = self._run(tensors, layout)
        loss = sum(((outs[k] * to_tensor(w).to(self.device)).sum() for k, w in zip(self.diff_out, weights)),
                   torch.zeros((), dtype=torch.float64, device=self.device))
        wanted = [tensors[p] for p in positions]
        if not loss.requires_grad:  # no gradient flows through the op: zeros, as the framework's grad gives
            return [to_array(torch.zeros_like(t).cpu()) for t in wanted]
        got = torch.autograd.grad(loss, wanted, allow_unused=True)
        if self.device.type == "cuda" and any(g is not None and g.device != self.device for g in got):
            raise CheckError("a gradient came back on another device than the forward's")
        return [to_array((torch.zeros_like(t) if g is None else g).cpu()) for t, g in zip(wanted, got)]
