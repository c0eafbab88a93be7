"""Every op in ops/ against MindSpore's builtin equivalent and numpy, on both execution paths,
forward and forward+backward, at a small size (per-call overhead) and at realistic sizes.

Run from the repository root::

    PYTHONPATH=$PWD .venv/bin/python bench/bench_kernels.py [--only gelu,matmul] [--sizes small,large]
        [--rounds 7] [--no-grad] [--no-limits]

Rows are ``op  size``; columns are medians per call of

- ``builtin``   MindSpore's own op (or the composition named in the table) -- the 1.0 of every ratio
- ``Function``  ``generated.opgen_ops.function.<op>`` (the Function<T> path)
- ``Custom``    ``generated.opgen_ops.custom.<op>`` (ops.Custom aot path, PyNative)
- ``numpy``     the same computation in numpy (forward only)

then the ratios ``Function / builtin`` and ``Custom / builtin``, and for the large forward cases
the bandwidth the faster opgen path reaches (bytes read + written per call; GB/s) or, for
matmul, its GFLOP/s. ``--limits`` (default on) first compiles and runs bench/machine_limits.cc:
stream bandwidth, peak FP32 FLOP/s and OpenBLAS sgemm called from C, on this machine, now.

All MindSpore ops run with ``mindspore.runtime.launch_blocking()``, so a call returns a finished
tensor. Each case's implementations take turns (a fresh random order each round, a few calls per
turn), so load from other processes hits them alike; the ratios of medians taken in one process
are what to read on a shared machine. Results are checked against numpy before timing. This
script prints numbers; it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_ops import build_dir, custom_path_in_pynative, fmt, machine  # noqa: E402

Fn = Callable[..., Any]
ROWS, COLS = 4096, 1024  # the large size of every op: 4M float32 elements, 16 MB per tensor


@dataclass
class Case:
    """One op at one size: inputs (numpy), and the same computation four ways."""

    op: str
    size: str
    inputs: dict[str, np.ndarray]
    opgen: Callable[[Any, dict[str, Any]], Any]  # (module, tensors) -> output
    builtin: Callable[[dict[str, Any]], Any] | None
    numpy: Callable[[dict[str, np.ndarray]], Any] | None
    grad_of: tuple[str, ...] = ()  # differentiable inputs (fwd+bwd rows)
    flops: float = 0.0  # per call (matmul); else the bandwidth is shown
    builtin_label: str = ""
    fused: bool = False  # an op of bench/specs (the fused package), not of ops/
    out_bytes: int = 0
    tol: float = 1e-4
    timings: dict[str, list[float]] = field(default_factory=dict)


def _rng_inputs(rng: np.random.Generator, shapes: dict[str, tuple[int, ...]], positive: bool = False
                ) -> dict[str, np.ndarray]:
    out = {}
    for k, s in shapes.items():
        a = rng.standard_normal(s).astype(np.float32)
        out[k] = np.abs(a) + np.float32(0.5) if positive else a
    return out


def erf(v: np.ndarray) -> np.ndarray:
    """numpy has no erf: math.erf element by element (slow; only the numpy column pays it)."""
    from math import erf as e

    return np.vectorize(e, otypes=[np.float32])(v)


def cases(sizes: list[str], rng: np.random.Generator) -> list[Case]:
    """Every op of ops/ with a builtin, at each size."""
    return [c for size in sizes for c in _cases_at(size, rng)]


def _cases_at(size: str, rng: np.random.Generator) -> list[Case]:
    from mindspore import ops

    layer_norm = ops.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=1e-5)
    out: list[Case] = []
    big = size == "large"
    shp = (ROWS, COLS) if big else (4, 4)
    row = (COLS,) if big else (4,)

    def unary(name: str, b: Fn, n: Fn, positive: bool = False, **attrs: Any) -> None:
        out.append(Case(name, size, _rng_inputs(rng, {"x": shp}, positive),
                        lambda m, t, name=name, attrs=attrs: getattr(m, name)(t["x"], **attrs),
                        lambda t, b=b: b(t["x"]), lambda a, n=n: n(a["x"]), ("x",)))

    def binary(name: str, b: Fn, n: Fn, positive: bool = False) -> None:
        out.append(Case(name, size, _rng_inputs(rng, {"x": shp, "y": shp}, positive),
                        lambda m, t, name=name: getattr(m, name)(t["x"], t["y"]),
                        lambda t, b=b: b(t["x"], t["y"]), lambda a, n=n: n(a["x"], a["y"]), ("x", "y")))

    binary("add", ops.add, np.add)
    binary("sub", ops.sub, np.subtract)
    binary("mul", ops.mul, np.multiply)
    binary("div", ops.div, np.divide, positive=True)
    binary("maximum", ops.maximum, np.maximum)
    binary("pow", ops.pow, np.power, positive=True)
    unary("exp", ops.exp, np.exp)
    unary("log", ops.log, np.log, positive=True)
    unary("sqrt", ops.sqrt, np.sqrt, positive=True)
    unary("rsqrt", ops.rsqrt, lambda v: 1 / np.sqrt(v), positive=True)
    unary("square", ops.square, np.square)
    unary("tanh", ops.tanh, np.tanh)
    unary("sigmoid", ops.sigmoid, lambda v: 1 / (1 + np.exp(-v)))
    unary("relu", ops.relu, lambda v: np.maximum(v, 0))
    unary("softplus", ops.softplus, lambda v: np.logaddexp(0, v))
    unary("gelu", lambda v: ops.gelu(v, approximate="none"), lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))))
    unary("leaky_relu", lambda v: ops.leaky_relu(v, 0.01), lambda v: np.where(v > 0, v, 0.01 * v), alpha=0.01)
    out.append(Case("clip", size, _rng_inputs(rng, {"x": shp}),
                    lambda m, t: m.clip(t["x"], -0.5, 0.5), lambda t: ops.clamp(t["x"], -0.5, 0.5),
                    lambda a: np.clip(a["x"], -0.5, 0.5), ("x",)))
    w = _rng_inputs(rng, {"c": shp, "x": shp, "y": shp})
    w["c"] = w["c"] > 0
    out.append(Case("where", size, w, lambda m, t: m.where(t["c"], t["x"], t["y"]),
                    lambda t: ops.where(t["c"], t["x"], t["y"]), lambda a: np.where(a["c"], a["x"], a["y"]),
                    ("x", "y")))
    out.append(Case("add (bias row)", size, _rng_inputs(rng, {"x": shp, "y": row}),
                    lambda m, t: m.add(t["x"], t["y"]), lambda t: ops.add(t["x"], t["y"]),
                    lambda a: a["x"] + a["y"], ("x", "y")))
    # rows: reductions and normalisations over the last axis (and reduce_sum over the first)
    for name, b, n in (("reduce_sum", lambda v: ops.sum(v, -1), lambda v: v.sum(-1)),
                       ("reduce_mean", lambda v: ops.mean(v, -1), lambda v: v.mean(-1)),
                       ("reduce_max", lambda v: ops.amax(v, -1), lambda v: v.max(-1))):
        out.append(Case(name, size, _rng_inputs(rng, {"x": shp}),
                        lambda m, t, name=name: getattr(m, name)(t["x"], axis=[-1]),
                        lambda t, b=b: b(t["x"]), lambda a, n=n: n(a["x"]), ("x",)))
    out.append(Case("reduce_sum axis 0", size, _rng_inputs(rng, {"x": shp}),
                    lambda m, t: m.reduce_sum(t["x"], axis=[0]), lambda t: ops.sum(t["x"], 0),
                    lambda a: a["x"].sum(0), ("x",)))
    out.append(Case("softmax", size, _rng_inputs(rng, {"x": shp}),
                    lambda m, t: m.softmax(t["x"], -1), lambda t: ops.softmax(t["x"], -1),
                    lambda a: np.exp(a["x"] - a["x"].max(-1, keepdims=True))
                    / np.exp(a["x"] - a["x"].max(-1, keepdims=True)).sum(-1, keepdims=True), ("x",)))
    out.append(Case("log_softmax", size, _rng_inputs(rng, {"x": shp}),
                    lambda m, t: m.log_softmax(t["x"], -1), lambda t: ops.log_softmax(t["x"], -1),
                    lambda a: a["x"] - a["x"].max(-1, keepdims=True)
                    - np.log(np.exp(a["x"] - a["x"].max(-1, keepdims=True)).sum(-1, keepdims=True)), ("x",)))
    ln = _rng_inputs(rng, {"x": shp, "g": row, "b": row})
    out.append(Case("layer_norm", size, ln,
                    lambda m, t: m.layer_norm(t["x"], t["g"], t["b"], eps=1e-5)[0],
                    lambda t: layer_norm(t["x"], t["g"], t["b"])[0],
                    lambda a: (a["x"] - a["x"].mean(-1, keepdims=True))
                    / np.sqrt(a["x"].var(-1, keepdims=True) + 1e-5) * a["g"] + a["b"], ("x", "g", "b"),
                    tol=1e-3))
    out.append(Case("cumsum", size, _rng_inputs(rng, {"x": shp}),
                    lambda m, t: m.cumsum(t["x"], axis=-1), lambda t: ops.cumsum(t["x"], -1),
                    lambda a: np.cumsum(a["x"], -1), ("x",), tol=1e-3))
    out.append(Case("concat", size, _rng_inputs(rng, {"x": shp, "y": shp}),
                    lambda m, t: m.concat([t["x"], t["y"]], axis=0), lambda t: ops.concat([t["x"], t["y"]], 0),
                    lambda a: np.concatenate([a["x"], a["y"]], 0), ("x", "y")))
    idx = {"x": _rng_inputs(rng, {"x": shp})["x"],
           "i": rng.integers(0, shp[0], size=shp[0]).astype(np.int64)}
    out.append(Case("gather", size, idx, lambda m, t: m.gather(t["x"], t["i"], axis=0),
                    lambda t: ops.gather(t["x"], t["i"], 0), lambda a: a["x"][a["i"]], ("x",)))
    # the ops of issue 13 (shapes as a language): MindSpore 2.10 has no CPU kernel for swiglu and
    # rms_norm ("The kernel Swiglu unregistered"), so they run against the builtin composition
    half = shp[-1] // 2
    out.append(Case("swiglu", size, _rng_inputs(rng, {"x": shp}), lambda m, t: m.swiglu(t["x"]),
                    lambda t: ops.silu(t["x"][:, :half]) * t["x"][:, half:],
                    lambda a: a["x"][:, :half] / (1 + np.exp(-a["x"][:, :half])) * a["x"][:, half:], ("x",),
                    builtin_label="ops.silu(a) * b"))
    out.append(Case("rms_norm", size, _rng_inputs(rng, {"x": shp, "w": row}),
                    lambda m, t: m.rms_norm(t["x"], t["w"], eps=1e-6),
                    lambda t: t["x"] * ops.rsqrt(ops.mean(t["x"] * t["x"], -1, keep_dims=True) + 1e-6) * t["w"],
                    lambda a: a["x"] / np.sqrt((a["x"] * a["x"]).mean(-1, keepdims=True) + 1e-6) * a["w"],
                    ("x", "w"), builtin_label="x * rsqrt(mean(x * x) + eps) * w", tol=1e-3))
    out.append(Case("smooth_l1_loss", size, _rng_inputs(rng, {"p": shp, "t": shp}),
                    lambda m, t: m.smooth_l1_loss(t["p"], t["t"], beta=1.0, reduction="none"),
                    lambda t: ops.smooth_l1_loss(t["p"], t["t"], 1.0, "none"),
                    lambda a: np.where(np.abs(a["p"] - a["t"]) < 1.0, 0.5 * (a["p"] - a["t"]) ** 2,
                                       np.abs(a["p"] - a["t"]) - 0.5), ("p", "t")))
    out.append(Case("broadcast_to", size, _rng_inputs(rng, {"x": row}),
                    lambda m, t: m.broadcast_to(t["x"], shape=list(shp)),
                    lambda t: ops.broadcast_to(t["x"], shp).contiguous(), lambda a: np.broadcast_to(a["x"], shp),
                    ("x",), builtin_label="ops.broadcast_to(...).contiguous(): MindSpore's alone is a view"))
    k = 8 if big else 2
    out.append(Case("topk", size, _rng_inputs(rng, {"x": shp}), lambda m, t: m.topk(t["x"], k)[0],
                    lambda t: ops.topk(t["x"], k)[0], lambda a: -np.sort(-a["x"], -1)[:, :k], ("x",)))
    nchw = (16, 64, 64, 64) if big else (1, 1, 4, 4)
    out.append(Case("avg_pool2d", size, _rng_inputs(rng, {"x": nchw}),
                    lambda m, t: m.avg_pool2d(t["x"], kernel=[2, 2], stride=[2, 2]),
                    lambda t: ops.avg_pool2d(t["x"], 2, 2),
                    lambda a: a["x"].reshape(*nchw[:2], nchw[2] // 2, 2, nchw[3] // 2, 2).mean((3, 5)), ("x",),
                    tol=1e-5))
    # fused: bias + gelu (one opgen elementwise op) against the builtin composition
    out.append(Case("bias_gelu", size, _rng_inputs(rng, {"x": shp, "y": row}),
                    lambda m, t: m.bias_gelu(t["x"], t["y"]),
                    lambda t: ops.gelu(ops.add(t["x"], t["y"]), approximate="none"),
                    lambda a: 0.5 * (a["x"] + a["y"]) * (1 + erf((a["x"] + a["y"]) / np.sqrt(2))), ("x", "y"),
                    builtin_label="ops.add + ops.gelu", fused=True))
    mm = [(4, 4, 4)] if not big else [(512, 512, 512), (1024, 1024, 1024)]
    for m_, k_, n_ in mm:
        lbl = size if not big else f"{m_}^3"
        out.append(Case("matmul", lbl, _rng_inputs(rng, {"a": (m_, k_), "b": (k_, n_)}),
                        lambda m, t: m.matmul(t["a"], t["b"]), lambda t: ops.matmul(t["a"], t["b"]),
                        lambda a: a["a"] @ a["b"], ("a", "b"), flops=2.0 * m_ * k_ * n_, tol=1e-3))
    return out


def timed(f: Fn, calls: int) -> list[float]:
    """Seconds per call, each call timed on its own."""
    res = []
    for _ in range(calls):
        t0 = time.perf_counter()
        f()
        res.append(time.perf_counter() - t0)
    return res


def run_case(case: Case, mods: dict[str, Any], rounds: int, grad: bool, alone: float = 0.0) -> None:
    """Check, then time every implementation of a case: interleaved, or with ``alone`` > 0 each
    one on its own for ``alone`` seconds of back-to-back calls (see ``--alone``)."""
    import mindspore as ms

    tensors = {k: ms.Tensor(v) for k, v in case.inputs.items()}
    impls: dict[str, Fn] = {}
    for label, mod in mods.items():
        impls[label] = lambda mod=mod: case.opgen(mod, tensors)
    if case.builtin is not None:
        impls["builtin"] = lambda: case.builtin(tensors)  # type: ignore[misc]
    if case.numpy is not None:
        impls["numpy"] = lambda: case.numpy(case.inputs)  # type: ignore[misc]
    if case.flops and case.size != "small":
        impls["sgemm"] = blas_from_c(case.inputs["a"], case.inputs["b"])
    want = np.asarray(case.numpy(case.inputs)) if case.numpy else None
    for label, f in impls.items():
        got = f()
        got = got.asnumpy() if hasattr(got, "asnumpy") else np.asarray(got)
        if want is not None and not np.allclose(got, want, rtol=case.tol, atol=case.tol):
            raise SystemExit(f"{case.op} ({case.size}): {label} differs from numpy "
                             f"(max error {np.max(np.abs(got - want)):.3g})")
    case.out_bytes = int(np.asarray(want).nbytes) if want is not None else 0
    if grad and case.grad_of:
        names = list(case.inputs)
        pos = tuple(names.index(n) for n in case.grad_of)

        def grad_impl(call: Fn) -> Fn:
            g = ms.grad(lambda *ts: call(dict(zip(names, ts))), grad_position=pos)
            return lambda: g(*(tensors[n] for n in names))

        for label, mod in mods.items():
            impls[f"{label} fwd+bwd"] = grad_impl(lambda t, mod=mod: case.opgen(mod, t))
        if case.builtin is not None:
            impls["builtin fwd+bwd"] = grad_impl(case.builtin)
    nbytes = sum(v.nbytes for v in case.inputs.values())
    per = 3 if case.size != "small" and (nbytes > 1 << 22 or case.flops > 5e8) else 40
    for f in impls.values():  # warm-up (builds MindSpore's kernels, grad graphs, caches)
        f()
        f()
    case.timings.update(time_impls(impls, rounds, per, alone, seed=hash((case.op, case.size)) & 0xFFFF))


def time_impls(impls: dict[str, Fn], rounds: int, per: int, alone: float = 0.0, seed: int = 0
               ) -> dict[str, list[float]]:
    """Seconds per call of every implementation (already warmed up): ``rounds`` turns of ``per``
    calls each, the implementations in a fresh random order per round; or, with ``alone`` > 0,
    each on its own for ``alone`` seconds of back-to-back calls."""
    order = list(impls)
    timings: dict[str, list[float]] = {}
    if alone:
        # Two passes, the second in reverse order, and each implementation's faster pass (by
        # median) kept: a call's speed depends on what ran before it in the process (MindSpore's
        # memory pool and threads; ms.grad of add measured 2.7 then 1.9 ms in one process), and
        # the reversed pass gives every implementation an early and a late turn.
        passes: list[dict[str, list[float]]] = []
        for pass_order in (order, order[::-1]):
            got: dict[str, list[float]] = {}
            for label in pass_order:
                f = impls[label]
                for _ in range(3):
                    f()
                t_end = time.perf_counter() + alone / 2
                while time.perf_counter() < t_end:
                    got.setdefault(label, []).extend(timed(f, per))
            passes.append(got)
        for label in order:
            timings[label] = min((got[label] for got in passes), key=statistics.median)
        return timings
    shuffle = random.Random(seed)
    for _ in range(rounds):
        shuffle.shuffle(order)
        for label in order:
            timings.setdefault(label, []).extend(timed(impls[label], per))
    return timings


def main(argv: list[str] | None = None) -> int:
    """Measure the machine, then every case; print one table per size."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default="", help="comma-separated op names (default: all)")
    p.add_argument("--sizes", default="small,large")
    p.add_argument("--rounds", type=int, default=7, help="turns per implementation (calls per turn: 3 large, 40 small)")
    p.add_argument("--no-grad", action="store_true", help="forward only")
    p.add_argument("--no-limits", action="store_true", help="skip the machine's stream / peak / sgemm figures")
    p.add_argument("--overhead-only", action="store_true", help="only the per-call table (16 elements)")
    p.add_argument("--alone", type=float, default=0.0, metavar="S",
                   help="time each implementation on its own for S seconds of back-to-back calls (two "
                        "passes of S/2, the second in reverse order; the faster kept) instead of in turns: "
                        "after a builtin op MindSpore's runtime threads spin for ~50 ms and take a core from "
                        "whatever runs next (docs/performance.md)")
    args = p.parse_args(argv)

    print(f"# {machine()}")
    limits: dict[str, float] = {}
    if not args.no_limits:
        limits = machine_limits()
        for k, v in limits.items():
            print(f"#   {k}: {v:g}")
    custom_path_in_pynative()
    import mindspore as ms

    ms.set_device("CPU")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.runtime.launch_blocking()
    from generated.opgen_ops import custom, function

    mods = {"Function": function, "Custom": custom}
    if args.overhead_only:
        overhead(args.rounds)
        return 0
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    selected = [c for c in cases(args.sizes.split(","), np.random.default_rng(0)) if not only or c.op in only]
    fused = fused_package() if any(c.fused for c in selected) else {}
    all_cases = selected
    # the large cases' tensors are 16 MB: the limit they run against is the stream figure over
    # arrays of that size (a large last-level cache may hold them), copy or triad, whichever is best
    bw = max([v for k, v in limits.items() if k.startswith("stream_") and "_16mb_" in k]
             or [v for k, v in limits.items() if k.startswith("stream_copy")] or [0.0])
    print(f"MindSpore {ms.__version__}, OPGEN_NUM_THREADS={os.environ.get('OPGEN_NUM_THREADS', '(all CPUs)')}, "
          f"{len(all_cases)} cases")
    print()
    print("| op | size | builtin | Function | Custom | numpy | F/builtin | C/builtin | reaches | "
          "fwd+bwd builtin | F/builtin | C/builtin |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case in all_cases:
        run_case(case, fused if case.fused else mods, args.rounds, not args.no_grad, args.alone)
        med = {k: statistics.median(v) for k, v in case.timings.items()}
        cell = functools.partial(_cell, med)
        ratio = functools.partial(_ratio, med)

        reach = ""
        if case.size != "small":
            best = min(med.get("Function", 1e9), med.get("Custom", 1e9))
            if case.flops:
                reach = f"{case.flops / best / 1e9:.0f} GFLOP/s"
                if "sgemm" in med:
                    reach += f" ({med['sgemm'] / best:.0%} of sgemm from C: {case.flops / med['sgemm'] / 1e9:.0f})"
            else:
                gbs = (sum(v.nbytes for v in case.inputs.values()) + case.out_bytes) / best / 1e9
                reach = f"{gbs:.1f} GB/s" + (f" ({gbs / bw:.0%})" if bw else "")
        label = case.op + (f" (vs {case.builtin_label})" if case.builtin_label else "")
        print(f"| {label} | {case.size} | {cell('builtin')} | {cell('Function')} | {cell('Custom')} | "
              f"{cell('numpy')} | {ratio('Function', 'builtin')} | {ratio('Custom', 'builtin')} | {reach} | "
              f"{cell('builtin fwd+bwd')} | {ratio('Function fwd+bwd', 'builtin fwd+bwd')} | "
              f"{ratio('Custom fwd+bwd', 'builtin fwd+bwd')} |", flush=True)
    overhead(args.rounds)
    print(f"# load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


def overhead(rounds: int) -> None:
    """Per-call cost at 16 elements of the generated wrappers against calling what they wrap
    directly: the pybind11 function of the extension (what a hand-written Function<T> op is
    called through) and the ``ops.Custom`` primitive itself (a hand-written aot op registered
    the same way). Ops with a float attr, a str attr and a list attr."""
    import mindspore as ms

    from generated.opgen_ops import custom, function
    from generated.opgen_ops.function import _ext

    x = ms.Tensor(np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32))
    pairs: dict[str, tuple[Fn, Fn]] = {
        "leaky_relu(x, 0.01) Function": (lambda: function.leaky_relu(x, 0.01), lambda: _ext.leaky_relu(x, 0.01)),
        "gelu(x, 'tanh') Function": (lambda: function.gelu(x, "tanh"), lambda: _ext.gelu(x, "tanh")),
        "reduce_sum(x, [1]) Function": (lambda: function.reduce_sum(x, [1]), lambda: _ext.reduce_sum(x, [1], False)),
        "mul(x, x) Function": (lambda: function.mul(x, x), lambda: _ext.mul(x, x)),
    }
    # the primitive with a Python out_shape (dynamic=False): what the wrapper picks for known
    # shapes, i.e. a hand-written aot op registered the same way
    for name, make in (("leaky_relu(x, 0.01) Custom", lambda: custom.leaky_relu_primitive(alpha=0.01, dynamic=False)),
                       ("gelu(x, 'tanh') Custom", lambda: custom.gelu_primitive(approximate="tanh", dynamic=False)),
                       ("add(x, x) Custom", lambda: custom.add_primitive(dynamic=False))):
        prim = make()
        op = name.split("(")[0]
        gen = {"leaky_relu": lambda: custom.leaky_relu(x, 0.01), "gelu": lambda: custom.gelu(x, "tanh"),
               "add": lambda: custom.add(x, x)}[op]
        pairs[name] = (gen, (lambda prim=prim: prim(x, x)) if op == "add" else (lambda prim=prim: prim(x)))
    print()
    print("| per call, 16 elements | generated wrapper | direct | ratio |")
    print("|---|---|---|---|")
    shuffle = random.Random(3)
    for name, (gen, direct) in pairs.items():
        n = 200 if "Function" in name else 20
        times: dict[str, list[float]] = {"gen": [], "direct": []}
        for f in (gen, direct):
            f()
        for _ in range(rounds * 5):
            order = [("gen", gen), ("direct", direct)]
            shuffle.shuffle(order)
            for k, f in order:
                t0 = time.perf_counter()
                for _ in range(n):
                    f()
                times[k].append((time.perf_counter() - t0) / n)
        g, d = statistics.median(times["gen"]), statistics.median(times["direct"])
        print(f"| {name} | {fmt(g).strip()} | {fmt(d).strip()} | {g / d:.3f} |", flush=True)


def _cell(med: dict[str, float], k: str) -> str:
    return fmt(med[k]).strip() if k in med else "-"


def _ratio(med: dict[str, float], a: str, b: str) -> str:
    return f"{med[a] / med[b]:.2f}" if a in med and b in med else "-"


def blas_from_c(a: np.ndarray, b: np.ndarray) -> Fn:
    """OpenBLAS sgemm (the library opgen::gemm calls) on a and b, called through ctypes with a
    preallocated output on OpenBLAS's own threads, one per CPU: the BLAS's own speed, measured
    in the same turns as the ops. The process has one OpenBLAS, which opgen::gemm sets to one
    thread (it splits rows on its own pool), so each call sets the count and puts 1 back."""
    import ctypes

    import scipy_openblas32 as blas  # type: ignore[import-not-found, import-untyped, unused-ignore]

    lib = ctypes.CDLL(str(Path(blas.get_lib_dir()) / f"lib{blas.get_library()}.so"))
    f = lib.scipy_cblas_sgemm
    p, i = ctypes.c_void_p, ctypes.c_int
    f.argtypes = [i, i, i, i, i, i, ctypes.c_float, p, i, p, i, ctypes.c_float, p, i]
    m, k = a.shape
    n = b.shape[1]
    c = np.empty((m, n), np.float32)
    threads = lib.scipy_openblas_set_num_threads
    threads.argtypes = [i]
    cpus = len(os.sched_getaffinity(0))

    def call() -> np.ndarray:
        threads(cpus)
        f(101, 111, 111, m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, n, 0.0, c.ctypes.data, n)
        threads(1)
        return c

    return call


def fused_package() -> dict[str, Any]:
    """The fused ops of bench/specs (bias_gelu), generated and built into the build cache."""
    import importlib

    from opgen.cli import main as opgen_main

    out = build_dir() / "fused"
    if opgen_main(["generate", str(ROOT / "bench" / "specs"), "-o", str(out), "-p", "bench_fused_ops", "-q"]) != 0:
        raise SystemExit("cannot generate bench/specs")
    if opgen_main(["build", str(out / "bench_fused_ops"), "-q"]) != 0:
        raise SystemExit("cannot build the fused ops")
    if str(out) not in sys.path:
        sys.path.insert(0, str(out))
    return {"Function": importlib.import_module("bench_fused_ops.function"),
            "Custom": importlib.import_module("bench_fused_ops.custom")}


def machine_limits() -> dict[str, float]:
    """Compile (cached) and run bench/machine_limits.cc; its figures by name."""
    from opgen.build import kernel_flags

    src = ROOT / "bench" / "machine_limits.cc"
    exe = build_dir() / "machine_limits"
    _, ldflags = kernel_flags()
    blas = [f for f in ldflags if "openblas" in f or f.startswith("-L") or "rpath" in f]
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["g++", "-O3", "-std=c++17", "-mavx2", "-mfma", "-pthread", str(src), "-o", str(exe)]
                       + (["-DOPGEN_BLAS"] + blas if blas else []), check=True)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=600)
    out = {}
    for line in proc.stdout.splitlines():
        name, value, unit = line.split()
        out[f"{name} ({unit})"] = float(value)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
