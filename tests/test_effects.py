"""In-place, out-argument and output-less ops (issue 24 part 1): ``outputs[].aliases`` and
``inputs[].writes`` (tests/specs/effects/), with real MindSpore and real numbers.

The three missing MindSpore custom-op test cases: ``add_`` (in place, ``x += y``),
``scale_into`` (an out-argument, ``scale_into(x, out=buf)``) and ``accumulate`` (no outputs,
``acc += scale * x``), and ``momentum_step`` (an optimizer step writing two inputs), each on
the Custom path and the Function<T> path in PyNative, in a GRAPH_MODE Cell updating Parameters
(kept, in order, across calls) and in ``ms.jit``, and on PyTorch eager and compiled; a gradient
through them, or on PyTorch a forward-mode tangent, is refused with an error naming the op; and
the spec checks of incoherent specs.
"""

from __future__ import annotations

import contextlib
import importlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from opgen import testing
from opgen.pipeline import generate, load_ops

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "tests" / "specs" / "effects"
REFUSED = r"in-place op '{}' cannot be differentiated"


@pytest.fixture(scope="module")
def pkg(tmp_path_factory: pytest.TempPathFactory, ms) -> str:  # type: ignore[no-untyped-def]
    """The three specs generated into one fresh MindSpore package and imported (its aot library
    built; the Function<T> extension is built by the first test that imports it)."""
    d = tmp_path_factory.mktemp("effects")
    with contextlib.chdir(d):
        res = generate([str(SPECS)], Path("out"), f"fx_{uuid.uuid4().hex[:8]}", backend="mindspore")
    assert not res.diagnostics, [x.format() for x in res.diagnostics]
    pkg_dir = res.package_dir if res.package_dir.is_absolute() else d / res.package_dir
    return testing.import_package(pkg_dir)


def test_opgen_test_compares_written_inputs_and_skips_gradients(pkg: str) -> None:
    package = testing.load_package(Path(importlib.import_module(pkg).__file__).parent)  # type: ignore[arg-type]
    ops, diags = load_ops([SPECS])
    assert not diags
    for op in ops:
        for check in package.checks:
            r = testing.run_check(package, op, check)
            if check.startswith("grad/"):
                written = ", ".join(x.name for x in op.written_inputs)
                assert (r.status, r.messages) == ("n/a", [f"writes {written} in place: no gradient (a gradient "
                                                         "through it is refused)"]), (op.name, check)
            else:
                assert r.status == "pass", (op.name, check, r.messages)
    # a wrong number in the written input is a failure: a reference that adds 2 * x
    acc = next(op for op in ops if op.name == "accumulate")
    ref = package.reference.accumulate
    try:
        package.reference.accumulate = lambda acc, x, scale: np.add(acc, 2 * x, out=acc)  # type: ignore[attr-defined]
        r = testing.run_check(package, acc, "forward/custom-pynative")
        assert r.status == "fail" and any("acc (written in place)" in m for m in r.messages), r.messages
    finally:
        package.reference.accumulate = ref  # type: ignore[attr-defined]


@pytest.fixture(params=["custom", "function"])
def path(request: pytest.FixtureRequest, pkg: str) -> ModuleType:
    """The module of one path in PyNative: ``custom`` (ops.Custom) or ``function`` (Function<T>)."""
    return importlib.import_module(f"{pkg}.{request.param}")


@pytest.fixture
def graph_mode(ms) -> Iterator[None]:  # type: ignore[no-untyped-def]
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
    ms.set_context(mode=ms.PYNATIVE_MODE)


def t(ms: Any, a: Any, dtype: Any = np.float32) -> Any:
    return ms.Tensor(np.asarray(a, dtype))


# ----------------------------------------------------------------------------- PyNative, both paths


