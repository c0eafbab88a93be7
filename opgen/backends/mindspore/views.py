"""The MindSpore backend's typed view of an op: what its templates need beyond :class:`~opgen.views.OpView`.

``templates/mindspore/*.j2`` receive ``op`` (the neutral :class:`~opgen.views.OpView`) and ``ms``
(an :class:`MsOpView`; package-wide templates loop over ``ops``, a list of :class:`MsOpView`,
each holding its ``op``). Every decision of the two paths is made here: the dtype enums of the
``Function<T>`` dispatch, its save slots and ``saved_data`` keys, the aot symbol names and flat
parameter counts, the Custom path's bprop wiring and last-call cache layout, and the C++ spelling
of gradient views (``opgen/ms.h``). Templates only loop and substitute.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from ... import shapes as lang
from ...api import _sym, every_grad_is_dout, op_context, shape_cpp, shape_prelude_cpp
from ...model import Attr, Op
from ...runtime.mindspore import MAX_CALL_TENSORS
from ...views import InputView, OpView, RowView
from .facts import TARGET

DONE_COLUMN = "F32_Default"
"""The dtype_format column of the placeholder output of an op that writes an input in place: an
``ops.Custom`` primitive has an output (MindSpore rejects one without), and a graph keeps the op
by assigning that output to a sink Parameter (``graph.keep``)."""
DONE_TYPE = "float"
"""Its C++ element type in the aot kernel."""
DONE_CPP = "opgen::aot::done"
"""The aot helper that fills it (one element, 0)."""
GRAD_VIEW_CPP = {"split": "opgen::ms::split_view", "unreduce": "opgen::ms::unreduce_view"}
"""The ``opgen/ms.h`` call of each gradient view geometry (:data:`opgen.shapes.GradViewKind`)."""
GRAD_VIEW_PY = {"split": "_graph.split_view", "unreduce": "_graph.unreduce_view"}
"""The ``opgen.runtime.mindspore_graph`` call of each (graph-parseable ``ops.narrow`` / ``ops.broadcast_to``)."""


def grad_view_call(kind: lang.GradViewKind, python: bool) -> str:
    """The function that makes a gradient view of geometry ``kind``, in C++ or in Python."""
    if kind == "split" or kind == "unreduce":
        return GRAD_VIEW_PY[kind] if python else GRAD_VIEW_CPP[kind]
    assert_never(kind)


@dataclass(frozen=True)
class MsInput:
    """One input, as the two MindSpore paths pass it."""

    name: str
    host_line: str
    """Function<T> Forward: the statement binding its host tensor(s) ``<name>_h``."""
    need_line: str
    """Function<T> Forward: ``need_<name>`` (whether a gradient is asked for it); "" for a
    non-differentiable input."""
    count: str
    """aot: how many flat parameters it brings (``1``, or ``attrs.opgen_layout[i]``)."""
    grad_view_cpp: str
    """Function<T> Backward: its gradient as a view of the output gradient ("" for none)."""


@dataclass(frozen=True)
class MsOutput:
    """One output."""

    name: str
    dtype_py: str
    """Custom path's ``out_dtype``: the input dtype it follows, or ``ms.<dtype>``."""


@dataclass(frozen=True)
class MsRow:
    """One dtype_format row, as both paths dispatch on it."""

    row: RowView
    """The neutral row (columns, C++ types)."""
    index: int
    in_enums: tuple[str, ...]
    """``mindspore::TypeId`` enumerators of the inputs."""
    out_enums: tuple[str, ...]
    bw_columns: tuple[str, ...]
    """The backward aot op's row: inputs, outputs, output gradients, input gradients."""
    bw_dtype_names: tuple[str, ...]
    """Its element type names (the aot backward's dispatch)."""
    dtype_match: str
    """Function<T>: the C++ conditions (`` && opgen::ms::dtype_is(...)``) that pick this row."""
    fw_outputs: tuple[str, ...]
    """Function<T> Forward: the statements allocating the outputs."""
    fw_call: str
    """Function<T> Forward: the kernel call."""
    bw_allocs: tuple[str, ...]
    """Function<T> Backward: the statements allocating the gradients asked for (relative indent)."""
    bw_call: str
    """Function<T> Backward: the kernel call."""
    aot_fw_takes: tuple[str, ...]
    """aot forward: the views taken from the flat parameters."""
    aot_bw_takes: tuple[str, ...]
    """aot backward: the same."""
    custom_dtype_names: tuple[str, ...] = ()
    """The element type names of :attr:`custom_columns` (the aot forward's dispatch)."""
    custom_columns: tuple[str, ...] = ()
    """The Custom primitive's row: the inputs, the outputs it makes (not those that alias an input),
    and, for an op that writes an input in place, its placeholder output (:data:`DONE_COLUMN`)."""


