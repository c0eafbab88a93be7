"""The same inputs give the same numbers on numpy, MindSpore and PyTorch, for every op in ops/.

One child process (tests/cross_framework_runner.py) loads both frameworks and both generated
packages (docs/distributed.md: safe in one process) and runs every op on two shape cases (the
first plain one and one other style: broadcast, 0-d or empty), in its float32 row and its float64
row, on: the numpy reference (generated reference.py, float64), the ops.Custom path in PyNative
(and in GRAPH_MODE for eight ops), the Function<T> path, PyTorch eager and ``torch.compile``
(``fullgraph=True, dynamic=True``, first case, float32) through the runners ``opgen test`` uses,
and torch's own builtin where it has one. Checked here,
with opgen.testing's error measure (``max |got - want| / max(1, |want|)``) and tolerances:

- forward: every implementation against the numpy reference, ``tolerance(dtype).forward``
  (float32 1e-5, float64 1e-10, integer and bool outputs exact), dtypes and shapes equal;
- gradients of ``sum_k sum(out_k * w_k)``: every implementation and row against the Function<T>
  path's float64 gradient (its float32 one when the op has no float64 row), as ``opgen test``
  checks rows against float64 gradients: ``tolerance(dtype).grad`` (float32 1e-4, float64 1e-10);
  the numpy reference's gradient (elementwise ops) too;
- torch's builtin (torch.topk, F.smooth_l1_loss, F.rms_norm, F.avg_pool2d, torch.softmax, ...):
  its outputs and gradients against the generated torch op's, same tolerances.

CI time: ~70 s at load 6 on 2 cores (one process: 37 ops x 2 cases x 2 rows x 5 paths, 37
``torch.compile`` calls and 8 MindSpore graph compiles); both packages must be built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from opgen import testing as T

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "tests" / "cross_framework_runner.py"
OPS = sorted(p.stem for p in (ROOT / "ops").glob("*.yaml"))
GENERATED = ("ms-custom", "ms-function", "ms-graph", "torch", "torch-compile")
sys.path.insert(0, str(ROOT / "tests"))
from cross_framework_runner import BUILTINS, GRAPH_OPS  # noqa: E402


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any]]:
    out = tmp_path_factory.mktemp("cross") / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(RUNNER), str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    meta = json.loads(Path(f"{out}.json").read_text(encoding="utf-8"))
    return np.load(f"{out}.npz"), meta


def _expected(op: str, case: int, row: str) -> list[str]:
    impls = ["numpy", "ms-custom", "ms-function", "torch"]
    if op in GRAPH_OPS and row == "float32":
        impls.append("ms-graph")
    if row == "float32" and case == 0:
        impls.append("torch-compile")
    if op in BUILTINS:
        impls.append("torch-builtin")
    return impls


@pytest.mark.parametrize("op", OPS)
def test_op_agrees_across_frameworks(op: str, results: tuple[Any, dict[str, Any]]) -> None:
    arrays, meta = results
    info = meta[op]
    tally = T._Tally()  # opgen test's comparison: error measure, messages
    for key, message in info["errors"].items():
        tally.fail(f"{key} raised {message}")
    rows = info["rows"]
    anchor_row = "float64" if "float64" in rows else "float32"
    for c, case in enumerate(info["cases"]):
        for row, out_dtypes in rows.items():
            base = f"{op}|{c}|{row}"
            tally.context = f"{case['describe']} ({row})"
            for impl in _expected(op, c, row):
                if f"{base}|{impl}" not in info["errors"] and f"{base}|{impl}|out0" not in arrays:
                    tally.fail(f"{base}|{impl}: no result")
            n_out = _n_out(arrays, base)
            for impl in GENERATED:
                for k in range(n_out):
                    key = f"{base}|{impl}|out{k}"
                    if key not in arrays:
                        continue
                    got, want = arrays[key], arrays[f"{base}|numpy|out{k}"]
                    if got.dtype != np.dtype(out_dtypes[k]):
                        tally.fail(f"{impl} out{k}: dtype {got.dtype}, expected {out_dtypes[k]}")
                    tally.compare(f"{impl} out{k} vs numpy", got, want, T.tolerance(out_dtypes[k]).forward)
                for j in case["slots"]:
                    anchor = arrays.get(f"{op}|{c}|{anchor_row}|ms-function|d{j}")
                    key = f"{base}|{impl}|d{j}"
                    if key not in arrays or anchor is None:
                        continue
                    tally.compare(f"{impl} d{case['slot_names'][j]} vs Function<T> {anchor_row}", arrays[key],
                                  anchor, T.tolerance(row).grad)
            for j in case["slots"]:
                key, anchor = f"{base}|numpy|d{j}", arrays.get(f"{op}|{c}|{anchor_row}|ms-function|d{j}")
                if key in arrays and anchor is not None:
                    tally.compare(f"numpy d{case['slot_names'][j]} vs Function<T> {anchor_row}", arrays[key], anchor,
                                  T.tolerance(row).grad)
            # torch's own op against the generated one
            for k in range(n_out):
                key = f"{base}|torch-builtin|out{k}"
                if key in arrays and f"{base}|torch|out{k}" in arrays:
                    tally.compare(f"torch builtin out{k} vs generated", arrays[key], arrays[f"{base}|torch|out{k}"],
                                  T.tolerance(out_dtypes[k]).forward)
            for j in case["slots"]:
                key = f"{base}|torch-builtin|d{j}"
                if key in arrays and f"{base}|torch|d{j}" in arrays:
                    tally.compare(f"torch builtin d{case['slot_names'][j]} vs generated", arrays[key],
                                  arrays[f"{base}|torch|d{j}"], T.tolerance(row).grad)
    assert tally.comparisons > 0
    assert not tally.n_problems, f"{op} ({info['attrs']}):\n" + "\n".join(tally.problems)


def _n_out(arrays: Any, base: str) -> int:
    n = 0
    while f"{base}|numpy|out{n}" in arrays:
        n += 1
    return n
