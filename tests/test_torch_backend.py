"""The PyTorch backend on every op in ops/, with real torch and real numbers: the committed package
generated/opgen_ops_torch (tests/test_cli.py checks that it is what ops/ generates).

- ``forward``: every CPU dtype row, the spec's test attrs, random shapes of every style the shape
  rules allow (plain, broadcasting, 0-d, 0-size dims, optional inputs left out, lists) against the
  numpy reference (generated reference.py), at opgen test's tolerances; a non-contiguous input
  (transposed) gives the same numbers.
- ``grad``: float64 ``torch.autograd.gradcheck`` of every differentiable op (through
  the C++ autograd kernel and the ``<op>_backward`` operator), on plain shapes.
- ``dtypes``: a dtype combination outside the rows raises TypeError naming the op and the rows.
- ``contracts``: shapes that break a contract raise the MindSpore path's ValueError text
  (``<op>(): contract '...' does not hold: ...``), from the C++ kernel and from the fake kernel.
- ``opcheck``: ``torch.library.opcheck`` (schema, fake tensor, autograd registration, aot dispatch
  static and dynamic) on every op.
- ``compile``: ``torch.compile(fullgraph=True, dynamic=True)`` on every op (aot_eager: Dynamo, the
  fake kernel, AOTAutograd's traced backward): forward and gradients as eager, no graph break, and
  no recompilation for a second call at other sizes (a plain case scaled x2 and x3, so no size is
  0 or 1); plus six hand-picked cases (lists, optional inputs left out, grad views) with a counting
  backend.
- ``export``: ``torch.export.export`` (static shapes) of every op gives eager's outputs exactly.

Runtime (measured, 2 cores shared with other builds): the first import builds the library, 37
kernel units and 5 operator units, 354-462 s wall (~3 CPU minutes; 399 s on 26 Nov); the tests
then take ~2 min warm (test_load_and_build_cli ~40 s of it: one more small library; opcheck ~45 s
for all 37 ops; compile + export of every op ~40 s).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from opgen import sampling, testing  # noqa: E402
from opgen.backends.torch.context import SCHEMA_RESERVED, schema_name  # noqa: E402
from opgen.backends.torch.testing import to_array, to_tensor  # noqa: E402
from opgen.model import Op  # noqa: E402
from opgen.pipeline import load_ops  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OPS, _ = load_ops([ROOT / "ops"])
BY_NAME = {op.name: op for op in OPS}


@pytest.fixture(scope="module")
def pkg() -> Any:
    """The generated PyTorch package (importing it builds and loads the operator library)."""
    return importlib.import_module("generated.opgen_ops_torch")


@pytest.fixture(scope="module")
def ref() -> Any:
    return importlib.import_module("generated.opgen_ops_torch.reference")


class _Ref:
    float_attr = "double"  # the torch kernels' float attrs (opgen.backends.torch.facts.FLOAT_ATTR)

    def __init__(self, module: Any):
        self.reference = module


def _call(pkg: Any, op: Op, arrays: list[np.ndarray], layout: tuple[int, ...], attrs: dict[str, Any],
          transform: Any = None) -> list[np.ndarray]:
    tensors = [to_tensor(a) for a in arrays]  # a bfloat16 row's arrays as torch.bfloat16 (opgen.testing.BFLOAT16)
    if transform is not None:
        tensors = [transform(t) for t in tensors]
    args = testing.group(op, tensors, layout)
    out = getattr(pkg, op.name)(*args, **attrs)
    outs = [] if not op.outputs else [out] if len(op.outputs) == 1 else list(out)
    # then each input the op writes in place and does not return ('writes: true'), after the call
    return [to_array(o) for o in outs] + [to_array(tensors[slot]) for _, slot in testing.written_slots(op, layout)]


def _non_contiguous(t: Any) -> Any:
    """The same values in a non-contiguous tensor (a transposed copy, transposed back)."""
    if t.dim() < 2:
        return t.repeat_interleave(2)[::2] if t.dim() == 1 else t
    return t.transpose(0, 1).contiguous().transpose(0, 1)


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_forward(pkg: Any, ref: Any, op: Op) -> None:
    rng = np.random.default_rng(0)
    settings = testing.read_settings(op)
    rows = [[r.dtype(i).name for i in range(len(r.columns))] for r in op.rows_for("CPU")]
    compared = 0
    for attrs in settings.attr_sets:
        attrs = dict(attrs)
        for row in rows:
            for case in testing.shape_cases(op, attrs, rng, settings):
                arrays = testing._draw(rng, op, case, row, settings)
                want = testing._reference_forward(_Ref(ref), op, attrs, case.layout)(arrays)  # type: ignore[arg-type]
                for transform in (None, _non_contiguous):
                    got = _call(pkg, op, arrays, case.layout, attrs, transform)
                    where = f"{op.name} row {row} {case.describe()} attrs {attrs} transform {transform}"
                    written = testing.written_slots(op, case.layout)
                    shapes = list(case.out_shapes) + [arrays[s].shape for _, s in written]
                    for k, (name, col) in enumerate(testing.compared(op)):
                        dtype = row[col]
                        assert testing.dtype_name(got[k]) == dtype, f"{where} {name}"
                        assert got[k].shape == shapes[k], f"{where} {name}"
                        tol = testing.tolerance(dtype).forward
                        if tol:
                            np.testing.assert_allclose(got[k].astype(np.float64), want[k].astype(np.float64),
                                                       rtol=tol, atol=tol, err_msg=where)
                        else:
                            np.testing.assert_array_equal(got[k], want[k].astype(dtype), err_msg=where)
                        compared += 1
    assert compared > 0


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_unsupported_dtypes(pkg: Any, op: Op) -> None:
    combos = testing.bad_dtype_combinations(op)
    if not combos:
        pytest.skip("every dtype combination is a row")
    rng = np.random.default_rng(1)
    settings = testing.read_settings(op)
    attrs = dict(settings.attr_sets[0])
    case = next(c for c in testing.shape_cases(op, attrs, rng, settings) if c.style == "plain")
    for combo in combos[:3]:
        arrays = testing._draw(rng, op, case, list(combo), settings)
        with pytest.raises(TypeError, match=rf"^{op.name}\(\): unsupported dtypes .*supported dtype_format rows: "):
            _call(pkg, op, arrays, case.layout, attrs)


def test_arguments_the_dispatcher_refuses_are_the_ops_errors(pkg: Any) -> None:
    """A numpy array, a list, None or a number where a tensor goes, a bad list input, a sparse
    tensor: the op's TypeError (ValueError for an empty list) naming the op and the input, with
    the MindSpore backend's message for the same mistake (torch's dispatcher said "Expected a value
    of type 'Tensor'" as a RuntimeError, or "There were no tensor arguments" for None and [])."""
    from opgen.backends.mindspore import graph

    x = torch.randn(4, 4)
    cases: list[tuple[Any, type[Exception], str]] = [
        (lambda: pkg.exp(np.ones(3, np.float32)), TypeError, "exp(): input 'x' must be a Tensor, got ndarray"),
        (lambda: pkg.exp([1.0, 2.0]), TypeError, "exp(): input 'x' must be a Tensor, got list"),
        (lambda: pkg.exp(None), TypeError, "exp(): input 'x' must be a Tensor, got NoneType"),
        (lambda: pkg.mul(x, 2.0), TypeError, "mul(): input 'y' must be a Tensor, got float"),
        (lambda: pkg.leaky_relu(None, 0.1), TypeError, "leaky_relu(): input 'x' must be a Tensor, got NoneType"),
        (lambda: pkg.concat([]), ValueError, "concat(): input 'xs' is an empty list; it takes at least one Tensor"),
        (lambda: pkg.concat([x, 3]), TypeError, "concat(): item 1 of input 'xs' must be a Tensor, got int"),
        (lambda: pkg.concat(x), TypeError, "concat(): input 'xs' must be a list of Tensors, got Tensor"),
        (lambda: pkg.layer_norm(x, "a", None), TypeError,
         "layer_norm(): input 'gamma' must be a Tensor or None, got str"),
        (lambda: pkg.exp(torch.ones(3).to_sparse()), TypeError,
         "exp(): input 'x' must be a dense (strided) tensor, got a torch.sparse_coo tensor"),
    ]
    for call, kind, message in cases:
        with pytest.raises(kind) as info:
            call()
        assert str(info.value) == message
    # the same words as MindSpore's generated ops
    for value, message in ((np.ones(3), cases[0][2]), (None, cases[2][2])):
        with pytest.raises(TypeError) as ms_info:
            graph.tensor_input("exp", "x", value)
        assert str(ms_info.value) == message
    with pytest.raises(ValueError) as ms_info:
        graph.tensor_list_input("concat", "xs", [])
    assert str(ms_info.value) == cases[5][2]
    # what torch refuses for a reason of its own stays torch's error: an in-place update of an
    # inference tensor outside inference mode (naming the op and the input, before anything is written)
    with torch.inference_mode():
        param = torch.randn(4)
    m, before = torch.zeros(4), param.clone()
    with pytest.raises(RuntimeError, match="^Inplace update to inference tensor outside InferenceMode.*adamw"):
        pkg.adamw(param, m, torch.zeros(4), torch.randn(4), torch.tensor(1), torch.tensor(0.1))
    assert torch.equal(param, before) and not m.any()
    # valid calls run
    torch.testing.assert_close(pkg.layer_norm(x, None, None)[0], torch.nn.functional.layer_norm(x, (4,)))
    torch.testing.assert_close(pkg.exp(torch.ones(3, device="meta")).shape, torch.Size([3]))


