"""The public op in PyNative against the Function<T> path it takes there (issue 24 part 4).

``generated.opgen_ops.<op>`` runs the Function<T> path in PyNative when the package's extension
is built (``OPGEN_PYNATIVE_PATH=auto``, the default) and compiles ``ops.Custom`` in graphs. This
prints what that choice costs a PyNative call, at 16 elements (per-call work) and at 4M float32
elements (4096 x 1024, 16 MB per tensor). Target: the public op at most 1.05x the Function path.

Run from the repository root::

    PYTHONPATH=$PWD .venv/bin/python bench/bench_dispatch.py [--rounds 30] [--only mul,leaky_relu]

Rows per op and size, medians per call (10th-90th percentile), PyNative with
``mindspore.runtime.launch_blocking()``:

- ``public``    ``generated.opgen_ops.<op>`` (what a user calls)
- ``Function``  ``generated.opgen_ops.function.<op>`` (the 1.0 of the ratio)
- ``Custom``    ``generated.opgen_ops.custom._<op>_custom``: the Custom path's PyNative wrapper,
                what the public op ran before (and runs with ``OPGEN_PYNATIVE_PATH=custom``)

The three take turns (a fresh random order per round, ``bench_kernels.time_impls``). Builds the
extension first when it is missing, so that the public op takes the Function<T> path. Prints
numbers; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_kernels import time_impls  # noqa: E402
from bench.bench_ops import fmt, machine  # noqa: E402

SIZES = {"16": (4, 4), "4M": (4096, 1024)}
CALLS = {"16": 40, "4M": 3}
"""Calls per turn: many for the per-call cost, few at 4M (about 1-3 ms each)."""


def calls(public: Any, function: Any, custom: Any, x: Any, y: Any) -> dict[str, dict[str, Any]]:
    """The ops timed, each as (public, Function, Custom) callables on ``x`` and ``y``."""
    return {
        "mul(x, y)": {"public": lambda: public.mul(x, y), "Function": lambda: function.mul(x, y),
                      "Custom": lambda: custom._mul_custom(x, y)},
        "leaky_relu(x, 0.01)": {"public": lambda: public.leaky_relu(x, 0.01),
                                "Function": lambda: function.leaky_relu(x, 0.01),
                                "Custom": lambda: custom._leaky_relu_custom(x, 0.01)},
        "reduce_sum(x, [1])": {"public": lambda: public.reduce_sum(x, [1]),
                               "Function": lambda: function.reduce_sum(x, [1]),
                               "Custom": lambda: custom._reduce_sum_custom(x, [1])},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=30, help="turns per implementation")
    p.add_argument("--only", default="", help="comma-separated op names (default: all)")
    p.add_argument("--sizes", default="16,4M", help="comma-separated: 16, 4M")
    args = p.parse_args(argv)
    os.environ["OPGEN_PYNATIVE_PATH"] = "auto"

    from opgen import backends

    backends.build(ROOT / "generated" / "opgen_ops", "ext")
    import mindspore as ms

    ms.set_device("CPU")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.runtime.launch_blocking()
    from generated import opgen_ops as public
    from generated.opgen_ops import custom, function

    print(f"# {machine()}")
    print(f"# MindSpore {ms.__version__}; the public op takes the {custom.PYNATIVE_PATH} path in PyNative")
    print("| op | size | public | Function | Custom | public / Function |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    only = {s for s in args.only.split(",") if s}
    for size in args.sizes.split(","):
        shape = SIZES[size]
        x = ms.Tensor(rng.standard_normal(shape).astype(np.float32))
        y = ms.Tensor(rng.standard_normal(shape).astype(np.float32))
        for label, impls in calls(public, function, custom, x, y).items():
            if only and label.split("(")[0] not in only:
                continue
            want = impls["Function"]().asnumpy()
            for name, f in impls.items():  # the same answer on every row, and warm
                np.testing.assert_allclose(f().asnumpy(), want, rtol=1e-6, atol=1e-6, err_msg=name)
            times = time_impls(impls, args.rounds, CALLS[size])
            med = {k: statistics.median(v) for k, v in times.items()}
            spread = {k: (np.percentile(v, 10), np.percentile(v, 90)) for k, v in times.items()}
            cells = [f"{fmt(med[k]).strip()} ({fmt(spread[k][0]).strip()}-{fmt(spread[k][1]).strip()})"
                     for k in ("public", "Function", "Custom")]
            print(f"| {label} | {size} | {' | '.join(cells)} | {med['public'] / med['Function']:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
