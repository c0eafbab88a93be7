"""``kernel.grad_views`` on an op that mixes a view gradient with a kernel gradient.

concat and reduce_sum in ops/ have one differentiable input, whose gradient is a view of
``dout`` on every PyNative path (tests/test_function_path.py, tests/test_custom_path.py). Here
``concat_bias`` adds a 0-d bias to the joined tensor: the gradients of ``xs`` are slices of
``dout`` (views) while the bias's is the sum of ``dout`` (the backward kernel, which also runs for
``xs`` in graphs). On the Function<T> path Backward then runs the kernel with empty ``dxs`` and
makes the views after it; the Custom path's bprop runs the kernel for both (its view shortcut
is for an op whose one differentiable input has a view). ``opgen test`` checks every path and
mode against the numpy reference and central differences.
"""

from __future__ import annotations

import contextlib
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

from opgen import testing
from opgen.model import Op
from opgen.pipeline import generate, load_ops

SPEC = """
name: concat_bias
doc: Joins xs along axis, then adds a 0-d bias to every element.
inputs:
  - {name: xs, doc: Tensors of equal rank whose shapes agree outside axis., kind: dynamic}
  - {name: bias, doc: A 0-d bias.}
attrs:
  - {name: axis, type: int, default: 0, doc: Axis to join along; negative counts from the end.}
outputs:
  - {name: out, doc: concat(xs) + bias., shape: 'concat(xs, axis)', dtype: xs}
requires:
  - bias.rank == 0
type_vars:
  T: [float32, float64]
dtype_format:
  CPU:
    - [T, T, T]
kernel:
  forward: |
    const int64_t ax = opgen::normalize_axes(axis, out.ndim)[0];
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < ax; ++i) outer *= out.dim(i);
    for (int i = static_cast<int>(ax) + 1; i < out.ndim; ++i) inner *= out.dim(i);
    const int64_t row = out.dim(static_cast<int>(ax)) * inner;
    int64_t offset = 0;
    for (const auto &t : xs) {
      const int64_t block = t.dim(static_cast<int>(ax)) * inner;
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < block; ++j) out[o * row + offset + j] = out_t(t[o * block + j] + bias[0]);
      }
      offset += block;
    }
  grad_views: [xs]
  backward: |
    const int64_t ax = opgen::normalize_axes(axis, out.ndim)[0];
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < ax; ++i) outer *= out.dim(i);
    for (int i = static_cast<int>(ax) + 1; i < out.ndim; ++i) inner *= out.dim(i);
    const int64_t row = out.dim(static_cast<int>(ax)) * inner;
    int64_t offset = 0;
    for (size_t k = 0; k < dxs.size(); ++k) {
      const int64_t block = dxs[k].dim(static_cast<int>(ax)) * inner;
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < block; ++j) dxs[k][o * block + j] = dout[o * row + offset + j];
      }
      offset += block;
    }
    if (dbias) {
      opgen::compute_t<bias_t> acc = 0;
      for (int64_t i = 0; i < dout.numel; ++i) acc += dout[i];
      dbias[0] = bias_t(acc);
    }
reference: |
  return np.concatenate(xs, axis=axis) + bias
test:
  shapes:
    bias: '[]'
  attrs:
    - {}
    - {axis: -1}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, ms) -> tuple[testing.Package, Op]:  # type: ignore[no-untyped-def]
    """concat_bias generated into a fresh package and imported (the aot library built; the
    Function<T> extension is built by the first function-path check)."""
    d = tmp_path_factory.mktemp("gradviews")
    (d / "specs").mkdir()
    spec = d / "specs" / "concat_bias.yaml"
    spec.write_text(textwrap.dedent(SPEC).lstrip("\n"), encoding="utf-8")
    with contextlib.chdir(d):
        res = generate(["specs"], Path("out"), f"gv_{uuid.uuid4().hex[:8]}")
    assert not res.diagnostics, [x.format() for x in res.diagnostics]
    (op,), diags = load_ops([spec])
    assert not diags
    pkg_dir = res.package_dir if res.package_dir.is_absolute() else d / res.package_dir
    return testing.load_package(pkg_dir), op


def test_mixed_view_and_kernel_gradients_on_every_path(built: tuple[testing.Package, Op]) -> None:
    package, op = built
    statuses = {}
    for check in testing.CHECKS:
        r = testing.run_check(package, op, check)
        assert r.status in ("pass", "n/a"), (check, r.messages)
        statuses[check] = r.status
    assert all(statuses[f"grad/{p}"] == "pass" for p in testing.PATHS), statuses


def test_function_path_returns_views_for_xs_and_a_sum_for_bias(built: tuple[testing.Package, Op],
                                                               ms) -> None:  # type: ignore[no-untyped-def]
    F = built[0].function()
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    b = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    w = np.linspace(-1, 2, 18, dtype=np.float32).reshape(3, 6)
    ga, gb, gbias = ms.grad(lambda p, q, s: F.concat_bias([p, q], s, axis=1) * ms.Tensor(w),
                            grad_position=(0, 1, 2))(ms.Tensor(a), ms.Tensor(b), ms.Tensor(np.float32(0.5)))
    np.testing.assert_array_equal(ga.asnumpy(), w[:, :2])
    np.testing.assert_array_equal(gb.asnumpy(), w[:, 2:])
    assert not ga.is_contiguous()  # columns of dout: a view
    np.testing.assert_allclose(gbias.asnumpy(), w.astype(np.float64).sum(), rtol=1e-5)