CONTRACT_OPS = [op for op in OPS if op.requires]


@pytest.mark.parametrize("op", CONTRACT_OPS, ids=[o.name for o in CONTRACT_OPS])
def test_contracts(pkg: Any, op: Op) -> None:
    """The C++ kernel's message is the MindSpore path's (both from opgen::sym::require); the fake
    kernel's (Python, over SymInts) is the same text."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    rng = np.random.default_rng(2)
    settings = testing.read_settings(op)
    attrs = dict(settings.attr_sets[0])
    row = [op.rows_for("CPU")[0].dtype(i).name for i in range(len(op.inputs))]
    cases = testing.violating_cases(op, attrs, rng, settings)
    if not cases:
        pytest.skip("no contract that a change of shapes breaks")
    for _text, case in cases:
        arrays = testing._draw(rng, op, case, row, settings)
        with pytest.raises(ValueError) as eager:
            _call(pkg, op, arrays, case.layout, attrs)
        message = str(eager.value)
        assert message.startswith(f"{op.name}(): "), message
        with FakeTensorMode() as mode:
            fakes = [mode.from_tensor(torch.from_numpy(a)) for a in arrays]
            with pytest.raises(ValueError) as fake:
                getattr(pkg, op.name)(*testing.group(op, fakes, case.layout), **attrs)
        assert str(fake.value) == message


def _grad_case(op: Op, rng: np.random.Generator) -> tuple[list[Any], tuple[int, ...], dict[str, Any]] | None:
    settings = testing.read_settings(op)
    attrs = dict(settings.attr_sets[0])
    rows = [[r.dtype(i).name for i in range(len(r.columns))] for r in op.rows_for("CPU")]
    diff = [i for i, x in enumerate(op.inputs) if x.differentiable]
    row = next((r for r in rows if all(r[i] == "float64" for i in diff)), None)
    if row is None or not diff or not op.has_backward:
        return None
    case = next(c for c in testing.shape_cases(op, attrs, rng, settings) if c.style == "plain")
    arrays = testing._draw(rng, op, case, row, settings)
    tensors = [torch.from_numpy(a).requires_grad_(case.slots[j] in diff and a.dtype == np.float64)
               for j, a in enumerate(arrays)]
    return tensors, case.layout, attrs


GRAD_OPS = [op for op in OPS if op.has_backward and any(o.differentiable for o in op.outputs)]


@pytest.mark.parametrize("op", GRAD_OPS, ids=[o.name for o in GRAD_OPS])
def test_gradcheck(pkg: Any, op: Op) -> None:
    rng = np.random.default_rng(3)
    got = _grad_case(op, rng)
    if got is None:
        pytest.skip("no float64 row")
    flat, layout, attrs = got
    fn = getattr(pkg, op.name)

    def f(*a: Any) -> Any:  # the differentiable outputs
        out = fn(*testing.group(op, list(a), layout), **attrs)
        outs = (out,) if len(op.outputs) == 1 else tuple(out)
        return tuple(t for o, t in zip(op.outputs, outs) if o.differentiable)

    assert torch.autograd.gradcheck(f, tuple(flat), eps=1e-6, atol=1e-5, rtol=1e-4,
                                    nondet_tol=0.0, check_undefined_grad=False)


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_opcheck(pkg: Any, op: Op) -> None:
    """torch.library.opcheck: schema, fake tensor, autograd registration, aot dispatch (static
    and dynamic), on a plain case with gradients wanted for every float differentiable input."""
    rng = np.random.default_rng(4)
    settings = testing.read_settings(op)
    attrs = dict(settings.attr_sets[0])
    case = next(c for c in testing.shape_cases(op, attrs, rng, settings) if c.style == "plain")
    row = [op.rows_for("CPU")[0].dtype(i).name for i in range(len(op.inputs))]
    diff = [i for i, x in enumerate(op.inputs) if x.differentiable]
    arrays = testing._draw(rng, op, case, row, settings)
    tensors = [torch.from_numpy(a).requires_grad_(case.slots[j] in diff and a.dtype.kind == "f")
               for j, a in enumerate(arrays)]
    overload = getattr(torch.ops.opgen_ops_torch, op.name).default
    for a in op.attrs:  # the schema has no nested lists: the operator takes a list of lists encoded
        if a.is_nested:
            attrs[a.name] = pkg._rt.encode_rows(attrs[a.name])
    kwargs = {schema_name(name): value for name, value in attrs.items()}  # the operator's argument names
    torch.library.opcheck(overload, tuple(testing.group(op, tensors, case.layout)), kwargs)


def _t(*shape: int, dtype: Any = None) -> Any:
    return torch.randn(*shape, dtype=dtype or torch.float64)


COMPILE_CASES: dict[str, tuple[Any, Any, dict[str, Any]]] = {
    # op: (inputs of the first call, inputs of the second (other sizes, same ranks), attrs)
    "mul": ((_t(3, 5), _t(5)), (_t(4, 7), _t(7)), {}),
    "topk": ((_t(3, 5),), (_t(4, 7),), {"k": 2}),  # two outputs, one not differentiable
    "concat": (([_t(2, 3), _t(2, 4)],), ([_t(3, 5), _t(3, 2)],), {"axis": 1}),  # list input, grad views
    "layer_norm": ((_t(3, 5), _t(5), None), (_t(4, 7), _t(7), None), {}),  # optional inputs
    "reduce_sum": ((_t(3, 5),), (_t(4, 7),), {"axis": [1]}),  # grad view (expand)
    "matmul": ((_t(3, 5), _t(5, 2)), (_t(4, 7), _t(7, 3)), {}),  # a contract between inputs
}


def _leaves(args: Any) -> list[Any]:
    out: list[Any] = []
    for a in args:
        out += list(a) if isinstance(a, list) else [] if a is None else [a]
    return out


@pytest.mark.parametrize("name", sorted(COMPILE_CASES))
def test_compile(pkg: Any, name: str) -> None:
    """torch.compile(fullgraph=True, dynamic=True): the same forward and gradients as eager, and
    a second call with other sizes runs the same graph (no recompile: nothing specialised)."""
    import torch._dynamo.testing

    op = BY_NAME[name]
    fn = getattr(pkg, name)
    first, second, attrs = COMPILE_CASES[name]

    def loss(*args: Any) -> Any:
        out = fn(*args, **attrs)
        outs = (out,) if len(op.outputs) == 1 else tuple(out)
        return sum((t * t).sum() for o, t in zip(op.outputs, outs) if o.differentiable)

    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(loss, fullgraph=True, dynamic=True, backend=counter)
    for args in (first, second):
        args_c = [([t.clone().requires_grad_() for t in a] if isinstance(a, list) else
                   None if a is None else a.clone().requires_grad_()) for a in args]
        args_e = [([t.clone().requires_grad_() for t in a] if isinstance(a, list) else
                   None if a is None else a.clone().requires_grad_()) for a in args]
        got = compiled(*args_c)
        want = loss(*args_e)
        got.backward()
        want.backward()
        torch.testing.assert_close(got, want)
        for g, w in zip(_leaves(args_c), _leaves(args_e)):
            torch.testing.assert_close(g.grad, w.grad)
    assert counter.frame_count == 1


FIXED_SIZES = {"broadcast_to": "the output is the attr shape; twice x's sizes do not broadcast to it"}
"""Ops whose sizes the test attrs fix: compiled once, called twice with the same sizes."""


def _two_sizes(pkg: Any, op: Op) -> tuple[testing.Case, testing.Case, dict[str, Any], list[str]]:
    """A plain case of ``op`` with every input dim >= 2, doubled and tripled: two cases with the same
    ranks, layout, equalities, parities and orderings (so the contracts hold and a dynamic graph's
    guards too) in which no size is 0 or 1, inputs' or outputs' (Dynamo specialises those: e.g.
    avg_pool2d's (3 - 2) // 2 + 1), and the dtype row to call them with (float64 where the
    differentiable inputs have it). For :data:`FIXED_SIZES`, the plain case twice."""
    settings = testing.read_settings(op)
    attrs = dict(settings.attr_sets[0])
    rows = [[r.dtype(i).name for i in range(len(r.columns))] for r in op.rows_for("CPU")]
    diff = [i for i, x in enumerate(op.inputs) if x.differentiable]
    row = next((r for r in rows if diff and all(r[i] == "float64" for i in diff)), rows[0])
    for seed in range(100):
        first = next((c for c in testing.shape_cases(op, attrs, np.random.default_rng(seed), settings)
                      if c.style == "plain" and all(d >= 2 for s in c.slot_shapes for d in s)), None)
        if first is not None:
            break
    else:
        raise AssertionError(f"{op.name}: no plain case with every dim >= 2")
    if op.name in FIXED_SIZES:
        return first, first, attrs, row

    def scaled(v: Any, k: int) -> Any:
        return None if v is None else [tuple(k * d for d in s) for s in v] if isinstance(v, list) else \
            tuple(k * d for d in v)

    def times(k: int) -> testing.Case:  # out_shapes are not read (the eager call is the oracle)
        return sampling._make_case(op, "plain", {n: scaled(v, k) for n, v in first.shapes.items()}, first.out_shapes)

    return times(2), times(3), attrs, row


def _tensors(op: Op, case: testing.Case, row: list[str], seed: int) -> list[Any]:
    rng = np.random.default_rng(seed)
    arrays = testing._draw(rng, op, case, row, testing.read_settings(op))
    diff = {i for i, x in enumerate(op.inputs) if x.differentiable}
    return [torch.from_numpy(a).requires_grad_(case.slots[j] in diff and a.dtype.kind == "f")
            for j, a in enumerate(arrays)]


def _loss_of(pkg: Any, op: Op, layout: tuple[int, ...], attrs: dict[str, Any]) -> Any:
    fn = getattr(pkg, op.name)

    def loss(*flat: Any) -> Any:  # every float output (and written input), so that a graph holds each kernel
        out = fn(*testing.group(op, list(flat), layout), **attrs)
        outs = (() if not op.outputs else (out,) if len(op.outputs) == 1 else tuple(out)) + \
            tuple(flat[slot] for _, slot in testing.written_slots(op, layout))
        return sum((t.to(torch.float64) ** 2).sum() for t in outs if t.dtype.is_floating_point) + \
            sum(t.to(torch.float64).sum().detach() for t in outs if not t.dtype.is_floating_point)

    return loss


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_compile_every_op(pkg: Any, op: Op) -> None:
    """torch.compile(fullgraph=True, dynamic=True) with AOTAutograd (aot_eager: Dynamo, the fake
    kernel, the traced backward) on every op: forward and gradients as eager, and one graph for
    two sizes (no graph break: fullgraph; no recompilation: one frame compiled)."""
    import torch._dynamo.testing

    torch._dynamo.reset()  # one code object (loss) for every op: each test starts from no compiled frame
    first, second, attrs, row = _two_sizes(pkg, op)
    assert first.layout == second.layout
    loss = _loss_of(pkg, op, first.layout, attrs)
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(loss, fullgraph=True, dynamic=True, backend=counter)
    compiled_first = 0
    for seed, case in enumerate((first, second)):
        args_c = _tensors(op, case, row, seed)
        args_e = [t.detach().clone().requires_grad_(t.requires_grad) for t in args_c]
        got, want = compiled(*args_c), loss(*args_e)
        where = f"{op.name} {case.describe()}"
        torch.testing.assert_close(got, want, msg=lambda m, where=where: f"{where}: {m}")
        if got.requires_grad:
            got.backward()
            want.backward()
            for g, w in zip(args_c, args_e):
                if w.grad is not None:
                    torch.testing.assert_close(g.grad, w.grad, msg=lambda m, where=where: f"{where} grad: {m}")
        compiled_first = compiled_first or counter.frame_count
    assert compiled_first >= 1
    assert counter.frame_count == compiled_first, \
        f"{op.name}: recompiled for {second.describe()} after {first.describe()}"


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_export_every_op(pkg: Any, op: Op) -> None:
    """torch.export.export (static shapes, strict tracing) of every op: the exported program's
    outputs are eager's."""
    first, _, attrs, row = _two_sizes(pkg, op)
    fn = getattr(pkg, op.name)
    layout = first.layout

    class Net(torch.nn.Module):
        def forward(self, *flat: Any) -> Any:
            return fn(*testing.group(op, list(flat), layout), **attrs)

    args = tuple(t.detach() for t in _tensors(op, first, row, 0))
    exported = torch.export.export(Net(), tuple(t.clone() for t in args))
    args_x, args_e = tuple(t.clone() for t in args), tuple(t.clone() for t in args)
    got, want = exported.module()(*args_x), Net()(*args_e)
    torch.testing.assert_close(got, want, rtol=0, atol=0, msg=lambda m: f"{op.name}: {m}")
    for _, slot in testing.written_slots(op, layout):  # an input written in place: the same values
        assert not torch.equal(args_x[slot], args[slot]), f"{op.name}: slot {slot} not written"
        torch.testing.assert_close(args_x[slot], args_e[slot], rtol=0, atol=0, msg=lambda m: f"{op.name}: {m}")