@dataclass(frozen=True)
class MsOpView:
    """What the MindSpore templates need about one op beyond :attr:`op`."""

    op: OpView
    inputs: tuple[MsInput, ...]
    outputs: tuple[MsOutput, ...]
    rows: tuple[MsRow, ...]
    symbol_forward: str
    """The aot forward kernel's C symbol."""
    symbol_backward: str
    has_aot_attrs: bool
    """The aot kernels read attrs (the op's, or the layout of a flexible op): they have an ``Init``."""
    fw_counts: str
    """aot forward: flat parameters per input and output (C++ array items)."""
    bw_counts: str
    """aot backward: the same, for inputs, outputs, output gradients, input gradients."""
    backward_shape_lines: tuple[str, ...]
    """aot backward ``InferShape``: taking the differentiable inputs' shapes."""
    shape_prelude_fn: tuple[str, ...]
    """Function<T> Forward: the inputs' ``opgen::sym`` shapes and the contracts."""
    shape_prelude_infer: tuple[str, ...]
    """aot ``InferShape``: the same over MindSpore's flattened shapes."""
    ret_type: str
    """Function<T>: ``TensorPtr`` (one output) or ``TensorPtrList``."""
    fixed_params: str
    """Function<T> Forward's parameters after ``ctx`` (fixed tensors, attrs), each after ``, ``."""
    fixed_args: str
    """The same as arguments."""
    n_fixed_args: int
    """Function<T>: the fixed tensors and attrs Forward takes (Backward returns one entry each)."""
    apply_args: str
    """``Apply``'s arguments before a dynamic input's tensors."""
    run_params: str
    """The ``run_<op>`` entry point's parameters."""
    list_sizes: tuple[int, ...]
    """Function<T>, an op with a list input: the item counts ``run_<op>`` dispatches on, 1 to
    :data:`~opgen.runtime.mindspore.MAX_CALL_TENSORS` (``()`` without a list input)."""
    bind_params: str
    """The pybind11 function's parameters (list attrs as Python objects)."""
    bind_args: str
    """Its call of ``run_<op>`` (list attrs converted by ``opgen::bind``)."""
    save_lines: tuple[str, ...]
    """Forward: what goes into ``SaveForBackward``, under each tensor's condition."""
    saved_data_lines: tuple[str, ...]
    """Forward: the shapes, presence flags and attrs Backward reads back."""
    restore_lines: tuple[str, ...]
    """Backward: reading them back."""
    saved_host_lines: tuple[str, ...]
    """Backward: the saved tensors by slot."""
    dout_lines: tuple[str, ...]
    """Backward: the output gradients (and shapes not saved)."""
    grad_decls: tuple[str, ...]
    grad_view_lines: tuple[str, ...]
    """Backward: the gradients that are views, after the kernel."""
    grads_lines: tuple[str, ...]
    """Backward: one gradient per Forward argument."""
    attr_same_function: str
    """Function<T> wrapper: the test that the attr values were checked by the last call ("" when none)."""
    attr_last_values: str
    attr_last_count: int
    input_check_lines: tuple[str, ...]
    """Python: each input checked to be a Tensor (a list of Tensors), relative indent."""
    custom_input_check_lines: tuple[str, ...]
    """:attr:`input_check_lines` of the Custom path: a list input is held to the most tensors one
    call takes counting the other inputs too (``_graph.MAX_CUSTOM_TENSORS``); on the Function<T>
    path, to the most items of a list."""
    flat_expr: str
    """Custom path: the tuple of every input tensor, flat."""
    layout_expr: str
    """Custom path: tensors per input."""
    tensor_dtypes: str
    """Custom path, fixed inputs: the tuple of their dtypes."""
    tensor_shapes: str
    tensor_tests: str
    """Custom path's quick call: ``isinstance(x, _Tensor) and `` per input."""
    out_dtype_py: str
    """Custom path's ``out_dtype`` return value."""
    last_call: bool
    """Custom path: the last call's primitive is remembered (no list attr: identity tests hold)."""
    quick_call: bool
    """Custom path: the wrapper itself takes the last call's primitive for a call like it."""
    last_size: int
    """Length of the last-call tuple: shapes, dtypes, layout, each attr, the primitive."""
    last_prim_slot: int
    last_attr_tests: str
    """`` and <attr> is opgen_last[i]`` for each attr."""
    bprop_returns_dout: bool
    """:func:`opgen.api.every_grad_is_dout`: the bprop returns ``dout`` for every input when none broadcasts."""
    grad_views_py: str
    grad_view_input: InputView | None
    """The (first) differentiable input, whose gradient the PyNative bprop may return as a view."""
    custom_outputs: tuple[str, ...] = ()
    """The Custom primitive's outputs: the op's outputs that are not an input updated in place, then
    the placeholder (``opgen_done``) of an op that writes an input (a Custom op has an output)."""
    custom_shapes_cpp: tuple[str, ...] = ()
    """aot ``InferShape``: the C++ shape of each of :attr:`custom_outputs`."""
    custom_out_shape_py: str = ""
    """Custom path's ``out_shape`` return value, for :attr:`custom_outputs`."""
    written_flat: str = ""
    """Custom path: the flat positions of the written inputs (``_rt.flat_positions`` call)."""
    returns_py: str = ""
    """Custom path, an op that writes an input: what a call returns, from ``opgen_result`` (the
    primitive's outputs) and the inputs (an aliased output is its input itself); "None" for none."""
    done_py: str = ""
    """Custom path: the placeholder output in ``opgen_result``."""
    fw_returns: str = ""
    """Function<T> Forward: the tensors it returns (an aliased output is its input; an op with no
    outputs returns its written inputs, which the wrapper drops)."""
    fn_returns_py: str = ""
    """Function<T> path, an op that writes an input: what a call returns, from ``opgen_result``
    (the extension's result) and the inputs (an aliased output is its input object itself)."""
    grad_refusal: str = ""
    """The error of differentiating an op that writes an input in place ("" for other ops)."""