def test_in_place_op_writes_its_input_and_returns_it(path: ModuleType, ms) -> None:  # type: ignore[no-untyped-def]
    x = t(ms, [[1, 2, 3], [4, 5, 6]])
    r = path.add_(x, t(ms, [10, 20, 30]))
    assert r is x
    np.testing.assert_array_equal(x.asnumpy(), [[11, 22, 33], [14, 25, 36]])
    xi = t(ms, [1, 2], np.int64)
    path.add_(xi, t(ms, [5, 5], np.int64))
    path.add_(xi, t(ms, [1, 1], np.int64))  # a second call sees the first one's result
    np.testing.assert_array_equal(xi.asnumpy(), [7, 8])
    p = ms.Parameter(t(ms, [1.0, 1.0]), name="p")
    path.add_(p, t(ms, [0.5, -1.0]))
    np.testing.assert_array_equal(p.asnumpy(), [1.5, 0.0])
    np.testing.assert_array_equal((p * 2).asnumpy(), [3.0, 0.0])  # a later op reads the new value


def test_out_argument_op_writes_the_buffer_only(path: ModuleType, ms) -> None:  # type: ignore[no-untyped-def]
    x = t(ms, [[1, -2], [3, 4]])
    buf = t(ms, np.full((2, 2), 99.0))
    r = path.scale_into(x, out=buf, alpha=0.5)
    assert r is buf
    np.testing.assert_array_equal(buf.asnumpy(), [[0.5, -1], [1.5, 2]])
    np.testing.assert_array_equal(x.asnumpy(), [[1, -2], [3, 4]])  # x unchanged
    b64 = ms.Tensor(np.zeros(3))
    path.scale_into(ms.Tensor(np.array([1.0, 2.0, 3.0])), b64)
    np.testing.assert_array_equal(b64.asnumpy(), [2.0, 4.0, 6.0])
    with pytest.raises(ValueError, match=r"scale_into\(\): contract 'out.shape == x.shape' does not hold"):
        path.scale_into(x, t(ms, [0.0]))


def test_op_without_outputs_returns_none_and_accumulates(path: ModuleType, ms) -> None:  # type: ignore[no-untyped-def]
    acc = ms.Parameter(t(ms, np.zeros((2, 2))), name="acc")
    assert path.accumulate(acc, t(ms, [1, 2])) is None
    assert path.accumulate(acc, t(ms, [[1, 1], [1, 1]]), scale=3.0) is None
    np.testing.assert_array_equal(acc.asnumpy(), [[4, 5], [4, 5]])
    with pytest.raises(TypeError, match=r"accumulate\(\): unsupported dtypes"):
        path.accumulate(t(ms, [1], np.int32), t(ms, [1], np.int32))


def test_gradient_through_a_written_input_is_refused(path: ModuleType, ms) -> None:  # type: ignore[no-untyped-def]
    y = t(ms, [1, 2, 3])

    def loss(x, y):  # type: ignore[no-untyped-def]
        path.add_(x, y)
        return (x * 2).sum()

    for grad in (ms.grad(loss, grad_position=1), ms.value_and_grad(loss, grad_position=(0, 1))):
        x = t(ms, [1, 1, 1])
        with pytest.raises(RuntimeError, match=REFUSED.format("add_")):
            grad(x, y)
        np.testing.assert_array_equal(x.asnumpy(), [1, 1, 1])  # refused before it wrote
    acc = t(ms, [0, 0, 0])
    with pytest.raises(RuntimeError, match=REFUSED.format("accumulate")):
        ms.grad(lambda v: (path.accumulate(acc, v), (acc * v).sum())[1])(y)
    with pytest.raises(RuntimeError, match=REFUSED.format("scale_into")):
        ms.grad(lambda v: path.scale_into(v, acc).sum())(y)
    path.add_(acc, y)  # outside a gradient the same op works
    np.testing.assert_array_equal(acc.asnumpy(), [1, 2, 3])


