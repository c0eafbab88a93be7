"""Issue 33's conventions, on the committed packages of ops/ (generated/opgen_ops and
generated/opgen_ops_torch, as tests/test_ops.py and tests/test_torch_backend.py build them):

- one answer per question: a reduction with no identity (reduce_max) over an axis of size 0
  raises the op's ValueError on every path of both frameworks, exactly where numpy.amax and
  torch.amax raise; a tensor with no elements reduced over non-empty axes is an empty result;
- scratch memory proportional to the answer: topk over one long row keeps k candidates, not an
  index per entry of the row (peak memory of a child process, measured around one call);
- topk's order is torch.topk's: NaN above every number, equal values by lower index.

docs/robustness.md ("PyTorch", "Conventions") states these rules.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

# (shape, axis): an axis of size 0 reduced, every axis of an empty tensor, or neither
EMPTY_CASES = [((0, 3), [0]), ((0, 3), [1]), ((0, 3), []), ((2, 0), [1]), ((2, 0), [-1]), ((2, 0), [0]),
               ((0, 0), [1]), ((2, 0, 3), [0, 2]), ((2, 0, 3), [1, 2]), ((), []), ((0,), [])]


def _numpy_raises(shape: tuple[int, ...], axis: list[int]) -> bool:
    try:
        np.amax(np.zeros(shape, np.float32), axis=tuple(axis) if axis else None)
    except ValueError:
        return True
    return False


def test_numpy_and_torch_agree_on_the_cases() -> None:
    """The oracle: numpy.amax and torch.amax raise on the same cases (the convention followed)."""
    torch = pytest.importorskip("torch")
    for shape, axis in EMPTY_CASES:
        try:
            torch.amax(torch.zeros(shape), dim=axis)
            raised = False
        except (RuntimeError, IndexError):
            raised = True
        assert raised == _numpy_raises(shape, axis), (shape, axis)


def test_reduce_max_over_an_empty_axis_raises_on_torch() -> None:
    """Eager, meta tensors (the fake kernel) and the C++ kernel called through torch.ops: the op's
    ValueError where numpy raises, an empty (or 0-d) result where it does not. It returned -inf."""
    torch = pytest.importorskip("torch")
    pkg = importlib.import_module("generated.opgen_ops_torch")
    for shape, axis in EMPTY_CASES:
        want = np.amax(np.zeros(shape, np.float32), axis=tuple(axis) if axis else None) \
            if not _numpy_raises(shape, axis) else None
        for device in ("cpu", "meta"):
            x = torch.zeros(shape, device=device)
            if want is None:
                with pytest.raises(ValueError, match=r"reduce_max\(\): contract .* does not hold"):
                    pkg.reduce_max(x, axis=axis)
                with pytest.raises(ValueError, match=r"reduce_max\(\): contract"):  # the C++ check too
                    torch.ops.opgen_ops_torch.reduce_max(x, axis, False)
            else:
                out = pkg.reduce_max(x, axis=axis)
                assert tuple(out.shape) == want.shape, (shape, axis)
                if device == "cpu":
                    np.testing.assert_array_equal(out.numpy(), want)


def test_reduce_max_over_an_empty_axis_raises_on_mindspore(ms) -> None:  # type: ignore[no-untyped-def]
    """Both paths (Function<T> and Custom), PyNative: the op's ValueError where numpy raises."""
    function = importlib.import_module("generated.opgen_ops.function")
    custom = importlib.import_module("generated.opgen_ops.custom")
    for shape, axis in EMPTY_CASES:
        x = ms.Tensor(np.zeros(shape, np.float32))
        for f in (function.reduce_max, custom._reduce_max_custom):
            if _numpy_raises(shape, axis):
                with pytest.raises(ValueError, match=r"reduce_max\(\): contract .* does not hold"):
                    f(x, axis=axis)
            else:
                want = np.amax(np.zeros(shape, np.float32), axis=tuple(axis) if axis else None)
                got = f(x, axis=axis)
                assert tuple(got.shape) == want.shape, (shape, axis, f)


def test_an_axis_out_of_range_keeps_its_own_message() -> None:
    """The contract lets an out-of-range axis through, so the shape rule's message names it."""
    torch = pytest.importorskip("torch")
    pkg = importlib.import_module("generated.opgen_ops_torch")
    with pytest.raises(ValueError, match="axis 2 is out of range for a tensor of rank 2"):
        pkg.reduce_max(torch.zeros(0, 3), axis=[2])


def test_topk_scratch_does_not_grow_with_the_row() -> None:
    """One row of 2**24 float32 (64 MiB), k = 1: the call's peak memory stays under 8 MiB above
    what the input took (the kernel kept an int64 index per entry of the row: 128 MiB more). A
    child process, so that the peak (ru_maxrss) is this call's."""
    pytest.importorskip("torch")
    code = textwrap.dedent("""
        import resource, torch
        import generated.opgen_ops_torch as pkg
        pkg.topk(torch.zeros(3, 5), 2)  # the library loaded, the thread pool started
        x = torch.rand(2 ** 24)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        values, indices = pkg.topk(x, 1)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert int(indices) == int(torch.argmax(x)), (indices, torch.argmax(x))
        print((after - before) // 1024)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    grown_mib = int(run.stdout.split()[-1])
    assert grown_mib < 8, f"topk over a row of 2**24 took {grown_mib} MiB of scratch"


def test_topk_orders_as_torch_topk() -> None:
    """torch.topk's values (NaN above every number), for k from 0 to the row's length; the indices
    point at them, and equal values (NaNs among them) come by lower index first, where torch's
    order among equals is unspecified."""
    torch = pytest.importorskip("torch")
    pkg = importlib.import_module("generated.opgen_ops_torch")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 300, generator=g)
    x[::3, ::7] = float("nan")
    x[1::3, ::5] = 0.5
    x[2::3, ::11] = float("inf")
    for dtype in (torch.float32, torch.float64):
        xd = x.to(dtype)
        for k in (0, 1, 8, 150, 300):
            v, i = pkg.topk(xd, k)
            tv, _ = torch.topk(xd, k)
            assert torch.equal(v.isnan(), tv.isnan()) and torch.equal(v.nan_to_num(), tv.nan_to_num()), (dtype, k)
            assert torch.equal(xd.gather(-1, i).nan_to_num(), v.nan_to_num())
            same = (v[:, 1:] == v[:, :-1]) | (v[:, 1:].isnan() & v[:, :-1].isnan())
            assert bool((i[:, 1:] > i[:, :-1])[same].all()), (dtype, k)
