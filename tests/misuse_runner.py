"""Runtime misuse cases for generated ops, each run in its own child process.

``python tests/misuse_runner.py OUT.json CASE...`` imports MindSpore and the generated packages
once, then forks one child per case (no op has run in the parent, so the children start clean).
A child runs its case with stdout/stderr redirected to its own file and reports how it ended:
the right answer (checked against numpy inside the child), a wrong answer, or an exception.
The parent records each child's exit status (a signal means a crash) and its stderr.
Importing MindSpore once instead of once per case is what keeps ~60 cases at a few seconds.

Imported by tests/test_misuse.py for the case table only (no MindSpore import at module level).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]

PATHS = ("custom", "function", "auto")
"""``custom``: ``<pkg>.<op>`` on the Custom path (``OPGEN_PYNATIVE_PATH=custom``); ``function``:
``<pkg>.function.<op>``; ``auto``: ``<pkg>.<op>`` as a user gets it, which takes the Function<T>
path in PyNative (its extension is built) and compiles the Custom path in graphs. An ``auto``
case expects what its ``custom`` twin does (one meaning, whichever path runs), unless it says
otherwise; it runs in a process of its own (the choice is made at import)."""

ATTR_SPEC = """\
name: scaled
doc: (x * alpha + n), negated when flip.
inputs:
  - {name: x, doc: any tensor}
outputs:
  - {name: out, doc: o, shape: x, dtype: x}
attrs:
  - {name: n, type: int, doc: offset, choices: [0, 1, 2]}
  - {name: alpha, type: float, doc: scale, default: 1.0, range: [0, 10]}
  - {name: flip, type: bool, doc: negate, default: false}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
    - [F64_Default, F64_Default]
elementwise:
  forward: (x * alpha + n) * (-1 if flip else 1)
  grad:
    x: dout * alpha * (-1 if flip else 1)
"""


NO_GRAD_SPECS = {
    # a mul whose output is not differentiable, and a square through which nothing is
    "mul_nd.yaml": """\
name: mul_nd
doc: x * y; no gradient flows back through it.
inputs:
  - {name: x, doc: first factor}
  - {name: y, doc: second factor}
outputs:
  - {name: out, doc: x * y, shape: "broadcast(x, y)", dtype: x, differentiable: false}
dtype_format:
  CPU:
    - [F32_Default, F32_Default, F32_Default]
elementwise:
  forward: x * y
  grad: {x: dout * y, y: dout * x}
""",
    "sq_nd.yaml": """\
name: sq_nd
doc: x * x, nothing differentiable.
inputs:
  - {name: x, doc: any tensor, differentiable: false}
