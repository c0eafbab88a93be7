"""The gather(x, indices, axis) shape rule: parsed and checked like the other rule calls, and its
Python (opgen.runtime.gather_shape) and C++ (opgen::gather_shape in rules.h) halves agree on
shapes and on error messages."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from opgen import runtime
from opgen import shapes as lang
from opgen.pipeline import load_ops
from opgen.resources import include_dir

SPEC = """\
name: take
doc: numpy.take.
inputs:
  - {name: x, doc: values, differentiable: false}
  - {name: indices, doc: positions, differentiable: false}
attrs:
  - {name: axis, type: int, default: 0, doc: axis}
outputs:
  - {name: out, doc: taken, shape: "gather(x, indices, axis)", dtype: x}
dtype_format:
  CPU:
    - [F32_Default, I64_Default, F32_Default]
kernel:
  forward: "(void)x;"
"""

DRIVER = r"""
#include <iostream>
#include "opgen/rules.h"

static void run(const opgen::Shape &x, const opgen::Shape &i, int64_t axis) {
  try {
    const opgen::Shape out = opgen::gather_shape(x, i, axis);
    std::cout << "ok";
    for (int64_t d : out) std::cout << ' ' << d;
    std::cout << '\n';
  } catch (const opgen::Error &e) {
    std::cout << "error " << e.what() << '\n';
  }
}

int main() {
CASES
}
"""

CASES: list[tuple[list[int], list[int], int]] = [
    ([4, 3], [2], 0),
    ([4, 3], [], 1),
    ([3, 5, 2], [2, 2], 1),
    ([3, 5, 2], [7], -1),
    ([3, 5, 2], [1, 2, 3], -3),
    ([5], [], 0),
    ([4, 3], [2], 2),
    ([4, 3], [2], -3),
    ([], [2], 0),
]


def test_parse() -> None:
    scope = lang.Scope({"x": "required", "indices": "required", "i": "required"}, {"axis": "int"})
    rule = lang.parse_shape("gather(x, indices, axis)", scope)
    assert isinstance(rule, lang.Call) and rule.fn.name == "gather"
    assert lang.tensors_used(rule) == ("x", "indices") and lang.attrs_used(rule) == ("axis",)
    default = lang.parse_shape("gather(x, i)", scope)
    assert isinstance(default, lang.Call) and isinstance(default.args[2], lang.Const) and default.args[2].value == 0
    msg = r"argument 'indices' of gather\(\) must be a list\[int\], but '1' is an int"
    with pytest.raises(lang.ShapeError, match=msg):
        lang.parse_shape("gather(x, 1)", scope)


def test_spec_checks(write_spec: Callable[[str, str], Path]) -> None:
    ops, diags = load_ops([write_spec("take.yaml", SPEC)])
    assert not diags and ops[0].outputs[0].shape.call == "gather"
    bad = SPEC.replace("[F32_Default, I64_Default, F32_Default]", "[F32_Default, F32_Default, F32_Default]")
    _, diags = load_ops([write_spec("take.yaml", bad)])
    assert "gather() takes integer indices, but this row gives F32_Default for 'indices'" in str(diags[0])
    bad = SPEC.replace("{name: axis, type: int,", "{name: axis, type: bool,").replace("default: 0", "default: false")
    _, diags = load_ops([write_spec("take.yaml", bad)])
    assert "bad shape: argument 'axis' of gather() must be an int, but 'axis' is a bool" in str(diags[0])


def _py(x: list[int], i: list[int], axis: int) -> str:
    try:
        return "ok" + "".join(f" {d}" for d in runtime.gather_shape(x, i, axis, op="take"))
    except ValueError as exc:
        return "error " + str(exc).removeprefix("take(): ")


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found")
def test_python_and_cpp_agree(tmp_path: Path) -> None:
    lines = []
    for x, i, axis in CASES:
        lines.append(f"  run({{{', '.join(map(str, x))}}}, {{{', '.join(map(str, i))}}}, {axis});")
    src = tmp_path / "g.cc"
    src.write_text(DRIVER.replace("CASES", "\n".join(lines)), encoding="utf-8")
    exe = tmp_path / "g"
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", "-pthread", f"-I{include_dir()}", str(src), "-o",
                    str(exe)], check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()
    want = [_py(*c) for c in CASES]
    assert got == want
    assert want[3] == "ok 3 5 7" and want[6] == "error axis 2 is out of range for a tensor of rank 2"
    assert want[8] == "error gather cannot index a 0-d tensor"