def _grad_views_cpp(op: Op) -> dict[str, str]:
    """Per input of ``kernel.grad_views``, the C++ (``opgen/ms.h``) of its gradient as a view of
    the output gradient, for the Function<T> Backward: the inverse of the output's shape rule, as
    its shape function defines it (``ShapeFunction.grad_view_kind``: slices of ``dout`` for
    ``concat``, ``dout`` broadcast back for ``reduce``). Backward has each fixed input's shape as
    ``<name>_shape``, each dynamic input's as ``<name>_shapes``, attrs as ``attrs.<name>``."""
    if op.kernel is None or not op.kernel.grad_views:
        return {}
    node = op.outputs[0].shape.node
    assert isinstance(node, lang.Call)  # checked (check._grad_view_problem)
    kind = {x.name: x.kind for x in op.inputs}
    syms = {n: f"opgen::sym::from_shapes({n}_shapes)" if k == "dynamic" else f"opgen::sym::from_shape({n}_shape)"
            for n, k in kind.items()}

    def cpp(n: lang.Node) -> str:
        return lang.to_cpp(n, syms, lambda a: f"attrs.{a}")

    geometry = node.fn.grad_view_kind
    assert geometry is not None  # checked (check._grad_view_problem)
    out = {}
    for name, _loc in op.kernel.grad_views:
        shape = f"{name}_shapes" if kind[name] == "dynamic" else f"{name}_shape"
        args = ", ".join(("grad_outputs[0]", *node.fn.grad_view_cpp(node.args, cpp), shape))
        out[name] = f"{grad_view_call(geometry, python=False)}({args})"
    return out


def grad_views_py(op: Op) -> str:
    """The Custom path's bprop, in PyNative with static shapes, when the gradient of the op's one
    differentiable input is a view (``kernel.grad_views``): a Python expression of the tuple of
    its gradients (one per tensor of a dynamic input) as views of ``dout``, the input bound to its
    name, attrs to theirs (``ShapeFunction.grad_view_py``); "" otherwise."""
    if op.kernel is None or not op.kernel.grad_views:
        return ""
    views = {n for n, _ in op.kernel.grad_views}
    if len(op.differentiable_inputs) != 1 or op.differentiable_inputs[0].name not in views:
        return ""  # (a view's input is the shape rule's first argument: only one can be)
    node = op.outputs[0].shape.node
    assert isinstance(node, lang.Call) and node.fn.grad_view_kind is not None  # checked (check._grad_view_problem)
    x = op.differentiable_inputs[0]

    def py(n: lang.Node) -> str:  # an attr by its name (the bprop is parsed in graphs: no _rt calls)
        return n.name if isinstance(n, lang.AttrRef) else lang.to_python(n)

    args = ", ".join(("dout", x.name, *node.fn.grad_view_py(node.args, py)))
    view = f"{grad_view_call(node.fn.grad_view_kind, python=True)}({args})"
    return view if x.kind == "dynamic" else f"({view},)"


def cpp_checks_attr(a: Attr) -> bool:
    """Whether the Function<T> extension checks everything about attr ``a`` that
    ``opgen.runtime.check_attrs`` does, on every call: a list attr without range or choices
    (``opgen::bind::int_list``... in ms_bind.h: types, int64 and float32 fit)."""
    return a.is_list and a.range is None and a.choices is None


def python_checked_attrs(attrs: Sequence[Attr]) -> list[Attr]:
    """The attrs the Function<T> wrapper tests and checks in Python (all but those
    :func:`cpp_checks_attr`), in order: ``_<OP>_LAST`` holds their last checked values."""
    return [a for a in attrs if not cpp_checks_attr(a)]


def attr_same_function(op: str, attrs: Sequence[Attr], names: dict[str, str]) -> str:
    """The Function<T> wrapper's per-call attr test: that each value was checked by the last
    checked call. Scalars by identity (``alpha is _LEAKY_RELU_LAST[0]``); list attrs with a
    range or choices by value (``axis == _REDUCE_SUM_LAST[0]``: a literal list is a new object on
    every call), against a copy of the last checked value (``axis[:]``: a list the caller changes
    afterwards is checked again; a tuple is its own copy, and a list never equals a tuple, so
    switching between them checks again). Equality cannot tell ``True`` from ``1``, so the
    extension checks the element types on every call (``opgen::bind::int_list``...), and with
    them the rest of what ``check_attrs`` checks of a list without range or choices (int64 and
    float32 fit, the same messages): such a list is not in this test at all. "" when no attr is."""
    parts = []
    for i, a in enumerate(python_checked_attrs(attrs)):
        if a.is_nested:  # a copy of the outer list would share its rows: compare deep keys
            parts.append(f"_rt.list_key({a.name}) == _{op.upper()}_LAST[{i}]")
        elif a.is_list:
            parts.append(f"{a.name}.__class__ in ({names['list']}, {names['tuple']}) and "
                         f"{a.name} == _{op.upper()}_LAST[{i}]")
        else:
            parts.append(f"{a.name} is _{op.upper()}_LAST[{i}]")
    return " and ".join(parts)



