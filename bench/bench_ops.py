"""Per-call time of element-wise ``mul`` (float32) on both execution paths, in one process.

Run from the repository root::

    PYTHONPATH=$PWD .venv/bin/python bench/bench_ops.py [--sizes 16,1048576,16777216]
        [--calls N] [--rounds R] [--mode blocking|async] [--threads T]

Compared, on the same inputs:

- ``opgen Function``  the generated Function<T> path (``generated.opgen_ops.function.mul``)
- ``seed Function``   the pyboost tutorial's CustomMul, hand-written (bench/handwritten/seed_mul.cc)
- ``opgen aot``       the generated Custom path (``generated.opgen_ops.custom.mul``, func_type="aot")
- ``seed aot``        a hand-written aot kernel in the Custom tutorial's style (bench/handwritten/aot_mul.cc),
                      registered as in the tutorial (out_shape = x's shape, no bprop)
- ``seed aot + bprop`` the same kernel with what the generated op has too, written by hand: a
                      broadcasting out_shape and a bprop -- the equivalent of ``opgen aot``
- ``ops.mul``         MindSpore's builtin
- ``numpy``           ``np.multiply`` on the same data (allocates its output too)

How a call is timed (the ``--mode``):

- ``blocking`` (default): ``mindspore.runtime.launch_blocking()`` makes every MindSpore op run
  synchronously, so one timed call returns a finished tensor on every row, and the time is its
  latency. Without it ``ops.mul`` and the Custom ops only enqueue work (a few microseconds) and
  run on MindSpore's pipeline threads. ``mindspore.runtime.synchronize()`` does not help on CPU
  (MindSpore 2.10 logs "CPU device is not supported" and returns).
- ``async``: MindSpore's default pipeline. N calls are issued back to back and the last
  output's ``.asnumpy()`` (a no-copy view of a CPU tensor; it waits for everything queued before
  it) ends the measurement; the time is the total over N (throughput per call).

Each implementation is warmed up, then timed ``--calls`` times in small blocks, the
implementations taking turns in a new random order each time (so a burst of load from other
processes hits all of them alike, and no row always follows the same other row); the table
shows the median over all calls, with the spread (10th-90th percentile) after it. Results are
checked against numpy before timing. This script prints numbers; it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HANDWRITTEN = ROOT / "bench" / "handwritten"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

Impl = Callable[[Any, Any], Any]


def custom_path_in_pynative() -> None:
    """Make ``generated.opgen_ops.custom.<op>`` the Custom path in PyNative in this process (call
    before importing it): by default it takes the Function<T> path there when the extension is
    built (OPGEN_PYNATIVE_PATH, docs/performance.md), and these rows time ops.Custom."""
    os.environ["OPGEN_PYNATIVE_PATH"] = "custom"


def build_dir() -> Path:
    """Where the hand-written baselines are built: ``$OPGEN_BUILD_DIR/bench`` or opgen's cache."""
    from opgen.build import build_root

    d = build_root() / "bench"
    d.mkdir(parents=True, exist_ok=True)
    return d


def load_seed_function() -> Any:
    """The hand-written seed-style Function<T> extension, built with CustomOpBuilder (cached)."""
    from mindspore.ops import CustomOpBuilder

    return CustomOpBuilder("bench_seed_mul", [str(HANDWRITTEN / "seed_mul.cc")], backend="CPU",
                           build_dir=str(build_dir() / "seed_mul")).load()


def seed_aot_library() -> Path:
    """The hand-written aot library, compiled with opgen's aot flags when missing or stale."""
    src = HANDWRITTEN / "aot_mul.cc"
    lib = build_dir() / "libbench_aot_mul.so"
    if not lib.exists() or lib.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["g++", "-O3", "-std=c++17", "-fPIC", "-shared", "-D_GLIBCXX_USE_CXX11_ABI=0", str(src),
                        "-o", str(lib)], check=True)
    return lib


def broadcast(x: list[int], y: list[int]) -> list[int]:
    """NumPy broadcast of two shapes, as a user writes it for ``out_shape``."""
    n = max(len(x), len(y))
    xs, ys = [1] * (n - len(x)) + list(x), [1] * (n - len(y)) + list(y)
    out = []
    for a, b in zip(xs, ys):
        if a != b and 1 not in (a, b):
            raise ValueError(f"shapes {x} and {y} cannot be broadcast")
        out.append(b if a == 1 else a)
    return out


def make_seed_aot(lib: Path, full: bool) -> Impl:
    """``ops.Custom`` primitive for the hand-written aot kernel (float32).

    ``full=False`` is the tutorial's op: ``out_shape`` is x's shape, no gradient. ``full=True``
    adds what the generated op also has, written by hand: a broadcasting ``out_shape`` and a
    bprop (dx = dout * y, dy = dout * x, with ``ops.mul``).
    """
    from mindspore import ops
    from mindspore.ops import CustomRegOp, DataType

    name = "bench_seed_aot_mul_full" if full else "bench_seed_aot_mul"
    reg = (CustomRegOp(name).input(0, "x").input(1, "y").output(0, "out")
           .dtype_format(DataType.F32_Default, DataType.F32_Default, DataType.F32_Default)
           .target("CPU").get_op_info())
    if not full:
        plain: Impl = ops.Custom(f"{lib}:CustomMul", out_shape=lambda x, y: x, out_dtype=lambda x, y: x,
                                 func_type="aot", reg_info=reg)
        return plain

    def bprop(x: Any, y: Any, out: Any, dout: Any) -> tuple[Any, Any]:
        return ops.mul(dout, y), ops.mul(dout, x)

    op: Impl = ops.Custom(f"{lib}:CustomMul", out_shape=broadcast, out_dtype=lambda x, y: x, func_type="aot",
                          reg_info=reg, bprop=bprop)
    return op


