"""Checked mode (issue 16): with ``OPGEN_CHECK=1`` (``opgen build --checked``, the default of
``opgen test``) a kernel's views are bounds-checked, so a user kernel that reads past a view is
an error naming the op, the view and the index instead of a silent garbage read.  The plain
build is the default and is cached beside the checked one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opgen import backends, build
from opgen.cli import main

ROOT = Path(__file__).resolve().parents[1]

# A loss-like kernel that trusts x and y to have the same size (the finding: given
# mismatched inputs it returned 0.25, then nan) and one that asks for a dimension it lacks.
SPECS = {
    "sloppy_loss.yaml": """\
name: sloppy_loss
doc: Mean of (x - y)**2, written as if x and y always had the same size.
inputs:
  - {name: x, doc: predictions, differentiable: false}
  - {name: y, doc: targets, differentiable: false}
outputs:
  - {name: out, doc: the mean, shape: [1], dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default, F32_Default]
kernel:
  forward: |
    double acc = 0;
    for (int64_t i = 0; i < x.numel; ++i) acc += (x[i] - y[i]) * (x[i] - y[i]);
    out[0] = static_cast<float>(acc / x.numel);
""",
    "last_dim.yaml": """\
name: last_dim
doc: x times the size of its third dimension (which a 2-D x does not have).
inputs:
  - {name: x, doc: any tensor, differentiable: false}
outputs:
  - {name: out, doc: x scaled, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
kernel:
  forward: |
    const int64_t n = x.dim(2);
    for (int64_t i = 0; i < x.numel; ++i) out[i] = x[i] * static_cast<float>(n);
""",
}

RUNNER = """
import json, sys
import numpy as np
import mindspore as ms
ms.set_device("CPU")
from checked_pkg import custom as C
out = {}
def run(name, fn):
    try:
        out[name] = ["answer", fn().asnumpy().tolist()]
    except Exception as exc:
        out[name] = [type(exc).__name__, str(exc).splitlines()[0]]
x = ms.Tensor(np.ones(6, np.float32))
run("loss_ok", lambda: C.sloppy_loss(x, ms.Tensor(np.zeros(6, np.float32))))
run("loss_short_y", lambda: C.sloppy_loss(x, ms.Tensor(np.zeros(4, np.float32))))
run("dim_3d", lambda: C.last_dim(ms.Tensor(np.ones((1, 2, 3), np.float32))))
run("dim_2d", lambda: C.last_dim(ms.Tensor(np.ones((2, 3), np.float32))))
print(json.dumps(out))
"""


def test_checked_mode_reports_out_of_bounds_reads(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    for name, text in SPECS.items():
        (tmp_path / "specs" / name).write_text(text, encoding="utf-8")
    assert main(["generate", str(tmp_path / "specs"), "-o", str(tmp_path / "out"), "-p", "checked_pkg", "-q"]) == 0
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "out"), str(ROOT)]), OPGEN_QUIET="1",
               OPGEN_BUILD_DIR=str(tmp_path / "build"), OPGEN_CHECK="1", GLOG_v="3")
    r = subprocess.run([sys.executable, "-c", RUNNER], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["loss_ok"] == ["answer", [1.0]]
    assert got["loss_short_y"] == ["ValueError", "sloppy_loss(): checked mode: index 4 is out of bounds for view "
                                                 "'y' of 4 elements"], got
    assert got["dim_3d"][0] == "answer"
    assert got["dim_2d"] == ["ValueError", "last_dim(): checked mode: dim 2 is out of bounds for view 'x' of 2 "
                                           "dimensions"], got

    # the checked library is a build of its own, beside the plain one (the default)
    pkg = tmp_path / "out" / "checked_pkg"
    assert not build.checked_flags()  # OPGEN_CHECK is unset in this process
    plain = backends.build(pkg, "aot", quiet=True, build_dir=tmp_path / "build")
    libs = sorted(p.name for p in (tmp_path / "build").glob("*/libchecked_pkg_aot-*.so"))
    assert len(libs) == 2 and plain.name in libs, libs


def test_opgen_test_checks_gradients_through_no_gradient_ops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``opgen test``'s grad checks of ops no gradient flows through were ``n/a``, so a Custom
    path without a bprop (or passing its output gradient on) went unnoticed; now they require
    ``ms.grad`` through the op to work and give zeros."""
    from misuse_runner import NO_GRAD_SPECS

    (tmp_path / "specs").mkdir()
    for name, text in NO_GRAD_SPECS.items():
        (tmp_path / "specs" / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["generate", "specs", "-o", "out", "-p", "nd_pkg", "-q"]) == 0
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPGEN_BUILD_DIR=str(tmp_path / "build"), OPGEN_QUIET="1")
    r = subprocess.run([sys.executable, "-m", "opgen", "test", "specs", "--package-dir", "out/nd_pkg", "--only",
                        "grad/custom-*"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "4 checks: 4 passed, 0 failed, 0 not applicable" in r.stderr + r.stdout, r.stdout + r.stderr
