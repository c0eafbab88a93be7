"""One function, the fastest path in each mode (issue 24 part 4): a package's public op
(``<pkg>.<op>``, ``<pkg>.custom.<op>``) runs the Function<T> path in PyNative when the package's
extension is built, and compiles the ``ops.Custom`` path in GRAPH_MODE and under ``ms.jit``.

Which path ran is read from the Custom path's own record: ``custom._<op>_resolved`` gains an
entry for each new (layout, dtypes, shapes) the Custom path resolves a primitive for, in
PyNative or while a graph compiles; the Function<T> path never touches it. Each phase uses
shapes of its own. The choice is made at import (``OPGEN_PYNATIVE_PATH``), so each scenario runs
in a process of its own; tests/conftest.py makes it ``custom`` for the rest of the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from opgen import backends
from opgen.env import EnvError

ROOT = Path(__file__).resolve().parents[1]

AUTO = textwrap.dedent('''
    import json, sys
    import numpy as np
    import mindspore as ms
    from mindspore import Parameter, Tensor, nn

    ms.set_device("CPU")
    from generated import opgen_ops as P
    from generated.opgen_ops import custom as C, function as F

    seen = {"path": C.PYNATIVE_PATH, "same_object": P.mul is C.mul, "name": P.mul.__name__,
            "doc": P.mul.__doc__.splitlines()[0]}
    resolved = lambda: len(C._mul_resolved)

    def close(got, want):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)

    def grads(fn, *xs):
        return ms.grad(fn, grad_position=tuple(range(len(xs))))(*xs)

    # PyNative: forward, ms.grad, an nn.Cell with a Parameter (value_and_grad), errors
    x, y = np.arange(6, dtype=np.float32).reshape(2, 3) - 2, np.float32([1.5, -2.0, 0.5])
    close(P.mul(Tensor(x), Tensor(y)), x * y)
    gx, gy = grads(P.mul, Tensor(x), Tensor(y))
    fx, fy = grads(F.mul, Tensor(x), Tensor(y))
    close(gx, fx.asnumpy()); close(gy, fy.asnumpy()); close(gy, x.sum(0))

    class Scale(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = Parameter(Tensor(np.float32([2.0, 3.0, 4.0])), name="w")

        def construct(self, t):
            return P.reduce_sum(P.mul(t, self.w))

    net = Scale()
    loss, (gt, (gw,)) = ms.value_and_grad(net, grad_position=0, weights=net.trainable_params())(Tensor(x))
    assert abs(float(loss.asnumpy()) - float((x * [2, 3, 4]).sum())) < 1e-4
    close(gt, np.broadcast_to(np.float32([2, 3, 4]), (2, 3))); close(gw, x.sum(0))
    errors = []
    h = Tensor(x.astype(np.int16))  # a dtype outside mul's rows
    for bad in (lambda: P.mul(Tensor(x), 2.0), lambda: P.mul(h, h),
                lambda: P.add(Tensor(x), Tensor(np.ones(4, np.float32))), lambda: P.leaky_relu(Tensor(x), "a")):
        try:
            bad()
        except Exception as exc:
            errors.append(type(exc).__name__)
    seen["errors"] = errors
    seen["pynative_resolved"] = resolved()

    # ms.jit inside PyNative: the Custom path compiles, gradients included
    x2 = np.arange(12, dtype=np.float32).reshape(3, 4) / 3

    @ms.jit
    def jitted(a, b):
        return P.mul(a, b) * 2

    close(jitted(Tensor(x2), Tensor(x2)), x2 * x2 * 2)
    close(grads(jitted, Tensor(x2), Tensor(x2))[0], 2 * x2)
    seen["jit_resolved"] = resolved()

    # GRAPH_MODE: a Cell, its gradient, and ms.grad of a plain function
    ms.set_context(mode=ms.GRAPH_MODE)
    x3 = np.arange(20, dtype=np.float32).reshape(4, 5) / 7

    class Net(nn.Cell):
        def construct(self, a, b):
            return P.mul(a, b)

    close(Net()(Tensor(x3), Tensor(x3)), x3 * x3)
    close(grads(Net(), Tensor(x3), Tensor(x3))[1], x3)
    x4 = np.ones((5, 2), np.float32)
    close(grads(P.mul, Tensor(x4), Tensor(x4 * 3))[0], x4 * 3)
    seen["graph_resolved"] = resolved()
    ms.set_context(mode=ms.PYNATIVE_MODE)
    close(P.mul(Tensor(x), Tensor(x)), x * x)  # PyNative again, after the graphs
    seen["pynative_again_resolved"] = resolved()
    print(json.dumps(seen))
''')

FALLBACK = textwrap.dedent('''
    import json
    import numpy as np
    import mindspore as ms

    ms.set_device("CPU")
    import fresh_ops
    from fresh_ops import custom as C

    x = np.float32([1.0, -2.0, 3.0])
    out = fresh_ops.twice(ms.Tensor(x)).asnumpy()
    grad = ms.grad(fresh_ops.twice)(ms.Tensor(x)).asnumpy()
    print(json.dumps({"path": C.PYNATIVE_PATH, "out": out.tolist(), "grad": grad.tolist(),
                      "resolved": len(C._twice_resolved)}))
''')

TWICE = """\
name: twice
doc: 2 * x.
inputs:
  - {name: x, doc: any tensor}