def _shape_preludes(op: Op, view: OpView) -> tuple[list[str], list[str]]:
    """The inputs' ``opgen::sym`` shapes that the shape expressions and contracts read, then the
    contracts: for the Function<T> Forward (from the host tensors) and the aot ``InferShape``
    (from MindSpore's flattened ndims/shapes)."""
    kind = {x.name: x.kind for x in view.inputs}
    shape_used = [n for n in view.in_names if any(n in lang.tensors_used(e) for e in
                                                    [o.shape.node for o in op.outputs] + [c.node for c in op.requires])]
    fn_prelude = []
    for n in shape_used:
        if kind[n] == "dynamic":
            fn_prelude.append(f"const std::vector<opgen::sym::List> {_sym(n)} = "
                              f"opgen::sym::from_shapes(opgen::ms::shapes_of({n}_h));")
        elif kind[n] == "optional":
            fn_prelude.append(f"const opgen::sym::List {_sym(n)} = {n}_h ? opgen::sym::from_shape({n}_h->shape()) "
                              ": opgen::sym::List{};")
        else:
            fn_prelude.append(f"const opgen::sym::List {_sym(n)} = opgen::sym::from_shape({n}_h->shape());")
    fn_prelude += shape_prelude_cpp(op, {n: f"{n}_h != nullptr" for n in view.in_names})
    count = _counts(view)
    infer_prelude = []
    for n in view.in_names:
        if kind[n] == "dynamic":
            call = f"opgen_in.list({count[n]})"
            decl = f"const std::vector<opgen::sym::List> {_sym(n)} = {call};"
        elif kind[n] == "optional":
            call = f"opgen_in.maybe({count[n]})"
            decl = f"const opgen::sym::List {_sym(n)} = {call};"
        else:
            call = "opgen_in.one()"
            decl = f"const opgen::sym::List {_sym(n)} = {call};"
        infer_prelude.append(decl if n in shape_used else f"{call};  // {n}: not read by the shape rules")
    infer_prelude += shape_prelude_cpp(op, {n: f"{count[n]} > 0" for n in view.in_names})
    return fn_prelude, infer_prelude


def _counts(view: OpView) -> dict[str, str]:
    """aot: the flat parameters each input brings (a flexible op's layout is an attr)."""
    return {x.name: (f"attrs.opgen_layout[{x.index}]" if view.flexible else "1") for x in view.inputs}


