"""The shape language (opgen/shapes/): parsing and diagnostics, the Python and the C++ meaning
(compared on random shapes and attrs through a driver compiled over opgen/sym.h, no MindSpore),
unknown dims and ranks in C++, and end to end on MindSpore: GRAPH_MODE with dynamic shape and
dynamic rank through one compiled graph, contracts on every path, shape arithmetic overflow.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from opgen import runtime
from opgen import shapes as lang
from opgen.pipeline import load_ops

ROOT = Path(__file__).resolve().parents[1]

SCOPE = lang.Scope({"x": "required", "y": "required", "g": "optional", "xs": "dynamic"},
                   {"k": "int", "axis": "list[int]", "flag": "bool", "mode": "str", "beta": "float",
                    "names": "list[str]", "pads": "list[list[int]]", "fpads": "list[list[float]]"})


# ----------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("text", [
    "x.shape", "broadcast(x.shape, y.shape)", "x.shape[:-1] + [k]", "x.shape[:-1] + [x.shape[-1] // 2]",
    "[] if mode != 'none' else x.shape", "reduce(x.shape, axis, flag)", "concat(xs, 0)",
    "[(x.shape[0] - k) // 2 + 1, max(k, 1)]", "[1] * x.rank", "gather(x.shape, y.shape, -1)",
    "[x.shape[0] + pads[0][0] + pads[0][1], len(pads), len(pads[-1])]",
    "x.shape if all(z.shape == x.shape for z in xs) else [0]",
    "[1] if any(p[0] > 0 and len(p) == 2 for p in pads) or all(d > 1 for d in x.shape) else []",
])
def test_round_trip(text: str) -> None:
    node = lang.parse_shape(text, SCOPE)
    assert lang.to_source(node) == text
    assert lang.to_source(lang.parse_shape(lang.to_source(node), SCOPE)) == text


@pytest.mark.parametrize(("text", "message", "col"), [
    ("x.shape[-1] / 2", "'/' is true division; shapes are ints: use '//' (floor division)", 13),
    ("x.shap", "unknown attribute '.shap'; inputs have '.shape' and '.rank'", 3),
    ("z.shape", "unknown name 'z'; expected an input or attr of the op", 1),
    ("x + 1", "what is added to a list must be a list[int], but '1' is an int", 5),
    ("[x]", "a dimension must be an int, but 'x' is a tensor", 2),
    ("axis[0] + k", "an output shape must be a list of dims, but this is an int", 1),
    ("reduce(xs)", "argument 'x' of reduce() is a dynamic input (a list of tensors); use concat(xs, axis)", 8),
    ("[k // 0]", "division by zero", 7),
    ("g.shape", "input 'g' is optional and may be None; an output shape cannot depend on it", 1),
    ("[names[0]]", "attr 'names' is a list[str]; shape expressions take int, float, bool, str, list[int] and "
     "list[list[int]] attrs", 2),
    ("[fpads[0][0]]", "attr 'fpads' is a list[list[float]]; shape expressions take", 2),
    ("[pads[0]]", "a dimension must be an int, but 'pads[0]' is a list[int]", 2),
    ("pads[0:1][0]", "what is sliced (a list[list[int]] attr takes an index, not a slice) must be a list[int]", 1),
    ("[1] if pads == pads else []", "a list[list[int]] cannot be compared; compare its items with all(... for v "
     "in s)", 8),
    ("[1] if all(z for z in xs) else []", "the condition of all() must be a bool, but 'z' is a tensor", 12),
    ("[1] if all(x.rank > 0 for x in xs) else []", "loop variable 'x' hides an input, attr or loop variable", 27),
    ("[1] if all(z.shape == x.shape for z in q) else []", "unknown name 'q'", 40),
    ("[1] if any(d > 0 for d in k) else []", "any() iterates over a dynamic input (its tensors), a list[list[int]] "
     "attr (its rows) or a list (its ints), but 'k' is an int", 27),
    ("[1] if all(z.rank > 0 for z in xs if z.rank) else []", "'if' inside all() is not supported", 38),
    ("[1] if all([z.rank > 0 for z in xs]) else []", "all() takes one generator", 8),
    ("[1] if all(z.rank for z in xs for w in xs) else []", "all() takes one 'for'", 8),
    ("[z.rank]", "unknown name 'z'", 2),  # a loop variable is visible inside its all() only
    ("[beta]", "a dimension must be an int, but 'beta' is a float", 2),
    ("[" * 70 + "1" + "]" * 70, "expression nested 70 deep; at most 64 levels are allowed", 1),
    ("[" + "9" * 400 + "]", "does not fit in int64", 2),
    ("x.shape if mode else y.shape", "the condition of 'if' must be a bool, but 'mode' is a str", 12),
    ("mode == 3", "cannot compare a str with an int", 1),
])
def test_errors_point_at_the_sub_expression(text: str, message: str, col: int) -> None:
    with pytest.raises(lang.ShapeError) as info:
        lang.parse_shape(text, SCOPE)
    assert message in str(info.value)
    assert info.value.col == col


def test_unknown_names_get_suggestions() -> None:
    with pytest.raises(lang.ShapeError) as info:
        lang.parse_condition("x.rank >= kk", SCOPE)
    assert info.value.notes == ("did you mean 'k'?",)


def test_validate_reports_every_expression_at_its_column(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "name: bad\n"
        "doc: d\n"
        "inputs: [{name: x, doc: d, differentiable: false}]\n"
        "attrs: [{name: k, type: int, default: 1, doc: d}]\n"
        "requires: [\"x.rank >= kk\", \"1 > 2\"]\n"
        "outputs: [{name: out, doc: d, shape: 'x.shape[-1] / 2', dtype: x}]\n"
        "dtype_format: {CPU: [[F32_Default, F32_Default]]}\n"
        "kernel: {forward: '(void)out;'}\n"
        "test: {attrs: [{nosuch: 1}], shapes: {x: '[k, q]'}}\n", encoding="utf-8")
    _, diags = load_ops([spec])
    got = [d.format().splitlines()[0].replace(str(tmp_path) + "/", "") for d in diags]
    assert "bad.yaml:5:23: error: op 'bad': requires[0]: unknown name 'kk'; expected an input or attr of the op" \
        in got
    assert "bad.yaml:6:51: error: op 'bad': output 'out': bad shape: '/' is true division; shapes are ints: use " \
        "'//' (floor division)" in got
    assert "bad.yaml:9:16: error: op 'bad': test.attrs names unknown attr 'nosuch'" in got
    assert "bad.yaml:9:47: error: op 'bad': test.shapes.x: unknown name 'q'; expected an input or attr of the op" \
        in got
    assert len(got) == 4  # the semantic checks (the contract '1 > 2') run once the model builds


def test_a_contract_that_never_holds(tmp_path: Path) -> None:
    spec = tmp_path / "never.yaml"
    spec.write_text(
        "name: never\ndoc: d\ninputs: [{name: x, doc: d, differentiable: false}]\nrequires: ['1 > 2']\n"
        "outputs: [{name: out, doc: d, shape: x, dtype: x}]\ndtype_format: {CPU: [[F32_Default, F32_Default]]}\n"
        "kernel: {forward: '(void)out;'}\n", encoding="utf-8")
    _, diags = load_ops([spec])
    assert [d.message for d in diags] == ["contract '1 > 2' never holds: it reads no input or attr and is false"]


# ----------------------------------------------------------------------------- Python vs C++

EXPRESSIONS = [
    "x.shape", "broadcast(x, y)", "x.shape[:-1] + [k]", "x.shape[:-1] + [x.shape[-1] // 2]",
    "[] if mode != 'none' else x.shape", "reduce(x, axis, flag)", "reduce(x, k, True)",
    "[(x.shape[0] - k) // 2 + 1, max(k, 1), min(x.rank, 7)]", "[1] * x.rank + y.shape[1:]",
    "gather(x, y, k)", "[x.shape[k] % (k - 1), -x.shape[0] // 3, x.shape[0] * y.rank]",
    "x.shape[k:] + axis[:1]", "[len(axis)] if flag and k > 0 or not flag else [0]",
    "matmul(x, y, flag, False)",
    "[x.shape[-1], rows[0][0], rows[-1][1]]", "[len(rows), len(rows[k]) if k < len(rows) else 0]",
]
CONDITIONS = [
    "y.shape == x.shape", "x.rank >= 1 and x.shape[-1] % 2 == 0", "k <= x.shape[-1]",
    "y.shape == [x.shape[-1]]", "broadcast(x, axis) == axis", "beta > 0.5", "mode == 'mean' or x.rank != k",
    "all(z.shape == x.shape for z in xs)", "any(z.rank == k for z in xs)",
    "all(len(r) == 2 and r[0] >= 0 for r in rows)",
    "all(d > 1 for d in x) or any(d == k for d in rows[0])", "all(all(d >= 1 for d in z) for z in xs)",
    "all(any(d == 0 for d in z) or z.rank < 2 for z in xs)",
]


DRIVER_SCOPE = lang.Scope({"x": "required", "y": "required", "xs": "dynamic"},
                          {"k": "int", "axis": "list[int]", "flag": "bool", "mode": "str", "beta": "float",
                           "rows": "list[list[int]]"})
"""The differential's names: ``xs`` is ``[x, y]``, ``rows`` a list[list[int]] attr."""