def test_a_second_library_of_one_package_is_an_import_error(pkg: Any) -> None:
    """PyTorch cannot unregister operators: loading a rebuilt library of a package already loaded
    (an edited spec, opgen.load again) aborted the process (c10::Error from TORCH_LIBRARY_FRAGMENT
    while loading: std::terminate); the runtime refuses it first with an ImportError."""
    from opgen.backends.torch import runtime as rt

    assert rt._namespaces["opgen_ops_torch"] == pkg.LIBRARY
    with pytest.raises(ImportError, match=r"^the PyTorch operators torch\.ops\.opgen_ops_torch\.\* are already "
                       r"registered in this process by .*start a new Python process to use it$"):
        rt.claim_namespace("opgen_ops_torch", "/elsewhere/libopgen_ops_torch-0.so")
    rt.claim_namespace("opgen_ops_torch", pkg.LIBRARY)  # the same library again: nothing to do
    assert rt._namespaces["opgen_ops_torch"] == pkg.LIBRARY


TOPK_CONTRACT = "topk(): contract 'k <= x.shape[-1]' does not hold: x has shape (3, 4), k = 9"


@pytest.mark.parametrize("fullgraph", [True, False])
def test_contract_under_compile(pkg: Any, fullgraph: bool) -> None:
    """Under torch.compile a contract raises the op's ValueError with eager's message: with
    fullgraph the fake kernel's error passes Dynamo as it is (runtime.traced; Dynamo appends where
    the op was called), without it Dynamo breaks the graph and the eager kernel raises it."""
    x = torch.randn(3, 4)
    with pytest.raises(ValueError) as eager:
        pkg.topk(x, k=9)
    assert str(eager.value) == TOPK_CONTRACT
    compiled = torch.compile(lambda t: pkg.topk(t, k=9), fullgraph=fullgraph, dynamic=True)
    with pytest.raises(ValueError) as info:
        compiled(x)
    assert str(info.value).split("\n")[0] == TOPK_CONTRACT
    if fullgraph:
        assert info.value.op_message == TOPK_CONTRACT  # type: ignore[attr-defined]


