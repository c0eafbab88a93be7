"""Stage 5a — api: translate an :class:`~opgen.model.Op` into the typed, frozen view the
templates read (:class:`opgen.views.OpView`: C++ signatures, dispatch rows, kernel bodies,
saved tensors, Python rules), and the neutral helpers backends build their own views with.

Every decision is made here, in Python; templates only loop and substitute.  Nothing here
knows about Jinja, and nothing in the templates knows about YAML.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any

from . import devices
from . import shapes as lang
from .check import identifiers, indent_python
from .devices import Device
from .devices import for_target as device_for_target
from .exprs import Expr
from .literals import cpp_string
from .model import Attr, Body, BuildFlags, Input, Op, Output, attr_cpp_type
from .views import AttrView, BackwardBlock, BodyView, InputView, OpView, OutputView, ReferenceView, RowView, SavedView

LINE_RESET = "//@@opgen-line-reset@@"
"""Marker the renderer replaces with ``#line N "generated file"`` after a spliced YAML body."""


def py_string(text: str) -> str:
    """A Python string literal for ``text``."""
    return repr(text)


def docstring_text(text: str) -> str:
    """``text`` made safe inside a ``\"\"\"`` docstring: the docstring's value is ``text`` again.

    Backslashes are doubled (so ``\\n`` or ``\\N`` stay two characters), a ``\"`` next to another
    or at the end is escaped (no ``\"\"\"`` can end the docstring early), and control characters
    other than newline and tab become ``\\xNN`` escapes (a NUL byte is not valid Python source).
    """
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"' and (text[i - 1:i] == '"' or text[i + 1:i + 2] in ('"', "")):
            out.append('\\"')
        elif (ord(ch) < 0x20 and ch not in "\n\t") or ord(ch) == 0x7F or ch in "\u2028\u2029\x85":
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def doc_block(text: str, indent: str = "    ") -> str:
    """A Python docstring body: escaped (:func:`docstring_text`), re-indented."""
    lines = docstring_text(text.strip("\n")).splitlines() or [""]
    return "\n".join((indent + ln) if ln.strip() else "" for ln in lines)


def cpp_comment(text: str) -> str:
    """``text`` made safe as the rest of a ``//`` comment: one line, never ending in a backslash
    (which would splice the next source line into the comment)."""
    one_line = " ".join(text.split())
    return one_line + " (sic)" if one_line.endswith(("\\", "??/")) else one_line


def indent_body(text: str, prefix: str = "  ") -> str:
    """A YAML C++ body re-indented for splicing (trailing blank lines dropped)."""
    return "\n".join(prefix + ln if ln.strip() else "" for ln in text.rstrip().splitlines())


def line_directive(body: Body) -> str:
    """``#line`` pointing at the first line of a YAML body."""
    return f"#line {max(body.location.line, 1)} {cpp_string(body.location.file)}"


def cpp_float(value: float, float_cpp: str = "float") -> str:
    """C++ expression of type ``float_cpp`` (``float`` or ``double``) for ``value``, infinities and
    NaN included."""
    v = float(value)
    if math.isnan(v):
        return f"std::numeric_limits<{float_cpp}>::quiet_NaN()"
    if math.isinf(v):
        return ("-" if v < 0 else "") + f"std::numeric_limits<{float_cpp}>::infinity()"
    return f"{v!r}f" if float_cpp == "float" else repr(v)


