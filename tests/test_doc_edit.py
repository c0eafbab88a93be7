"""An edit to a doc compiles nothing (issue 24 part 3).

Docs, arg docs and YAML comments are no part of any C++ unit's inputs: the generated C++ of
both backends holds no doc text (function.py, custom.py and the torch package document the
ops), so a doc-only edit leaves every C++ source byte for byte as it was, the libraries' keys
do not change, and a build -- or an import -- finds them built and starts no compiler.

The compiler processes are counted by a launcher (``OPGEN_CXX_LAUNCHER``, which opgen puts in
front of every compile and link, and which is no part of a library's key) that appends one line
per process to a log; the same launcher is used from the first build on, so that ninja's
recorded commands never change because of it. A body edit must show up in that log (the
counter counts). A doc edit that adds lines above a body moves the body's ``#line`` directives:
only that op's kernel unit (no framework header) is compiled again, so that compiler
diagnostics and sanitizer reports keep naming the body's new YAML lines.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from opgen import backends
from opgen.cli import main as opgen_main

ROOT = Path(__file__).resolve().parents[1]

SPEC = """\
# yaml-language-server: $schema=../schemas/op.schema.json
# COMMENT-ONE: a comment about the op
name: scaled_add
doc: |
  DOC-ONE: x * alpha + y, with NumPy broadcasting.
inputs:
  - {name: x, doc: "DOC-X: the scaled term"}
  - {name: y, doc: "DOC-Y: the added term"}  # COMMENT-TWO
attrs:
  - {name: alpha, type: float, default: 1.0, doc: "DOC-ALPHA: the scale"}
outputs:
  - {name: out, doc: "DOC-OUT: x * alpha + y", shape: "broadcast(x, y)", dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default, F32_Default]
elementwise:
  forward: x * alpha + y
  grad:
    x: dout * alpha
    y: dout