def test_errors_under_compile_and_export(pkg: Any) -> None:
    """A shape rule's error, a dtype outside the rows (TypeError) and a contract under
    torch.export: each the op's own exception class and first line, as in eager."""
    a, b = torch.randn(3, 4), torch.randn(5, 6)
    with pytest.raises(ValueError) as eager:
        pkg.matmul(a, b)
    with pytest.raises(ValueError) as info:
        torch.compile(lambda p, q: pkg.matmul(p, q), fullgraph=True, dynamic=True)(a, b)
    assert str(info.value).split("\n")[0] == str(eager.value) == (
        "matmul(): matmul inner dimensions differ: (3, 4) x (5, 6) (4 != 5)")
    ints = torch.ones(3, dtype=torch.int32)
    with pytest.raises(TypeError) as eager_type:
        pkg.exp(ints)
    with pytest.raises(TypeError) as compiled_type:
        torch.compile(lambda t: pkg.exp(t), fullgraph=True)(ints)
    assert str(compiled_type.value).split("\n")[0] == str(eager_type.value)

    class TopK(torch.nn.Module):
        def forward(self, t: torch.Tensor) -> Any:
            return pkg.topk(t, k=9)

    with pytest.raises(ValueError) as exported:
        torch.export.export(TopK(), (torch.randn(3, 4),))
    assert str(exported.value).split("\n")[0] == TOPK_CONTRACT