def test_a_view_is_refused_as_a_written_input(path: ModuleType, ms) -> None:  # type: ignore[no-untyped-def]
    base = t(ms, np.zeros((3, 2)))
    s = t(ms, np.zeros(4))
    for view in (base.transpose(1, 0), s[1:3]):  # the Custom path would write a copy: lost
        with pytest.raises(ValueError, match=r"add_\(\): input 'x' is written in place, so it must be a tensor of "
                           r"its own, not a view"):
            path.add_(view, t(ms, [1.0]))
    np.testing.assert_array_equal(s.asnumpy(), np.zeros(4))
    with pytest.raises(ValueError, match=r"scale_into\(\): input 'out' is written in place"):
        path.scale_into(t(ms, [1.0, 2.0]), s[:2] if not s[:2].is_contiguous() else s[2:])


# ----------------------------------------------------------------------------- graphs (Custom path)


def test_graph_cell_updates_parameters_in_order_across_calls(pkg: str, ms, graph_mode) -> None:  # type: ignore[no-untyped-def]
    E = importlib.import_module(pkg)

    class Net(ms.nn.Cell):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.p = ms.Parameter(t(ms, np.ones(3)), name="p")
            self.acc = ms.Parameter(t(ms, np.zeros(3)), name="acc")
            self.buf = ms.Parameter(t(ms, np.zeros(3)), name="buf")

        def construct(self, y):  # type: ignore[no-untyped-def]
            before = self.p * 1  # read before the write: the old value
            r = E.add_(self.p, y)
            after = self.p * 2  # read after it: the new value
            E.accumulate(self.acc, self.p)  # no outputs, result unused: kept
            E.accumulate(self.acc, y, 2.0)  # and in order with the one before
            s = E.scale_into(self.p, self.buf)
            return before, after, r * 1, self.acc * 1, s + 0

    net = Net()
    y = t(ms, [5, 5, 5])
    p, acc = 1.0, 0.0
    for _ in range(3):
        out = [o.asnumpy()[0] for o in net(y)]
        before, p = p, p + 5
        acc = acc + p + 10
        assert out == [before, 2 * p, p, acc, 2 * p]
        assert (net.p.asnumpy()[0], net.acc.asnumpy()[0], net.buf.asnumpy()[0]) == (p, acc, 2 * p)


def _momentum_reference(steps: int, lr: float) -> tuple[Any, Any]:
    p, v = np.array([1.0, -2.0, 3.0]), np.zeros(3)
    for k in range(steps):
        g = p * 0.5 + k  # what the loops below feed in
        v = 0.9 * v + g
        p = p - lr * v
    return p, v


def test_an_optimizer_step_writes_two_parameters_on_every_path(pkg: str, path: ModuleType, ms) -> None:  # type: ignore[no-untyped-def]
    p = ms.Parameter(t(ms, [1.0, -2.0, 3.0]), name="w")
    v = ms.Parameter(t(ms, np.zeros(3)), name="w_v")
    for k in range(3):  # PyNative, outside any gradient, as an optimizer runs
        assert path.momentum_step(p, v, p * 0.5 + k, t(ms, 0.1)) is None
    want_p, want_v = _momentum_reference(3, 0.1)
    np.testing.assert_allclose(p.asnumpy(), want_p, rtol=1e-6)
    np.testing.assert_allclose(v.asnumpy(), want_v, rtol=1e-6)


def test_an_optimizer_step_in_a_graph_cell(pkg: str, ms, graph_mode) -> None:  # type: ignore[no-untyped-def]
    E = importlib.import_module(pkg)

    class Step(ms.nn.Cell):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.p = ms.Parameter(t(ms, [1.0, -2.0, 3.0]), name="p")
            self.v = ms.Parameter(t(ms, np.zeros(3)), name="v")

        def construct(self, k, lr):  # type: ignore[no-untyped-def]
            E.momentum_step(self.p, self.v, self.p * 0.5 + k, lr)  # both written, no output
            return self.p * 1

    step = Step()
    for k in range(3):  # lr is a tensor: a new value recompiles nothing
        out = step(t(ms, float(k)), t(ms, 0.1 + 0.0 * k))
    want_p, want_v = _momentum_reference(3, 0.1)
    np.testing.assert_allclose(out.asnumpy(), want_p, rtol=1e-6)
    np.testing.assert_allclose(step.v.asnumpy(), want_v, rtol=1e-6)


