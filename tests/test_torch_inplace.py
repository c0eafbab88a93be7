"""Ops that write their inputs, and ops without a differentiable output, on PyTorch (issue 33,
items 1, 2 and 7a), with real torch and a real compiled package: ops/adamw.yaml, the effects
specs (tests/specs/effects: add_, scale_into, accumulate, momentum_step) and
tests/specs/nodiff/mul_no_diff_out.yaml, generated into one package.

- **Versions in every mode.** A written input's version counter is bumped by the op's
  ADInplaceOrView kernel, so a backward that saved the tensor before the write raises "modified
  by an inplace operation" -- in grad mode, under ``torch.no_grad()``, under
  ``torch.inference_mode()`` (which skips the Autograd kernel: before, the version stayed and the
  backward silently used the new values) and under ``torch.compile`` -- as it does for
  ``torch.Tensor.add_``.
- **All or nothing.** Every refusal (internal overlap, aliasing, inference tensors, dtypes,
  contracts, requires, attrs, the kernel's own check, a gradient or a tangent) comes before the
  first byte of any written input changes: each case compares every input before and after,
  eager and compiled.
- **No history.** The outputs of an op with no differentiable output have no ``grad_fn`` (an
  Autograd kernel that runs the op below autograd), where torch's fallback gave them one that
  warned at backward; ``torch.library.opcheck`` cannot see the difference (see
  :func:`test_opcheck_cannot_see_a_missing_autograd_kernel`).

Runtime: the package's first build, ~2 min on 2 shared cores (6 kernel units, 1 operator unit);
then ~1 min (compile cases).
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from opgen import testing  # noqa: E402
from opgen.pipeline import generate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPECS = [ROOT / "ops" / "adamw.yaml", ROOT / "tests" / "specs" / "effects", ROOT / "tests" / "specs" / "nodiff"]
STALE = "modified by an inplace operation"
INFERENCE = r"^Inplace update to inference tensor outside InferenceMode is not allowed: {op}\(\) writes '{name}'"


@pytest.fixture(scope="module")
def pkg(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The specs generated into one PyTorch package, built and imported."""
    d = tmp_path_factory.mktemp("inplace_torch")
    with contextlib.chdir(d):
        res = generate([str(s) for s in SPECS], Path("out"), "opgen_inplace", backend="torch")
    assert not res.diagnostics, [x.format() for x in res.diagnostics]
    pkg_dir = res.package_dir if res.package_dir.is_absolute() else d / res.package_dir
    return importlib.import_module(testing.import_package(pkg_dir))


def _adamw_args(n: int = 4) -> dict[str, Any]:
    return {"param": torch.ones(n), "m": torch.zeros(n), "v": torch.zeros(n), "grad": torch.ones(n),
            "step": torch.tensor(1), "lr": torch.tensor(0.1)}


# --------------------------------------------------------------------------- 1: versions


def _writes(pkg: ModuleType) -> dict[str, Callable[[Any], Any]]:
    """Per op, a call that writes ``b`` (a float32 tensor of shape (4,)) in place."""
    return {
        "adamw": lambda b: pkg.adamw(**dict(_adamw_args(), param=b)),
        "add_": lambda b: pkg.add_(b, torch.ones(4)),
        "scale_into": lambda b: pkg.scale_into(torch.ones(4), out=b),
        "accumulate": lambda b: pkg.accumulate(b, torch.ones(4)),
        "momentum_step": lambda b: pkg.momentum_step(b, torch.zeros(4), torch.ones(4), torch.tensor(0.1)),
        "torch add_": lambda b: b.add_(1.0),  # what the generated ops must match
    }


MODES = ["grad", "no_grad", "inference_mode", "compile", "compile_no_grad", "compile_inference_mode"]


def _mode(name: str) -> Any:
    if name.endswith("inference_mode"):
        return torch.inference_mode()
    if name.endswith("no_grad"):
        return torch.no_grad()
    return contextlib.nullcontext()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["adamw", "add_", "scale_into", "accumulate", "momentum_step", "torch add_"])
def test_a_stale_saved_tensor_is_an_error_in_every_mode(pkg: ModuleType, op: str, mode: str) -> None:
    """``y = (a * b).sum()`` saves ``b``; the op then writes ``b``: ``y.backward()`` raises, as
    after ``b.add_(1)``, instead of using ``b``'s new values for ``a``'s gradient."""
    a = torch.tensor([1.0, 2, 3, 4], requires_grad=True)
    b = torch.tensor([1.0, 2, 3, 4])
    y = (a * b).sum()
    call = _writes(pkg)[op]
    if mode.startswith("compile"):
        torch._dynamo.reset()
        call = torch.compile(call, fullgraph=True)
    version = b._version
    with _mode(mode):
        call(b)
    assert b._version > version, f"{op} under {mode}: the version of the written tensor did not change"
    with pytest.raises(RuntimeError, match=STALE):
        y.backward()


