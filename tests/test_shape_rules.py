"""The shape rules agree between Python and C++.

Every shape rule of the spec language is implemented twice: in ``opgen/runtime.py`` (the Custom
path's ``out_shape``) and in ``opgen/include/opgen/{kernel,rules}.h`` (the Function<T> path's
shape inference). This test compiles a small driver over the C++ headers (no MindSpore needed)
and checks, on hypothesis-drawn shapes and arguments, that both give the same output shape or
the same error message. The per-op agreement on real calls is in tests/test_ops.py, where every
op's outputs on both paths are compared with the shapes the rules predict.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opgen import runtime

ROOT = Path(__file__).resolve().parents[1]

DRIVER = r"""
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "opgen/rules.h"

using opgen::Shape;

static Shape read_shape(std::istream &in) {
  int64_t rank;
  in >> rank;
  Shape s(rank);
  for (auto &d : s) in >> d;
  return s;
}

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string rule;
    in >> rule;
    try {
      Shape out;
      if (rule == "broadcast") {
        int n;
        in >> n;
        std::vector<Shape> shapes;
        for (int i = 0; i < n; ++i) shapes.push_back(read_shape(in));
        if (n == 2) out = opgen::broadcast_shape({shapes[0], shapes[1]});
        else out = opgen::broadcast_shape({shapes[0], shapes[1], shapes[2]});
      } else if (rule == "reduce") {
        Shape x = read_shape(in);
        Shape axes = read_shape(in);
        int keep;
        in >> keep;
        out = opgen::reduce_shape(x, std::vector<int64_t>(axes.begin(), axes.end()), keep != 0);
      } else if (rule == "matmul") {
        Shape a = read_shape(in), b = read_shape(in);
        int ta, tb;
        in >> ta >> tb;
        out = opgen::matmul_shape(a, b, ta != 0, tb != 0);
      } else if (rule == "concat") {
        int n;
        in >> n;
        std::vector<Shape> xs;
        for (int i = 0; i < n; ++i) xs.push_back(read_shape(in));
        int64_t axis;
        in >> axis;
        out = opgen::concat_shape(xs, axis);
      } else if (rule == "dim") {
        Shape x = read_shape(in);
        int64_t axis;
        in >> axis;
        out = {opgen::dim_of(x, axis, "x")};
      }
      std::cout << "ok";
      for (auto d : out) std::cout << " " << d;
      std::cout << std::endl;
    } catch (const std::exception &e) {
      std::cout << "err " << e.what() << std::endl;
    }
  }
}
"""


class Driver:
    """The compiled C++ driver, one line in, one line out."""

    def __init__(self, exe: Path):
        self.proc = subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, *words: Any) -> tuple[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.proc.stdin.flush()
        kind, _, rest = self.proc.stdout.readline().rstrip("\n").partition(" ")
        if kind == "ok":
            return "ok", [int(d) for d in rest.split()]
        return "err", rest

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def cpp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.fail("no C++ compiler on PATH (g++ is part of the README's setup)")
    work = tmp_path_factory.mktemp("rules")
    (work / "driver.cc").write_text(DRIVER, encoding="utf-8")
    exe = work / "driver"
    subprocess.run([cxx, "-std=c++17", "-O0", "-pthread", f"-I{ROOT / 'opgen' / 'include'}", str(work / "driver.cc"),
                    "-o", str(exe)], check=True, capture_output=True, text=True)
    driver = Driver(exe)
    yield driver
    driver.close()


def py(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", [int(d) for d in fn(*args)]
    except ValueError as exc:
        return "err", str(exc)


def words(shape: Sequence[int]) -> list[int]:
    return [len(shape), *shape]


dims = st.integers(0, 4)
shapes = st.lists(dims, min_size=0, max_size=4)
axes = st.lists(st.integers(-5, 4), max_size=3)

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True)


@SETTINGS
@given(st.lists(st.lists(st.sampled_from([1, 2, 3]), max_size=3), min_size=2, max_size=3))
def test_broadcast(cpp: Driver, xs: list[list[int]]) -> None:
    line = ["broadcast", len(xs)] + [w for s in xs for w in words(s)]
    assert cpp.ask(*line) == py(runtime.broadcast_shape, *xs)


@SETTINGS
@given(shapes, axes, st.booleans())
def test_reduce(cpp: Driver, x: list[int], axis: list[int], keep: bool) -> None:
    assert cpp.ask("reduce", *words(x), *words(axis), int(keep)) == py(runtime.reduce_shape, x, axis, keep)


@SETTINGS
@given(st.lists(dims, min_size=1, max_size=3), st.lists(dims, min_size=1, max_size=3), st.booleans(), st.booleans())
def test_matmul(cpp: Driver, a: list[int], b: list[int], ta: bool, tb: bool) -> None:
    assert cpp.ask("matmul", *words(a), *words(b), int(ta), int(tb)) == py(runtime.matmul_shape, a, b, ta, tb)


@SETTINGS
@given(st.lists(st.lists(st.integers(1, 3), max_size=3), min_size=1, max_size=3), st.integers(-4, 3),
       st.data())
def test_concat(cpp: Driver, xs: list[list[int]], axis: int, data: st.DataObject) -> None:
    if data.draw(st.booleans()) and xs[0]:  # mostly compatible shapes: vary only the joined axis
        ax = axis % len(xs[0]) if -len(xs[0]) <= axis < len(xs[0]) else 0
        xs = [[data.draw(st.integers(0, 3)) if i == ax else d for i, d in enumerate(xs[0])] for _ in xs]
    line = ["concat", len(xs)] + [w for s in xs for w in words(s)] + [axis]
    assert cpp.ask(*line) == py(runtime.concat_shape, xs, axis)


@SETTINGS
@given(shapes, st.integers(-5, 4))
def test_dim_of(cpp: Driver, x: list[int], axis: int) -> None:
    assert cpp.ask("dim", *words(x), axis) == py(lambda s, a: [runtime.dim_of(s, a, "x")], x, axis)


def test_errors_are_compared_too(cpp: Driver) -> None:
    """The properties above compare messages as well as shapes; pin a few to be sure they run."""
    assert cpp.ask("matmul", 2, 2, 3, 2, 2, 3, 0, 0) == (
        "err", "matmul inner dimensions differ: (2, 3) x (2, 3) (3 != 2)")
    assert cpp.ask("reduce", 1, 4, 1, 1, 0) == ("err", "axis 1 is out of range for a tensor of rank 1")
    assert cpp.ask("concat", 2, 1, 2, 2, 2, 2, 0)[0] == "err"
    assert cpp.ask("broadcast", 2, 1, 2, 1, 3) == ("err", "shapes cannot be broadcast together: (2,) (3,)")