def _driver_source() -> str:
    scope = DRIVER_SCOPE
    names = {"x": "sx", "y": "sy", "xs": "sxs"}
    cases = []
    for i, text in enumerate(EXPRESSIONS):
        node = lang.parse_shape(text, scope)
        cases.append(f"    case {i}: print(opgen::sym::to_ms({lang.to_cpp(node, names, lambda a: 'a.' + a)}, \"out\"));"
                     " break;")
    for j, text in enumerate(CONDITIONS):
        node = lang.parse_condition(text, scope)
        cond = lang.to_cpp(node, names, lambda a: "a." + a)
        cases.append(f"    case {len(EXPRESSIONS) + j}: opgen::sym::require([&] {{ return {cond}; }}, "
                     f"{_c(text)}, {{opgen::sym::fact(\"x\", sx), opgen::sym::fact(\"y\", sy)}}); "
                     "std::cout << \"ok\\n\"; break;")
    return r"""
#include <iostream>
#include <sstream>
#include <string>
#include <vector>
#include "opgen/sym.h"

struct Attrs { int64_t k; std::vector<int64_t> axis; bool flag; std::string mode; float beta;
               std::vector<std::vector<int64_t>> rows; };

static opgen::sym::List read_list(std::istream &in) {
  int64_t n; in >> n;
  if (n == -2) return opgen::sym::List::unknown_rank();
  opgen::sym::List l;
  for (int64_t i = 0; i < n; ++i) {
    int64_t d;
    in >> d;
    l.items.push_back(d < 0 ? opgen::sym::Int::unknown() : opgen::sym::Int(d));
  }
  return l;
}
static void print(const std::vector<int64_t> &v) {
  std::cout << "[";
  for (size_t i = 0; i < v.size(); ++i) std::cout << (i ? ", " : "") << v[i];
  std::cout << "]\n";
}
int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    int which; in >> which;
    const opgen::sym::List sx = read_list(in), sy = read_list(in);
    const std::vector<opgen::sym::List> sxs{sx, sy};
    Attrs a; int64_t n; in >> a.k >> n; a.axis.resize(n); for (auto &v : a.axis) in >> v;
    int flag; in >> flag >> a.mode >> a.beta; a.flag = flag != 0;
    int64_t nrows = 0; in >> nrows; a.rows.resize(nrows);
    for (auto &r : a.rows) { int64_t len; in >> len; r.resize(len); for (auto &v : r) in >> v; }
    try {
      switch (which) {
""" + "\n".join(cases) + r"""
      }
    } catch (const std::exception &e) {
      std::cout << "error: " << e.what() << "\n";
    }
  }
}
"""