def test_load_and_build_cli(tmp_path: Path) -> None:
    """opgen.load(backend="torch") generates, builds and imports <package>_torch; opgen build picks
    the torch backend from the package directory (nothing left to compile: a cached library)."""
    import os
    import subprocess
    import sys

    import opgen

    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    spec = ROOT / "ops" / "square.yaml"
    module = opgen.load(spec, package="sq_ops", build_dir=tmp_path / "build", backend="torch")
    assert module.__name__ == "sq_ops_torch"
    x = torch.tensor([1.5, -2.0], dtype=torch.float64)
    torch.testing.assert_close(module.square(x), x * x)
    assert torch.ops.sq_ops_torch.square.default(x).tolist() == [2.25, 4.0]
    pkg_dir = Path(module.__file__).parent
    run = subprocess.run([sys.executable, "-m", "opgen", "build", str(pkg_dir), "--build-dir", str(tmp_path / "build")],
                         capture_output=True, text=True, cwd=ROOT, env=env)
    assert run.returncode == 0, run.stderr
    assert "torch: " in run.stdout and "compiling" not in run.stderr
    bad = subprocess.run([sys.executable, "-m", "opgen", "build", str(pkg_dir), "--only", "aot"],
                         capture_output=True, text=True, cwd=ROOT, env=env)
    assert bad.returncode == 2 and "is a torch package, whose libraries are torch" in bad.stderr