outputs:
  - {name: out, doc: 2 * x, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
elementwise:
  forward: x * 2
  grad:
    x: dout * 2
"""


def _run(script: str, env: dict[str, str], cwd: Path, pythonpath: list[Path]) -> dict[str, Any]:
    full = dict(os.environ, **env, PYTHONPATH=os.pathsep.join(str(p) for p in pythonpath), OPGEN_QUIET="1")
    (cwd / "scenario.py").write_text(script, encoding="utf-8")  # graphs compile only from files
    r = subprocess.run([sys.executable, str(cwd / "scenario.py")], cwd=cwd, env=full, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-5000:]
    loaded: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return loaded


def test_auto_takes_the_function_path_in_pynative_and_custom_in_graphs(tmp_path: Path) -> None:
    pkg = ROOT / "generated" / "opgen_ops"
    for kind in ("aot", "ext"):
        backends.build(pkg, kind, quiet=True)
    seen = _run(AUTO, {"OPGEN_PYNATIVE_PATH": "auto"}, tmp_path, [ROOT])
    assert seen["path"] == "function"
    assert seen["same_object"] and seen["name"] == "mul"
    assert seen["doc"].startswith("Element-wise product x * y")
    assert seen["errors"] == ["TypeError", "TypeError", "ValueError", "TypeError"]
    assert seen["pynative_resolved"] == 0  # PyNative: forward, ms.grad and a Cell, no Custom primitive
    assert seen["jit_resolved"] >= 1  # ms.jit compiled the Custom path
    assert seen["graph_resolved"] >= seen["jit_resolved"] + 2  # a GRAPH_MODE Cell and ms.grad in GRAPH_MODE
    assert seen["pynative_again_resolved"] == seen["graph_resolved"]


def test_auto_falls_back_to_the_custom_path_without_the_extension(tmp_path: Path) -> None:
    """A package whose extension is not built (only its aot library, in a fresh build root) runs
    the Custom path in PyNative: importing it builds nothing more."""
    from opgen.cli import main as opgen_main

    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "twice.yaml").write_text(TWICE, encoding="utf-8")
    assert opgen_main(["generate", str(tmp_path / "specs"), "-o", str(tmp_path / "out"), "-p", "fresh_ops", "-q"]) == 0
    root = tmp_path / "build"
    backends.build(tmp_path / "out" / "fresh_ops", "aot", quiet=True, build_dir=root)
    seen = _run(FALLBACK, {"OPGEN_PYNATIVE_PATH": "auto", "OPGEN_BUILD_DIR": str(root)}, tmp_path,
                [ROOT, tmp_path / "out"])
    assert seen == {"path": "custom", "out": [2.0, -4.0, 6.0], "grad": [2.0, 2.0, 2.0], "resolved": 1}
    assert not list(root.glob("fresh_ops-*/fresh_ops_ext-*.so"))  # the import built no extension


def test_the_switch_forces_a_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from opgen.backends.mindspore import runtime as ms_runtime

    custom_file = str(ROOT / "generated" / "opgen_ops" / "custom.py")
    monkeypatch.setenv("OPGEN_PYNATIVE_PATH", "custom")
    assert ms_runtime.pynative_function_module("generated.opgen_ops", custom_file) is None
    backends.build(ROOT / "generated" / "opgen_ops", "ext", quiet=True)
    monkeypatch.setenv("OPGEN_PYNATIVE_PATH", "function")
    module = ms_runtime.pynative_function_module("generated.opgen_ops", custom_file)
    assert module is not None and module.__name__ == "generated.opgen_ops.function"
    monkeypatch.setenv("OPGEN_PYNATIVE_PATH", "fast")
    with pytest.raises(EnvError, match="OPGEN_PYNATIVE_PATH='fast' is not one of auto, custom, function"):
        ms_runtime.pynative_function_module("generated.opgen_ops", custom_file)
