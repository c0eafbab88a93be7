"""PyTorch: float attrs at the precision of the row, and the op's own error in every mode (issue 33,
items 3 and 4; docs/robustness.md "Errors in every mode").

One small package of five ops of ops/ (clip, pad2d, topk, dropout, adamw), built once per build
root (~40-90 s cold on 2 cores, cached after) and imported in this process:

- float attrs reach a float64 kernel as the doubles the schema passes: clip, pad2d's fill value,
  dropout's scale and fifty float64 AdamW steps equal torch's own to the last bit or near it (they
  were float32: clip(x64, 0.1, 0.7) gave 0.10000000149011612); float32 rows unchanged;
- under ``torch.compile(fullgraph=True, dynamic=True)`` an attr out of range or of the wrong type
  (topk ``k=-1``, ``k`` from a shape, dropout ``keep_prob=0``, ``k="a"``) is the op's
  ValueError/TypeError (was Dynamo's "Failed to trace builtin operator" / "repr_impl not
  implemented");
- on meta and fake tensors a shape rule's int64 overflow, and an output whose bytes overflow
  int64, are the CPU kernel's ValueError (were torch's "Overflow when unpacking long long" and
  "Storage size calculation overflowed");
- a nested tensor is the op's TypeError (was the dispatcher's NotImplementedError);
- an allocation that fails names the op and the output, as the allocator's exception type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
OPS = ("clip", "pad2d", "topk", "dropout", "adamw")
BIG = 2**62


@pytest.fixture(scope="module")
def ops() -> Any:
    import opgen
    from opgen.build import build_root

    return opgen.load([ROOT / "ops" / f"{name}.yaml" for name in OPS], package="torch_errors",
                      build_dir=build_root() / "torch-errors", backend="torch")


# ----------------------------------------------------------------------------- float attrs


def test_float_attrs_reach_float64_rows_as_doubles(ops: Any) -> None:
    x = torch.tensor([-1.0, 0.0, 0.5, 1.0], dtype=torch.float64)
    assert ops.clip(x, 0.1, 0.7).tolist() == torch.clamp(x, 0.1, 0.7).tolist() == [0.1, 0.1, 0.5, 0.7]
    padded = ops.pad2d(torch.zeros(1, 1, 1, dtype=torch.float64), paddings=[[1, 0], [0, 0]], value=0.1)
    assert padded.flatten().tolist() == [0.1, 0.0]
    y, mask = ops.dropout(torch.ones(64, dtype=torch.float64), keep_prob=0.3, seed=5)
    assert mask.any() and torch.equal(y[mask], torch.full_like(y[mask], 1 / 0.3))
    # a float32 row converts the double to float32 once, as before
    x32 = x.float()
    assert torch.equal(ops.clip(x32, 0.1, 0.7), torch.clamp(x32, 0.1, 0.7))


def test_float64_adamw_follows_torch_optim(ops: Any) -> None:
    """Fifty float64 steps: with float32 betas/eps/weight decay they drifted 5e-11 relative."""
    gen = torch.Generator().manual_seed(0)
    p0 = torch.randn(64, dtype=torch.float64, generator=gen)
    grads = [torch.randn(64, dtype=torch.float64, generator=gen) for _ in range(50)]
    ref = p0.clone().requires_grad_(True)
    opt = torch.optim.AdamW([ref], lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    param, m, v = p0.clone(), torch.zeros_like(p0), torch.zeros_like(p0)
    lr = torch.tensor(1e-2, dtype=torch.float64)
    for t, g in enumerate(grads, start=1):
        ref.grad = g.clone()
        opt.step()
        ops.adamw(param, m, v, g, torch.tensor(t), lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01)
    drift = ((param - ref.detach()).abs() / ref.detach().abs()).max().item()
    assert drift < 1e-13, drift


# ----------------------------------------------------------------------------- torch.compile


def _compiled_error(fn: Any, *args: Any) -> BaseException:
    with pytest.raises((TypeError, ValueError)) as info:
        torch.compile(fn, fullgraph=True, dynamic=True)(*args)
    return info.value


@pytest.mark.parametrize(("name", "fn", "kind", "message"), [
    ("k=-1", lambda ops, t: ops.topk(t, k=-1), ValueError, "topk(): attr 'k' = -1 is outside [0, 2147483647]"),
    ("k from a shape", lambda ops, t: ops.topk(t, k=t.shape[0] - 5), ValueError,
     "topk(): attr 'k' = -2 is outside [0, 2147483647]"),
    ("keep_prob=0", lambda ops, t: ops.dropout(t, keep_prob=0.0), ValueError,
     "dropout(): attr 'keep_prob' = 0.0 is outside [1e-30, 1]"),
    ("k='a'", lambda ops, t: ops.topk(t, k="a"), TypeError, "topk(): attr 'k' must be an int, got str 'a'"),
])
def test_attr_errors_under_compile_are_the_ops(ops: Any, name: str, fn: Any, kind: type, message: str) -> None:
    x = torch.randn(3, 4)
    with pytest.raises(kind) as eager:
        fn(ops, x)
    error = _compiled_error(lambda t: fn(ops, t), x)
    assert isinstance(error, kind), (name, type(error), error)
    assert str(error).split("\n")[0] == message
    if name != "k from a shape":  # eagerly a shape is an int: the same message
        assert str(eager.value) == message


def test_a_symbolic_attr_that_holds_stays_symbolic(ops: Any) -> None:
    """``k`` from a shape, in range: checked on the SymInt (a guard), not made a constant."""
    compiled = torch.compile(lambda t: ops.topk(t, k=t.shape[0] - 1)[0], fullgraph=True, dynamic=True)
    for n in (3, 5):
        x = torch.randn(n, 8)
        assert torch.equal(compiled(x), torch.topk(x, n - 1).values)


# ----------------------------------------------------------------------------- meta and fake tensors


def _meta(*shape: int) -> Any:
    return torch.empty(*shape, device="meta")


@pytest.mark.parametrize(("paddings", "message"), [
    ([[BIG, BIG], [0, 0]], "pad2d(): shape arithmetic overflows int64"),
    ([[2**61, 0], [0, 0]], "pad2d(): output 'out' would have shape (1, 2305843009213693953, 1), more bytes "
                           "(4 per element) than int64 can count"),
])
def test_overflow_on_meta_and_fake_tensors_is_the_ops_error(ops: Any, paddings: list[list[int]],
                                                           message: str) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with pytest.raises(ValueError) as cpu:
        ops.pad2d(torch.empty(1, 1, 1), paddings=paddings)
    with pytest.raises(ValueError) as meta:
        ops.pad2d(_meta(1, 1, 1), paddings=paddings)
    with FakeTensorMode(), pytest.raises(ValueError) as fake:
        ops.pad2d(torch.empty(1, 1, 1), paddings=paddings)
    assert str(cpu.value) == str(meta.value) == str(fake.value) == message


# ----------------------------------------------------------------------------- nested tensors, allocation


@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
def test_a_nested_tensor_is_the_ops_type_error(ops: Any, layout: Any) -> None:
    nested = torch.nested.nested_tensor([torch.randn(2), torch.randn(3)], layout=layout)
    with pytest.raises(TypeError) as info:
        ops.clip(nested, 0.0, 1.0)
    assert str(info.value) == "clip(): input 'x' must be a dense (strided) tensor, got a nested tensor"


def test_an_allocation_failure_names_the_op_and_the_output(ops: Any) -> None:
    """2**60 bytes: no allocator gives them (beyond a 47-bit address space), overcommit or not."""
    with pytest.raises(RuntimeError) as info:
        ops.pad2d(torch.empty(1, 1, 1), paddings=[[2**58 - 1, 0], [0, 0]])
    assert str(info.value).startswith(
        "pad2d(): cannot allocate output 'out' of shape (1, 288230376151711744, 1) (1152921504606846976 bytes): ")
    assert ops.pad2d(_meta(1, 1, 1), paddings=[[2**58 - 1, 0], [0, 0]]).shape == (1, 2**58, 1)