def test_inductor_avg_pool2d(pkg: Any) -> None:
    """A plain torch.compile (Inductor) runs an op whose spec names an attr ``kernel``: the schema
    calls it ``kernel_`` (Inductor's FallbackKernel.create takes ``kernel`` itself), the Python
    function keeps the spec's name."""
    for name in dir(pkg._ops):
        packet = getattr(pkg._ops, name)
        if hasattr(packet, "default"):
            args = {a.name for a in packet.default._schema.arguments}
            assert not args & SCHEMA_RESERVED, (name, args)
    x = torch.randn(2, 3, 8, 8)
    compiled = torch.compile(lambda t: pkg.avg_pool2d(t, kernel=(2, 2), stride=(2, 2)))
    torch.testing.assert_close(compiled(x), torch.nn.functional.avg_pool2d(x, 2, 2))


def _leaf(*shape: int, grad: bool = True) -> Any:
    return torch.randn(*shape, dtype=torch.float64, requires_grad=grad)


def test_autograd_node_saves_only_what_the_backward_reads(pkg: Any) -> None:
    """The Autograd kernel's node (opgen::pt::ag::OpNode) saves a tensor only when the backward
    body reads it for a gradient that is wanted (mul's x for dy, y for dx; exp its output), through
    torch's SavedVariable: saved-tensor hooks see exactly those; gradients match torch's own."""
    def packed(f: Any) -> list[tuple[int, ...]]:
        seen: list[tuple[int, ...]] = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: seen.append(tuple(t.shape)) or t, lambda t: t):
            f().sum().backward()
        return seen

    x, y = _leaf(2, 3), _leaf(2, 3, grad=False)
    assert packed(lambda: pkg.mul(x, y)) == [(2, 3)]  # y only: dy is not wanted
    torch.testing.assert_close(x.grad, y)
    x, y = _leaf(2, 3), _leaf(2, 3)
    assert packed(lambda: pkg.mul(x, y)) == [(2, 3), (2, 3)]
    torch.testing.assert_close((x.grad, y.grad), (y, x))
    x = _leaf(4)
    assert packed(lambda: pkg.exp(x)) == [(4,)]
    torch.testing.assert_close(x.grad, x.detach().exp())
    x = _leaf(3, 4)
    assert packed(lambda: pkg.reduce_sum(x, axis=[1])) == []  # a grad view: nothing saved
    (gx,) = torch.autograd.grad(pkg.reduce_sum(x, axis=[1]).sum(), (x,))
    assert gx.stride() == (0, 0) and gx.tolist() == [[1.0] * 4] * 3  # dout reshaped and expanded, not copied
    # needs_input_grad: torch.autograd.grad of x alone computes x's gradient only, right
    x, y = _leaf(2, 3), _leaf(2, 3)
    (gx,) = torch.autograd.grad(pkg.mul(x, y).sum(), (x,))
    torch.testing.assert_close(gx, y.detach())
    assert y.grad is None