def _row(view: OpView, r: RowView, enums: Sequence[str], dout: str, counts: dict[str, str]) -> MsRow:
    """One row's dispatch on both paths."""
    n_in = len(view.inputs)
    in_enums, out_enums = tuple(enums[:n_in]), tuple(enums[n_in:])
    diff_index = [view.in_names.index(n) for n in view.diff_names]
    t_in, t_out = r.in_cpp_types, r.out_cpp_types
    types = ", ".join(r.cpp_types)
    saved = set(view.saved_names)

    def fw_in(x: InputView) -> str:
        if x.written:  # its own memory (opgen::ms::writable), read-only unless 'writes: true'
            return f"opgen::ms::view_at<{'' if x.writes else 'const '}{t_in[x.index]}>({x.name}_w, {x.name})"
        return f"opgen::ms::{'in_list' if x.dynamic else 'in'}<{t_in[x.index]}>({x.name}_h)"

    fw_args = [fw_in(x) for x in view.inputs]
    fw_args += [f"opgen::ms::view_at<{t_out[o.index]}>({o.aliases}_w, {o.aliases})" if o.aliases else
                f"opgen::ms::out<{t_out[o.index]}>({o.name})" for o in view.outputs]

    allocs: list[str] = []
    for x in view.inputs:
        if not x.differentiable:
            continue
        e, t, ti = in_enums[x.index], t_in[x.index], x.tensor_index
        if x.grad_view:
            allocs.append(f"// d{x.name}: a view of {dout}, made after the kernel (kernel.grad_views)")
        elif x.dynamic:
            allocs += [
                f"bool want_{x.name} = false;",
                f"for (size_t j = 0; j < {x.name}_shapes.size(); ++j) want_{x.name} = want_{x.name} || "
                f"ctx->NeedsInputGrad({ti} + j);",
                f"if (want_{x.name}) {{",
                f"  for (const auto &s : {x.name}_shapes) d{x.name}.push_back(opgen::ms::empty(mindspore::{e}, s));",
                "}",
            ]
        elif x.grad_is_dout and t == t_out[0]:
            allocs += [
                f"if (ctx->NeedsInputGrad({ti})) {{",
                f"  if ({x.name}_shape == opgen::Shape({dout}_h->shape())) {{",
                f"    d{x.name}_is_{dout} = {dout}_h;  // d{x.name} = {dout}, same shape and dtype",
                "  } else {",
                f"    d{x.name} = opgen::ms::empty(mindspore::{e}, {x.name}_shape);  "
                f"// summed down to {x.name}'s shape",
                "  }",
                "}",
            ]
        else:
            present = f"{x.name}_present && " if x.optional else ""
            allocs.append(f"if ({present}ctx->NeedsInputGrad({ti})) d{x.name} = "
                          f"opgen::ms::empty(mindspore::{e}, {x.name}_shape);")

    bw_args = []
    for x in view.inputs:
        t = t_in[x.index]
        if x.name in saved:
            bw_args.append(f"opgen::ms::{'in_list' if x.dynamic else 'in'}<{t}>({x.name}_h)")
        elif x.dynamic:
            bw_args.append(f"opgen::ms::shape_only_list<{t}>({x.name}_shapes)")
        elif x.optional:
            bw_args.append(f"({x.name}_present ? opgen::ms::shape_only<{t}>({x.name}_shape) : opgen::In<{t}>{{}})")
        else:
            bw_args.append(f"opgen::ms::shape_only<{t}>({x.name}_shape)")
    for o in view.outputs:
        t = t_out[o.index]
        bw_args.append(f"opgen::ms::in<{t}>({o.name}_h)" if o.name in saved else
                       f"opgen::ms::shape_only<{t}>({o.name}_shape)")
    bw_args += [f"opgen::ms::in<{t_out[o.index]}>({o.grad_name}_h)" for o in view.outputs]
    bw_args += [f"opgen::ms::{'out_list' if x.dynamic else 'out'}<{t_in[x.index]}>(d{x.name})"
                for x in view.inputs if x.differentiable]

    def take(x: InputView, t: str) -> str:
        if x.dynamic:
            return f"cur.list<{t}>({counts[x.name]})"
        if x.optional:
            return f"cur.maybe<{t}>({counts[x.name]})"
        return f"cur.one<{t}>()"

    takes_in = []
    for x in view.inputs:
        if x.written:  # a written input's view is writable; its body name is read-only unless 'writes: true'
            takes_in.append(f"const auto {x.name}_w = cur.one<{t_in[x.index]}>();")
            takes_in.append(f"const auto {x.name} = {x.name}_w;" if x.writes else
                            f"const auto {x.name} = opgen::as_in({x.name}_w);")
        else:
            takes_in.append(f"const auto {x.name} = {take(x, 'const ' + t_in[x.index])};")
    takes_out = [f"const auto {o.name} = {o.aliases}_w;  // '{o.aliases}' updated in place" if o.aliases else
                 f"const auto {o.name} = cur.one<{t_out[o.index]}>();" for o in view.outputs]
    if view.has_effects:
        takes_out.append(f"{DONE_CPP}(cur.one<{DONE_TYPE}>());")
    made = [r.columns[n_in + o.index] for o in view.outputs if not o.aliases]
    made_names = [r.dtype_names[n_in + o.index] for o in view.outputs if not o.aliases]
    return MsRow(
        row=r,
        index=r.index,
        in_enums=in_enums,
        out_enums=out_enums,
        bw_columns=(*r.columns, *r.columns[n_in:], *(r.columns[i] for i in diff_index)),
        bw_dtype_names=(*r.dtype_names, *r.dtype_names[n_in:], *(r.dtype_names[i] for i in diff_index)),
        dtype_match="".join(f" && opgen::ms::dtype_is({x.name}_h, mindspore::{in_enums[x.index]})"
                            for x in view.inputs),
        fw_outputs=tuple(f"TensorPtr {o.name} = opgen::ms::empty(mindspore::{out_enums[o.index]}, {o.name}_shape);"
                         for o in view.outputs if not o.aliases),
        fw_call=f"forward<{types}>(attrs{''.join(', ' + a for a in fw_args)})",
        bw_allocs=tuple(allocs),
        bw_call=f"backward<{types}>(attrs{''.join(', ' + a for a in bw_args)})",
        aot_fw_takes=(*takes_in, *takes_out),
        custom_columns=(*r.columns[:n_in], *made, *((DONE_COLUMN,) if view.has_effects else ())),
        custom_dtype_names=(*r.dtype_names[:n_in], *made_names, *(("float32",) if view.has_effects else ())),
        aot_bw_takes=(*(f"const auto {x.name} = {take(x, 'const ' + t_in[x.index])};" for x in view.inputs),
                      *(f"const auto {o.name} = cur.one<const {t_out[o.index]}>();" for o in view.outputs),
                      *(f"const auto {o.grad_name} = cur.one<const {t_out[o.index]}>();" for o in view.outputs),
                      *(f"const auto d{x.name} = {take(x, t_in[x.index])};" for x in view.inputs if x.differentiable)),
    )


