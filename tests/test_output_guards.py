"""Checked mode guards every writable CPU view (opgen/sanitize.h ShadowScope and shadow()): a body
that writes past the end of an output (a shape rule one element smaller than what it writes,
through a raw pointer), or past an input it writes in place, is the op's error naming the op and
the view, and a failing check of ``opgen test``, instead of a corrupted heap: on PyTorch (eager,
compiled) and on MindSpore's three paths (Custom in GRAPH_MODE and PyNative, Function<T>). A
correct op (empty and 0-d outputs, gradients, a non-contiguous input written in place) is
untouched. One tiny spec package per backend, in checked mode (torch ~40 s, MindSpore ~3 min on 2
cores, cached per build root)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SHIFT_BAD = """
name: shift_bad
doc: Copies x into an output its rule makes one element shorter (wrong on purpose).
inputs:
  - {name: x, doc: "rank 1, at least one element", differentiable: false}
requires:
  - x.rank == 1
  - x.shape[0] >= 1
outputs:
  - {name: y, doc: wrong on purpose, shape: "[x.shape[0] - 1]", dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
kernel:
  forward: |
    float *p = y.data;  // raw pointer: the views' bounds checks do not see these writes
    for (int64_t i = 0; i < x.numel; ++i) p[i] = x[i];
reference: |
  return x[:-1]
"""

BUMP_BAD = """
name: bump_bad
doc: Adds 1 to acc in place, and to the element past its end (wrong on purpose).
inputs:
  - {name: acc, doc: written in place, writes: true}
outputs: []
dtype_format:
  CPU:
    - [F32_Default]
kernel:
  forward: |
    float *p = acc.data;  // raw pointer: the views' bounds checks do not see these writes
    for (int64_t i = 0; i <= acc.numel; ++i) p[i] += 1;
reference: |
  acc += 1
"""

BUMP = """
name: bump
doc: Adds 1 to acc in place.
inputs:
  - {name: acc, doc: written in place, writes: true}
outputs: []
dtype_format:
  CPU:
    - [F32_Default]
kernel:
  forward: |
    float *p = acc.data;
    for (int64_t i = 0; i < acc.numel; ++i) p[i] += 1;
reference: |
  acc += 1
"""

TWICE = """
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
    float *p = y.data;
    for (int64_t i = 0; i < y.numel; ++i) p[i] = 2 * x[i];
  backward: |
    float *p = dx.data;
    for (int64_t i = 0; i < dx.numel; ++i) p[i] = 2 * dy[i];
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
acc = torch.zeros(3, 2).t()  # not contiguous: the op writes a copy, copied back after the kernel
ops.bump(acc)
assert torch.equal(acc, torch.ones(2, 3)), acc
print("bump ok")
for call in [lambda: ops.shift_bad(torch.ones(2)), lambda: ops.bump_bad(torch.ones(2, 3))]:
    try:
        call()
    except ValueError as exc:
        print(exc)
"""

MS_PATHS = ("custom-graph", "custom-pynative", "function")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("guards")
    (base / "specs").mkdir()
    for name, text in [("shift_bad", SHIFT_BAD), ("bump_bad", BUMP_BAD), ("bump", BUMP), ("twice", TWICE)]:
        (base / "specs" / f"{name}.yaml").write_text(textwrap.dedent(text).lstrip())
    return base


def _env(**extra: str) -> dict[str, str]:
    from opgen.build import build_root

    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", OPGEN_BUILD_DIR=str(build_root() / "output-guards"))
    env.update(extra)
    return env


def _failures(stdout: str) -> dict[str, str]:
    """``opgen test``'s failure blocks: "<op> <check>" -> the indented lines under its FAIL line."""
    out: dict[str, str] = {}
    key = None
    for line in stdout.splitlines():
        if line.startswith("FAIL ") and line.endswith(":"):
            key = line[len("FAIL "):-1]
            out[key] = ""
        elif key is not None and line.startswith("  "):
            out[key] += line + "\n"
        else:
            key = None
    return out


OUTPUT_Y = ("shift_bad(): checked mode: the kernel wrote past the end of output 'y' ({} bytes), 0 bytes after its "
            "end: the output's shape rule is smaller than what the body writes")
INPUT_ACC = ("bump_bad(): checked mode: the kernel wrote past the end of input 'acc' (written in place) ({} bytes), "
             "0 bytes after its end: the body writes more than the input holds")


def test_a_write_past_an_output_or_a_written_input_is_the_ops_error_in_checked_mode(project: Path) -> None:
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=project, env=_env(OPGEN_CHECK="1"), text=True,
                       capture_output=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == ["twice ok", "bump ok", OUTPUT_Y.format(4), INPUT_ACC.format(24)]


def _assert_named_failures(r: subprocess.CompletedProcess[str], paths: tuple[str, ...]) -> None:
    """``opgen test`` failed shift_bad and bump_bad on every path (their forward checks, and any other
    check that runs their forward) with errors naming their views, passed every check of twice and
    bump, and nothing crashed."""
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    failures = _failures(r.stdout)
    assert {key.split()[0] for key in failures} == {"shift_bad", "bump_bad"}, r.stdout[-5000:]
    assert {f"{op} forward/{p}" for op in ("shift_bad", "bump_bad") for p in paths} <= set(failures), r.stdout[-5000:]
    named = {"shift_bad": "shift_bad(): checked mode: the kernel wrote past the end of output 'y' (",
             "bump_bad": "bump_bad(): checked mode: the kernel wrote past the end of input 'acc' (written in place) ("}
    for key, text in failures.items():
        lines = text.splitlines()
        assert lines and all(named[key.split()[0]] in line for line in lines), (key, text)
    assert "SIGSEGV" not in r.stdout and "SIGABRT" not in r.stdout and "corrupted" not in r.stdout + r.stderr


def test_opgen_test_fails_the_ops_that_write_past_a_buffer_on_torch(project: Path) -> None:
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-m", "opgen", "test", "specs", "--backend", "torch"],
                       cwd=project, env=_env(), text=True, capture_output=True, timeout=900)
    _assert_named_failures(r, ("eager", "compiled"))


def test_opgen_test_fails_the_ops_that_write_past_a_buffer_on_mindspore(project: Path) -> None:
    pytest.importorskip("mindspore")
    r = subprocess.run([sys.executable, "-m", "opgen", "test", "specs", "--backend", "mindspore"],
                       cwd=project, env=_env(), text=True, capture_output=True, timeout=1500)
    _assert_named_failures(r, MS_PATHS)