def test_autograd_node_graph(pkg: Any) -> None:
    """Non-differentiable outputs, an absent optional input, a list input, an output gradient
    that never arrives (zeros, as torch::autograd::Function materialised it), node hooks."""
    x = _leaf(3, 5)
    values, indices = pkg.topk(x, k=2)
    assert values.grad_fn.name() == "opgen_ops_torch::topk::Grad"
    assert values.requires_grad and not indices.requires_grad and indices.grad_fn is None
    values.sum().backward()
    assert x.grad.sum().item() == 6.0
    x, w = _leaf(3, 5), _leaf(5)
    y, mean, rstd = pkg.layer_norm(x, w, None)
    assert not mean.requires_grad and not rstd.requires_grad
    assert [f is None for f, _ in y.grad_fn.next_functions] == [False, False, True]  # beta left out: no edge
    gx, gw = torch.autograd.grad(y.pow(2).sum(), (x, w))
    ref_x, ref_w = x.detach().requires_grad_(), w.detach().requires_grad_()
    ref = torch.nn.functional.layer_norm(ref_x, (5,), ref_w, None, eps=1e-5)
    torch.testing.assert_close((gx, gw), torch.autograd.grad(ref.pow(2).sum(), (ref_x, ref_w)))
    x0, zs = _leaf(2, 2), [_leaf(2, 2), _leaf(2, 2, grad=False), _leaf(2, 2)]
    grads = torch.autograd.grad(pkg.add_n(x0, zs).sum(), (x0, zs[0], zs[2]))
    assert all(g.tolist() == [[1.0, 1.0], [1.0, 1.0]] for g in grads)

    class NoGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, t: Any) -> Any:
            return t.clone()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return None

    a, b = _leaf(2, 3), _leaf(2, 4)
    for out, leaves in ((pkg.exp(a), (a,)), (pkg.concat([a, b], axis=1), (a, b)), (pkg.topk(a, k=2)[0], (a,))):
        got = torch.autograd.grad(NoGrad.apply(out).sum(), leaves)
        assert all(g is not None and g.abs().sum().item() == 0.0 and g.shape == t.shape for g, t in zip(got, leaves))
    x, y = _leaf(2, 3), _leaf(2, 3)
    out = pkg.mul(x, y)
    seen: list[Any] = []
    out.grad_fn.register_prehook(lambda go: seen.append(("pre", len(go))))
    out.grad_fn.register_hook(lambda gi, go: seen.append(("post", len(gi))))
    out.sum().backward()
    assert seen == [("pre", 1), ("post", 2)]


def test_autograd_node_errors(pkg: Any) -> None:
    """torch's own errors from the saved tensors (SavedVariable): a saved input or output modified
    in place, a second backward after the graph was freed; the op's error for forward-mode AD
    and for torch.func's differentiating transforms (create_graph: the next test)."""
    x, y = _leaf(2, 3), _leaf(2, 3)
    a = x * 1
    out = pkg.mul(a, y)
    a.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    out = pkg.exp(x)
    out.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    loss = pkg.mul(x, y).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    torch.testing.assert_close(x.grad, 2 * y.detach())
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    import torch.autograd.forward_ad as fwAD

    for grad in (False, True):
        with fwAD.dual_level(), pytest.raises(NotImplementedError, match=r"^exp\(\): forward-mode AD"):
            pkg.exp(fwAD.make_dual(_leaf(2, grad=grad), torch.ones(2, dtype=torch.float64)))
    with pytest.raises(RuntimeError, match=r"^exp\(\): gradients under torch.func transforms"):
        torch.func.grad(lambda t: pkg.exp(t).sum())(_leaf(3, grad=False))
    torch.testing.assert_close(torch.func.vmap(pkg.exp)(x.detach()), x.detach().exp())  # no gradient: runs