def _function_backward(view: OpView, views_cpp: dict[str, str], dout: str) -> dict[str, tuple[str, ...]]:
    """The Function<T> class's save and restore statements, and Backward's gradients."""
    save = []
    for s in view.saved:
        if s.dynamic:
            save.append(f"for (const auto &t : {s.name}) to_save.push_back(({s.condition}) ? t : nullptr);")
        elif s.is_input:
            save.append(f"to_save.push_back(({s.condition}) && {s.name}_h != nullptr ? {s.name} : nullptr);")
        else:
            save.append(f"to_save.push_back(({s.condition}) ? outputs[{s.output_index}] : nullptr);")
    data, restore = [], [f"attrs.{a.name} = opgen::ms::restore<{a.cpp_type}>(ctx->saved_data[\"{a.name}\"]);"
                         for a in view.attrs]
    for x in view.inputs:
        if x.dynamic:
            data.append(f"ctx->saved_data[\"{x.name}.shapes\"] = "
                        f"opgen::ms::keep_shapes(opgen::ms::shapes_of({x.name}_h));")
            restore.append(f"const std::vector<opgen::Shape> {x.name}_shapes = "
                           f"opgen::ms::restore<std::vector<opgen::Shape>>(ctx->saved_data[\"{x.name}.shapes\"]);")
            continue
        data.append(f"ctx->saved_data[\"{x.name}.shape\"] = "
                    f"mindspore::MakeValue({x.name}_h ? {x.name}_h->shape() : opgen::Shape{{}});")
        restore.append(f"const opgen::Shape {x.name}_shape = "
                       f"mindspore::GetValue<std::vector<int64_t>>(ctx->saved_data[\"{x.name}.shape\"]);")
        if x.optional:
            data.append(f"ctx->saved_data[\"{x.name}.present\"] = mindspore::MakeValue({x.name}_h != nullptr);")
            restore.append(f"const bool {x.name}_present = "
                           f"mindspore::GetValue<bool>(ctx->saved_data[\"{x.name}.present\"]);")
    data += [f"ctx->saved_data[\"{a.name}\"] = opgen::ms::keep({a.name});" for a in view.attrs]
    # a dynamic input is saved last (one slot per tensor), so every other slot is its index
    hosts = [f"const TensorPtrList {s.name}_h = opgen::ms::host_list(TensorPtrList(saved.begin() + {s.slot}, "
             f"saved.begin() + {s.slot} + {s.name}_shapes.size()));" if s.dynamic else
             f"const TensorPtr {s.name}_h = opgen::ms::host(saved[{s.slot}]);" for s in view.saved]
    if view.all_grad_views:
        douts = [f"(void)row;  // every gradient is a view of {dout} (kernel.grad_views): no kernel runs"]
    else:
        douts = []
        for o in view.outputs:
            douts.append(f"const TensorPtr {o.grad_name}_h = opgen::ms::host(grad_outputs[{o.index}]);")
            if o.name not in view.saved_names:
                douts.append(f"const opgen::Shape {o.name}_shape = opgen::Shape({o.grad_name}_h->shape());")
    decls = []
    for x in view.inputs:
        if not x.differentiable:
            continue
        if x.dynamic:
            decls.append(f"TensorPtrList d{x.name};")
            continue
        decls.append(f"TensorPtr d{x.name} = nullptr;")
        if x.grad_is_dout:
            decls.append(f"TensorPtr d{x.name}_is_{dout} = nullptr;  // the grad is {dout} itself (no copy)")
    view_lines = []
    for x in view.inputs:
        if x.name not in views_cpp:
            continue
        view_lines.append(f"// d{x.name}: a view of {dout} (kernel.grad_views), no copy, as MindSpore's own bprop "
                          "returns it")
        if x.dynamic:
            view_lines += [
                f"bool want_{x.name} = false;",
                f"for (size_t j = 0; j < {x.name}_shapes.size(); ++j) want_{x.name} = want_{x.name} || "
                f"ctx->NeedsInputGrad({x.tensor_index} + j);",
                f"if (want_{x.name}) d{x.name} = {views_cpp[x.name]};",
            ]
        else:
            view_lines.append(f"if (ctx->NeedsInputGrad({x.tensor_index})) d{x.name} = {views_cpp[x.name]};")
    grads = []
    for x in view.inputs:
        if x.dynamic:
            continue
        if x.differentiable and x.grad_is_dout:
            grads.append(f"grads.push_back(d{x.name} != nullptr ? d{x.name} : d{x.name}_is_{dout});")
        else:
            grads.append(f"grads.push_back({'d' + x.name if x.differentiable else 'nullptr'});")
    grads += ["grads.push_back(nullptr);" for _ in view.attrs]
    for x in view.inputs:
        if not x.dynamic:
            continue
        if x.differentiable:
            grads += [f"if (d{x.name}.empty()) d{x.name}.resize({x.name}_shapes.size());",
                      f"grads.insert(grads.end(), d{x.name}.begin(), d{x.name}.end());"]
        else:
            grads.append(f"grads.resize(grads.size() + {x.name}_shapes.size());")
    return {"save_lines": tuple(save), "saved_data_lines": tuple(data), "restore_lines": tuple(restore),
            "saved_host_lines": tuple(hosts), "dout_lines": tuple(douts), "grad_decls": tuple(decls),
            "grad_view_lines": tuple(view_lines), "grads_lines": tuple(grads)}