def test_jit_keeps_and_orders_writes(pkg: str, ms) -> None:  # type: ignore[no-untyped-def]
    E = importlib.import_module(pkg)
    q = ms.Parameter(t(ms, np.zeros(3)), name="q_jit")
    y = t(ms, [1, 2, 3])

    @ms.jit  # type: ignore[misc]
    def twice(y):  # type: ignore[no-untyped-def]
        E.accumulate(q, y)  # no output, nothing uses the call: still run, twice, in order
        E.accumulate(q, y, 10.0)
        return y

    twice(y)
    np.testing.assert_array_equal(q.asnumpy(), [11, 22, 33])

    @ms.jit  # type: ignore[misc]
    def war(x, y):  # type: ignore[no-untyped-def]
        a = x * 2  # before the write
        r = E.add_(x, y)
        b = x * 2  # after it
        return a, b, r

    x = t(ms, [1, 1, 1])
    a, b, r = war(x, y)
    np.testing.assert_array_equal(a.asnumpy(), [2, 2, 2])
    np.testing.assert_array_equal(b.asnumpy(), [4, 6, 8])
    np.testing.assert_array_equal(r.asnumpy(), [2, 3, 4])
    np.testing.assert_array_equal(x.asnumpy(), [2, 3, 4])


def test_graph_gradient_through_the_result_is_refused(pkg: str, ms) -> None:  # type: ignore[no-untyped-def]
    E = importlib.import_module(pkg)

    def loss(x, y):  # type: ignore[no-untyped-def]
        return (E.add_(x, y) * 2).sum()

    with pytest.raises(RuntimeError, match=REFUSED.format("add_")):
        ms.grad(ms.jit(loss), grad_position=1)(t(ms, [1, 1]), t(ms, [1, 2]))

    def reads_x(x, y):  # type: ignore[no-untyped-def]
        E.accumulate(x, y)
        return (x * 2).sum()  # x read after the write, not through the op's result

    with pytest.raises(RuntimeError, match=REFUSED.format("accumulate")):  # refused while the graph compiles
        ms.grad(ms.jit(reads_x), grad_position=1)(t(ms, [1, 1]), t(ms, [1, 2]))
    x = t(ms, [1, 1])
    ms.jit(reads_x)(x, t(ms, [1, 2]))  # the same function without a gradient runs
    np.testing.assert_array_equal(x.asnumpy(), [2, 3])


# ----------------------------------------------------------------------------- spec checks


def _errors(tmp_path: Path, body: str) -> list[str]:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: bad\ndoc: d\n" + body, encoding="utf-8")
    _, diags = load_ops([spec])
    return [d.format().splitlines()[0].replace(str(tmp_path) + "/", "") for d in diags]