def _not_differentiable(op: str) -> str:
    return rf"^{op}\(\): the backward of opgen op '{op}' is not differentiable \(no double backward\)"


def test_create_graph_gives_first_order_gradients_and_refuses_the_second(pkg: Any) -> None:
    """create_graph=True (OpNode::apply with grad mode on): the first-order gradients are the same
    numbers as without it and usable as values; differentiating them again -- a gradient penalty,
    torch.autograd.grad of the gradient (alone or added to another term), hessian -- raises the
    op's RuntimeError, never a silently constant gradient. Without create_graph nothing changes."""
    x, y = _leaf(2, 3), _leaf(2, 3)
    (gx,) = torch.autograd.grad(pkg.exp(x).sum(), (x,), create_graph=True)
    torch.testing.assert_close(gx, x.detach().exp())
    assert gx.requires_grad and gx.grad_fn.name() == "torch::autograd::Error"
    with pytest.raises(RuntimeError, match=_not_differentiable("exp")):
        (gx ** 2).sum().backward()  # a gradient penalty
    with pytest.raises(RuntimeError, match=_not_differentiable("exp")):
        torch.autograd.grad(gx.sum(), (x,))
    with pytest.raises(RuntimeError, match=_not_differentiable("exp")):  # torch's DelayedError would miss this
        torch.autograd.grad(gx.sum() + (x ** 3).sum(), (x,))
    with pytest.raises(RuntimeError, match=_not_differentiable("exp")):
        torch.autograd.functional.hessian(lambda t: pkg.exp(t).sum(), x.detach())
    with pytest.raises(RuntimeError, match=_not_differentiable("exp")):
        torch.autograd.gradgradcheck(pkg.exp, (x,))
    assert x.grad is None
    # an output gradient that itself requires grad (it depends on x): the same numbers, the same error
    out = pkg.mul(x, y)
    gx, gy = torch.autograd.grad((out * out).sum(), (x, y), create_graph=True)
    torch.testing.assert_close((gx, gy), (2 * x.detach() * y.detach() ** 2, 2 * y.detach() * x.detach() ** 2))
    with pytest.raises(RuntimeError, match=_not_differentiable("mul")):
        torch.autograd.grad((gx * gy).sum(), (y,))
    # backward(create_graph=True) fills .grad with the right numbers; a penalty on them raises
    with pytest.warns(UserWarning, match="reference cycle"):  # torch's warning, for any op
        pkg.mul(x, y).sum().backward(create_graph=True)
    torch.testing.assert_close((x.grad, y.grad), (y.detach(), x.detach()))
    with pytest.raises(RuntimeError, match=_not_differentiable("mul")):
        (x.grad ** 2 + y.grad ** 2).sum().backward()
    # each gradient path (backward op, dout itself, views of dout; optional, list and
    # non-differentiable-output ops): the same numbers with create_graph, every one refused again
    cases: list[tuple[str, Any, list[Any]]] = [
        ("add", lambda a, b: pkg.add(a, b), [_leaf(2, 3), _leaf(2, 3)]),
        ("concat", lambda a, b: pkg.concat([a, b], axis=1), [_leaf(2, 3), _leaf(2, 4)]),
        ("reduce_sum", lambda a: pkg.reduce_sum(a, axis=[1]), [_leaf(3, 4)]),
        ("topk", lambda a: pkg.topk(a, k=2)[0], [_leaf(3, 5)]),
        ("layer_norm", lambda a, w: pkg.layer_norm(a, w, None)[0], [_leaf(3, 5), _leaf(5)]),
        ("add_n", lambda a, *zs: pkg.add_n(a, list(zs)), [_leaf(2, 2), _leaf(2, 2), _leaf(2, 2)]),
    ]
    for name, op, leaves in cases:
        dout = torch.randn_like(op(*leaves))
        plain = torch.autograd.grad(op(*leaves), leaves, dout)
        assert not any(g.requires_grad for g in plain), name
        graphed = torch.autograd.grad(op(*leaves), leaves, dout, create_graph=True)
        torch.testing.assert_close(graphed, plain, rtol=0, atol=0, msg=name)
        assert all(g.requires_grad for g in graphed), name
        with pytest.raises(RuntimeError, match=_not_differentiable(name)):
            torch.autograd.grad(sum((g * g).sum() for g in graphed), leaves)
    # without create_graph: plain gradients, no graph, as before
    x = _leaf(4)
    pkg.exp(x).sum().backward()
    assert not x.grad.requires_grad and x.grad.grad_fn is None
    torch.testing.assert_close(x.grad, x.detach().exp())