"""

KERNEL_SPEC = """\
name: twice_k
doc: 2 * x, with C++ bodies (which carry #line directives to this file).
inputs:
  - {name: x, doc: any tensor}
outputs:
  - {name: out, doc: 2 * x, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
kernel:
  forward: |
    for (int64_t i = 0; i < out.numel; ++i) out[i] = x[i] * 2;
  backward: |
    for (int64_t i = 0; i < dx.numel; ++i) dx[i] = dout[i] * 2;
"""

EDITS = {"DOC-ONE: x * alpha + y": "DOC-ONE reworded: y plus alpha times x", "DOC-X: the scaled term": "DOC-X: x",
         "DOC-Y: the added term": "DOC-Y: y, broadcast", "DOC-ALPHA: the scale": "DOC-ALPHA: how much of x",
         "DOC-OUT: x * alpha + y": "DOC-OUT: the sum", "COMMENT-ONE: a comment": "COMMENT-ONE: another comment",
         "COMMENT-TWO": "COMMENT-TWO edited"}

LAUNCHER = """#!/bin/sh
echo "$*" >> "$OPGEN_TEST_COMPILER_LOG"
exec "$@"
"""


def _generate(tmp_path: Path) -> None:
    assert opgen_main(["generate", str(tmp_path / "specs"), "-o", str(tmp_path / "out"), "-p", "doc_ops",
                       "--backend", "mindspore,torch", "-q"]) == 0


def _cpp(tmp_path: Path) -> dict[str, bytes]:
    """Every C++ source and header opgen generated, both backends."""
    return {str(p.relative_to(tmp_path)): p.read_bytes() for p in sorted((tmp_path / "out").glob("*/csrc/*"))}


def _processes(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def test_a_doc_edit_starts_no_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    launcher, log = tmp_path / "count-compilers", tmp_path / "compilers.log"
    launcher.write_text(LAUNCHER, encoding="utf-8")
    launcher.chmod(0o755)
    monkeypatch.setenv("OPGEN_CXX_LAUNCHER", str(launcher))
    monkeypatch.setenv("OPGEN_TEST_COMPILER_LOG", str(log))
    monkeypatch.setenv("OPGEN_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.delenv("OPGEN_PCH", raising=False)
    spec = tmp_path / "specs" / "scaled_add.yaml"
    spec.parent.mkdir()
    spec.write_text(SPEC, encoding="utf-8")
    kernel_spec = tmp_path / "specs" / "twice_k.yaml"
    kernel_spec.write_text(KERNEL_SPEC, encoding="utf-8")
    _generate(tmp_path)
    pkg = tmp_path / "out" / "doc_ops"
    first = {kind: backends.build_library(pkg, kind, quiet=True).path for kind in ("aot", "ext")}
    before = _cpp(tmp_path)
    assert any("DOC-" in p.read_text(encoding="utf-8") for p in (pkg / "function.py", pkg / "custom.py"))
    assert not [name for name, text in before.items() if b"DOC-" in text or b"COMMENT-" in text]

    # a doc-only edit, every kind of doc and comment, no line added: no C++ byte changes
    text = SPEC
    for old, new in EDITS.items():
        assert old in text
        text = text.replace(old, new)
    spec.write_text(text, encoding="utf-8")
    _generate(tmp_path)
    assert _cpp(tmp_path) == before
    assert "DOC-ONE reworded" in (pkg / "function.py").read_text(encoding="utf-8")
    log.unlink(missing_ok=True)
    for kind in ("aot", "ext"):
        again = backends.build_library(pkg, kind, quiet=True)
        assert again.cached and again.compiled == () and again.path == first[kind]
    # and the new docs import, building nothing
    path = os.pathsep.join([str(ROOT), str(tmp_path / "out")])
    r = subprocess.run([sys.executable, "-c", "import doc_ops.custom as c, doc_ops.function as f; "
                        "print(c.scaled_add.__doc__.splitlines()[0]); print(f.scaled_add.__doc__.splitlines()[0])"],
                       cwd=tmp_path, env=dict(os.environ, PYTHONPATH=path, OPGEN_PYNATIVE_PATH="auto"),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines()[-2:] == ["DOC-ONE reworded: y plus alpha times x, with NumPy broadcasting."] * 2
    assert _processes(log) == []  # no compiler process: not for a build, not for an import

    # the counter counts: a body edit compiles the op's kernel unit
    spec.write_text(text.replace("forward: x * alpha + y", "forward: y + x * alpha"), encoding="utf-8")
    _generate(tmp_path)
    backends.build_library(pkg, "aot", quiet=True)
    compiled = [line for line in _processes(log) if " -c " in f" {line} "]
    assert any("scaled_add_kernel.cc" in line for line in compiled), _processes(log)

    # a doc edit that adds lines: an elementwise op's C++ does not change; C++ bodies move, and
    # with them their #line directives: only that op's kernel unit (no MindSpore or torch header)
    # compiles again
    generated = _cpp(tmp_path)
    spec.write_text(spec.read_text(encoding="utf-8").replace("doc: |\n", "doc: |\n  A new first line.\n"),
                    encoding="utf-8")
    _generate(tmp_path)
    assert _cpp(tmp_path) == generated
    kernel_spec.write_text(KERNEL_SPEC.replace("doc: 2 * x,", "doc: |\n  A new first line.\n  2 * x,", 1),
                           encoding="utf-8")
    _generate(tmp_path)
    changed = {name for name, data in _cpp(tmp_path).items() if generated.get(name) != data}
    assert changed == {"out/doc_ops/csrc/twice_k_kernel.h", "out/doc_ops_torch/csrc/twice_k_kernel.h"}
    log.unlink()
    for kind in ("aot", "ext"):
        backends.build_library(pkg, kind, quiet=True)
    compiled = [line for line in _processes(log) if " -c " in f" {line} "]
    assert len(compiled) == 1 and "twice_k_kernel.cc" in compiled[0], compiled