def py_value(value: Any) -> str:
    """Python source for a plain value (scalars, lists, tuples, dicts); infinities and NaN as
    ``float('inf')`` / ``float('nan')`` (their ``repr`` is a bare, undefined name)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "float('nan')" if math.isnan(value) else ("-" if value < 0 else "") + "float('inf')"
    if isinstance(value, list):
        return "[" + ", ".join(py_value(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(py_value(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_value(k)}: {py_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def cpp_literal(attr: Attr, value: Any, float_cpp: str = "float") -> str:
    """C++ literal for an attr value of the attr's type (lists of any element type included), its
    floats of type ``float_cpp``."""
    return _cpp_value(attr.type, value, float_cpp)


def _cpp_value(t: str, value: Any, float_cpp: str = "float") -> str:
    if t == "int":
        return f"int64_t{{{int(value)}}}"
    if t == "float":
        return cpp_float(value, float_cpp)
    if t == "bool":
        return "true" if value else "false"
    if t == "str":
        return f"std::string({cpp_string(str(value))})"
    elem = t[len("list["):-1]  # list[int], list[float], list[bool], list[str]
    return attr_cpp_type(t, float_cpp) + "{" + ", ".join(_cpp_value(elem, v, float_cpp) for v in value) + "}"


def py_literal(attr: Attr, value: Any) -> str:
    """Python literal for an attr value (lists become tuples: defaults are immutable)."""
    if attr.type == "float":
        return py_value(float(value))
    if attr.is_nested:
        return py_value(tuple(tuple(float(v) if attr.leaf_type == "float" else v for v in r) for r in value))
    if attr.is_list:
        items = [float(v) if attr.type == "list[float]" else v for v in value]
        return py_value(tuple(items))
    return repr(value)


PY_ATTR_TYPE = {
    "int": "int",
    "float": "float",
    "bool": "bool",
    "str": "str",
    "list[int]": "Sequence[int]",
    "list[float]": "Sequence[float]",
    "list[bool]": "Sequence[bool]",
    "list[str]": "Sequence[str]",
    "list[list[int]]": "Sequence[Sequence[int]]",
    "list[list[float]]": "Sequence[Sequence[float]]",
}


PY_BUILTINS_CALLED = ("int", "len", "list", "range", "sum", "tuple", "zip")
"""Builtins the generated Python calls in functions whose parameters are an op's inputs and attrs."""


def builtin_names(user_names: Sequence[str]) -> dict[str, str]:
    """How generated code spells each of :data:`PY_BUILTINS_CALLED`: plainly, or as
    ``_builtins.<name>`` where an input or attr of that name shadows it (an input named ``list``)."""
    return {b: f"_builtins.{b}" if b in user_names else b for b in PY_BUILTINS_CALLED}


def _sym(name: str) -> str:
    """C++ name of an input's ``opgen::sym`` shape in generated shape code."""
    return f"opgen_s_{name}"


def _facts(op: Op, node: lang.Node) -> tuple[list[str], list[str]]:
    """The inputs and attrs a contract reads, in declaration order (its violation message shows them)."""
    ins, ats = lang.tensors_used(node), lang.attrs_used(node)
    return [x.name for x in op.inputs if x.name in ins], [a.name for a in op.attrs if a.name in ats]


def shape_prelude_cpp(op: Op, present: dict[str, str]) -> list[str]:
    """C++ statements that check ``op``'s contracts (``requires``), in order, over the inputs'
    ``opgen::sym`` shapes (``opgen_s_<name>``, declared by the caller) and ``attrs``; a contract
    that mentions an optional input is checked only when ``present[name]`` (a C++ bool) holds."""
    lines = []
    for c in op.requires:
        cond = lang.to_cpp(c.node, {n: _sym(n) for n in lang.tensors_used(c.node)}, lambda a: f"attrs.{a}")
        ins, ats = _facts(op, c.node)
        facts = [f"opgen::sym::fact({cpp_string(n)}, {_sym(n)})" for n in ins]
        facts += [f"opgen::sym::fact_value({cpp_string(a)}, attrs.{a})" for a in ats]
        line = f"opgen::sym::require([&] {{ return {cond}; }}, {cpp_string(c.text)}, {{{', '.join(facts)}}});"
        guard = " && ".join(present[n] for n in lang.optional_inputs(c.node))
        lines.append(f"if ({guard}) {line}" if guard else line)
    return lines


def _noexcept(cpp: str) -> str:
    """The noexcept specifier of a generated elementwise lambda: only an integer ``/`` can throw
    (opgen::math::div), and lambdas that cannot throw run in SIMD loops (kernel.h simd_loop)."""
    return "noexcept(!std::is_integral_v<C>) " if "opgen::math::div(" in cpp else "noexcept "


def _functor(device: Device, params: str, cpp: str) -> str:
    """An elementwise expression as ``device``'s functor over compute-type scalars (the CPU's
    ``[&](C x) noexcept -> C {...}``, CUDA's ``[=] __host__ __device__ (C x) -> C {...}``)."""
    return f"{device.lambda_head()}({params}) {device.lambda_tail(_noexcept(cpp))}-> C {{ return {cpp}; }}"