def test_incoherent_effect_specs_are_errors_at_their_place(tmp_path: Path) -> None:
    assert _errors(tmp_path, (
        "inputs: [{name: x, doc: d}, {name: y, doc: d}]\n"
        "outputs:\n"
        "  - {name: a, doc: d, aliases: z}\n"
        "dtype_format: {CPU: [[F32_Default, F32_Default, F32_Default]]}\n"
        "kernel: {forward: ';'}\n")) == [
        "bad.yaml:5:32: error: op 'bad': output 'a' aliases unknown input 'z'"]
    assert _errors(tmp_path, (
        "inputs: [{name: x, doc: d, kind: optional}]\n"
        "outputs:\n"
        "  - {name: a, doc: d, aliases: x, shape: x}\n"
        "dtype_format: {CPU: [[F32_Default, F32_Default]]}\n"
        "kernel: {forward: ';'}\n")) == [
        "bad.yaml:5:32: error: op 'bad': output 'a' aliases input 'x', which is optional; only a required input "
        "(one tensor) can be updated in place",
        "bad.yaml:5:35: error: op 'bad': output 'a' aliases input 'x': its shape is the input's, so it takes no "
        "'shape:'"]
    assert _errors(tmp_path, (
        "inputs: [{name: x, doc: d, writes: true}, {name: y, doc: d, kind: dynamic, writes: true}]\n"
        "outputs:\n"
        "  - {name: a, doc: d, aliases: x}\n"
        "  - {name: b, doc: d, aliases: x, differentiable: true}\n"
        "dtype_format: {CPU: [[F32_Default, F32_Default, F64_Default, F32_Default]]}\n"
        "kernel: {forward: ';', backward: ';'}\n")) == [
        "bad.yaml:3:10: error: op 'bad': input 'x' is written through output 'a' (aliases: x), so it takes no "
        "'writes: true'",
        "bad.yaml:3:43: error: op 'bad': input 'y' is dynamic and 'writes: true'; only a required input (one "
        "tensor) can be written in place",
        "bad.yaml:6:5: error: op 'bad': output 'b' is marked differentiable, but op 'bad' writes 'x', 'y' in place, "
        "and such an op has no gradient",
        "bad.yaml:6:5: error: op 'bad': outputs 'a' and 'b' both alias input 'x'; an input is updated in place by "
        "one output at most",
        "bad.yaml:7:22: error: op 'bad': output 'a' aliases input 'x' (it is that tensor), but this row gives "
        "F32_Default for 'x' and F64_Default for 'a'",
        "bad.yaml:8:34: error: op 'bad': kernel.backward: op 'bad' writes 'x', 'y' in place, and such an op has no "
        "gradient"]
    assert _errors(tmp_path, (
        "inputs: [{name: x, doc: d}]\n"
        "outputs: []\n"
        "dtype_format: {CPU: [[F32_Default]]}\n"
        "kernel: {forward: ';'}\n")) == [
        "bad.yaml:1:1: error: op 'bad': op 'bad' has no outputs and writes no input, so a call would do nothing"]
    assert _errors(tmp_path, (
        "inputs: [{name: x, doc: d}, {name: y, doc: d}]\n"
        "outputs: [{name: a, doc: d, aliases: x}]\n"
        "dtype_format: {CPU: [[F32_Default, F32_Default, F32_Default]]}\n"
        "elementwise: {forward: x + y, grad: {x: da}}\n")) == [
        "bad.yaml:6:41: error: op 'bad': elementwise.grad.x: op 'bad' writes 'x' in place, and such an op has no "
        "gradient"]
    assert _errors(tmp_path, (
        "inputs: [{name: x, doc: d}]\n"
        "outputs: [{name: a, doc: d, shape: x}]\n"
        "dtype_format: {CPU: [[F32_Default, F32_Default]]}\n"
        "kernel: {forward: ';'}\n")) == [
        "bad.yaml:4:11: error: op 'bad': output 'a' has no 'dtype'; an output states its shape and dtype rules, "
        "unless it is an input updated in place"]


# ----------------------------------------------------------------------------- PyTorch