def _c(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("g++ not found")
    d = tmp_path_factory.mktemp("sym")
    (d / "driver.cc").write_text(_driver_source(), encoding="utf-8")
    subprocess.run(["g++", "-std=c++17", "-O0", "-I", str(ROOT / "opgen" / "include"), str(d / "driver.cc"),
                    "-o", str(d / "driver"), "-pthread"], check=True)
    return d / "driver"


def _python(which: int, env: dict[str, Any]) -> str:
    scope = DRIVER_SCOPE
    env = {**env, "xs": [env["x"], env["y"]]}
    try:
        if which < len(EXPRESSIONS):
            node = lang.parse_shape(EXPRESSIONS[which], scope)
            return "[" + ", ".join(str(d) for d in runtime.check_output(lang.evaluate(node, env), "out")) + "]"
        text = CONDITIONS[which - len(EXPRESSIONS)]
        node = lang.parse_condition(text, scope)
        if not runtime.holds(lambda: lang.evaluate(node, env)):
            raise runtime.violation(text, [("x", env["x"]), ("y", env["y"])], [])
        return "ok"
    except ValueError as exc:
        return f"error: {exc}"


def test_python_and_cpp_agree(driver: Path) -> None:
    rng = np.random.default_rng(7)
    lines, envs = [], []
    for _ in range(2500):
        which = int(rng.integers(len(EXPRESSIONS) + len(CONDITIONS)))
        x = tuple(int(d) for d in rng.integers(0, 5, int(rng.integers(0, 4))))
        y = x if rng.random() < 0.3 else tuple(int(d) for d in rng.integers(0, 5, int(rng.integers(0, 4))))
        k = int(rng.integers(-3, 4))
        axis = [int(a) for a in rng.integers(-3, 4, int(rng.integers(0, 3)))]
        flag = bool(rng.random() < 0.5)
        mode = ["none", "mean", "sum"][int(rng.integers(3))]
        beta = [0.25, 0.5, 1.0][int(rng.integers(3))]
        rows = [[int(a) for a in rng.integers(-1, 4, int(rng.integers(0, 3)))] for _ in range(int(rng.integers(0, 3)))]
        envs.append((which, {"x": x, "y": y, "k": k, "axis": axis, "flag": flag, "mode": mode, "beta": beta,
                             "rows": rows}))
        lines.append(" ".join(str(v) for v in [which, len(x), *x, len(y), *y, k, len(axis), *axis, int(flag), mode,
                                                beta, len(rows), *[w for r in rows for w in (len(r), *r)]]))
    out = subprocess.run([str(driver)], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert len(out) == len(envs)
    mismatches = [(EXPRESSIONS + CONDITIONS)[w] + f" {env}: python {_python(w, env)!r} c++ {got!r}"
                  for (w, env), got in zip(envs, out) if _python(w, env) != got]
    assert not mismatches, "\n".join(mismatches[:10])
    assert sum(g.startswith("error") for g in out) > 100 and sum(not g.startswith("error") for g in out) > 500


@pytest.mark.parametrize(("which", "x", "y", "want"), [
    (0, [-1, 3], [2], "[-1, 3]"),                     # x.shape, one unknown dim
    (1, [-1, 3], [1, 3], "[-1, 3]"),                  # broadcast: an unknown stays unknown against 1
    (1, [-1, 3], [4, 3], "[4, 3]"),                   # a known dim decides
    (1, [-2], [4, 3], "[-2]"),                        # unknown rank
    (2, [-2], [1], "[-2]"),                           # x.shape[:-1] + [k] of an unknown rank
    (3, [5, -1], [1], "[5, -1]"),                     # x.shape[-1] // 2 of an unknown dim
    (5, [-1, 3, 4], [1], "[-1, 3]"),                  # reduce over axis [-1] (attrs below)
    (13, [-1, 4], [4, -1], "[-1, -1]"),               # matmul of unknowns
    (16, [-1, 3], [2, 3], "ok"),                      # y.shape == x.shape: undecided, not an error
    (16, [-1, 3], [2, 4], "error: contract 'y.shape == x.shape' does not hold: x has shape (?, 3), "
                          "y has shape (2, 4)"),    # ... unless a known dim already differs
    (18, [-2], [1], "ok"),                            # k <= x.shape[-1] of an unknown rank
    (23, [-1, 3], [2, 3], "ok"),                      # all(z.shape == x.shape for z in xs): undecided
    (23, [-1, 3], [2, 4], "error: contract 'all(z.shape == x.shape for z in xs)' does not hold: x has shape "
                          "(?, 3), y has shape (2, 4)"),  # ... unless one tensor already differs
    (23, [-2], [2, 4], "ok"),                         # an unknown rank decides nothing
    (27, [-1, 3], [2, 3], "ok"),                      # all(all(d >= 1 for d in z) for z in xs): undecided
    (27, [0, -1], [2, 3], "error: contract 'all(all(d >= 1 for d in z) for z in xs)' does not hold: x has shape "
                          "(0, ?), y has shape (2, 3)"),  # a known 0 decides
])
def test_unknown_dims_propagate_in_cpp(driver: Path, which: int, x: list[int], y: list[int], want: str) -> None:
    def enc(s: list[int]) -> list[int]:
        return [-2] if s == [-2] else [len(s), *s]

    line = " ".join(str(v) for v in [which, *enc(x), *enc(y), 1, 1, -1, 0, "none", 1.0, 0])
    out = subprocess.run([str(driver)], input=line + "\n", capture_output=True, text=True, check=True).stdout
    assert out.strip() == want
