"""Nested-list attrs (``list[list[int]]``: ops/pad2d.yaml) and contracts over each tensor of a
dynamic input (``all(z.shape == x.shape for z in zs)``: ops/add_n.yaml), on every path: the
spec checks, the runtime attr checks, opgen test's sampler, the Custom path (PyNative, GRAPH_MODE
with static and dynamic shapes), the Function<T> path, and PyTorch eager, compiled and exported.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from opgen import runtime, testing
from opgen.backends.mindspore import runtime as ms_runtime
from opgen.pipeline import load_ops

ROOT = Path(__file__).resolve().parents[1]

PADS = [[1, 0], [2, 1]]
X = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
PADDED = np.pad(X, [(0, 0), (1, 0), (2, 1)], constant_values=-1.0)


# ----------------------------------------------------------------------------- spec and runtime


def test_bad_nested_defaults_and_uses_are_errors_at_their_place(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "name: bad\n"
        "doc: d\n"
        "inputs: [{name: x, doc: d, differentiable: false}]\n"
        "attrs:\n"
        "  - {name: p, type: 'list[list[int]]', default: [[1, 2], [3, 1.5]], doc: d}\n"
        "  - {name: q, type: 'list[list[int]]', default: [1, 2], doc: d}\n"
        "  - {name: r, type: 'list[list[float]]', default: [[0.5], []], range: [0, 1], doc: d}\n"
        "  - {name: s, type: 'list[list[int]]', default: [[1, 5]], range: [0, 4], doc: d}\n"
        "requires: ['len(p[0]) == 2 and r[0][0] > 0']\n"
        "outputs: [{name: out, doc: d, shape: 'x.shape[:1] + [p[0][0]] + p[0][0]', dtype: x}]\n"
        "dtype_format: {CPU: [[F32_Default, F32_Default]]}\n"
        "kernel: {forward: '(void)out;'}\n", encoding="utf-8")
    _, diags = load_ops([spec])
    got = [d.format().splitlines()[0].replace(str(tmp_path) + "/", "") for d in diags]
    assert got == [
        "bad.yaml:5:49: error: op 'bad': attr 'p': default [[1, 2], [3, 1.5]] is not a list[list[int]]: item [1][1] "
        "is 1.5, not an int",
        "bad.yaml:6:49: error: op 'bad': attr 'q': default [1, 2] is not a list[list[int]]: row 0 is 1, not a "
        "list[int]",
        "bad.yaml:8:49: error: op 'bad': attr 's': default [[1, 5]] is outside the range [0, 4]",
        "bad.yaml:9:32: error: op 'bad': requires[0]: attr 'r' is a list[list[float]]; shape expressions take int, "
        "float, bool, str, list[int] and list[list[int]] attrs",
        "bad.yaml:10:65: error: op 'bad': output 'out': bad shape: what is added to a list must be a list[int], "
        "but 'p[0][0]' is an int",
    ]


def test_check_attrs_normalises_and_rejects_nested_lists() -> None:
    spec = {"p": {"type": "list[list[int]]", "range": [0, 9], "choices": None},
            "f": {"type": "list[list[float]]", "range": None, "choices": None}}
    assert runtime.check_attrs("pad", {"p": [[1, np.int64(2)], []], "f": ([1, 2.5],)}, spec) == (
        ((1, 2), ()), ((1.0, 2.5),))
    with pytest.raises(TypeError, match=r"^pad\(\): attr 'p' must be a list\[list\[int\]\], got float 1.5$"):
        runtime.check_attrs("pad", {"p": [[1, 1.5]], "f": []}, spec)
    with pytest.raises(TypeError, match=r"^pad\(\): attr 'p' must be a list\[list\[int\]\], got a row int 1$"):
        runtime.check_attrs("pad", {"p": [1, 2], "f": []}, spec)
    with pytest.raises(ValueError, match=r"^pad\(\): attr 'p' = \[\[1, 10\]\] is outside \[0, 9\]$"):
        runtime.check_attrs("pad", {"p": [[1, 10]], "f": []}, spec)
    # the check cache tells the classes of items apart, rows included
    assert runtime.list_key([[1, 2]]) != runtime.list_key([[1, True]]) != runtime.list_key([(1, 2)])
    hash(runtime.list_key([[1, 2], []]))


def test_aot_attr_encoding_of_nested_lists() -> None:
    # AotExtra's GetAttrInt2DVec / GetAttrFloat2DVec read a nested list whose items all have
    # the getter's Python type (an int among floats throws in MindSpore 2.10): converted here
    assert ms_runtime.encode_attr("list[list[int]]", ((1, 2), ())) == ("listListInt", [[1, 2], []])
    kind, value = ms_runtime.encode_attr("list[list[float]]", [[1, 2.5]])
    assert (kind, value) == ("listListFloat", [[1.0, 2.5]]) and all(type(v) is float for v in value[0])


def test_sampler_ties_every_tensor_of_a_list_input() -> None:
    ops, diags = load_ops([ROOT / "ops" / "add_n.yaml"])
    assert not diags
    (op,) = ops
    first = testing.shape_cases(op, {}, np.random.default_rng(5))
    assert [c.shapes for c in first] == [c.shapes for c in testing.shape_cases(op, {}, np.random.default_rng(5))]
    assert {c.style for c in first} == {"plain", "scalar", "empty"}
    assert max(len(c.shapes["zs"]) for c in first) > 1
    for case in first:
        assert all(tuple(z) == tuple(case.shapes["x"]) for z in case.shapes["zs"]), case.describe()
    broken = testing.violating_cases(op, {}, np.random.default_rng(5))
    assert [text for text, _ in broken] == ["all(z.shape == x.shape for z in zs)"]
    case = broken[0][1]
    assert any(tuple(z) != tuple(case.shapes["x"]) for z in case.shapes["zs"])


def test_sampler_reads_nested_attrs() -> None:
    ops, _ = load_ops([ROOT / "ops" / "pad2d.yaml"])
    (op,) = ops
    for attrs in ({"paddings": [[1, 1], [1, 1]], "value": 0.0}, {"paddings": [[0, 2], [3, 1]], "value": 1.5}):
        for case in testing.shape_cases(op, attrs, np.random.default_rng(1)):
            x = case.shapes["x"]
            (p, q), (r, s) = attrs["paddings"]
            assert case.out_shapes == (tuple(x[:-2]) + (x[-2] + p + q, x[-1] + r + s),)


# ----------------------------------------------------------------------------- MindSpore


def test_pad2d_and_add_n_on_the_custom_path(mode: str, ms) -> None:  # type: ignore[no-untyped-def]
    from generated import opgen_ops as G

    class Net(ms.nn.Cell):
        def construct(self, x, a, b):  # type: ignore[no-untyped-def]
            return G.pad2d(x, paddings=[[1, 0], [2, 1]], value=-1.0), G.add_n(x, [a, b])

    ones, twos = np.ones_like(X), np.full_like(X, 2.0)
    padded, summed = Net()(ms.Tensor(X), ms.Tensor(ones), ms.Tensor(twos))
    np.testing.assert_array_equal(padded.asnumpy(), PADDED)
    np.testing.assert_array_equal(summed.asnumpy(), X + 3)
    gx, ga, gb = ms.grad(Net(), grad_position=(0, 1, 2))(ms.Tensor(X), ms.Tensor(ones), ms.Tensor(twos))
    np.testing.assert_array_equal(gx.asnumpy(), np.full_like(X, 2.0))  # one from each output
    np.testing.assert_array_equal(ga.asnumpy(), np.ones_like(X))
    np.testing.assert_array_equal(gb.asnumpy(), np.ones_like(X))


def test_contracts_on_the_custom_path_name_the_op(ms) -> None:  # type: ignore[no-untyped-def]
    from generated import opgen_ops as G

    x = ms.Tensor(X)
    with pytest.raises(ValueError, match=r"^add_n\(\): contract 'all\(z.shape == x.shape for z in zs\)' does not "
                                         r"hold: x has shape \(1, 3, 4\), zs has shapes \[\(1, 3, 4\), \(3, 4\)\]$"):
        G.add_n(x, [x, ms.Tensor(X[0])])
    with pytest.raises(ValueError, match=r"^pad2d\(\): contract 'all\(p\[0\] >= 0 and p\[1\] >= 0 for p in "
                                         r"paddings\)' does not hold: paddings = \[\[1, -1\], \[0, 0\]\]$"):
        G.pad2d(x, paddings=[[1, -1], [0, 0]])
    with pytest.raises(ValueError, match=r"^pad2d\(\): contract 'len\(paddings\) == 2 and all\(len\(p\) == 2 for "
                                         r"p in paddings\)' does not hold: paddings = \[\[1, 1\], \[2\]\]$"):
        G.pad2d(x, paddings=[[1, 1], [2]])
    with pytest.raises(TypeError, match=r"^pad2d\(\): attr 'paddings' must be a list\[list\[int\]\], got float 1.5$"):
        G.pad2d(x, paddings=[[1, 1.5], [0, 0]])


def test_dynamic_shapes_check_the_contract_in_cpp_infer_shape(ms) -> None:  # type: ignore[no-untyped-def]
    from generated import opgen_ops as G

    class Net(ms.nn.Cell):
        def construct(self, x, a, b):  # type: ignore[no-untyped-def]
            return G.pad2d(x, paddings=[[1, 0], [2, 1]], value=-1.0), G.add_n(x, [a, b])

    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        net = Net()
        net.set_inputs(*[ms.Tensor(shape=[None, None, None], dtype=ms.float32) for _ in range(3)])
        padded, summed = net(ms.Tensor(X), ms.Tensor(X), ms.Tensor(X))
        np.testing.assert_array_equal(padded.asnumpy(), PADDED)
        np.testing.assert_array_equal(summed.asnumpy(), 3 * X)
        bad = Net()
        bad.set_inputs(*[ms.Tensor(shape=[None, None, None], dtype=ms.float32) for _ in range(3)])
        with pytest.raises(RuntimeError, match=r"add_n\(\): contract 'all\(z.shape == x.shape for z in zs\)' does "
                                               r"not hold: x has shape \(1, 3, 4\), zs has shapes \[\(1, 3, 4\), "
                                               r"\(1, 3, 5\)\]"):
            bad(ms.Tensor(X), ms.Tensor(X), ms.Tensor(np.zeros((1, 3, 5), np.float32)))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


def test_function_path(ms) -> None:  # type: ignore[no-untyped-def]
    from generated.opgen_ops import function as F

    x = ms.Tensor(X)
    np.testing.assert_array_equal(F.pad2d(x, paddings=PADS, value=-1.0).asnumpy(), PADDED)
    np.testing.assert_array_equal(F.pad2d(x, paddings=((1, 0), (2, 1)), value=-1.0).asnumpy(), PADDED)
    dx = ms.grad(lambda t: (F.pad2d(t, paddings=PADS) * 3).sum())(x)
    np.testing.assert_array_equal(dx.asnumpy(), np.full_like(X, 3.0))
    zs = [ms.Tensor(np.ones_like(X)), ms.Tensor(np.full_like(X, 2.0))]
    np.testing.assert_array_equal(F.add_n(x, zs).asnumpy(), X + 3)
    with pytest.raises(ValueError, match=r"^add_n\(\): contract 'all\(z.shape == x.shape for z in zs\)' does not "
                                         r"hold: x has shape \(1, 3, 4\), zs has shapes \[\(1, 3, 4\), \(3, 4\)\]$"):
        F.add_n(x, [zs[0], ms.Tensor(X[0])])
    with pytest.raises(ValueError, match=r"^pad2d\(\): contract 'all\(p\[0\] >= 0"):
        F.pad2d(x, paddings=[[1, -1], [0, 0]])
    with pytest.raises(TypeError, match=r"^pad2d\(\): attr 'paddings' must be a list\[list\[int\]\], got float 1.5$"):
        F.pad2d(x, paddings=[[1, 1.5], [0, 0]])
    with pytest.raises(TypeError, match=r"^pad2d\(\): attr 'paddings' must be a list\[list\[int\]\], got a row int "
                                        r"1$"):
        F.pad2d(x, paddings=[1, 2])


# ----------------------------------------------------------------------------- PyTorch


def test_torch_eager_compiled_and_exported() -> None:
    torch = pytest.importorskip("torch")
    from generated import opgen_ops_torch as T

    x = torch.tensor(X, requires_grad=True)
    out = T.pad2d(x, paddings=PADS, value=-1.0)
    np.testing.assert_array_equal(out.detach().numpy(), PADDED)
    (out * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full_like(X, 2.0))
    padc = torch.compile(lambda t: T.pad2d(t, paddings=PADS, value=-1.0), fullgraph=True, dynamic=True)
    np.testing.assert_array_equal(padc(x).detach().numpy(), PADDED)
    assert tuple(padc(torch.ones(2, 5, 6)).shape) == (2, 6, 9)
    zs = [torch.ones(1, 3, 4), torch.full((1, 3, 4), 2.0)]
    np.testing.assert_array_equal(T.add_n(x, zs).detach().numpy(), X + 3)
    addc = torch.compile(T.add_n, fullgraph=True, dynamic=True)
    np.testing.assert_array_equal(addc(x, zs).detach().numpy(), X + 3)
    message = (r"^add_n\(\): contract 'all\(z.shape == x.shape for z in zs\)' does not hold: x has shape "
               r"\(1, 3, 4\), zs has shapes \[\(1, 3, 4\), \(3, 4\)\]$")
    with pytest.raises(ValueError, match=message):
        T.add_n(x, [zs[0], torch.ones(3, 4)])
    with pytest.raises(ValueError, match=r"^pad2d\(\): contract 'all\(p\[0\] >= 0"):
        T.pad2d(x, paddings=[[1, -1], [0, 0]])
    with pytest.raises(TypeError, match=r"^pad2d\(\): attr 'paddings' must be a list\[list\[int\]\]"):
        T.pad2d(x, paddings=[[1, 1.5], [0, 0]])

    class Pad(torch.nn.Module):
        def forward(self, t):  # type: ignore[no-untyped-def]
            return T.pad2d(t, paddings=PADS, value=-1.0)

    ep = torch.export.export(Pad(), (torch.zeros(1, 3, 4),))  # static: the shape it was exported at
    np.testing.assert_array_equal(ep.module()(torch.tensor(X)).numpy(), PADDED)
    torch.library.opcheck(torch.ops.opgen_ops_torch.pad2d.default,
                          (torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True), T._rt.encode_rows(PADS), 0.5))
    torch.library.opcheck(torch.ops.opgen_ops_torch.add_n.default,
                          (torch.randn(2, 3, requires_grad=True), [torch.randn(2, 3), torch.randn(2, 3)]))