@pytest.fixture(scope="module")
def tpkg(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The three specs generated into one fresh PyTorch package and imported (its library built)."""
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("effects_torch")
    with contextlib.chdir(d):
        res = generate([str(SPECS)], Path("out"), f"fx_{uuid.uuid4().hex[:8]}", backend="torch")
    assert not res.diagnostics, [x.format() for x in res.diagnostics]
    pkg_dir = res.package_dir if res.package_dir.is_absolute() else d / res.package_dir
    return importlib.import_module(testing.import_package(pkg_dir))


def test_torch_schemas_annotate_the_written_inputs(tpkg: ModuleType) -> None:
    import torch

    ns = getattr(torch.ops, Path(tpkg.__file__).parent.name)  # type: ignore[arg-type]
    assert str(ns.add_.default._schema).endswith("add_(Tensor(a!) x, Tensor y) -> ()")
    assert str(ns.scale_into.default._schema).endswith("scale_into(Tensor x, Tensor(a!) out, float alpha=2.) -> ()")
    assert str(ns.accumulate.default._schema).endswith("accumulate(Tensor(a!) acc, Tensor x, float scale=1.) -> ()")


def test_torch_eager_writes_the_inputs(tpkg: ModuleType) -> None:
    import torch

    x = torch.tensor([[1.0, 2, 3], [4, 5, 6]])
    version = x._version
    assert tpkg.add_(x, torch.tensor([10.0, 20, 30])) is x
    assert x.tolist() == [[11, 22, 33], [14, 25, 36]] and x._version > version
    xt = torch.zeros(3, 2).t()  # not contiguous: the kernel writes a copy, copied back
    tpkg.add_(xt, torch.tensor([1.0, 2, 3]))
    assert xt.tolist() == [[1, 2, 3], [1, 2, 3]]
    xi = torch.tensor([1, 2])
    tpkg.add_(tpkg.add_(xi, torch.tensor([5, 5])), torch.tensor([1, 1]))
    assert xi.tolist() == [7, 8]
    buf = torch.full((2, 3), 99.0)
    assert tpkg.scale_into(x, out=buf, alpha=0.5) is buf
    assert buf.tolist() == [[5.5, 11, 16.5], [7, 12.5, 18]] and x.tolist() == [[11, 22, 33], [14, 25, 36]]
    acc = torch.zeros(2, 2)
    assert tpkg.accumulate(acc, torch.tensor([1.0, 2])) is None
    assert tpkg.accumulate(acc, torch.ones(2, 2), scale=3.0) is None
    assert acc.tolist() == [[4, 5], [4, 5]]
    with pytest.raises(ValueError, match=r"scale_into\(\): contract 'out.shape == x.shape' does not hold"):
        tpkg.scale_into(x, torch.zeros(1))


def test_torch_compiled_writes_the_inputs_in_order(tpkg: ModuleType) -> None:
    import torch

    def step(x, y, acc, buf):  # type: ignore[no-untyped-def]
        before = x * 1
        r = tpkg.add_(x, y)
        tpkg.accumulate(acc, x)  # no output, unused: still runs, after add_
        tpkg.accumulate(acc, y, scale=10.0)
        return before, r * 2, tpkg.scale_into(x, buf)

    for dynamic in (False, True):
        f = torch.compile(step, fullgraph=True, dynamic=dynamic)
        x, acc, buf = torch.ones(3), torch.zeros(3), torch.zeros(3)
        y = torch.tensor([1.0, 2, 3])
        before, doubled, scaled = f(x, y, acc, buf)
        assert before.tolist() == [1, 1, 1] and doubled.tolist() == [4, 6, 8]
        assert x.tolist() == [2, 3, 4] and acc.tolist() == [12, 23, 34] and buf.tolist() == scaled.tolist() == [4, 6, 8]


def test_torch_opcheck(tpkg: ModuleType) -> None:
    import torch

    ns = getattr(torch.ops, Path(tpkg.__file__).parent.name)  # type: ignore[arg-type]
    cases = {"add_": ((torch.randn(2, 3), torch.randn(3)), {}),
             "scale_into": ((torch.randn(2, 3), torch.randn(2, 3)), {"alpha": 1.5}),
             "accumulate": ((torch.randn(2, 3), torch.randn(3)), {"scale": 2.0})}
    for name, (args, kwargs) in cases.items():
        overload = getattr(ns, name).default
        result = torch.library.opcheck(overload, args, kwargs)
        assert set(result.values()) == {"SUCCESS"}, (name, result)
        # the autograd kernel (which refuses) is registered on the Autograd key: with an input that
        # requires grad, the registration check itself passes
        graded = (args[0], args[1].clone().requires_grad_(True))
        assert torch.library.opcheck(overload, graded, kwargs, test_utils="test_autograd_registration") == {
            "test_autograd_registration": "SUCCESS"}


def test_torch_optimizer_step_writes_two_tensors(tpkg: ModuleType) -> None:
    import torch

    p = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0], dtype=torch.float32))
    v = torch.zeros(3)
    step = torch.compile(tpkg.momentum_step, fullgraph=True)
    for k in range(3):
        with torch.no_grad():  # as torch's optimizers step
            (tpkg.momentum_step if k == 0 else step)(p, v, p.detach() * 0.5 + k, torch.tensor(0.1))
    want_p, want_v = _momentum_reference(3, 0.1)
    np.testing.assert_allclose(p.detach().numpy(), want_p, rtol=1e-6)
    np.testing.assert_allclose(v.numpy(), want_v, rtol=1e-6)


def test_torch_refuses_a_call_that_needs_a_gradient(tpkg: ModuleType) -> None:
    import torch

    x = torch.ones(3)
    with pytest.raises(RuntimeError, match=REFUSED.format("add_")):
        tpkg.add_(x, torch.ones(3, requires_grad=True))  # x's new value would depend on y
    w = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=REFUSED.format("accumulate")):
        tpkg.accumulate(w, torch.ones(3))
    with pytest.raises(RuntimeError, match=REFUSED.format("scale_into")):
        tpkg.scale_into(w, torch.zeros(3))
    assert x.tolist() == [1, 1, 1] and w.tolist() == [1, 1, 1]  # refused before writing
    with torch.no_grad():  # an optimizer step: no gradient recorded, the same call works
        tpkg.accumulate(w, torch.ones(3), scale=0.5)
    assert w.tolist() == [1.5, 1.5, 1.5]
    f = torch.compile(lambda a, b: tpkg.add_(a, b) * 1, fullgraph=True)
    with pytest.raises(Exception, match=REFUSED.format("add_")):
        f(torch.ones(3), torch.ones(3, requires_grad=True))


def test_torch_refuses_a_forward_mode_tangent(tpkg: ModuleType) -> None:
    """A forward-mode tangent (torch.autograd.forward_ad) on any input of an op that writes its
    inputs is NotImplementedError naming the op, raised before anything is written, also under
    no_grad (the tangent would be dropped: the ops have no forward derivative); without a
    tangent the call runs inside a dual level as outside."""
    import torch
    import torch.autograd.forward_ad as fwAD

    def refused(name: str) -> Any:
        return pytest.raises(NotImplementedError, match=rf"^{name}\(\): forward-mode AD")

    x, y = torch.ones(3), torch.tensor([1.0, 2, 3])
    with fwAD.dual_level():
        with refused("add_"):
            tpkg.add_(fwAD.make_dual(x, torch.ones(3)), y)  # the written input
        with refused("add_"):
            tpkg.add_(x, fwAD.make_dual(y, torch.ones(3)))  # the other
        with refused("scale_into"):
            tpkg.scale_into(fwAD.make_dual(y, torch.ones(3)), out=x)
        p, v = torch.tensor([1.0, -2.0, 3.0]), torch.zeros(3)
        with torch.no_grad(), refused("momentum_step"):
            tpkg.momentum_step(p, v, fwAD.make_dual(p * 0.5, torch.ones(3)), torch.tensor(0.1))
        with refused("accumulate"):
            tpkg.accumulate(x, fwAD.make_dual(y, torch.ones(3)))
        assert x.tolist() == [1, 1, 1] and p.tolist() == [1, -2, 3] and v.tolist() == [0, 0, 0]
        assert tpkg.add_(x, y) is x  # no tangent: runs
    assert x.tolist() == [2, 3, 4]


def test_torch_opgen_test_compares_written_inputs(tpkg: ModuleType) -> None:
    package = testing.load_package(Path(tpkg.__file__).parent)  # type: ignore[arg-type]
    ops, diags = load_ops([SPECS])
    assert not diags
    for op in ops:
        for check in package.checks:
            r = testing.run_check(package, op, check)
            assert r.status == ("n/a" if check.startswith("grad/") else "pass"), (op.name, check, r.messages)


def test_the_docs_show_the_specs_these_tests_run() -> None:
    """docs/spec-reference.md's examples of these keys are these test specs, as written (less the
    editor line): the examples the docs show are the ones run here on every path."""
    text = (ROOT / "docs" / "spec-reference.md").read_text(encoding="utf-8")
    for spec in sorted(SPECS.glob("*.yaml")):
        body = spec.read_text(encoding="utf-8").split("\n", 1)[1].rstrip("\n")
        assert f"```yaml\n{body}\n```" in text, spec.name