def _isa_cap(expr: Expr) -> str:
    """The template argument of ``opgen::map``/``map_reduce_to`` for ``expr``: the AVX2 cap of a
    memory-bound loop (kernel.h ``kMemoryBoundIsa``), none for one that computes."""
    return "<opgen::kMemoryBoundIsa>" if expr.memory_bound else ""


def shape_cpp(o: Output) -> str:
    """C++ expression (an ``opgen::sym::List``) of output ``o``'s shape over ``opgen_s_<input>``
    and ``attrs``: the Function<T> path's inference and the aot ``InferShape``."""
    return lang.to_cpp(o.shape.node, {n: _sym(n) for n in lang.tensors_used(o.shape.node)}, lambda a: f"attrs.{a}")


def shape_check_py(op: Op) -> list[str]:
    """Python statements (a function body, inputs bound to their shapes and attrs to their values)
    that check ``op``'s contracts and compute its output shapes, raising ``ValueError`` that names
    the op; the Custom path runs them before a call whose shapes are all known."""
    lines = ["try:"]
    for c in op.requires:
        ins, ats = _facts(op, c.node)
        facts_in = "[" + "".join(f"({n!r}, {n}), " for n in ins) + "]"
        facts_at = "[" + "".join(f"({a!r}, {a}), " for a in ats) + "]"
        cond = lang.to_python(c.node)
        guard = "".join(f"{n} is None or " for n in lang.optional_inputs(c.node))
        lines.append(f"    if not ({guard}_rt.holds(lambda: {cond})):")
        lines.append(f"        raise _rt.violation({c.text!r}, {facts_in}, {facts_at})")
    outs = ", ".join(f"_rt.check_output({lang.to_python(o.shape.node)}, {o.name!r})" for o in op.outputs)
    lines.append(f"    return ({outs},)" if outs else "    return ()")
    lines.append("except ValueError as opgen_exc:")
    lines.append(f"    raise ValueError(f\"{op.name}(): {{opgen_exc}}\") from None")
    return lines


def output_shapes_py(op: Op) -> str:
    """Python expression of the op's output shapes (one list, or a tuple of lists for several
    outputs) over inputs bound to their shapes and attrs to their values: the Custom path's
    ``out_shape`` when every shape is known (its contracts were checked just before)."""
    outs = [lang.to_python(o.shape.node) for o in op.outputs]
    return outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ",)"


def _rows_text(op: Op, target: str) -> str:
    """The dtype_format rows of ``target`` in words, for error messages: ``(x=float32, out=float32), ...``."""
    names = [x.name for x in op.inputs] + [o.name for o in op.outputs]
    parts = []
    for r in op.rows_for(target):
        parts.append("(" + ", ".join(f"{n}={r.dtype(i).name}" for i, n in enumerate(names)) + ")")
    return ", ".join(parts)


PY_TENSOR_TYPE = {"required": "Tensor", "optional": "Tensor or None", "dynamic": "list of Tensor"}


def attr_key(attrs: Sequence[Attr]) -> str:
    """Python expression of the key under which a call's attr values, once checked, are cached
    (``runtime.check_attrs_once``): each value with its class, so that ``True``, ``1`` and ``1.0``
    (equal and of equal hash) stay apart; list values through ``runtime.list_key``."""
    parts = [f"_rt.list_key({a.name})" if a.is_list else f"{a.name}.__class__, {a.name}"
             for a in attrs]
    return ", ".join(parts) + ("," if len(parts) == 1 and attrs[0].is_list else "")


def grad_is_dout(op: Op) -> frozenset[str]:
    """Inputs whose gradient is the incoming gradient itself: an ``elementwise:`` op with one
    output whose ``grad`` of the input is exactly ``dout`` (add's x and y, sub's x). Where such
    an input has the output's shape and dtype, the Function<T> path's Backward returns ``dout``
    itself, as MindSpore's own bprops of add and sub do, instead of copying it into a new
    tensor; a broadcast input still sums ``dout`` down to its shape in the kernel."""
    if op.elementwise is None or len(op.outputs) != 1:
        return frozenset()
    dout = "d" + op.outputs[0].name
    return frozenset(name for name, expr, _ in op.elementwise.grads
                     if expr.names == (dout,) and expr.text.strip() == dout)