outputs:
  - {name: out, doc: x squared, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
elementwise:
  forward: x * x
""",
}


THROW_SPECS = {
    # kernels that throw: a std::exception other than opgen::Error, and a value that is none
    "throw_std.yaml": """\
name: throw_std
doc: Throws std::runtime_error("boom") for a negative first element.
inputs:
  - {name: x, doc: any tensor}
outputs:
  - {name: out, doc: x, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
kernel:
  forward: |
    if (x.numel > 0 && x[0] < 0) throw std::runtime_error("boom");
    for (int64_t i = 0; i < out.numel; ++i) out[i] = x[i];
  backward: |
    for (int64_t i = 0; i < dx.numel; ++i) dx[i] = dout[i];
""",
    "throw_int.yaml": """\
name: throw_int
doc: Throws 42 for a negative first element.
inputs:
  - {name: x, doc: any tensor}
outputs:
  - {name: out, doc: x, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
kernel:
  forward: |
    if (x.numel > 0 && x[0] < 0) throw 42;
    for (int64_t i = 0; i < out.numel; ++i) out[i] = x[i];
  backward: |
    for (int64_t i = 0; i < dx.numel; ++i) dx[i] = dout[i];
""",
}


@dataclass(frozen=True)
class Case:
    """``expect`` is ``"answer"`` or ``(exception type name, substrings of its message)``."""

    name: str
    path: str
    run: Callable[[Any], None]
    expect: Any
    xfail: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)


def _np() -> Any:
    import numpy

    return numpy


def _t(a: Any) -> Any:
    import mindspore

    return mindspore.Tensor(a)


def _f32(*shape: int) -> Any:
    np = _np()
    return (np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 2.5) / 2


def _eq(got: Any, want: Any) -> None:
    np = _np()
    got = got.asnumpy() if hasattr(got, "asnumpy") else np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _graph_cell(op: Any, form: str, other: Any = None) -> Any:
    """A GRAPH_MODE Cell calling ``op`` on its Tensor argument ``t`` as ``form`` says, with
    ``other`` (a closure constant: a numpy array, a float, None...) where the form puts it."""
    import mindspore

    mindspore.set_context(mode=mindspore.GRAPH_MODE)

    class Net(mindspore.nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.op = op
            self.in_list = [op]
            self.in_tuple = (op,)
            self.in_dict = {"op": op}
            self.module = sys.modules[op.__module__]  # the op as an attribute of its module

        def construct(self, t):  # type: ignore[no-untyped-def]
            if form == "pair":
                return self.op(t, other)
            # reached as a value, not by name: MindSpore parses the function object itself
            if form == "pair_from_list":
                return self.in_list[0](t, other)
            if form == "pair_from_tuple":
                return self.in_tuple[0](t, other)
            if form == "pair_from_dict":
                return self.in_dict["op"](t, other)
            if form == "pair_from_module":  # only for mul
                return self.module.mul(t, other)
            if form == "list":
                return self.op([t, other])
            if form == "gather":
                return self.op(t, other, 1)
            if form == "nd_pair":  # through a no-gradient op plus a product, for grads
                return self.op(t, t * 2) + t * 3
            if form == "nd_one":
                return self.op(t) + t * 3
            if form == "axis":
                return self.op(t, axis=other)
            if form == "approximate":
                return self.op(t, approximate=other)
            return self.op(t)

    return Net()


def _grad(fn: Any, *xs: Any) -> Any:
    import mindspore

    g = mindspore.grad(fn, grad_position=tuple(range(len(xs))))(*xs)
    return g if isinstance(g, tuple) else (g,)


ROWS_MUL = "(x=float32, y=float32, out=float32), (x=float64, y=float64, out=float64)"
ROWS_SQUARE = "(x=float32, out=float32), (x=float64, out=float64)"

def _cases() -> list[Case]:
    cases: list[Case] = []

    def add(name: str, run: Callable[[Any], None], expect: Any, xfail: dict[str, str] | None = None,
            paths: tuple[str, ...] = PATHS, auto: Any = None) -> None:
        """``auto``: what the ``auto`` path gives where it differs from the ``custom`` one."""
        for p in paths:
            like = "custom" if p == "auto" else p
            want = auto if p == "auto" and auto is not None else expect(like) if callable(expect) else expect
            cases.append(Case(f"{p}-{name}", p, run, want, (xfail or {}).get(like, "")))

    np = _np()
    x23, y3 = _f32(2, 3), _f32(3)

    # --- dtypes outside the rows ------------------------------------------------------------
    h = np.ones(3, np.int16)  # (float16 and bfloat16 are rows of mul)
    add("mul_int16", lambda P: P.mul(_t(h), _t(h)), ("TypeError", ["mul()", "int16", ROWS_MUL]))
    i64 = np.arange(3, dtype=np.int64)
    add("mul_int64", lambda P: P.mul(_t(i64), _t(i64)), ("TypeError", ["mul()", "int64", ROWS_MUL]))
    add("mul_mixed_float32_float64", lambda P: P.mul(_t(y3), _t(y3.astype(np.float64))),
        ("TypeError", ["mul()", "float64", ROWS_MUL]))
    add("square_bool", lambda P: P.square(_t(np.array([True, False]))), ("TypeError", ["square()", "bool",
                                                                                        ROWS_SQUARE]))
    ai = np.arange(6, dtype=np.int32).reshape(2, 3)
    add("add_int32_row", lambda P: _eq(P.add(_t(ai), _t(ai[0])), ai + ai[0]), "answer")
    add("add_float64_row", lambda P: _eq(P.add(_t(x23.astype(np.float64)), _t(y3.astype(np.float64))),
                                         x23.astype(np.float64) + y3), "answer")

    # --- shapes ----------------------------------------------------------------------------
    add("add_bad_broadcast", lambda P: P.add(_t(x23), _t(np.ones(4, np.float32))),
        ("ValueError", ["add()", "shapes cannot be broadcast together: (2, 3) (4,)"]))
    add("mul_bad_broadcast_rank", lambda P: P.mul(_t(np.ones((2, 3, 4), np.float32)), _t(x23)),
        ("ValueError", ["mul()", "(2, 3, 4) (2, 3)"]))
    r8 = _f32(1, 2, 1, 2, 1, 2, 1, 2)
    add("mul_rank8_broadcast", lambda P: _eq(P.mul(_t(r8), _t(np.float32([3.0, -1.0]))), r8 * np.float32([3.0, -1.0])),
        "answer")

    # --- None, wrong arguments -------------------------------------------------------------
    add("square_none", lambda P: P.square(None), ("TypeError", ["square()", "Tensor"]))
    add("mul_none_second", lambda P: P.mul(_t(y3), None), ("TypeError", ["mul()", "Tensor"]))
    add("mul_one_argument", lambda P: P.mul(_t(y3)),
        ("TypeError", ["mul() missing 1 required positional argument: 'y'"]))
    add("square_two_arguments", lambda P: P.square(_t(y3), _t(y3)),
        ("TypeError", ["square() takes 1 positional argument but 2 were given"]))
    add("square_unknown_keyword", lambda P: P.square(x=_t(y3), z=_t(y3)),
        ("TypeError", ["square() got an unexpected keyword argument 'z'"]))

    # --- non-contiguous inputs ----------------------------------------------------------------
    x46 = _f32(4, 6)
    add("mul_transposed", lambda P: _eq(P.mul(_t(x23).transpose(), _t(x23.T.copy())), x23.T * x23.T), "answer")
    add("square_sliced", lambda P: _eq(P.square(_t(x46)[:, ::2]), x46[:, ::2] ** 2), "answer")
    add("add_transposed_broadcast", lambda P: _eq(P.add(_t(x23).transpose(), _t(np.float32([[1.0], [2.0],
                                                                                            [3.0]]))),
                                                  x23.T + np.float32([[1.0], [2.0], [3.0]])), "answer")

    # views opgen's Function path copies itself (ms_support.cc gather_view): an offset slice, a
    # stride-0 broadcast of a row and of a scalar, 3-d transposes (32 x 32 tiles: sizes that are
    # not multiples of 32), a transpose sliced again, an int64 slice
    x3d = _f32(3, 70, 45)

    def _bcast(a: Any, shape: tuple[int, ...]) -> Any:
        import mindspore

        return mindspore.ops.broadcast_to(_t(a), shape)

    add("square_offset_slice", lambda P: _eq(P.square(_t(x46)[1:, 2:5]), x46[1:, 2:5] ** 2), "answer")
    add("square_broadcast_row", lambda P: _eq(P.square(_bcast(x46[:1], (5, 6))),
                                              np.broadcast_to(x46[:1], (5, 6)) ** 2), "answer")
    add("square_broadcast_scalar", lambda P: _eq(P.square(_bcast(np.float32(1.5), (3, 4))),
                                                 np.full((3, 4), 2.25, np.float32)), "answer")
    for perm in ((0, 2, 1), (2, 1, 0), (2, 0, 1)):
        add(f"square_transposed_{''.join(map(str, perm))}",
            lambda P, perm=perm: _eq(P.square(_t(x3d).transpose(*perm)), x3d.transpose(perm) ** 2), "answer")
    add("square_transposed_sliced", lambda P: _eq(P.square(_t(x3d).transpose(0, 2, 1)[:, 3:40:3, 1:]),
                                                  x3d.transpose(0, 2, 1)[:, 3:40:3, 1:] ** 2), "answer")
    def square_view_of_fresh_output(P: Any) -> None:
        import mindspore

        big = _f32(96, 160)
        y = mindspore.ops.exp(mindspore.ops.mul(_t(big), 0.0001))  # queued asynchronously in PyNative
        got_t, got_s = P.square(y.transpose(1, 0)), P.square(y[5:, ::3])  # before anything syncs
        want = y.asnumpy()
        _eq(got_t, want.T * want.T)
        _eq(got_s, want[5:, ::3] * want[5:, ::3])

    add("square_view_of_fresh_output", square_view_of_fresh_output, "answer")
    i46 = np.arange(24, dtype=np.int64).reshape(4, 6)
    add("concat_int64_slices", lambda P: _eq(P.concat([_t(i46)[:, 1:], _t(i46)[:, ::3]], axis=1),
                                             np.concatenate([i46[:, 1:], i46[:, ::3]], 1)), "answer")

    def grad_transposed(P: Any) -> None:
        xt = _t(x23).transpose()
        gx, gy = _grad(P.mul, xt, _t(y3[:2]))
        _eq(gx, np.broadcast_to(y3[:2], (3, 2)))
        _eq(gy, x23.T.sum(axis=0))
    add("mul_grad_transposed", grad_transposed, "answer")

    # --- empty and 0-d tensors ----------------------------------------------------------------
    e0, e20 = np.zeros(0, np.float32), np.zeros((2, 0), np.float32)
    add("add_empty", lambda P: _eq(P.add(_t(e0), _t(e0)), e0), "answer")
    add("mul_empty_broadcast", lambda P: _eq(P.mul(_t(e20), _t(np.float32([2.0]))), e20), "answer")
    add("square_empty_grad", lambda P: _eq(_grad(P.square, _t(e20))[0], e20), "answer")
    s = np.float32(3.0)
    add("square_0d", lambda P: _eq(P.square(_t(s)), np.float32(9.0)), "answer")
    add("mul_0d_broadcast", lambda P: _eq(P.mul(_t(s), _t(x23)), s * x23), "answer")

    def grad_0d(P: Any) -> None:
        gx, gy = _grad(P.mul, _t(s), _t(x23))
        _eq(gx, np.float32(x23.sum()))
        _eq(gy, np.full((2, 3), s, np.float32))
    add("mul_grad_0d", grad_0d, "answer")

    # --- attrs: wrong type, out of range, missing -------------------------------------------------
    def scaled_ok(P: Any) -> None:
        out = P.scaled(_t(x23), 2, alpha=2.5, flip=True)
        _eq(out, -(x23 * 2.5 + 2))
        _eq(_grad(lambda t: P.scaled(t, 2, alpha=2.5, flip=True), _t(x23))[0], np.full((2, 3), -2.5, np.float32))
        _eq(P.scaled(_t(x23.astype(np.float64)), 1), x23.astype(np.float64) + 1)
    add("scaled_valid_attrs", scaled_ok, "answer")
    add("scaled_alpha_str", lambda P: P.scaled(_t(x23), 0, alpha="2"),
        ("TypeError", ["scaled()", "attr 'alpha' must be a float"]))
    add("scaled_alpha_above_range", lambda P: P.scaled(_t(x23), 0, alpha=11.0),
        ("ValueError", ["scaled()", "attr 'alpha' = 11.0 is outside [0, 10]"]))
    add("scaled_alpha_below_range", lambda P: P.scaled(_t(x23), 0, alpha=-0.5),
        ("ValueError", ["scaled()", "attr 'alpha' = -0.5 is outside [0, 10]"]))
    add("scaled_n_not_a_choice", lambda P: P.scaled(_t(x23), 3),
        ("ValueError", ["scaled()", "attr 'n' = 3 is not one of [0, 1, 2]"]))
    add("scaled_n_float", lambda P: P.scaled(_t(x23), 1.5),
        ("TypeError", ["scaled()", "attr 'n' must be an int"]))
    add("scaled_alpha_none", lambda P: P.scaled(_t(x23), 0, alpha=None),
        ("TypeError", ["scaled()", "attr 'alpha' must be a float"]))
    add("scaled_n_missing", lambda P: P.scaled(_t(x23)),
        ("TypeError", ["scaled() missing 1 required positional argument: 'n'"]))
    # both paths check attrs in Python (opgen.runtime.check_attrs) before pybind11 could coerce them
    add("scaled_flip_int", lambda P: P.scaled(_t(x23), 0, flip=1),
        ("TypeError", ["scaled()", "attr 'flip' must be a bool"]))
    add("scaled_alpha_bool", lambda P: P.scaled(_t(x23), 0, alpha=True),
        ("TypeError", ["scaled()", "attr 'alpha' must be a float"]))
    add("scaled_alpha_int", lambda P: _eq(P.scaled(_t(x23), 0, alpha=2), x23 * 2), "answer")
    add("scaled_numpy_scalars", lambda P: _eq(P.scaled(_t(x23), np.int64(1), alpha=np.float32(0.5),
                                                       flip=np.bool_(True)), -(x23 * 0.5 + 1)), "answer")

    # --- issue 16: non-Tensor inputs, int attrs beyond int64, kernel errors, graphs -------------
    a23 = _f32(2, 3)
    not_tensor = ("TypeError", ["mul()", "input 'y' must be a Tensor"])
    add("mul_numpy_input", lambda P: P.mul(_t(a23), a23), ("TypeError", ["mul()", "must be a Tensor, got ndarray"]))
    add("mul_float_input", lambda P: P.mul(_t(a23), 2.0), ("TypeError", ["mul()", "must be a Tensor, got float"]))
    add("mul_list_input", lambda P: P.mul(_t(a23), [1.0, 2.0, 3.0]), ("TypeError", ["mul()", "got list"]))
    add("concat_float_item", lambda P: P.concat([_t(a23), 2.0]),
        ("TypeError", ["concat()", "item 1 of input 'xs' must be a Tensor, got float"]))
    add("concat_none_item", lambda P: P.concat([_t(a23), None]), ("TypeError", ["concat()", "got NoneType"]))
    add("concat_empty_list", lambda P: P.concat([]), ("ValueError", ["concat()", "'xs' is an empty list"]))
    add("concat_tensor_not_list", lambda P: P.concat(_t(a23)), ("TypeError", ["concat()", "list of Tensors"]))
    add("scaled_n_beyond_int64", lambda P: P.scaled(_t(x23), 2**63),
        ("ValueError", ["scaled()", "attr 'n' = 9223372036854775808 does not fit an int attr (int64"]))
    add("scaled_alpha_beyond_float32", lambda P: P.scaled(_t(x23), 0, alpha=1e39),
        ("ValueError", ["scaled()", "does not fit a float attr (float32"]))
    idx = np.array([0, 7], np.int64)
    add("gather_index_out_of_range", lambda P: P.gather(_t(a23), _t(idx), 1).asnumpy(),
        ("ValueError", ["gather(): index 7 is out of range for axis 1 of size 3"]))

    def gather_error_then_other_op(P: Any) -> None:
        """The error is raised by the gather call, not by a later, unrelated one."""
        try:
            P.gather(_t(a23), _t(idx), 1)
        except ValueError as exc:
            assert "gather(): index 7" in str(exc), exc
        else:
            raise AssertionError("gather did not raise")
        _eq(P.mul(_t(a23), _t(a23)), a23 * a23)
    add("gather_error_raised_at_its_call", gather_error_then_other_op, "answer")
    # issue 25 item 6: a body's own exceptions name the op, and say the same on both paths
    add("kernel_throws_std_exception", lambda P: P.throw_std(_t(a23)).asnumpy(),
        ("ValueError", ["throw_std(): boom"]))
    add("kernel_throws_int", lambda P: P.throw_int(_t(a23)).asnumpy(),
        ("ValueError", ["throw_int(): the kernel threw a value that is not a std::exception (throw opgen::Error("]))

    # issue 25 item 8: a 0-d tensor has no axis to list (numpy: AxisError); every axis when none is listed
    d0 = np.float32(2)
    axis_0d = ("ValueError", ["reduce_sum(): axis 0 is out of range for a tensor of rank 0"])
    add("reduce_sum_0d_axis_list", lambda P: P.reduce_sum(_t(d0), axis=[0]).asnumpy(), axis_0d)
    add("reduce_sum_0d_all_axes", lambda P: _eq(P.reduce_sum(_t(d0)), np.sum(d0)), "answer")

    # GRAPH_MODE Cells: the Custom path rejects what is not a Tensor (a numpy array used to
    # abort the process), the Function<T> path refuses to compile into a graph (its gradients
    # were silently zero through PyExecute)
    in_graph = {"function": ("RuntimeError", ["mul()", "the Function<T> path", "Call generated.opgen_ops.mul (the "
                                                                                 "Custom path)"])}

    def graph(expect_custom: Any, name: str = "mul") -> Any:
        if name != "mul":
            return lambda p: expect_custom if p == "custom" else ("RuntimeError", [f"{name}()", "Custom path"])
        return lambda p: expect_custom if p == "custom" else in_graph["function"]
    # (inputs are checked first, so a non-Tensor is the same TypeError on both paths)
    add("graph_mul_numpy_input", lambda P: _graph_cell(P.mul, "pair", a23)(_t(a23)),
        ("TypeError", ["mul()", "must be a Tensor, got ndarray"]))
    add("graph_mul_float_input", lambda P: _graph_cell(P.mul, "pair", 2.0)(_t(a23)), not_tensor)
    add("graph_mul_none_input", lambda P: _graph_cell(P.mul, "pair", None)(_t(a23)), not_tensor)
    add("graph_concat_none_item", lambda P: _graph_cell(P.concat, "list", None)(_t(a23)),
        ("TypeError", ["concat()", "item 1 of input 'xs' must be a Tensor, got NoneType"]))
    add("graph_concat_numpy_item", lambda P: _graph_cell(P.concat, "list", a23)(_t(a23)),
        ("TypeError", ["concat()", "got ndarray"]))
    add("graph_mul_valid", lambda P: _eq(_graph_cell(P.mul, "pair", _t(a23))(_t(a23)), a23 * a23),
        graph("answer"))

    # a graph reaching the op as a value compiles what it compiles for the name (the Custom path's
    # PyNative wrapper, with its lock, was compiled as is: TypeError 'Only support jit_class instance')
    for reach in ("list", "tuple", "dict", "module"):
        add(f"graph_mul_valid_from_{reach}",
            lambda P, reach=reach: _eq(_graph_cell(P.mul, f"pair_from_{reach}", _t(a23))(_t(a23)), a23 * a23),
            graph("answer"))

        def graph_grad_from(P: Any, reach: str = reach) -> None:
            _eq(_grad(_graph_cell(P.mul, f"pair_from_{reach}", _t(a23)), _t(a23))[0], a23)
        add(f"graph_mul_grad_from_{reach}", graph_grad_from, graph("answer"))

    def graph_grad(P: Any) -> None:
        _eq(_grad(_graph_cell(P.mul, "pair", _t(a23)), _t(a23))[0], a23)
    add("graph_mul_grad", graph_grad, graph("answer"))
    add("graph_gather_index_out_of_range", lambda P: _graph_cell(P.gather, "gather", _t(idx))(_t(a23)).asnumpy(),
        graph(("RuntimeError", ["gather(): index 7 is out of range for axis 1 of size 3"]), "gather"))
    # issue 25 item 8: (0, 1) + (1, 2**62), the second a lazily initialised tensor: numpy's answer is
    # an empty (0, 2**62) array; the Custom path gives it without reading the inputs, the Function<T>
    # path reads them first (MemoryError: std::bad_array_new_length, no op named)
    def add_to_empty(P: Any) -> None:
        import mindspore
        from mindspore.common.initializer import Zero

        big = mindspore.Tensor(shape=(1, 2**62), dtype=mindspore.float32, init=Zero())
        out = P.add(_t(np.zeros((0, 1), np.float32)), big)
        assert tuple(out.shape) == np.broadcast_shapes((0, 1), (1, 2**62)), out.shape
    out_of_memory = ("MemoryError", ["add(): out of memory (std::bad_"])
    add("add_empty_result_of_a_huge_input", add_to_empty, lambda p: "answer" if p == "custom" else out_of_memory,
        auto=out_of_memory)

    # issue 25 item 8: a list of more tensors than a call takes, checked before a graph unrolls it
    # (a 1,000-tensor concat in a Cell was "Exceed function call depth limit 1000")
    too_many = ("ValueError", ["concat(): 'xs' takes 1 to 16 tensors, got "])
    add("concat_17_tensors", lambda P: P.concat([_t(y3)] * 17), too_many)
    add("graph_concat_1000_tensors", lambda P: _graph_cell(P.concat, "one")([_t(y3)] * 1000), too_many)
    # MindSpore makes a bytes constant a str while it compiles a graph, before opgen code sees it
    add("graph_gelu_bytes_attr", lambda P: _graph_cell(P.gelu, "approximate", b"none")(_t(y3)).asnumpy(),
        graph(("TypeError", ["gelu(): attr 'approximate' must be a str, got bytes"]), "gelu"),
        xfail={"custom": "MindSpore turns the bytes constant b'none' into the str 'none' while it compiles the "
                         "graph (isinstance(b'x', str) is True in a Cell); PyNative raises TypeError "
                         "(docs/robustness.md)"})
    add("gelu_bytes_attr", lambda P: P.gelu(_t(y3), approximate=b"none"),
        ("TypeError", ["gelu(): attr 'approximate' must be a str, got bytes"]))
    add("graph_reduce_sum_0d_axis_list", lambda P: _graph_cell(P.reduce_sum, "axis", [0])(_t(d0)).asnumpy(),
        graph(axis_0d, "reduce_sum"))
    add("graph_scaled_n_beyond_int64", lambda P: _graph_cell(P.scaled, "pair", 2**63)(_t(x23)),
        graph(("ValueError", ["scaled()", "int64"]), "scaled"),
        xfail=dict.fromkeys(PATHS, "MindSpore converts the int constant to int64 while compiling, before any "
                            "opgen code runs: RuntimeError 'Unable to cast Python instance of type <class 'int'> to "
                            "C++ type 'long'' (docs/robustness.md)"))

    # gradients through ops no gradient flows through: zeros for their contribution, never an error
    def nd_grads(P: Any, graph_mode: bool) -> None:
        for op, form in ((P.mul_nd, "nd_pair"), (P.sq_nd, "nd_one")):
            if graph_mode:
                fn = _graph_cell(op, form)
            elif form == "nd_pair":
                def fn(t: Any, op: Any = op) -> Any:
                    return op(t, t * 2) + t * 3
            else:
                def fn(t: Any, op: Any = op) -> Any:
                    return op(t) + t * 3
            _eq(_grad(fn, _t(a23))[0], np.full((2, 3), 3.0, np.float32))
    add("grad_through_no_gradient_ops", lambda P: nd_grads(P, False), "answer")
    add("graph_grad_through_no_gradient_ops", lambda P: nd_grads(P, True),
        lambda p: "answer" if p == "custom" else ("RuntimeError", ["mul_nd()", "Custom path"]))
    return cases


CASES = {c.name: c for c in _cases()}


def prepare(home: Path, kinds: tuple[str, ...] = ("aot", "ext")) -> Path:
    """Generate the attr package under ``home`` and build it and the repository's package
    (cached by content hash: a no-op when nothing changed).  Returns the output directory."""
    from opgen import backends
    from opgen.cli import main as opgen_main

    (home / "specs").mkdir(parents=True, exist_ok=True)
    (home / "specs" / "scaled.yaml").write_text(ATTR_SPEC, encoding="utf-8")
    for name, text in {**NO_GRAD_SPECS, **THROW_SPECS}.items():
        (home / "specs" / name).write_text(text, encoding="utf-8")
    assert opgen_main(["generate", str(home / "specs"), "-o", str(home / "out"), "-p", "misuse_ops", "-q"]) == 0
    for pkg in (home / "out" / "misuse_ops", ROOT / "generated" / "opgen_ops"):
        for kind in kinds:
            backends.build(pkg, kind, quiet=True)
    return home / "out"


def selected_paths() -> tuple[str, ...]:
    """The paths to exercise: ``$OPGEN_MISUSE_PATHS`` (comma-separated) or all."""
    env = os.environ.get("OPGEN_MISUSE_PATHS")
    return tuple(p for p in env.split(",") if p in PATHS) if env else PATHS


def _modules(attr_pkg: str, paths: set[str]) -> dict[str, Any]:
    """The repository's ops and the attr package, one namespace per path (imported once, here)."""
    import importlib
    import types

    import mindspore as ms

    ms.set_device("CPU")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    spaces = {}
    for path in paths:
        mod = importlib.import_module("generated.opgen_ops" + (".function" if path == "function" else ""))
        attr = importlib.import_module(f"{attr_pkg}.{'function' if path == 'function' else 'custom'}")
        if path != "function":  # the choice OPGEN_PYNATIVE_PATH made, checked
            want = "function" if path == "auto" else "custom"
            for pkg in (importlib.import_module("generated.opgen_ops.custom"), attr):
                assert pkg.PYNATIVE_PATH == want, f"{pkg.__name__}.PYNATIVE_PATH is {pkg.PYNATIVE_PATH}, not {want}"
        spaces[path] = types.SimpleNamespace(add=mod.add, mul=mod.mul, square=mod.square, concat=mod.concat,
                                             gather=mod.gather, reduce_sum=mod.reduce_sum, gelu=mod.gelu,
                                             scaled=attr.scaled,
                                             mul_nd=attr.mul_nd, sq_nd=attr.sq_nd, throw_std=attr.throw_std,
                                             throw_int=attr.throw_int)
    return spaces


def _child(case: Case, ns: Any, result_path: str, log_path: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        case.run(ns)
        outcome: dict[str, Any] = {"outcome": "answer"}
    except AssertionError as exc:
        outcome = {"outcome": "wrong answer", "message": str(exc)}
    except Exception as exc:  # the exception a user would see
        outcome = {"outcome": "raised", "type": type(exc).__name__, "message": str(exc)}
        traceback.print_exc()
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(outcome, fh)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--prepare"]:  # used by scripts/sanitize.sh to build before preloading ASan
        sys.path.insert(0, str(ROOT))
        prepare(Path(argv[1]), tuple(argv[2:]) or ("aot", "ext"))
        return 0
    out_file, attr_pkg, names = argv[0], argv[1], argv[2:]
    spaces = _modules(attr_pkg, {CASES[n].path for n in names})
    work = os.path.dirname(os.path.abspath(out_file))
    records = {}
    for name in names:
        case = CASES[name]
        result_path = os.path.join(work, f"{name}.result.json")
        log_path = os.path.join(work, f"{name}.log")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(case, spaces[case.path], result_path, log_path)
        _, status = os.waitpid(pid, 0)
        exit_code = os.waitstatus_to_exitcode(status)
        with open(log_path, encoding="utf-8", errors="replace") as fh:
            log = fh.read()
        try:
            with open(result_path, encoding="utf-8") as fh:
                outcome = json.load(fh)
        except (OSError, ValueError):
            outcome = {"outcome": "no result"}
        records[name] = {"exit": exit_code, "log": log[-4000:], **outcome}
    with open(out_file, "w", encoding="utf-8") as fh:
        json.dump(records, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