def test_an_inference_tensor_is_written_under_inference_mode_only(pkg: ModuleType) -> None:
    """An inference tensor has no version counter: written under inference mode as by torch's own
    ops; outside it, refused with torch's error before the write (torch's add_ raises it after
    writing)."""
    with torch.inference_mode():
        b = torch.ones(4)
        pkg.add_(b, torch.ones(4))
    assert b.is_inference() and b.tolist() == [2, 2, 2, 2]
    before = b.clone()
    with pytest.raises(RuntimeError, match=INFERENCE.format(op="add_", name="x")):
        pkg.add_(b, torch.ones(4))
    assert torch.equal(b, before)


# --------------------------------------------------------------------------- 2: all or nothing


def _expanded(n: int = 4) -> Any:
    return torch.zeros(1).expand(n)


def _refusals() -> dict[str, tuple[Callable[[], dict[str, Any]], type[Exception], str]]:
    """Per case: the adamw arguments, the error and its message (a regex): calls that must
    change nothing."""
    def args(**kw: Any) -> Callable[[], dict[str, Any]]:
        def make() -> dict[str, Any]:
            a = _adamw_args()
            a.update({k: (v() if callable(v) else v) for k, v in kw.items()})
            return a
        return make

    def aliased(*names: str, base: Callable[[], Any] = lambda: torch.ones(4)) -> Callable[[], dict[str, Any]]:
        def make() -> dict[str, Any]:
            a, t = _adamw_args(), base()
            a.update(dict.fromkeys(names, t))
            return a
        return make

    def partial() -> dict[str, Any]:
        buf = torch.zeros(5)
        return dict(_adamw_args(), param=buf[:4], m=buf[1:])

    def inference() -> dict[str, Any]:
        with torch.inference_mode():
            v = torch.zeros(4)
        return dict(_adamw_args(), v=v)

    over = "more than one of its elements refers to a single memory location"
    return {
        "expanded m": (args(m=_expanded), ValueError, rf"^adamw\(\): 'm' is written in place, but {over}"),
        "expanded v": (args(v=_expanded), ValueError, rf"^adamw\(\): 'v' is written in place, but {over}"),
        "zero-stride param": (args(param=lambda: torch.zeros(3).as_strided((4,), (0,))), ValueError,
                              rf"^adamw\(\): 'param' .*{over}"),
        "m is param": (aliased("param", "m"), ValueError, r"^adamw\(\): 'param' and 'm' are the same memory"),
        "v is m": (aliased("m", "v"), ValueError, r"^adamw\(\): 'm' and 'v' are the same memory"),
        "grad is param": (aliased("param", "grad"), ValueError,
                          r"^adamw\(\): 'param' \(written in place\) and 'grad' are the same memory"),
        "m overlaps param": (partial, ValueError, r"^adamw\(\): 'param' \(written in place\) and 'm' overlap"),
        "inference v": (inference, RuntimeError, INFERENCE.format(op="adamw", name="v")),
        "dtype": (args(m=lambda: torch.zeros(4, dtype=torch.float64)), TypeError, r"^adamw\(\): unsupported dtypes"),
        "contract": (args(grad=lambda: torch.ones(3)), ValueError, r"^adamw\(\): contract 'grad.shape == param.shape'"),
        "kernel check": (args(step=lambda: torch.tensor(0)), ValueError, r"^adamw\(\): step must be >= 1"),
        "gradient wanted": (args(grad=lambda: torch.ones(4, requires_grad=True)), RuntimeError,
                            r"^adamw\(\): in-place op 'adamw' cannot be differentiated"),
    }


REFUSALS = _refusals()


def _snapshot(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v.detach().clone() for k, v in args.items()}


def _unchanged(args: dict[str, Any], before: dict[str, Any]) -> list[str]:
    return [k for k in args if not torch.equal(args[k].detach(), before[k])]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compile"])