def shared_grad_sources(op: Op) -> dict[str, str]:
    """Inputs of an ``elementwise:`` op whose gradient may be summed from an earlier input's:
    each maps to the first earlier (in input order) required, differentiable input whose ``grad`` is the same
    parsed expression (equal C++ text; bias_gelu's x and bias). The backward kernel then
    evaluates the expression once, for the earlier input, and where that gradient has the
    output's shape and the compute type, sums it down to the later input's shape (the
    reduction a broadcast input's gradient gets anyway) instead of evaluating it again. An
    expression that is one name (add's ``dout``) computes nothing and is left alone: summing
    ``dx`` costs what summing ``dout`` does."""
    if op.elementwise is None or len(op.outputs) != 1:
        return {}
    grads = {name: expr for name, expr, _ in op.elementwise.grads}
    seen: dict[str, str] = {}
    out: dict[str, str] = {}
    for x in op.inputs:  # the backward fills the gradients in input order
        expr = grads.get(x.name)
        if expr is None or x.kind != "required" or not x.differentiable or expr.names == (expr.text.strip(),):
            continue
        if expr.cpp in seen:
            out[x.name] = seen[expr.cpp]
        else:
            seen[expr.cpp] = x.name
    return out


def dout_grad_inputs(op: Op) -> frozenset[str]:
    """Inputs whose gradient may be ``dout`` itself where they have the output's shape: required,
    differentiable, with gradient exactly ``dout`` (:func:`grad_is_dout`: add's x and y, sub's
    x) and the output's dtype in every dtype_format row. The PyTorch autograd kernel's backward
    returns ``dout`` for such an input when its shape is dout's, as torch's own add and sub do,
    and runs the backward kernel only for the other gradients (add's broadcast bias)."""
    same = grad_is_dout(op)
    n = len(op.inputs)
    return frozenset(x.name for i, x in enumerate(op.inputs)
                     if x.kind == "required" and x.differentiable and x.name in same
                     and all(r.dtype(i) == r.dtype(n) for r in op.rows))


def every_grad_is_dout(op: Op) -> bool:
    """Whether every input is one of :func:`dout_grad_inputs` (add, broadcast_to): where no input
    broadcasts, MindSpore's Custom-path bprop then returns ``dout`` for every input without
    running the backward kernel, as MindSpore's own add does."""
    return bool(op.inputs) and len(dout_grad_inputs(op)) == len(op.inputs)


def can_fail(op: Op) -> bool:
    """Whether the op's kernel may raise an error the Python wrapper cannot check before launch
    (data-dependent: an index out of range, an integer division by zero), so that its Custom
    path launches blocking in PyNative and the error reaches the call that caused it: a C++
    body that throws (or raises on the device: ``opgen::raise_in_kernel``), or an elementwise
    ``/`` over an integer row."""
    if op.kernel is not None:
        return any("throw" in b.text or "raise_in_kernel" in b.text for b in op.kernel.all_bodies)
    if op.elementwise is None:  # pragma: no cover - a spec has one body
        return False
    exprs = [op.elementwise.forward, *(e for _, e, _ in op.elementwise.grads)]
    integer_rows = any(not r.dtype(i).is_float for r in op.rows for i in range(len(r.columns)))
    return integer_rows and any("/" in e.text for e in exprs)


def _kernel_signatures(inputs: Sequence[Input], outputs: Sequence[Output], diff: Sequence[str],
                       cpp_types: Sequence[str]) -> dict[str, str]:
    """Parameter types of ``forward`` and ``backward`` for one dtype row (explicit instantiations).

    ``<op>_kernel.cc`` instantiates the kernel templates once per row with these; the aot and
    Function<T> units see only the declarations (``<op>_kernel_decl.h``), never the bodies.
    """
    t = dict(zip([x.name for x in inputs] + [o.name for o in outputs], cpp_types))

    def view(x: Input, direction: str) -> str:
        return f"const opgen::{direction}{'List' if x.kind == 'dynamic' else ''}<{t[x.name]}> &"

    ins = [view(x, "Out" if x.writes else "In") for x in inputs]  # a 'writes: true' input is written
    by_name = {x.name: x for x in inputs}
    fw = ["const Attrs &", *ins, *(f"const opgen::Out<{t[o.name]}> &" for o in outputs)]
    bw = ["const Attrs &", *ins, *(f"const opgen::In<{t[o.name]}> &" for o in outputs),
          *(f"const opgen::In<{t[o.name]}> &" for o in outputs), *(view(by_name[n], "Out") for n in diff)]
    return {"forward_params": ", ".join(fw), "backward_params": ", ".join(bw)}


