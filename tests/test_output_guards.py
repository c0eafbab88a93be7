"""Checked mode guards PyTorch outputs (opgen/torch.h guarded_empty, opgen/sanitize.h ShadowScope):
a body that writes past the end of an output through a raw pointer (a shape rule smaller than
what it writes) is the op's ValueError naming the output's shape, and a failing check of ``opgen
test``, instead of a corrupted heap; a correct op (empty and 0-d outputs included) is untouched.
One small torch library in checked mode (~30 s on 2 cores, cached per build root)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

BAD = """
name: rows_bad
doc: Writes x.numel elements into an output its rule makes one axis shorter (wrong on purpose).
inputs:
  - {name: x, doc: "rank >= 1", differentiable: false}
requires:
  - x.rank >= 1
outputs:
  - {name: y, doc: wrong on purpose, shape: "x.shape[:-1]", dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
kernel:
  forward: |
    float *p = y.data;  // raw pointer: the views' bounds checks do not see these writes
    for (int64_t i = 0; i < x.numel; ++i) p[i] = x[i];
reference: |
  return x.sum(-1)
"""

GOOD = """
name: twice
doc: 2 * x.
inputs:
  - {name: x, doc: any tensor}
outputs:
  - {name: y, doc: 2 x, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
kernel:
  forward: |
    for (int64_t i = 0; i < y.numel; ++i) y.data[i] = 2 * x[i];
  backward: |
    for (int64_t i = 0; i < dx.numel; ++i) dx.data[i] = 2 * dy[i];
reference: |
  return 2 * x
"""

SCRIPT = """
import torch, opgen
ops = opgen.load("specs", package="guards", backend="torch")
for shape in [(3,), (2, 3), (), (0,), (5, 0)]:
    t = torch.randn(shape, requires_grad=True)
    (g,) = torch.autograd.grad(ops.twice(t).sum(), t)
    assert torch.equal(g, torch.full(shape, 2.0)), shape
print("twice ok")
try:
    ops.rows_bad(torch.ones(2, 4))
except ValueError as exc:
    print(exc)
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    base = tmp_path_factory.mktemp("guards")
    (base / "specs").mkdir()
    (base / "specs" / "rows_bad.yaml").write_text(textwrap.dedent(BAD).lstrip())
    (base / "specs" / "twice.yaml").write_text(textwrap.dedent(GOOD).lstrip())
    return base


def _env(**extra: str) -> dict[str, str]:
    from opgen.build import build_root

    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", OPGEN_BUILD_DIR=str(build_root() / "output-guards"))
    env.update(extra)
    return env


def test_a_write_past_an_output_is_the_ops_error_in_checked_mode(project: Path) -> None:
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=project, env=_env(OPGEN_CHECK="1"), text=True,
                       capture_output=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == [
        "twice ok",
        "rows_bad(): checked mode: the kernel wrote past the end of an output of shape (2) (8 bytes, as its shape "
        "rule sized it), 0 bytes after its end: the rule is smaller than what the body writes"]


def test_opgen_test_fails_the_op_whose_rule_is_too_small(project: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "opgen", "test", "specs", "--backend", "torch", "--only", "forward/*"],
                       cwd=project, env=_env(), text=True, capture_output=True, timeout=900)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert "FAIL rows_bad forward/eager" in r.stdout
    assert "rows_bad(): checked mode: the kernel wrote past the end of an output of shape" in r.stdout
    assert "FAIL twice" not in r.stdout and "SIGSEGV" not in r.stdout