def _tuple(items: Sequence[str]) -> str:
    """Python tuple display of ``items`` (``(x,)`` for one)."""
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def ms_view(op: Op, package: str, target: str = TARGET) -> MsOpView:
    """The MindSpore view of ``op`` (its neutral view, from its ``target`` rows, included): ``CPU``
    for the aot library and the Function<T> extension, ``GPU`` for the GPU aot library."""
    view = op_context(op, package, target)
    attrs = list(op.attrs)
    dout = view.outputs[0].grad_name if view.outputs else "dout"
    counts = _counts(view)
    cpu_rows = op.rows_for(target)
    rows = tuple(_row(view, r, [r0.dtype(i).ms_enum for i in range(len(r0.columns))], dout, counts)
                 for r, r0 in zip(view.rows, cpu_rows))
    views_cpp = _grad_views_cpp(op)
    fn_prelude, infer_prelude = _shape_preludes(op, view)
    run_params = [
        {"dynamic": "const opgen::ms::TensorPtrList &", "optional": "const std::optional<opgen::ms::TensorPtr> &"}.get(
            x.kind, "const opgen::ms::TensorPtr &") + x.name
        for x in view.inputs
    ] + [f"{a.cpp_type} {a.name}" for a in view.attrs]
    # the pybind11 function's parameters: list attrs arrive as Python objects and are converted by
    # opgen::bind (element types checked on every call: the wrapper checks their values once)
    bind_params = run_params[:len(view.inputs)] + [
        f"const pybind11::handle &{a.name}" if a.is_list else f"{a.cpp_type} {a.name}" for a in view.attrs]
    bind_args = list(view.in_names) + [
        f'opgen::bind::{a.leaf_type}_{"rows" if a.is_nested else "list"}("{op.name}", "{a.name}", {a.name})'
        if a.is_list
        else a.name for a in view.attrs]
    apply_items = [f"opgen::ms::optional_arg({x.name})" if x.optional else x.name
                   for x in view.inputs if not x.dynamic] + list(view.attr_names)
    checks: list[str] = []
    custom_checks: list[str] = []  # the Custom path counts the other inputs too
    others = sum(1 for y in view.inputs if not y.dynamic and not y.optional)
    for x in view.inputs:
        if x.dynamic:
            call = f'{x.name} = _graph.tensor_list_input("{op.name}", "{x.name}", {x.name}'
            checks.append(call + ", 0)")  # Function<T>: 1 to MAX_CALL_TENSORS items (run_<op>'s list_sizes)
            custom_checks.append(call + f", {others})")
            continue
        if x.optional:
            lines = [f"if {x.name} is not None:",
                     f'    {x.name} = _graph.tensor_input("{op.name}", "{x.name}", {x.name})']
        else:
            lines = [f'{x.name} = _graph.tensor_input("{op.name}", "{x.name}", {x.name})']
        checks += lines
        custom_checks += lines
    b = view.builtin
    flat = " + ".join(f"{b['tuple']}({x.name})" if x.dynamic else f"(() if {x.name} is None else ({x.name},))"
                      if x.optional else f"({x.name},)" for x in view.inputs)
    layout = _tuple([f"{b['len']}({x.name})" if x.dynamic else f"0 if {x.name} is None else 1" if x.optional
                     else "1" for x in view.inputs])
    # a fixed dtype is returned as a tensor type, as MindSpore passes the inputs' dtypes: the plain
    # number type (ms.float16) makes GRAPH_MODE hand a 0-d output back as a Python scalar, through
    # which ms.grad does not compile (ScalarCast refuses Float16)
    dtype_py = [(f"{o.dtype_input}[0]" if o.dtype_input_dynamic else o.dtype_input) if o.dtype_input
                else f"_TensorType(ms.{'bool_' if o.dtype_rule == 'bool' else o.dtype_rule})" for o in view.outputs]
    checked = python_checked_attrs(attrs)
    last_call = not view.has_list_attr
    effects = _effects(op, view, dtype_py)
    return MsOpView(
        op=view,
        inputs=tuple(MsInput(
            name=x.name,
            host_line=(f"const TensorPtr {x.name}_h = {x.name};  // written in place: through {x.name}_w, its own "
                       f"memory\n    void *const {x.name}_w = opgen::ms::writable({x.name}, \"{op.name}\", "
                       f"\"{x.name}\");" if x.written else
                       f"const TensorPtrList {x.name}_h = opgen::ms::host_list({x.name});" if x.dynamic else
                       f"const TensorPtr {x.name}_h = opgen::ms::host_optional({x.name});  // nullptr when None"
                       if x.optional else f"const TensorPtr {x.name}_h = opgen::ms::host({x.name});"),
            need_line="" if not x.differentiable else (
                f"const bool need_{x.name} = opgen::ms::need_any(ctx, {x.name});" if x.dynamic else
                f"const bool need_{x.name} = {x.name}_h != nullptr && ctx->NeedGrad({x.name});" if x.optional else
                f"const bool need_{x.name} = ctx->NeedGrad({x.name});"),
            count=counts[x.name],
            grad_view_cpp=views_cpp.get(x.name, ""),
        ) for x in view.inputs),
        outputs=tuple(MsOutput(o.name, d) for o, d in zip(view.outputs, dtype_py)),
        rows=rows,
        symbol_forward=f"{package}_{op.name}_forward",
        symbol_backward=f"{package}_{op.name}_backward",
        has_aot_attrs=bool(view.attrs) or view.flexible,
        fw_counts=", ".join([counts[n] for n in view.in_names] + ["1"] * len(effects.custom_outputs)),
        bw_counts=", ".join([counts[n] for n in view.in_names] + ["1"] * (2 * len(view.outputs))
                            + [counts[n] for n in view.diff_names]),
        backward_shape_lines=tuple(
            f"for (auto &s : opgen_in.raw({counts[x.name]})) out.push_back(std::move(s));" if x.differentiable
            else f"opgen_in.skip({counts[x.name]});" for x in view.inputs),
        shape_prelude_fn=tuple(fn_prelude),
        shape_prelude_infer=tuple(infer_prelude),
        ret_type="TensorPtr" if view.single_output else "TensorPtrList",  # no outputs: the written inputs
        list_sizes=tuple(range(1, MAX_CALL_TENSORS + 1)) if view.dynamic else (),
        fixed_params="".join([f", const TensorPtr &{n}" for n in view.fixed_names]
                             + [f", {a.cpp_type} {a.name}" for a in view.attrs]),
        fixed_args="".join(f", {n}" for n in [*view.fixed_names, *view.attr_names]),
        n_fixed_args=len(view.fixed_names) + len(view.attrs),
        apply_args=", ".join(apply_items),
        run_params=", ".join(run_params),
        bind_params=", ".join(bind_params),
        bind_args=", ".join(bind_args),
        **_function_backward(view, views_cpp, dout),
        attr_same_function=attr_same_function(op.name, attrs, view.builtin),
        attr_last_values=", ".join(f"_rt.list_key({a.name})" if a.is_nested else f"{a.name}[:]" if a.is_list
                                   else a.name for a in checked),
        attr_last_count=len(checked),
        input_check_lines=tuple(checks),
        custom_input_check_lines=tuple(custom_checks),
        flat_expr=flat,
        layout_expr=layout,
        tensor_dtypes=_tuple([f"{n}.dtype" for n in view.in_names]),
        tensor_shapes=_tuple([f"{n}.shape" for n in view.in_names]),
        tensor_tests="".join(f"isinstance({n}, _Tensor) and " for n in view.in_names),
        out_dtype_py=effects.out_dtype_py or (
            dtype_py[0] if view.single_output else "(" + "".join(d + ", " for d in dtype_py) + ")"),
        # the last call's primitive is remembered when every attr can be compared by identity (no
        # list attr: the same list object may hold other values since), and the wrapper itself
        # takes it for a call like the last one when the inputs are fixed (one tensor each) and
        # the kernel cannot fail (no blocking launch to add)
        last_call=last_call,
        quick_call=last_call and not view.flexible and not view.can_fail and not view.has_effects,
        last_size=4 + len(attrs),
        last_prim_slot=3 + len(attrs),
        last_attr_tests="".join(f" and {a.name} is opgen_last[{3 + i}]" for i, a in enumerate(attrs)),
        bprop_returns_dout=every_grad_is_dout(op),
        grad_views_py=grad_views_py(op),
        grad_view_input=next((x for x in view.inputs if x.differentiable), None),
        custom_outputs=effects.custom_outputs,
        custom_shapes_cpp=effects.custom_shapes_cpp,
        custom_out_shape_py=effects.custom_out_shape_py,
        written_flat=effects.written_flat,
        returns_py=effects.returns_py,
        done_py=effects.done_py,
        fw_returns=effects.fw_returns,
        fn_returns_py=effects.fn_returns_py,
        grad_refusal=effects.grad_refusal,
    )