def op_context(op: Op, package: str, target: str, float_attr: str = "float") -> OpView:
    """The framework-neutral view of ``op`` for templates (:class:`opgen.views.OpView`).

    Args:
        op: a checked op.
        package: the generated package's name (its C++ namespace).
        target: the dtype_format target whose rows the view has (``CPU``; ``GPU`` for the CUDA
            kernel layer): its device lowers the ``elementwise:`` expressions.
        float_attr: the C++ type of float attrs in the kernel layer (:attr:`OpView.float_attr_cpp`).

    Raises:
        ValueError: no device builds ``target`` (``opgen validate`` refuses such rows first).
    """
    device = device_for_target(target)
    if device is None:
        raise ValueError(f"op '{op.name}': no device builds target {target!r}")
    del package  # the same view serves every package name (templates get ``package`` themselves)
    inputs = list(op.inputs)
    outputs = list(op.outputs)
    attrs = list(op.attrs)
    in_names = [x.name for x in inputs]
    out_names = [o.name for o in outputs]
    attr_names = [a.name for a in attrs]
    diff = [x.name for x in op.differentiable_inputs]
    kind = {x.name: x.kind for x in inputs}
    flexible = any(x.kind != "required" for x in inputs)
    # the backward is called with the fixed tensors, then the attrs, then a dynamic input's
    # tensors (Function<T>::Forward's order; NeedsInputGrad counts tensors only, in that order)
    fixed = [x.name for x in inputs if x.kind != "dynamic"]
    dynamic = next((x.name for x in inputs if x.kind == "dynamic"), None)

    rows = []
    for ri, r in enumerate(op.rows_for(target)):
        cols = [r.dtype(i) for i in range(len(r.columns))]
        cpp_types = tuple(c.cpp for c in cols)
        rows.append(RowView(
            index=ri,
            columns=tuple(r.columns),
            dtype_names=tuple(c.name for c in cols),
            cpp_types=cpp_types,
            in_cpp_types=cpp_types[:len(inputs)],
            out_cpp_types=cpp_types[len(inputs):],
            **_kernel_signatures(inputs, outputs, diff, cpp_types),
        ))

    # ---- kernel bodies -----------------------------------------------------------------
    # (void): a body need not read every attr (nvcc warns of an unused reference, g++ does not)
    attr_prelude = tuple(f"const {attr_cpp_type(a.type, float_attr)} &{a.name} = attrs.{a.name}; (void){a.name};"
                         for a in attrs)
    fw_lines: list[str] = []
    bw_blocks: list[BackwardBlock] = []
    used_by_grad: dict[str, set[str]] = {}
    single_body_uses: set[str] = set()
    if op.elementwise is not None and outputs:
        ew = op.elementwise
        out = outputs[0]
        fw_names = list(ew.forward.names)
        fw_tensors = [n for n in fw_names if n in in_names]
        params = ", ".join(f"C {n}" for n in fw_tensors)
        args = "".join(f", {n}" for n in fw_tensors)
        # computed in the common type of the output and every input (x > y: floats compared,
        # then stored as bool), like numpy's promotion
        common = "opgen::common_compute_t<" + ", ".join(f"{n}_t" for n in [out.name, *in_names]) + ">"
        fw_lines = [
            f"using C = {common};",
            f"// {out.name} = {ew.forward.text}",
            f"opgen::map{_isa_cap(ew.forward)}({out.name}, {_functor(device, params, ew.forward.cpp)}{args});",
        ]
        grads = {g[0]: g[1] for g in ew.grads}
        bw_head = (f"using C = {common};", f"const opgen::Shape iter_shape = {out.grad_name}.shape_vector();")
        bw_blocks.append(BackwardBlock("", bw_head, None, None))
        sources = shared_grad_sources(op)
        for x in inputs:
            if x.name not in grads:
                continue
            expr = grads[x.name]
            tensors = [n for n in expr.names if n not in attr_names]
            used_by_grad[x.name] = set(tensors)
            p = ", ".join(f"C {n}" for n in tensors)
            a = "".join(f", {n}" for n in tensors)
            compute = (f"opgen::map_reduce_to{_isa_cap(expr)}(d{x.name}, iter_shape, "
                       f"{_functor(device, p, expr.cpp)}{a});")
            src = sources.get(x.name)
            if src is None:
                lines: tuple[str, ...] = (f"// d{x.name} = {expr.text}", compute)
            else:
                # the same expression as d<src>, already computed over the output's shape: summed
                # from it (bit for bit the same sums) instead of evaluated a second time
                lines = (
                    f"// d{x.name} = {expr.text}",
                    f"// (d{src}'s expression: summed from d{src} where d{src} has the output's shape)",
                    f"if (d{src} && std::is_same_v<{src}_t, C> && d{src}.shape_vector() == iter_shape) {{",
                    f"  opgen::map_reduce_to<opgen::kMemoryBoundIsa>(d{x.name}, iter_shape, "
                    f"{_functor(device, 'C g', 'g')}, opgen::as_in(d{src}));",
                    "} else {",
                    f"  {compute}",
                    "}",
                )
            bw_blocks.append(BackwardBlock("d" + x.name, lines, None, None))
    else:
        assert op.kernel is not None
        k = op.kernel.for_target(target)  # this target's own bodies (kernel.GPU), else the default

        def block(guard: str, body: Body) -> BackwardBlock:
            return BackwardBlock(guard, (), indent_body(body.text, "    " if guard else "  "), line_directive(body))

        if k.backward is not None:
            bw_blocks.append(block("", k.backward))
        for name, body in k.backward_per_input:
            bw_blocks.append(block(f"!d{name}.empty()" if kind[name] == "dynamic" else f"d{name}", body))
        # what the backward reads, over every target's bodies: the framework glue keeps the same
        # tensors whichever device's kernel runs the backward
        targets = [op.kernel, *(op.kernel.for_target(t.target) for t in op.kernel.targets)]
        for kt in targets:
            if kt.backward is not None:
                single_body_uses |= identifiers(kt.backward.text)
            for name, body in kt.backward_per_input:
                used_by_grad[name] = used_by_grad.get(name, set()) | identifiers(body.text)
        if k.save is not None:
            single_body_uses, used_by_grad = set(k.save), {}
    views = {n for n, _ in op.kernel.grad_views} if op.kernel is not None else set()
    all_views = bool(views) and all(x.name in views for x in op.differentiable_inputs)
    if all_views:
        single_body_uses, used_by_grad = set(), {}  # Backward runs no kernel: nothing to keep
    else:
        used_by_grad = {g: used for g, used in used_by_grad.items() if g not in views}

    # ---- what the backward needs: saved tensors and their conditions ---------------------
    saveable = [n for n in fixed] + out_names + ([dynamic] if dynamic else [])
    saved: list[SavedView] = []

    def keep(name: str, condition: str) -> None:
        saved.append(SavedView(name, len(saved), condition, name == dynamic, name in kind,
                               out_names.index(name) if name in out_names else -1))

    for name in saveable:
        if single_body_uses:
            if name in single_body_uses:
                keep(name, " || ".join(f"need_{d}" for d in diff) or "false")
            continue
        needers = [g for g, used in used_by_grad.items() if name in used]
        if needers:
            keep(name, " || ".join(f"need_{g}" for g in needers))

    def view_type(name: str, direction: str) -> str:
        base = {"dynamic": "List"}.get(kind.get(name, "required"), "")
        return f"opgen::{direction}{base}<{name}_t>"

    writes = {x.name for x in inputs if x.writes}
    written = [x.name for x in op.written_inputs]

    def py_default(x_name: str) -> str:
        return " = None" if kind[x_name] == "optional" else ""

    attr_params = [f"{a.name}: {PY_ATTR_TYPE[a.type]}" + (f" = {py_literal(a, a.default)}" if a.has_default else "")
                   for a in attrs]
    # an attr without a default after one with a default: it and all later attrs are keyword-only
    kw_at = next((i for i, a in enumerate(attrs) if not a.has_default and any(b.has_default for b in attrs[:i])),
                 None)
    if kw_at is not None:
        attr_params.insert(kw_at, "*")
    py_params = [x.name + py_default(x.name) for x in inputs] + attr_params
    names = builtin_names(in_names + attr_names)
    same = grad_is_dout(op)
    rows_text = _rows_text(op, target)
    return OpView(
        name=op.name,
        class_name=op.class_name,
        file=op.file,
        doc=op.doc.strip(),
        doc_py=doc_block(op.doc),
        inputs=tuple(
            InputView(
                name=x.name,
                doc=" ".join(x.doc.split()),
                index=i,
                differentiable=x.differentiable,
                kind=x.kind,
                optional=x.kind == "optional",
                dynamic=x.kind == "dynamic",
                py_type=PY_TENSOR_TYPE[x.kind],
                in_view=view_type(x.name, "Out" if x.name in writes else "In"),
                out_view=view_type(x.name, "Out"),
                tensor_index=fixed.index(x.name) if x.kind != "dynamic" else len(fixed),
                grad_is_dout=x.kind == "required" and x.name in same,
                grad_view=x.name in views,
                writes=x.name in writes,
                written=x.name in written,
                aliased_by=next((o.name for o in outputs if o.aliases == x.name), ""),
            )
            for i, x in enumerate(inputs)
        ),
        outputs=tuple(
            OutputView(
                name=o.name,
                doc=" ".join(o.doc.split()),
                index=i,
                column=len(inputs) + i,
                grad_name=o.grad_name,
                differentiable=o.differentiable,
                shape_cpp=shape_cpp(o),
                shape_text=o.shape.text,
                dtype_rule=o.dtype,
                dtype_input=o.dtype if o.dtype in in_names else "",
                dtype_input_dynamic=kind.get(o.dtype) == "dynamic",
                aliases=o.aliases or "",
            )
            for i, o in enumerate(outputs)
        ),
        attrs=tuple(
            AttrView(
                name=a.name,
                type=a.type,
                cpp_type=attr_cpp_type(a.type, float_attr),
                py_type=PY_ATTR_TYPE[a.type],
                has_default=a.has_default,
                py_default=py_literal(a, a.default) if a.has_default else "",
                cpp_default=cpp_literal(a, a.default, float_attr) if a.has_default else "",
                doc=" ".join(a.doc.split()),
                range_py=py_value(list(a.range)) if a.range else "None",
                choices_py=py_value(tuple(a.choices)) if a.choices else None,
                is_list=a.is_list,
                item_type=a.item_type if a.is_list else a.type,
                is_nested=a.is_nested,
                leaf_type=a.leaf_type,
            )
            for a in attrs
        ),
        in_names=tuple(in_names),
        out_names=tuple(out_names),
        attr_names=tuple(attr_names),
        kinds=tuple(x.kind for x in inputs),
        flexible=flexible,
        fixed_names=tuple(fixed),
        dynamic=dynamic,
        diff_names=tuple(diff),
        diff_indices=tuple(in_names.index(n) for n in diff),
        nondiff_names=tuple(n for n in in_names if n not in diff),
        tparams=tuple(f"{n}_t" for n in in_names + out_names),
        rows=tuple(rows),
        rows_text=rows_text,
        rows_cpp=cpp_string(rows_text),
        attr_prelude=attr_prelude,
        fw_lines=tuple(fw_lines),
        fw_body=None if op.elementwise is not None or op.kernel is None
        else _body_view(op.kernel.for_target(target).forward),
        bw_blocks=tuple(bw_blocks),
        has_backward=op.has_backward,
        all_grad_views=all_views,
        can_fail=can_fail(op),
        grad_flows=op.has_backward and any(o.differentiable for o in op.outputs),
        saved=tuple(saved),
        saved_names=tuple(sorted(s.name for s in saved)),
        reference=_reference(op),
        grad_reference=_grad_reference(op),
        single_output=len(outputs) == 1,
        includes=tuple(h if h[:1] in "<\"" else f'"{h}"' for h in op.build.includes),
        shape_check_py=tuple(shape_check_py(op)),
        output_shapes_py=output_shapes_py(op),
        has_contracts=bool(op.requires),
        py_params=", ".join(py_params),
        call_args=", ".join(in_names + [f"{a}={a}" for a in attr_names]),
        attr_key=attr_key(attrs),
        primitive_params="".join(p + ", " for p in attr_params),
        builtin=names,
        shadows_builtins=any(v != k for k, v in names.items()),
        has_list_attr=any(a.is_list for a in attrs),
        has_effects=op.has_effects,
        written_names=tuple(written),
        fw_roles="".join("w" if n in written else "-" for n in in_names) + "o" * len(out_names),
        bw_roles="-" * (len(in_names) + 2 * len(out_names)) + "g" * len(diff),
        no_outputs=not outputs,
        float_attr_cpp=float_attr,
    )


