"""The generated PyTorch ops against torch's own, at large sizes, and their per-call cost.

Run from the repository root::

    PYTHONPATH=$PWD .venv/bin/python bench/bench_torch.py [--only gelu,matmul] [--rounds 7]
        [--no-grad] [--alone S] [--overhead-only | --no-overhead] [--threads N] [--stat min]
        [--dtypes float32,float16,bfloat16]

Large cases (bench_kernels.py's sizes: 4096 x 1024 float32, 16 MB per tensor; matmul 512^3;
avg_pool2d 16x64x64x64; topk k=8), one row per op, medians per call of

- ``builtin``   torch eager: the builtin op, or for the fused ops (bias_gelu, swiglu, rms_norm)
  the eager composition they replace -- the 1.0 of every ratio
- ``opgen``     ``generated.opgen_ops_torch.<op>`` (bias_gelu: bench/specs generated for torch)
- ``compiled``  ``torch.compile`` of the same composition (fused ops only; the anchor to beat)

forward, and forward+backward (``torch.autograd.grad`` of the output with a fixed random
``dout``, for every differentiable input), then ``opgen / builtin`` and ``opgen / compiled``.
Each case is checked (opgen against builtin) before timing; the implementations take turns
(bench_kernels.time_impls), or with ``--alone S`` each runs on its own for S seconds.

The per-call table: 16 float32 elements, the generated Python function against what it wraps
(``torch.ops.opgen_ops_torch.<op>``) and against two hand-written ``TORCH_LIBRARY`` operators
called through ``torch.ops`` (bench/handwritten/torch_ops.cc, built with torch.utils.cpp_extension):
one with a C++ ``torch::autograd::Function`` (the tutorial's way: the issue's baseline) and one
with a ``torch::autograd::Node`` per op (torch's own generated autograd, what the generated op
does); for an op without attrs (mul) and one with a float attr (leaky_relu), inputs without and
with ``requires_grad``. The four calls take turns in one process, in a shuffled order per turn.
This script prints numbers; it asserts nothing about speed.

``--dtypes float16,bfloat16`` (any of float32, float16, bfloat16) runs the 16-bit rows too: the
cases of :data:`SIXTEEN_BIT` (add, gelu, softmax, rms_norm against ``F.rms_norm``, layer_norm, and
what ``--only`` keeps of them) with their inputs cast to the dtype, against torch's own 16-bit CPU
kernels (opgen's compute in float32 and round once, see docs/performance.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench.bench_kernels import COLS, ROWS, Case, _cell, _ratio, _rng_inputs, time_impls  # noqa: E402
from bench.bench_ops import build_dir, fmt, machine  # noqa: E402

Fn = Callable[..., Any]
HANDWRITTEN = ROOT / "bench" / "handwritten" / "torch_ops.cc"


def _rms_norm(t: dict[str, Any], eps: float = 1e-6) -> Any:
    x = t["x"]
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * t["w"]


def cases(rng: np.random.Generator) -> list[Case]:
    """Every op of ops/ with a torch builtin, and the fused ops against their compositions."""
    out: list[Case] = []
    shp, row = (ROWS, COLS), (COLS,)

    def add(name: str, shapes: dict[str, tuple[int, ...]], opgen: Fn, builtin: Fn, grad_of: tuple[str, ...],
            positive: bool = False, **kw: Any) -> None:
        out.append(Case(name, "large", _rng_inputs(rng, shapes, positive), opgen, builtin, None, grad_of, **kw))

    for name, b in (("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div),
                    ("maximum", torch.maximum), ("pow", torch.pow)):
        add(name, {"x": shp, "y": shp}, lambda m, t, name=name: getattr(m, name)(t["x"], t["y"]),
            lambda t, b=b: b(t["x"], t["y"]), ("x", "y"), positive=name in ("div", "pow"))
    for name, b in (("exp", torch.exp), ("log", torch.log), ("sqrt", torch.sqrt), ("rsqrt", torch.rsqrt),
                    ("square", torch.square), ("tanh", torch.tanh), ("sigmoid", torch.sigmoid), ("relu", torch.relu),
                    ("softplus", F.softplus), ("gelu", F.gelu)):
        add(name, {"x": shp}, lambda m, t, name=name: getattr(m, name)(t["x"]), lambda t, b=b: b(t["x"]), ("x",),
            positive=name in ("log", "sqrt", "rsqrt"))
    add("leaky_relu", {"x": shp}, lambda m, t: m.leaky_relu(t["x"], 0.01), lambda t: F.leaky_relu(t["x"], 0.01),
        ("x",))
    add("clip", {"x": shp}, lambda m, t: m.clip(t["x"], -0.5, 0.5), lambda t: torch.clamp(t["x"], -0.5, 0.5), ("x",))
    w = _rng_inputs(rng, {"c": shp, "x": shp, "y": shp})
    w["c"] = w["c"] > 0
    out.append(Case("where", "large", w, lambda m, t: m.where(t["c"], t["x"], t["y"]),
                    lambda t: torch.where(t["c"], t["x"], t["y"]), None, ("x", "y")))
    add("add (bias row)", {"x": shp, "y": row}, lambda m, t: m.add(t["x"], t["y"]), lambda t: t["x"] + t["y"],
        ("x", "y"))
    for name, b in (("reduce_sum", torch.sum), ("reduce_mean", torch.mean), ("reduce_max", torch.amax)):
        add(name, {"x": shp}, lambda m, t, name=name: getattr(m, name)(t["x"], axis=[-1]),
            lambda t, b=b: b(t["x"], -1), ("x",))
    add("reduce_sum axis 0", {"x": shp}, lambda m, t: m.reduce_sum(t["x"], axis=[0]), lambda t: t["x"].sum(0), ("x",))
    add("softmax", {"x": shp}, lambda m, t: m.softmax(t["x"], -1), lambda t: torch.softmax(t["x"], -1), ("x",))
    add("log_softmax", {"x": shp}, lambda m, t: m.log_softmax(t["x"], -1), lambda t: torch.log_softmax(t["x"], -1),
        ("x",))
    add("layer_norm", {"x": shp, "g": row, "b": row}, lambda m, t: m.layer_norm(t["x"], t["g"], t["b"], eps=1e-5)[0],
        lambda t: F.layer_norm(t["x"], (COLS,), t["g"], t["b"], 1e-5), ("x", "g", "b"), tol=1e-3)
    add("cumsum", {"x": shp}, lambda m, t: m.cumsum(t["x"], axis=-1), lambda t: torch.cumsum(t["x"], -1), ("x",),
        tol=1e-3)
    add("concat", {"x": shp, "y": shp}, lambda m, t: m.concat([t["x"], t["y"]], axis=0),
        lambda t: torch.cat([t["x"], t["y"]], 0), ("x", "y"))
    idx = {"x": _rng_inputs(rng, {"x": shp})["x"], "i": rng.integers(0, ROWS, size=ROWS).astype(np.int64)}
    out.append(Case("gather", "large", idx, lambda m, t: m.gather(t["x"], t["i"], axis=0),
                    lambda t: torch.index_select(t["x"], 0, t["i"]), None, ("x",)))
    add("smooth_l1_loss", {"p": shp, "t": shp},
        lambda m, t: m.smooth_l1_loss(t["p"], t["t"], beta=1.0, reduction="none"),
        lambda t: F.smooth_l1_loss(t["p"], t["t"], reduction="none", beta=1.0), ("p", "t"))
    add("broadcast_to", {"x": row}, lambda m, t: m.broadcast_to(t["x"], shape=list(shp)),
        lambda t: t["x"].expand(shp).contiguous(), ("x",), builtin_label="x.expand(...).contiguous(): expand is a view")
    add("topk", {"x": shp}, lambda m, t: m.topk(t["x"], 8)[0], lambda t: torch.topk(t["x"], 8)[0], ("x",))
    add("avg_pool2d", {"x": (16, 64, 64, 64)}, lambda m, t: m.avg_pool2d(t["x"], kernel=[2, 2], stride=[2, 2]),
        lambda t: F.avg_pool2d(t["x"], 2, 2), ("x",), tol=1e-5)
    add("rms_norm (vs F.rms_norm)", {"x": shp, "w": row}, lambda m, t: m.rms_norm(t["x"], t["w"], eps=1e-6),
        lambda t: F.rms_norm(t["x"], (COLS,), t["w"], 1e-6), ("x", "w"), tol=1e-3)
    # fused: one opgen op against the eager composition it replaces, and torch.compile of it
    half = COLS // 2
    add("swiglu", {"x": shp}, lambda m, t: m.swiglu(t["x"]), lambda t: F.silu(t["x"][:, :half]) * t["x"][:, half:],
        ("x",), builtin_label="F.silu(a) * b", fused=True)
    add("rms_norm", {"x": shp, "w": row}, lambda m, t: m.rms_norm(t["x"], t["w"], eps=1e-6), _rms_norm, ("x", "w"),
        builtin_label="x * rsqrt(mean(x^2) + eps) * w", fused=True, tol=1e-3)
    add("bias_gelu", {"x": shp, "y": row}, lambda m, t: m.bias_gelu(t["x"], t["y"]), lambda t: F.gelu(t["x"] + t["y"]),
        ("x", "y"), builtin_label="F.gelu(x + b)", fused=True)
    add("matmul", {"a": (512, 512), "b": (512, 512)}, lambda m, t: m.matmul(t["a"], t["b"]),
        lambda t: torch.matmul(t["a"], t["b"]), ("a", "b"), flops=2.0 * 512 ** 3, tol=1e-3)
    for c in out:
        if c.op == "matmul":
            c.size = "512^3"
    return out


SIXTEEN_BIT = ("add", "gelu", "softmax", "rms_norm (vs F.rms_norm)", "layer_norm")
"""The cases ``--dtypes float16,bfloat16`` runs in 16 bits (against torch's own 16-bit kernels)."""

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOLERANCE_16 = {"float16": 1e-2, "bfloat16": 5e-2}
"""How far a 16-bit result may be from torch's (each rounds its float32 result once; torch's
layer_norm and rms_norm of 16-bit inputs also round once, so this is a few ulp)."""


def _tensors(case: Case, grad: bool, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    out = {}
    for k, v in case.inputs.items():
        t = torch.from_numpy(v.copy())
        out[k] = (t.to(dtype) if t.dtype == torch.float32 else t).requires_grad_(grad and k in case.grad_of)
    return out


def in_dtype(case: Case, dtype: str) -> Case:
    """A copy of ``case`` (fresh timings) whose float inputs are ``dtype``; 16-bit ones are named so."""
    if dtype == "float32":
        return dataclasses.replace(case, timings={})
    tag = {"float16": "f16", "bfloat16": "bf16"}[dtype]
    return dataclasses.replace(case, op=f"{case.op} {tag}", timings={}, tol=max(case.tol, TOLERANCE_16[dtype]))


def run_case(case: Case, mods: dict[str, Any], rounds: int, grad: bool, alone: float,
             dtype: torch.dtype = torch.float32) -> None:
    """Check opgen against the builtin, then time forward (and forward+backward) of each."""
    fwd_t = _tensors(case, False, dtype)
    impls: dict[str, Fn] = {"builtin": functools.partial(case.builtin, fwd_t)}  # type: ignore[arg-type]
    impls["opgen"] = functools.partial(case.opgen, mods["fused" if case.op == "bias_gelu" else "ops"], fwd_t)
    if case.fused:
        impls["compiled"] = functools.partial(torch.compile(case.builtin), fwd_t)  # type: ignore[arg-type]
    with torch.no_grad():
        want = impls["builtin"]()
        for label, f in impls.items():
            got = f()
            if got.dtype != want.dtype or not torch.allclose(got.float(), want.float(), rtol=case.tol, atol=case.tol):
                raise SystemExit(f"{case.op}: {label} differs from torch's builtin "
                                 f"(max error {(got - want).abs().max().item():.3g})")
    if grad:
        bwd_t = _tensors(case, True, dtype)
        inputs = [bwd_t[k] for k in case.grad_of]
        dout = torch.from_numpy(np.random.default_rng(1).standard_normal(tuple(want.shape)).astype(np.float32))
        dout = dout.to(want.dtype)

        def fwd_bwd(f: Fn) -> Fn:
            return lambda: torch.autograd.grad(f(bwd_t), inputs, dout)

        impls["builtin fwd+bwd"] = fwd_bwd(case.builtin)  # type: ignore[arg-type]
        module = mods["fused" if case.op == "bias_gelu" else "ops"]
        impls["opgen fwd+bwd"] = fwd_bwd(lambda t: case.opgen(module, t))
        if case.fused:
            impls["compiled fwd+bwd"] = fwd_bwd(torch.compile(case.builtin))  # type: ignore[arg-type]
    per = 3
    for f in impls.values():  # warm-up (torch.compile compiles here)
        f()
        f()
    case.timings.update(time_impls(impls, rounds, per, alone, seed=hash(case.op) & 0xFFFF))


def fused_package() -> Any:
    """bench/specs (bias_gelu) generated for torch and built into the build cache."""
    import importlib

    from opgen.cli import main as opgen_main

    out = build_dir() / "fused_torch"
    if opgen_main(["generate", str(ROOT / "bench" / "specs"), "-o", str(out), "-p", "bench_fused_ops",
                   "--backend", "torch", "-q"]) != 0:
        raise SystemExit("cannot generate bench/specs for torch")
    if str(out) not in sys.path:
        sys.path.insert(0, str(out))
    return importlib.import_module("bench_fused_ops_torch")


def handwritten() -> Any:
    """bench/handwritten/torch_ops.cc, built with torch.utils.cpp_extension (cached): torch.ops.bench_torch."""
    from torch.utils.cpp_extension import load

    d = build_dir() / "torch_handwritten"
    d.mkdir(exist_ok=True)
    load("bench_torch_ops", [str(HANDWRITTEN)], is_python_module=False, build_directory=str(d),
         extra_cflags=["-O3"])
    return torch.ops.bench_torch


def _calls(gen: Any, wrapped: Any, hand: Any, grad: bool) -> dict[str, tuple[Fn, Fn, Fn, Fn]]:
    """(generated, wrapped, hand-written with torch::autograd::Function, hand-written with a Node)
    calls of mul and leaky_relu on 4x4 float32 inputs."""
    x = torch.randn(4, 4, requires_grad=grad)
    y = torch.randn(4, 4, requires_grad=grad)
    return {
        "mul(x, y)": (lambda: gen.mul(x, y), lambda: wrapped.mul(x, y), lambda: hand.mul(x, y),
                      lambda: hand.mul_node(x, y)),
        "leaky_relu(x, 0.01)": (lambda: gen.leaky_relu(x, 0.01), lambda: wrapped.leaky_relu(x, 0.01),
                                lambda: hand.leaky_relu(x, 0.01), lambda: hand.leaky_relu_node(x, 0.01)),
    }


def overhead(rounds: int, stat: Callable[[list[float]], float] = statistics.median) -> None:
    """Per-call cost at 16 elements: generated function, what it wraps, two hand-written ops."""
    from generated import opgen_ops_torch as gen

    hand = handwritten()
    wrapped = torch.ops.opgen_ops_torch
    print()
    print(f"# load average before the per-call table: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print("| per call, 16 elements | generated function | torch.ops.opgen_ops_torch | hand-written, Function | "
          "hand-written, Node | generated / hand-written Function | generated / hand-written Node | "
          "generated / wrapped |")
    print("|---|---|---|---|---|---|---|---|")
    shuffle = random.Random(3)
    for grad in (False, True):
        tag = " (requires_grad)" if grad else ""
        for name, fs in _calls(gen, wrapped, hand, grad).items():
            name += tag
            n = 200
            times: list[list[float]] = [[] for _ in fs]
            for f in fs:
                f()
            for _ in range(rounds * 5):
                order = list(range(len(fs)))
                shuffle.shuffle(order)
                for i in order:
                    t0 = time.perf_counter()
                    for _ in range(n):
                        fs[i]()
                    times[i].append((time.perf_counter() - t0) / n)
            g, w, h, hn = (stat(t) for t in times)
            print(f"| {name} | {fmt(g).strip()} | {fmt(w).strip()} | {fmt(h).strip()} | {fmt(hn).strip()} | "
                  f"{g / h:.3f} | {g / hn:.3f} | {g / w:.3f} |", flush=True)
    print(f"# load average after the per-call table: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


def main(argv: list[str] | None = None) -> int:
    """Every large case, then the per-call table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default="", help="comma-separated op names (default: all)")
    p.add_argument("--rounds", type=int, default=7, help="turns per implementation (3 calls per turn)")
    p.add_argument("--no-grad", action="store_true", help="forward only")
    p.add_argument("--alone", type=float, default=0.0, metavar="S",
                   help="time each implementation on its own for S seconds (bench_kernels.py --alone)")
    p.add_argument("--overhead-only", action="store_true", help="only the per-call table (16 elements)")
    p.add_argument("--no-overhead", action="store_true", help="no per-call table (it builds the hand-written ops)")
    p.add_argument("--stat", choices=("median", "min"), default="median",
                   help="per-call figure: the median (bench_kernels.py's) or the minimum, the figure to read on a "
                        "loaded machine, where the median measures the preemptions (docs/performance.md)")
    p.add_argument("--dtypes", default="float32",
                   help="comma-separated: float32, float16, bfloat16 (16-bit: the cases of SIXTEEN_BIT only)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch.set_num_threads(N) first (opgen's pool follows torch's count); default: torch's")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"# {machine()}")
    print(f"# torch {torch.__version__}, torch.get_num_threads()={torch.get_num_threads()}, {args.stat} per call, "
          f"OPGEN_NUM_THREADS={os.environ.get('OPGEN_NUM_THREADS', '(all CPUs)')}")
    stat = min if args.stat == "min" else statistics.median
    if args.overhead_only:
        overhead(args.rounds, stat)
        return 0
    from generated import opgen_ops_torch

    only = {s.strip() for s in args.only.split(",") if s.strip()}
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if not dtypes or any(d not in DTYPES for d in dtypes):
        p.error(f"--dtypes: expected some of {', '.join(DTYPES)}")
    base = [c for c in cases(np.random.default_rng(0)) if not only or c.op.split(" ")[0] in only]
    selected = [(in_dtype(c, d), DTYPES[d]) for d in dtypes for c in base if d == "float32" or c.op in SIXTEEN_BIT]
    mods = {"ops": opgen_ops_torch}
    if any(c.op == "bias_gelu" for c, _ in selected):
        mods["fused"] = fused_package()
    print()
    print("| op | size | builtin | opgen | opgen/builtin | compiled | opgen/compiled | "
          "fwd+bwd builtin | opgen | opgen/builtin | compiled | opgen/compiled |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case, dtype in selected:
        run_case(case, mods, args.rounds, not args.no_grad, args.alone, dtype)
        med = {k: stat(v) for k, v in case.timings.items()}
        cell = functools.partial(_cell, med)
        ratio = functools.partial(_ratio, med)
        label = case.op + (f" (vs {case.builtin_label})" if case.builtin_label else "")
        print(f"| {label} | {case.size} | {cell('builtin')} | {cell('opgen')} | {ratio('opgen', 'builtin')} | "
              f"{cell('compiled')} | {ratio('opgen', 'compiled')} | {cell('builtin fwd+bwd')} | "
              f"{cell('opgen fwd+bwd')} | {ratio('opgen fwd+bwd', 'builtin fwd+bwd')} | {cell('compiled fwd+bwd')} | "
              f"{ratio('opgen fwd+bwd', 'compiled fwd+bwd')} |", flush=True)
    if not args.no_overhead:
        overhead(args.rounds, stat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
