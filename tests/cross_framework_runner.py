"""Every op of ops/ on every framework, on the same inputs: numbers for tests/test_cross_framework.py.

``python tests/cross_framework_runner.py OUT [--ops a,b]`` loads numpy, MindSpore (the generated
``generated.opgen_ops``: ops.Custom path and Function<T> path) and PyTorch (the generated
``generated.opgen_ops_torch``) into this one process (docs/distributed.md: that is safe), and for
each op draws inputs once (opgen.testing's shape cases and values, from the op's name), then runs:

- ``numpy``: the generated reference.py, in float64 from the same values (forward; and
  ``<op>_grad`` where the reference has one);
- ``ms-custom`` (ops.Custom path, PyNative) and ``ms-function`` (Function<T> path), through
  opgen.testing's own runner; ``ms-graph`` (ops.Custom path in GRAPH_MODE) for :data:`GRAPH_OPS`;
- ``torch`` and ``torch-compile``: the torch package's ``eager`` and ``compiled`` paths through the
  runner ``opgen test --backend torch`` uses (``torch.compile(fullgraph=True, dynamic=True)``,
  gradients through AOTAutograd), and ``torch-builtin`` (torch's own op, :data:`BUILTINS`, where
  it has one).

Forward outputs and the gradients of ``sum_k sum(out_k * w_k)`` (random ``w``, every
differentiable output) are written to ``OUT.npz`` under ``op|case|row|impl|out<k>`` and
``op|case|row|impl|d<slot>``; ``OUT.json`` holds per op the cases, rows, output dtypes,
differentiable slots and every exception an implementation raised. The float32 row runs on
every implementation, the float64 row (where the op has one) on all but ``ms-graph`` and
``torch-compile``. Nothing is compared here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from opgen import testing as T  # noqa: E402
from opgen.model import Op  # noqa: E402
from opgen.pipeline import load_ops  # noqa: E402

Array = Any
GRAPH_OPS = ("add", "gelu", "layer_norm", "log_softmax", "matmul", "reduce_sum", "topk", "where")
"""Ops also run on the ops.Custom path in GRAPH_MODE (a graph compile each: ~1 s)."""

CASES_PER_OP = 2
"""The first plain case and the first case of another style (broadcast, 0-d, empty) per op."""


def _axes(axis: Sequence[int], x: torch.Tensor) -> list[int]:
    return list(axis) if len(axis) else list(range(x.dim()))


def _reduce(f: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    def call(x: torch.Tensor, axis: Sequence[int] = (), keep_dims: bool = False) -> torch.Tensor:
        return f(x, dim=_axes(axis, x), keepdim=keep_dims) if x.dim() else x.clone()
    return call


def _gather(x: torch.Tensor, indices: torch.Tensor, axis: int = 0) -> torch.Tensor:
    a = axis % x.dim()
    flat = torch.index_select(x, a, indices.reshape(-1).long())
    return flat.reshape(x.shape[:a] + indices.shape + x.shape[a + 1:])


def _layer_norm(x: torch.Tensor, gamma: torch.Tensor | None = None, beta: torch.Tensor | None = None,
                eps: float = 1e-5) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def _matmul(a: torch.Tensor, b: torch.Tensor, transpose_a: bool = False, transpose_b: bool = False) -> torch.Tensor:
    return torch.matmul(a.mT if transpose_a else a, b.mT if transpose_b else b)


BUILTINS: dict[str, Callable[..., Any]] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "square": torch.square,
    "softplus": F.softplus,
    "gelu": lambda x, approximate="none": F.gelu(x, approximate=approximate),
    "leaky_relu": lambda x, alpha=0.01: F.leaky_relu(x, alpha),
    "clip": lambda x, min, max: torch.clamp(x, min, max),
    "reduce_sum": _reduce(torch.sum), "reduce_mean": _reduce(torch.mean), "reduce_max": _reduce(torch.amax),
    "softmax": lambda x, axis=-1: torch.softmax(x, axis),
    "log_softmax": lambda x, axis=-1: torch.log_softmax(x, axis),
    "layer_norm": _layer_norm,
    "rms_norm": lambda x, weight, eps=1e-6: F.rms_norm(x, (x.shape[-1],), weight, eps),
    "smooth_l1_loss": lambda pred, target, beta=1.0, reduction="none": F.smooth_l1_loss(
        pred, target, reduction=reduction, beta=beta),
    "matmul": _matmul, "where": torch.where,
    "cumsum": lambda x, axis=0, exclusive=False, reverse=False: torch.cumsum(x, axis),
    "concat": lambda xs, axis=0: torch.cat(list(xs), axis),
    "gather": _gather,
    "broadcast_to": lambda x, shape: torch.broadcast_to(x, tuple(shape)),
    "topk": lambda x, k=1: tuple(torch.topk(x, k, dim=-1, largest=True, sorted=True)),
    "avg_pool2d": lambda x, kernel=(2, 2), stride=(2, 2): F.avg_pool2d(x, list(kernel), list(stride)),
}
"""torch's own op for an op of ops/ (same arguments; its first outputs where the op has more).
No builtin: dropout (opgen's counter-based mask), scale_add, swiglu (a composition). Only the
default attrs of cumsum (exclusive/reverse have no torch equivalent) are run against torch.cumsum."""


def _rows(op: Op) -> tuple[list[str], list[str] | None]:
    """The op's float32 row (else its first) and its float64 row (None when it has none)."""
    rows = [[r.dtype(i).name for i in range(len(r.columns))] for r in op.rows_for("CPU")]
    f32 = next((r for r in rows if "float32" in r), rows[0])
    f64 = next((r for r in rows if "float64" in r and "float32" not in r), None)
    return f32, f64


def _cases(op: Op, attrs: dict[str, Any], rng: np.random.Generator) -> list[T.Case]:
    cases = T.shape_cases(op, attrs, rng, T.read_settings(op))
    plain = [c for c in cases if c.style == "plain"][:1]
    other = [c for c in cases if c.style != "plain"][: CASES_PER_OP - len(plain)]
    return plain + other


class Recorder:
    """Arrays by key for OUT.npz, and per op the metadata and errors for OUT.json."""

    def __init__(self) -> None:
        self.arrays: dict[str, Array] = {}
        self.meta: dict[str, dict[str, Any]] = {}
        self.seconds: dict[str, float] = {}

    def run(self, op: str, key: str, impl: str, f: Callable[..., tuple[list[Array], list[Any]]], *args: Any) -> None:
        """Record ``f(*args)``'s outputs and gradients under ``key|impl``, or the exception it raised."""
        t0 = time.perf_counter()
        try:
            outs, grads = f(*args)
        except Exception as exc:  # recorded; the test reports it as a failure
            self.meta[op]["errors"][f"{key}|{impl}"] = "".join(traceback.format_exception_only(exc)).strip()[:600]
            return
        finally:
            self.seconds[impl] = self.seconds.get(impl, 0.0) + time.perf_counter() - t0
        for k, o in enumerate(outs):
            self.arrays[f"{key}|{impl}|out{k}"] = np.asarray(o)
        for slot, g in grads:
            self.arrays[f"{key}|{impl}|d{slot}"] = np.asarray(g)


def _builtin_runner(fn: Callable[..., Any], op: Op, attrs: dict[str, Any], layout: Sequence[int]
                    ) -> Callable[[Sequence[Array], Sequence[Array], Sequence[int]], Any]:
    """(arrays, weights, diff slots) -> (outputs, [(slot, gradient)]) through torch's builtin ``fn``."""
    def f(*flat: torch.Tensor) -> Any:
        return fn(*T.group(op, list(flat), layout), **attrs)

    diff_out = [k for k, o in enumerate(op.outputs) if o.differentiable]

    def run(arrays: Sequence[Array], weights: Sequence[Array], slots: Sequence[int]) -> Any:
        ts = [torch.from_numpy(np.array(a)) for a in arrays]
        for j in slots:
            ts[j].requires_grad_(True)
        res = f(*ts)
        outs = list(res) if isinstance(res, (tuple, list)) else [res]
        grads: list[tuple[int, Array]] = []
        if slots and diff_out:
            loss = sum((outs[k] * torch.from_numpy(w)).sum() for k, w in zip(diff_out, weights))
            got = torch.autograd.grad(loss, [ts[j] for j in slots], allow_unused=True)
            grads = [(j, (g if g is not None else torch.zeros_like(ts[j])).detach().numpy())
                     for j, g in zip(slots, got)]
        return [o.detach().numpy() for o in outs], grads

    return run


def _reference(pkg: T.Package, op: Op, attrs: dict[str, Any], layout: Sequence[int], arrays: Sequence[Array],
               weights: Sequence[Array], slots: Sequence[int]) -> tuple[list[Array], list[tuple[int, Array]]]:
    """The numpy reference in float64 (float inputs widened), and ``<op>_grad`` where it exists."""
    outs = T._reference_forward(pkg, op, attrs, layout)(arrays)  # what `opgen test` compares with
    ref_grad = getattr(pkg.reference, f"{op.name}_grad", None)
    grads: list[tuple[int, Array]] = []
    if ref_grad is not None and slots and len(layout) == len(arrays):  # no dynamic/optional inputs
        diff_out = [k for k, o in enumerate(op.outputs) if o.differentiable]
        wide = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
        args: dict[str, Any] = {x.name: a for x, a in zip(op.inputs, wide)}
        args.update({o.name: v for o, v in zip(op.outputs, outs)})
        args.update({o.grad_name: (weights[diff_out.index(k)].astype(np.float64) if k in diff_out
                                   else np.zeros_like(outs[k])) for k, o in enumerate(op.outputs)})
        args.update(T._ref_attrs(op, attrs))
        with np.errstate(all="ignore"):
            got = list(ref_grad(**args))
        grads = [(j, np.broadcast_to(got[j], arrays[j].shape)) for j in slots]
    return outs, grads


def _pkg_run(pkg: T.Package, op: Op, path: str, attrs: dict[str, Any], layout: Sequence[int],
             arrays: Sequence[Array], weights: Sequence[Array], slots: Sequence[int]) -> Any:
    """Outputs and gradients on one path of a generated package, through the runner ``opgen test``
    uses (MindSpore's ``custom-pynative``, ``custom-graph``, ``function``; torch's ``eager``,
    ``compiled``)."""
    runner = pkg.runner(op, path, attrs)
    outs = runner.forward(arrays, layout)
    grads = runner.grads(arrays, weights, layout, slots) if slots and runner.diff_out else []
    return outs, list(zip(slots, grads))


def run_op(rec: Recorder, ms_pkg: T.Package, torch_pkg: T.Package, op: Op) -> None:
    """Every implementation of ``op`` on its cases, float32 and float64 rows."""
    settings = T.read_settings(op)
    # the spec's first test.attrs entry, defaults merged, its floats rounded to float32: MindSpore's
    # kernels hold float attrs as float32, PyTorch's as doubles (docs/spec-reference.md), so only
    # float32 values are the same inputs to both
    attrs = T._ref_attrs(op, dict(settings.attr_sets[0]))
    rng = np.random.default_rng(zlib.crc32(op.name.encode()))
    f32, f64 = _rows(op)
    meta: dict[str, Any] = {"rows": {}, "cases": [], "errors": {}, "attrs": repr(attrs)}
    rec.meta[op.name] = meta
    diff_in = [i for i, x in enumerate(op.inputs) if x.differentiable]
    diff_out = [k for k, o in enumerate(op.outputs) if o.differentiable]
    cases = _cases(op, attrs, rng)
    for c, case in enumerate(cases):
        base = [T.draw_values(rng, s, f32[i], settings.domain(op.inputs[i].name))
                for i, s in zip(case.slots, case.slot_shapes)]
        slots = [j for j, i in enumerate(case.slots) if i in diff_in and np.dtype(f32[i]).kind == "f"]
        w64 = [rng.uniform(-1, 1, case.out_shapes[k]) for k in diff_out]
        meta["cases"].append({"describe": case.describe(), "slots": slots,
                              "slot_names": [op.inputs[i].name for i in case.slots]})
        builtin = BUILTINS.get(op.name)
        for row_name, row in (("float32", f32), ("float64", f64)):
            if row is None:
                continue
            key = f"{op.name}|{c}|{row_name}"
            meta["rows"][row_name] = [row[col] for _, col in T.compared(op)]  # outputs', written inputs' dtypes
            arrays = [a.astype(row[i]) for i, a in zip(case.slots, base)]
            weights = [w.astype(row[len(op.inputs) + k]) for k, w in zip(diff_out, w64)]
            rec.run(op.name, key, "numpy", _reference, ms_pkg, op, attrs, case.layout, arrays, weights, slots)
            paths = [("ms-custom", "custom-pynative"), ("ms-function", "function")]
            if op.name in GRAPH_OPS and row_name == "float32":
                paths.append(("ms-graph", "custom-graph"))
            for impl, path in paths:
                rec.run(op.name, key, impl, _pkg_run, ms_pkg, op, path, attrs, case.layout, arrays, weights, slots)
            rec.run(op.name, key, "torch", _pkg_run, torch_pkg, op, "eager", attrs, case.layout, arrays, weights, slots)
            if row_name == "float32" and c == 0:  # one compile per op
                rec.run(op.name, key, "torch-compile", _pkg_run, torch_pkg, op, "compiled", attrs, case.layout, arrays,
                        weights, slots)
            if builtin is not None:  # given the attrs as the kernels see them (float32 values, above)
                run = _builtin_runner(builtin, op, T._ref_attrs(op, attrs), case.layout)
                rec.run(op.name, key, "torch-builtin", run, arrays, weights, slots)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="writes OUT.npz and OUT.json")
    p.add_argument("--ops", default="", help="comma-separated op names (default: every op in ops/)")
    args = p.parse_args()
    import mindspore as ms

    ms.set_device("CPU")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms_pkg = T.load_package(ROOT / "generated" / "opgen_ops")
    torch_pkg = T.load_package(ROOT / "generated" / "opgen_ops_torch")
    ops, diags = load_ops(sorted(str(p) for p in (ROOT / "ops").glob("*.yaml")))
    if diags:
        raise SystemExit("\n".join(str(d) for d in diags))
    only = {s for s in args.ops.split(",") if s}
    rec = Recorder()
    for op in ops:
        if not only or op.name in only:
            run_op(rec, ms_pkg, torch_pkg, op)
    np.savez(f"{args.out}.npz", **rec.arrays)
    Path(f"{args.out}.json").write_text(json.dumps(rec.meta, indent=1, sort_keys=True), encoding="utf-8")
    print("seconds per implementation: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(rec.seconds.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