def device_contexts(op: Op, package: str, float_attr: str = "float") -> list[tuple[Device, OpView]]:
    """The view of ``op`` for each device other than the CPU that its rows name (CUDA for ``GPU``
    rows), in device order: what the kernel layer and each backend's device glue render from
    (``float_attr``: :func:`op_context`'s)."""
    return [(d, op_context(op, package, d.target, float_attr)) for d in devices.of_rows([r.target for r in op.rows])
            if d.name != "cpu"]


def _body_view(body: Body) -> BodyView:
    """A forward body as the kernel template splices it (indented, after its ``#line``)."""
    return BodyView(indent_body(body.text), line_directive(body))


def _reference(op: Op) -> ReferenceView | None:
    params = tuple(x.name for x in op.inputs) + tuple(a.name for a in op.attrs)
    if op.reference is not None:
        return ReferenceView(params, indent_python(op.reference.text))
    if op.elementwise is not None and op.outputs:
        # an expression may use fewer inputs than the shape rule broadcasts (forward: x with
        # shape broadcast(x, y)): the result takes the output's shape, like the kernel's.
        return ReferenceView(params, f"    return np.broadcast_to({op.elementwise.forward.numpy}, "
                                     f"{_reference_shape(op)}).copy()")
    return None


def _reference_shape(op: Op) -> str:
    """numpy expression of an elementwise op's output shape, from its shape expression (the
    array arguments are bound to the input names)."""
    return "tuple(" + lang.to_python(op.outputs[0].shape.node, tensor=lambda n: f"np.shape({n})") + ")"


