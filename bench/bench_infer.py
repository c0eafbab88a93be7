"""Per-call cost of the Custom path's shape inference: the aot library's C++ ``InferShape``
(``out_shape=None``, needed by GRAPH_MODE graphs with dynamic shapes) against a Python
``out_shape`` callable on the same aot kernel, in one process.

Run from the repository root::

    PYTHONPATH=$PWD .venv/bin/python bench/bench_infer.py [--calls 3000] [--size 16]

Rows (PyNative, ``mindspore.runtime.launch_blocking()``, float32 ``add`` of two tensors):

- ``opgen add``            ``generated.opgen_ops.add``: the wrapper (dtype, attr and contract checks,
                           memoized per shapes) and the primitive it picks for known shapes
                           (Python ``out_shape``)
- ``primitive, C++ infer`` ``add_primitive(dynamic=True)``, created once, called directly: ``out_shape=None``
- ``primitive, Python out_shape`` ``add_primitive(dynamic=False)``, created once, called directly
- ``hand-written, Python out_shape`` the same aot kernel registered by hand with a Python
                           ``out_shape`` (``opgen.runtime.broadcast_shape``), as opgen generated before
- ``hand-written + bprop`` the same, with a bprop (returning dout twice) as the generated op has
- ``Function path add``    ``generated.opgen_ops.function.add``: the same kernel without ops.Custom
- ``ops.add``              MindSpore's builtin, timed after the others in a loop of its own

With ``--size 4194304`` the same rows show what ops.Custom costs at a large size: the hand-written
registration of the kernel is as far behind the Function path as the generated op (docs/performance.md).

Calls of the aot rows are interleaved in a new random order each round; medians (10th-90th
percentile) are printed, with each row's ratio to ``hand-written, Python out_shape``. ``ops.add``
is not in the rotation: after each builtin op MindSpore's runtime threads spin for ~50 ms
(docs/performance.md), taking one of the two cores from whichever row runs next. Prints
numbers, asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--size", type=int, default=16)
    args = ap.parse_args()
    os.environ["OPGEN_PYNATIVE_PATH"] = "custom"  # 'opgen add' is the Custom path's wrapper

    import mindspore as ms
    from mindspore import ops

    from generated.opgen_ops import custom as C
    from generated.opgen_ops import function as F
    from opgen import runtime as rt

    ms.set_device("CPU")
    ms.runtime.launch_blocking()
    x = ms.Tensor(np.random.default_rng(0).standard_normal(args.size).astype(np.float32))
    y = ms.Tensor(np.random.default_rng(1).standard_normal(args.size).astype(np.float32))
    layout = (1, 1)
    kinds = ("required", "required")
    def hand_written(**bprop: Any) -> Any:
        """The generated op's aot kernel registered by hand, with a Python out_shape."""
        return ops.Custom(
            f"{C._LIB}:opgen_ops_add_forward",
            out_shape=lambda a, b: rt.broadcast_shape(a, b, op="add"),
            out_dtype=lambda a, b: a,
            func_type="aot",
            reg_info=rt.reg_info("opgen_ops_add", [("x", k, 1) for k in kinds[:1]] + [("y", "required", 1)],
                                 [("out", "required", 1)], [], C._ADD_ROWS),
            **bprop,
        )

    py_prim = hand_written()
    # the same registration with a bprop, as the generated op has (MindSpore does per-call work
    # for a primitive with a bprop): the hand-written op "registered the same way"
    py_prim_bprop = hand_written(bprop=lambda a, b, out, dout: (dout, dout))
    prim_cpp = C.add_primitive(layout=layout, dynamic=True)
    prim_py = C.add_primitive(layout=layout, dynamic=False)
    rows: dict[str, Callable[[], Any]] = {
        "opgen add": lambda: C.add(x, y),
        "primitive, C++ infer": lambda: prim_cpp(x, y),
        "primitive, Python out_shape": lambda: prim_py(x, y),
        "hand-written, Python out_shape": lambda: py_prim(x, y),
        "hand-written + bprop": lambda: py_prim_bprop(x, y),
        "Function path add": lambda: F.add(x, y),
    }
    builtin = {"ops.add": lambda: ops.add(x, y)}
    want = x.asnumpy() + y.asnumpy()
    for name, fn in {**rows, **builtin}.items():
        np.testing.assert_allclose(fn().asnumpy(), want, rtol=1e-6, err_msg=name)
        for _ in range(200):
            fn()
    times: dict[str, list[float]] = {n: [] for n in rows}
    order = list(rows)
    for _ in range(args.calls):
        random.shuffle(order)
        for name in order:
            t0 = time.perf_counter()
            rows[name]()
            times[name].append(time.perf_counter() - t0)
    for name, fn in builtin.items():
        times[name] = []
        for _ in range(args.calls):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["hand-written, Python out_shape"])
    print(f"{'row':32s} {'median us':>10s} {'p10':>8s} {'p90':>8s} {'ratio':>7s}")
    for name, ts in times.items():
        ts.sort()
        med = statistics.median(ts)
        print(f"{name:32s} {med * 1e6:10.1f} {ts[len(ts) // 10] * 1e6:8.1f} {ts[len(ts) * 9 // 10] * 1e6:8.1f} "
              f"{med / base:7.2f}")


if __name__ == "__main__":
    main()
