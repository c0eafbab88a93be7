"""What ``ops.Custom`` itself costs per call next to a kernel that sweeps memory.

An aot kernel that only writes N MB of its own buffer (no opgen code, registered by hand) is
timed called directly through ctypes and through ``ops.Custom``, PyNative with
``mindspore.runtime.launch_blocking()``. The difference is MindSpore's per-call work for the
primitive. It grows with N: the kernel's sweep evicts the caches that MindSpore's per-call path
(tens of microseconds of code and data when warm) then runs from memory. This is why the Custom
path of opgen's large ops is 0.15-0.25 ms behind its Function path at 16 MB, as much for a
hand-written registration as for the generated one (docs/performance.md).

Run from the repository root::

    PYTHONPATH=$PWD .venv/bin/python bench/bench_custom_sweep.py [--calls 100]

Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_ops import build_dir  # noqa: E402

SOURCE = r"""
#include <cstdint>
#include <cstring>
#include <vector>
static std::vector<char> buf(std::size_t{64} << 20);
// Writes as many MB of buf as the first input has elements (at most 64); returns 0.
extern "C" int sweep(int, void **, int *, int64_t **shapes, const char **, void *, void *) {
  const int64_t mb = shapes[0][0] < 64 ? shapes[0][0] : 64;
  std::memset(buf.data(), static_cast<int>(mb), static_cast<std::size_t>(mb) << 20);
  return 0;
}
"""


def _median_us(fn: Callable[[], Any], calls: int) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main() -> None:
    """Build the sweep kernel, then print direct and ops.Custom times for 1 to 64 MB."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=100)
    args = ap.parse_args()

    out = build_dir() / "custom_sweep"
    out.mkdir(parents=True, exist_ok=True)
    src, lib_path = out / "sweep.cc", out / "sweep.so"
    src.write_text(SOURCE)
    subprocess.run(["g++", "-O2", "-std=c++17", "-shared", "-fPIC", str(src), "-o", str(lib_path)], check=True)

    import mindspore as ms
    from mindspore import ops

    ms.set_device("CPU")
    ms.runtime.launch_blocking()
    lib = ctypes.CDLL(str(lib_path))
    op = ops.Custom(f"{lib_path}:sweep", out_shape=lambda x: [1], out_dtype=lambda x: x, func_type="aot")
    print("| MB written per call | kernel called directly | through ops.Custom | ops.Custom's share |")
    print("|---|---|---|---|")
    for mb in (1, 4, 16, 32, 64):
        x = ms.Tensor(np.zeros(mb, np.float32))
        dims = (ctypes.c_int64 * 1)(mb)
        shapes = (ctypes.POINTER(ctypes.c_int64) * 1)(dims)
        direct = _median_us(lambda s=shapes: lib.sweep(1, None, None, s, None, None, None), args.calls)
        custom = _median_us(lambda t=x: op(t), args.calls)
        print(f"| {mb} | {direct:.1f} us | {custom:.1f} us | {custom - direct:.1f} us |", flush=True)


if __name__ == "__main__":
    main()