def implementations() -> dict[str, Impl]:
    """Every implementation in the table, by row label (builds what is missing first)."""
    from mindspore import ops

    from generated.opgen_ops import custom, function

    seed_fn = load_seed_function()
    return {
        "opgen Function": function.mul,
        "seed Function": seed_fn.mul,
        "opgen aot": custom.mul,
        "seed aot": make_seed_aot(seed_aot_library(), full=False),
        "seed aot + bprop": make_seed_aot(seed_aot_library(), full=True),
        "ops.mul": ops.mul,
    }


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of values, by linear interpolation."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def time_blocking(f: Impl, x: Any, y: Any, calls: int) -> list[float]:
    """Seconds per call, each call timed on its own (ops run synchronously)."""
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        f(x, y)
        out.append(time.perf_counter() - t0)
    return out


def time_async(f: Impl, x: Any, y: Any, calls: int) -> list[float]:
    """Seconds per call over `calls` back-to-back calls ended by the last output's asnumpy()."""
    t0 = time.perf_counter()
    z = None
    for _ in range(calls):
        z = f(x, y)
    if z is not None and hasattr(z, "asnumpy"):
        z.asnumpy()
    return [(time.perf_counter() - t0) / calls]


def fmt(seconds: float) -> str:
    """A duration in the unit that suits it."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.1f} us"
    return f"{seconds * 1e3:8.2f} ms"


def machine() -> str:
    """One line about the machine and its load, for the table's header."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def main(argv: list[str] | None = None) -> int:
    """Build what is missing, check every implementation against numpy, time them, print a table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="16,1048576,16777216", help="comma-separated element counts")
    p.add_argument("--calls", type=int, default=0, help="timed calls per implementation and size (default: by size)")
    p.add_argument("--rounds", type=int, default=20, help="at least this many turns per implementation")
    p.add_argument("--mode", choices=("blocking", "async"), default="blocking")
    p.add_argument("--only", default="", help="comma-separated row labels to run (default: all)")
    args = p.parse_args(argv)
    custom_path_in_pynative()

    import mindspore as ms

    ms.set_device("CPU")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    if args.mode == "blocking":
        ms.runtime.launch_blocking()
    impls = implementations()
    sizes = [int(v) for v in args.sizes.split(",")]
    timer = time_blocking if args.mode == "blocking" else time_async

    print(f"mul, float32, PyNative, mode={args.mode}; {machine()}")
    print(f"MindSpore {ms.__version__}, OPGEN_NUM_THREADS={os.environ.get('OPGEN_NUM_THREADS', '(all CPUs)')}")
    rows: dict[tuple[str, int], list[float]] = {}
    rng = np.random.default_rng(0)
    shuffle = random.Random(0)
    for n in sizes:
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        x, y = ms.Tensor(a), ms.Tensor(b)
        want = a * b
        cases: dict[str, tuple[Impl, Any, Any]] = {k: (f, x, y) for k, f in impls.items()}
        cases["numpy"] = (np.multiply, a, b)
        if args.only:
            keep = {label.strip() for label in args.only.split(",")}
            cases = {k: c for k, c in cases.items() if k in keep}
        for label, (f, u, v) in cases.items():
            got = f(u, v)
            got = got.asnumpy() if hasattr(got, "asnumpy") else got
            if not np.array_equal(got, want):
                raise SystemExit(f"{label} gives wrong results at n={n}")
        calls = args.calls or (2000 if n <= 4096 else 300 if n <= 1 << 20 else 40)
        block = max(1, min(calls // args.rounds, 20 if n <= 4096 else 5 if n <= 1 << 20 else 2))
        for f, u, v in cases.values():  # warm-up
            timer(f, u, v, max(3, block))
        order = list(cases)
        for _ in range(-(-calls // block)):
            # Small blocks, implementations taking turns in a fresh random order each time: a
            # burst of load from other processes falls on all of them alike, and none always runs
            # right after the same other one (whose cache and allocator footprint it would inherit).
            shuffle.shuffle(order)
            for label in order:
                f, u, v = cases[label]
                rows.setdefault((label, n), []).extend(timer(f, u, v, block))

    labels = [label for label in list(impls) + ["numpy"] if any(key[0] == label for key in rows)]
    width = 26
    print()
    print("| implementation | " + " | ".join(f"n = {n:,}" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for label in labels:
        cells = []
        for n in sizes:
            t = rows[(label, n)]
            cells.append(f"{fmt(statistics.median(t)).strip()} ({fmt(percentile(t, 0.1)).strip()}-"
                         f"{fmt(percentile(t, 0.9)).strip()})")
        print(f"| {label} | " + " | ".join(c.ljust(width) for c in cells) + " |")
    print()
    med = {k: statistics.median(v) for k, v in rows.items()}

    def ratio(a: str, b: str, n: int) -> str:
        return f"{a} / {b} = {med[(a, n)] / med[(b, n)]:.3f}"

    for n in sizes:
        pairs = [("opgen Function", "seed Function"), ("opgen aot", "seed aot + bprop"), ("opgen aot", "seed aot"),
                 ("opgen Function", "ops.mul"), ("opgen aot", "ops.mul")]
        shown = [ratio(a, b, n) for a, b in pairs if (a, n) in med and (b, n) in med]
        print(f"n = {n:,}: " + ", ".join(shown))
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
