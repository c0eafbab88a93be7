"""The generated PyTorch ops on an NVIDIA GPU against torch's own, measured in one process.

Run from the repository root on a machine with a GPU, after the package is built with CUDA::

    PYTHONPATH=$PWD python3 bench/bench_gpu.py --package-dir generated/opgen_ops_torch [--quick]

Every figure is a median over ``--rounds`` rounds of CUDA-event timings (after a warm-up), with
absolute times, in one process, the implementations taking turns:

- ``copy``: a device-to-device copy of 64M float32 (``dst.copy_(src)``), the bandwidth every
  memory-bound op is measured against (bytes read + written per second).
- memory-bound elementwise ops at 64M float32 (add, sub, mul, maximum, relu, square, ...): opgen
  against torch eager, and the share of the copy's bandwidth each reaches (goal: >= 85%, <= 1.0x).
- softmax, log_softmax, layer_norm, rms_norm (4096 x 4096), forward and forward+backward, against
  torch eager (rms_norm: its eager composition); goal <= 1.0x.
- fused ops (rms_norm, swiglu) against ``torch.compile`` of the same composition; goal <= 1.0x.
- matmul (4096^3) against ``torch.matmul``; goal <= 1.05x.
- per call at 1K float32 elements: opgen's mul against a hand-written ``TORCH_LIBRARY`` CUDA op
  (bench/handwritten/torch_cuda_ops.cu, torch.utils.cpp_extension), host time per call; goal <= 1.05x.

An op without ``GPU`` rows in the package is listed as such. This script prints numbers; it
asserts nothing about speed (docs/performance.md, "On the GPU", gives the figures).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

Fn = Callable[[], Any]


def _time(fns: dict[str, Fn], rounds: int, reps: int) -> dict[str, float]:
    """Median milliseconds per call of each function, the functions taking turns each round."""
    for fn in fns.values():  # warm-up: libraries loaded, allocator primed, graphs compiled
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / reps)
    return {k: statistics.median(v) for k, v in times.items()}


def _row(label: str, t: dict[str, float], base: str, extra: str = "") -> None:
    cells = "  ".join(f"{k} {v * 1e3:9.1f} us" for k, v in t.items())
    ratios = "  ".join(f"{k}/{base} {v / t[base]:.2f}" for k, v in t.items() if k != base)
    print(f"{label:<28} {cells}  {ratios}{extra}", flush=True)


def _has_gpu_rows(fn: Fn) -> bool:
    try:
        fn()
        return True
    except TypeError as exc:
        if "CUDA" in str(exc) or "unsupported dtypes" in str(exc):
            return False
        raise


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--package-dir", type=Path, default=ROOT / "generated" / "opgen_ops_torch")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--quick", action="store_true", help="smaller sizes and fewer rounds (a smoke run)")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_gpu: no CUDA device", file=sys.stderr)
        return 2
    pkg = args.package_dir.resolve()
    sys.path.insert(0, str(pkg.parent))
    ops = importlib.import_module(pkg.name)
    dev = torch.device("cuda")
    rounds = 3 if args.quick else args.rounds
    n = (1 << 22) if args.quick else (1 << 26)  # 64M float32 = 256 MB a tensor
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__} (CUDA {torch.version.cuda})", flush=True)

    # ---- memory-bound elementwise against the copy's bandwidth -----------------------------
    x, y = torch.randn(n, device=dev), torch.randn(n, device=dev)
    dst = torch.empty_like(x)
    copy = _time({"copy": lambda: dst.copy_(x)}, rounds, 10)["copy"]
    bw = 2 * 4 * n / (copy * 1e-3) / 1e9
    print(f"copy of {n} float32: {copy * 1e3:.1f} us, {bw:.0f} GB/s (read + write)")
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum}
    unary = {"relu": torch.relu, "square": torch.square, "exp": torch.exp, "sigmoid": torch.sigmoid,
             "tanh": torch.tanh, "gelu": F.gelu}
    for name, builtin in {**binary, **unary}.items():
        args_ = (x, y) if name in binary else (x,)
        fn = getattr(ops, name, None)
        if fn is None or not _has_gpu_rows(lambda fn=fn, a=args_: fn(*a)):
            print(f"{name:<28} no GPU rows")
            continue
        t = _time({"torch": lambda b=builtin, a=args_: b(*a), "opgen": lambda f=fn, a=args_: f(*a)}, rounds, 10)
        moved = 4 * n * (len(args_) + 1)
        share = moved / (t["opgen"] * 1e-3) / 1e9 / bw
        _row(f"{name} 64M", t, "torch", f"  {share:.0%} of the copy's bandwidth")

    # ---- row ops, forward and forward+backward -----------------------------------------------
    rows, cols = (1024, 1024) if args.quick else (4096, 4096)
    a = torch.randn(rows, cols, device=dev)
    w = torch.randn(cols, device=dev)
    b = torch.randn(cols, device=dev)

    def rms(x_: Any, w_: Any) -> Any:
        return x_ * torch.rsqrt(x_.pow(2).mean(-1, keepdim=True) + 1e-6) * w_

    row_ops: dict[str, tuple[Callable[..., Any], Callable[..., Any], tuple[Any, ...]]] = {
        "softmax": (lambda t: torch.softmax(t, -1), lambda t: ops.softmax(t), (a,)),
        "log_softmax": (lambda t: torch.log_softmax(t, -1), lambda t: ops.log_softmax(t), (a,)),
        "layer_norm": (lambda t, g, h: F.layer_norm(t, (cols,), g, h), lambda t, g, h: ops.layer_norm(t, g, h),
                       (a, w, b)),
        "rms_norm": (rms, lambda t, g: ops.rms_norm(t, g), (a, w)),
    }
    for name, (ref, mine, inputs) in row_ops.items():
        if not hasattr(ops, name) or not _has_gpu_rows(lambda m=mine, i=inputs: m(*i)):
            print(f"{name:<28} no GPU rows")
            continue
        t = _time({"torch": lambda r=ref, i=inputs: r(*i), "opgen": lambda m=mine, i=inputs: m(*i)}, rounds, 5)
        _row(f"{name} {rows}x{cols} fwd", t, "torch")
        leaves = [i.detach().requires_grad_(True) for i in inputs]
        dout = torch.randn(rows, cols, device=dev)

        def fwd_bwd(f: Callable[..., Any], leaves: list[Any] = leaves, dout: Any = dout) -> Any:
            return torch.autograd.grad(f(*leaves), leaves, dout)

        t = _time({"torch": lambda r=ref: fwd_bwd(r), "opgen": lambda m=mine: fwd_bwd(m)}, rounds, 5)
        _row(f"{name} {rows}x{cols} fwd+bwd", t, "torch")

    # ---- fused ops against torch.compile of their composition ------------------------------------
    fused: dict[str, tuple[Callable[..., Any], Callable[..., Any], tuple[Any, ...]]] = {
        "rms_norm": (rms, lambda t, g: ops.rms_norm(t, g), (a, w)),
        "swiglu": (lambda t: F.silu(t[..., : cols // 2]) * t[..., cols // 2:], lambda t: ops.swiglu(t), (a,)),
    }
    for name, (ref, mine, inputs) in fused.items():
        if not hasattr(ops, name) or not _has_gpu_rows(lambda m=mine, i=inputs: m(*i)):
            print(f"{name:<28} no GPU rows")
            continue
        compiled = torch.compile(ref)
        t = _time({"compiled": lambda c=compiled, i=inputs: c(*i), "opgen": lambda m=mine, i=inputs: m(*i)}, rounds, 5)
        _row(f"{name} vs torch.compile", t, "compiled")

    # ---- matmul ------------------------------------------------------------------------------------
    m = 1024 if args.quick else 4096
    p_, q_ = torch.randn(m, m, device=dev), torch.randn(m, m, device=dev)
    if hasattr(ops, "matmul") and _has_gpu_rows(lambda: ops.matmul(p_, q_)):
        t = _time({"torch": lambda: torch.matmul(p_, q_), "opgen": lambda: ops.matmul(p_, q_)}, rounds, 3)
        _row(f"matmul {m}^3", t, "torch")
    else:
        print(f"{'matmul':<28} no GPU rows")

    # ---- per call at 1K elements: host time --------------------------------------------------------
    from torch.utils import cpp_extension

    cpp_extension.load("handwritten_cuda", [str(ROOT / "bench" / "handwritten" / "torch_cuda_ops.cu")],
                       is_python_module=False, verbose=False)
    s, u = torch.randn(1024, device=dev), torch.randn(1024, device=dev)
    hand = torch.ops.handwritten_cuda.mul
    mine_mul = getattr(ops, "mul", None)
    if mine_mul is not None and _has_gpu_rows(lambda: mine_mul(s, u)):
        calls = 2000 if args.quick else 20000
        per: dict[str, list[float]] = {"handwritten": [], "opgen": []}
        for _ in range(rounds):
            for name, fn in (("handwritten", lambda: hand(s, u)), ("opgen", lambda: mine_mul(s, u))):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                torch.cuda.synchronize()
                per[name].append((time.perf_counter() - t0) / calls * 1e3)
        _row("mul per call, 1K", {k: statistics.median(v) for k, v in per.items()}, "handwritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