@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_refused_call_writes_nothing(pkg: ModuleType, case: str, compiled: bool) -> None:
    make, error, message = REFUSALS[case]
    args = make()
    before = _snapshot(args)
    call = pkg.adamw
    if compiled:
        if case == "gradient wanted":
            pytest.skip("eager only (tests/test_effects.py refuses it compiled)")
        torch._dynamo.reset()
        call = torch.compile(pkg.adamw, fullgraph=True, dynamic=True)
    with pytest.raises(error, match=message):
        call(**args)
    assert not _unchanged(args, before), f"{case}: refused, but wrote {_unchanged(args, before)}"


def test_requires_and_attrs_are_checked_before_writing(pkg: ModuleType) -> None:
    for attrs, message in (({"beta1": 1.0}, r"contract 'beta1 < 1 and beta2 < 1'"),
                           ({"eps": -1.0}, r"eps")):
        args = _adamw_args()
        before = _snapshot(args)
        with pytest.raises(ValueError, match=message):
            pkg.adamw(**args, **attrs)
        assert not _unchanged(args, before)


def test_overlap_rules_of_an_elementwise_op(pkg: ModuleType) -> None:
    """``add_(x, x)`` runs (an elementwise op reads each element before writing it, as
    ``x.add_(x)``); a partial overlap is refused before the write, as torch refuses it."""
    x = torch.tensor([1.0, 2, 3, 4])
    pkg.add_(x, x)
    assert x.tolist() == [2, 4, 6, 8]
    before = x.clone()
    with pytest.raises(ValueError, match=r"^add_\(\): 'x' \(written in place\) and 'y' overlap in memory in part"):
        pkg.add_(x[1:], x[:-1])
    assert torch.equal(x, before)
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
        x[1:].add_(x[:-1])  # torch's own rule
    # a read input that overlaps no written one, a non-contiguous written input: as before
    xt = torch.zeros(3, 2).t()
    pkg.add_(xt, torch.tensor([1.0, 2, 3]))
    assert xt.tolist() == [[1, 2, 3], [1, 2, 3]]


def test_two_written_inputs_of_one_buffer_that_do_not_overlap(pkg: ModuleType) -> None:
    """Halves of one buffer are tensors of their own: no refusal."""
    buf = torch.zeros(8)
    args = dict(_adamw_args(), m=buf[:4], v=buf[4:])
    pkg.adamw(**args)
    assert buf[:4].abs().sum() > 0 and buf[4:].abs().sum() > 0


# --------------------------------------------------------------------------- 7a: no history


@contextlib.contextmanager
def _no_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compile"])
def test_non_differentiable_outputs_have_no_grad_fn(pkg: ModuleType, compiled: bool) -> None:
    """docs/torch.md: non-differentiable outputs get no grad_fn. Before, torch's autograd fallback
    gave them one (requires_grad=True) and a backward through them warned "an autograd kernel was
    not registered"."""
    x = torch.tensor([1.0, 2, 3], requires_grad=True)
    f = pkg.mul_no_diff_out
    if compiled:
        torch._dynamo.reset()
        f = torch.compile(f, fullgraph=True)
    with _no_warnings():
        out = f(x, torch.tensor([2.0, 2, 2]))
        assert out.tolist() == [2, 4, 6]
        assert out.grad_fn is None and not out.requires_grad
        (out.sum() + x.sum()).backward()  # the output adds nothing to x's gradient, and no warning
    assert x.grad is not None and x.grad.tolist() == [1, 1, 1]


def test_opcheck_cannot_see_a_missing_autograd_kernel(pkg: ModuleType) -> None:
    """Why ``torch.library.opcheck`` passed without an Autograd kernel: its
    test_autograd_registration runs the op with the autograd fallback mode set to "nothing",
    under which the fallback leaves the outputs without requires_grad, and only flags outputs that
    require grad. So the registration itself is the test: every generated op has an Autograd kernel,
    and, for an op that writes its inputs, an ADInplaceOrView kernel."""
    ns = Path(pkg.__file__).parent.name  # type: ignore[arg-type]
    x = torch.ones(3, requires_grad=True)
    overload = getattr(torch.ops, ns).mul_no_diff_out.default
    assert torch.library.opcheck(overload, (x, torch.ones(3)), test_utils="test_autograd_registration") == {
        "test_autograd_registration": "SUCCESS"}
    for name in ("mul_no_diff_out", "adamw", "add_", "scale_into", "accumulate", "momentum_step"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"{ns}::{name}", "Autograd"), name
    for name in ("adamw", "add_", "scale_into", "accumulate", "momentum_step"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"{ns}::{name}", "ADInplaceOrView"), name
    assert not torch._C._dispatch_has_kernel_for_dispatch_key(f"{ns}::mul_no_diff_out", "ADInplaceOrView")
