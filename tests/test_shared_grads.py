"""opgen.api.shared_grad_sources: which elementwise gradients the backward kernel sums from
another input's instead of evaluating their expression again (bench/specs/bias_gelu.yaml's bias
from x), and that no op of ops/ is touched by it. The numbers of such a backward are checked by
``opgen test bench/specs`` (both backends) against central differences."""

from __future__ import annotations

from pathlib import Path

from opgen import api
from opgen.pipeline import load_ops

ROOT = Path(__file__).resolve().parents[1]


def test_bias_gelu_bias_gradient_is_summed_from_x() -> None:
    ops, diags = load_ops([ROOT / "bench" / "specs" / "bias_gelu.yaml"])
    assert not diags
    (op,) = ops
    assert api.shared_grad_sources(op) == {"bias": "x"}
    lines = "\n".join(line for b in api.op_context(op, "p", "CPU").bw_blocks for line in b.lines)
    assert lines.count("opgen::math::erf(") == 2  # dx's, and dbias's fallback where dx is broadcast
    assert "if (dx && std::is_same_v<x_t, C> && dx.shape_vector() == iter_shape) {" in lines


def test_no_op_of_ops_shares_a_gradient() -> None:
    ops, diags = load_ops([ROOT / "ops"])
    assert not diags
    # add's x and y are both `dout`: nothing to compute once, left alone
    assert {op.name: api.shared_grad_sources(op) for op in ops if api.shared_grad_sources(op)} == {}