def grad_refusal(op: Op) -> str:
    """The error of a gradient through ``op``, which writes an input in place: MindSpore's autograd
    does not see the write (the Custom path's gradient would be silently zero), so both paths
    refuse, naming the op ("" for an op that writes nothing)."""
    written = [x.name for x in op.written_inputs]
    if not written:
        return ""
    return (f"{op.name}(): in-place op '{op.name}' cannot be differentiated: it writes "
            f"{', '.join(repr(n) for n in written)} in place, which MindSpore's autograd does not track; call it "
            "outside ms.grad / ms.value_and_grad (e.g. after the gradient step), or use an op that returns a new "
            "tensor")


@dataclass(frozen=True)
class _Effects:
    """The fields of :class:`MsOpView` about the Custom primitive's outputs and what an op that
    writes an input in place returns (same names and meanings)."""

    custom_outputs: tuple[str, ...]
    custom_shapes_cpp: tuple[str, ...]
    custom_out_shape_py: str
    grad_refusal: str
    out_dtype_py: str = ""
    written_flat: str = ""
    returns_py: str = ""
    done_py: str = ""
    fw_returns: str = ""
    fn_returns_py: str = ""


def _effects(op: Op, view: OpView, dtype_py: Sequence[str]) -> _Effects:
    """The fields of :class:`MsOpView` about the Custom primitive's outputs and, for an op that
    writes an input in place, its placeholder output, returns and refusal of gradients."""
    made = [o for o in op.outputs if o.aliases is None]
    shapes_cpp = [shape_cpp(o) for o in made]
    shapes_py = [lang.to_python(o.shape.node) for o in made]
    names = [o.name for o in made]
    dtypes = [d for o, d in zip(op.outputs, dtype_py) if o.aliases is None]
    if op.has_effects:
        names.append("opgen_done")
        shapes_cpp.append(lang.to_cpp(lang.parse_shape("[1]", lang.Scope({}, {})), {}, lambda a: a))
        shapes_py.append("[1]")
        dtypes.append("_TensorType(ms.float32)")
    base = _Effects(tuple(names), tuple(shapes_cpp),
                    shapes_py[0] if len(shapes_py) == 1 else "(" + ", ".join(shapes_py) + ",)", grad_refusal(op))
    if not op.has_effects:
        return base
    index = {x.name: i for i, x in enumerate(op.inputs)}
    made_at = {o.name: i for i, o in enumerate(made)}
    single = len(names) == 1

    def result(o: str) -> str:
        return "opgen_result" if single else f"opgen_result[{made_at[o]}]"

    outs = [f"_graph.after({o.aliases}, opgen_done)" if o.aliases else result(o.name) for o in op.outputs]
    fn_outs = [o.aliases if o.aliases else ("opgen_result" if len(op.outputs) == 1 else f"opgen_result[{i}]")
               for i, o in enumerate(op.outputs)]
    return dataclasses.replace(
        base,
        fn_returns_py="None" if not fn_outs else fn_outs[0] if len(fn_outs) == 1 else _tuple(fn_outs),
        out_dtype_py=dtypes[0] if single else "(" + "".join(d + ", " for d in dtypes) + ")",
        written_flat=f"_rt.flat_positions(layout, {_tuple([str(index[x.name]) for x in op.written_inputs])})",
        returns_py="None" if not outs else outs[0] if len(outs) == 1 else _tuple(outs),
        done_py="opgen_result" if single else "opgen_result[-1]",
        fw_returns=", ".join(o.aliases or o.name for o in op.outputs) if op.outputs else
        ", ".join(x.name for x in op.written_inputs),
    )
