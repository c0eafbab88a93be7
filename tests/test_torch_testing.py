"""``opgen test --backend torch``: the neutral checks of opgen.testing (reference, forward, float64
gradients against central differences, dtype rows, contracts) on the torch backend's paths, eager and
compiled (``torch.compile(fullgraph=True, dynamic=True)``), through the command line.

- ops of ops/ on the committed package generated/opgen_ops_torch (its default directory), unchecked
  build (the one tests/test_torch_backend.py builds), every check passes;
- a small package of a right op and a deliberately wrong gradient, in the default checked mode
  (OPGEN_CHECK=1 variant of its library), given as ``--package-dir`` (the backend is the
  directory's): the wrong gradient fails ``grad/eager`` and ``grad/compiled`` naming ``dy``, the
  right op passes everything;
- a stale torch package is refused with the command that regenerates it (``--backend torch``);
- twelve ops on the compiled path in one run (more graphs than Dynamo's recompile limit allows
  one code object).

Runtime (measured, 2 loaded cores, library of ops/ already built): ~3 min (the ops/ run ~75 s,
the twelve compiled ops ~45 s; the small package's checked library ~30 s to build).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from small_specs import BADGRAD, SCALE

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]

def _opgen(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "opgen", *args], cwd=cwd, env=full, text=True,
                          capture_output=True, timeout=1200)


def test_ops_pass_on_eager_and_compiled() -> None:
    ops = ["exp", "matmul", "topk", "concat", "avg_pool2d"]
    run = _opgen("test", "--backend", "torch", "--unchecked", *ops, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["op", "ref", "fwd", "eager", "fwd", "compiled", "grad", "eager", "grad", "compiled",
                                "dtype", "eager", "dtype", "compiled", "req", "eager", "req", "compiled"]
    assert "testing generated/opgen_ops_torch" in run.stderr
    # topk and avg_pool2d have contracts: their ValueError is checked eager and under compile
    topk = next(line for line in lines if line.startswith("topk")).split()
    assert topk.count("ok") == 9 and "-" not in topk
    assert f"{len(ops)} op(s), {9 * len(ops)} checks: " in run.stdout and " 0 failed" in run.stdout


def test_many_ops_compile_in_one_run() -> None:
    """More ops than Dynamo's recompile limit (8) in one run of the compiled path: with one code
    object for every op's runner, the 8th op on failed with FailOnRecompileLimitHit."""
    ops = ["add", "clip", "cumsum", "div", "exp", "gelu", "leaky_relu", "log", "mul", "relu", "sigmoid", "sub"]
    run = _opgen("test", "--backend", "torch", "--unchecked", "--only", "*/compiled", *ops, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{len(ops)} op(s), {4 * len(ops)} checks: " in run.stdout and " 0 failed" in run.stdout


def test_wrong_gradient_fails_on_torch(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "scale.yaml").write_text(textwrap.dedent(SCALE))
    (specs / "badgrad.yaml").write_text(textwrap.dedent(BADGRAD))
    env = {"OPGEN_BUILD_DIR": str(tmp_path / "build")}
    gen = _opgen("generate", "specs", "--backend", "torch", "-o", "out", "-p", "tops", cwd=tmp_path, env=env)
    assert gen.returncode == 0, gen.stderr
    run = _opgen("test", "specs", "--package-dir", "out/tops_torch", cwd=tmp_path, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    table = {line.split()[0]: line.split()[1:] for line in run.stdout.splitlines()[2:5] if line.strip()}
    assert "FAIL" not in " ".join(table["scale"]), run.stdout
    for check in ("reference", "grad/eager", "grad/compiled"):
        assert f"FAIL badgrad {check}:" in run.stdout, run.stdout
    failures = run.stdout.split("FAIL badgrad grad/eager:")[1].split("FAIL")[0]
    assert "dy" in failures and "dx" not in failures, failures
    assert "FAIL badgrad forward" not in run.stdout
    assert "2 op(s), 18 checks: " in run.stdout and " 3 failed" in run.stdout
    # checked mode by default: the library loaded is the checked variant (-DOPGEN_CHECKED=1)
    assert any("OPGEN_CHECKED" in p.read_text() for p in (tmp_path / "build").rglob("build.ninja"))

    (specs / "scale.yaml").write_text(textwrap.dedent(SCALE).replace("alpha * x.", "alpha times x."))
    stale = _opgen("test", "specs", "--package-dir", "out/tops_torch", cwd=tmp_path, env=env)
    assert stale.returncode == 1
    assert "run 'opgen generate specs -o out -p tops --backend torch' first" in stale.stderr, stale.stderr


ZEROS = """
name: zint
doc: floor(x / 3), but its int32 row writes zeros.
inputs:
  - {name: x, doc: any, differentiable: false}
outputs:
  - {name: out, doc: floor(x / 3), shape: x, dtype: x, differentiable: false}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
    - [I32_Default, I32_Default]
kernel:
  forward: |
    for (int64_t i = 0; i < out.numel; ++i) {
      if constexpr (std::is_floating_point_v<x_t>) out[i] = std::floor(x[i] / 3);
      else out[i] = 0;
    }
reference: |
  return np.floor(x / 3).astype(x.dtype)
test:
  domain:
    x: [0, 3]
"""


def test_a_kernel_writing_zeros_fails_every_path(tmp_path: Path) -> None:
    """Issue 32: an int32 row whose body writes zeros failed forward/eager and passed
    forward/compiled. Not a compiled-path bug: each check draws its own cases, and the integers of
    the domain (0..3 here, -2..2 by default) made every case of forward/compiled want zeros (with
    seed 0: that is what happened before the fix). A case's values are now drawn again while an
    output would be all zeros, so both paths fail."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "zint.yaml").write_text(textwrap.dedent(ZEROS))
    env = {"OPGEN_BUILD_DIR": str(tmp_path / "build")}
    gen = _opgen("generate", "specs", "--backend", "torch", "-o", "out", "-p", "zp", cwd=tmp_path, env=env)
    assert gen.returncode == 0, gen.stderr
    run = _opgen("test", "specs", "--package-dir", "out/zp_torch", "--only", "forward/*", "--seed", "0",
                 cwd=tmp_path, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    for path in ("eager", "compiled"):
        failures = run.stdout.split(f"FAIL zint forward/{path}:")[1].split("FAIL")[0]
        assert "(x=int32, out=int32)" in failures and "got 0.0, expected 1.0" in failures, run.stdout
        assert "x=float32" not in failures