def _grad_reference(op: Op) -> ReferenceView | None:
    if op.elementwise is None or not op.elementwise.grads or op.has_effects:
        return None
    out = op.outputs[0]
    params = (*(x.name for x in op.inputs), out.name, out.grad_name, *(a.name for a in op.attrs))
    lines = []
    grads = {g[0]: g[1] for g in op.elementwise.grads}
    results = []
    for x in op.inputs:
        if x.name in grads:
            lines.append(
                f"    d{x.name} = _sum_to_shape(np.broadcast_to({grads[x.name].numpy}, "
                f"np.shape({out.grad_name})), np.shape({x.name}))"
            )
            results.append(f"d{x.name}")
        else:
            results.append("None")
    lines.append("    return (" + ", ".join(results) + ("," if len(results) == 1 else "") + ")")
    return ReferenceView(params, "\n".join(lines))


def build_flags(ops: Sequence[Op], package_dir: str, package: BuildFlags | None = None) -> str:
    """``csrc/build.json`` for :func:`opgen.build.user_flags`, or ``""`` when nobody adds flags.

    Paths (include dirs, ``-L`` dirs, libraries given as files) become relative to the package directory:
    a spec's are written relative to its own directory, the package's relative to where opgen
    runs. Absolute paths stay as they are.
    """

    def rebase(path: str, base: str) -> str:
        if os.path.isabs(path):
            return path
        return os.path.relpath(os.path.join(base, path), package_dir).replace(os.sep, "/")

    def entry(flags: BuildFlags, base: str) -> dict[str, list[str]]:
        out = {
            "cflags": list(flags.cflags),
            "include_dirs": [rebase(d, base) for d in flags.include_dirs],
            "ldflags": ["-L" + rebase(f[2:], base) if f.startswith("-L") and len(f) > 2 else f for f in flags.ldflags],
            "libraries": [rebase(lib, base) if "/" in lib else lib for lib in flags.libraries],
        }
        return {k: v for k, v in out.items() if v}

    data: dict[str, Any] = {}
    if package is not None and entry(package, "."):
        data["package"] = entry(package, ".")
    ops_flags = {op.name: entry(op.build, os.path.dirname(op.file)) for op in sorted(ops, key=lambda o: o.name)}
    if any(ops_flags.values()):
        data["ops"] = {name: f for name, f in ops_flags.items() if f}
    return json.dumps(data, indent=2, sort_keys=True) + "\n" if data else ""
