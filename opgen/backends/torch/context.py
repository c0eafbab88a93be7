"""The fields the PyTorch templates (``templates/torch/``) need for one op, decided here in Python.

:func:`torch_op` turns a checked :class:`~opgen.model.Op` (and its neutral
:func:`opgen.api.op_context`) into a frozen :class:`TorchOp`: the operator schemas, the C++
parameters and argument unpacking of the CPU kernels, the dtype dispatch rows as ``at::ScalarType``
tests, the backward op's tensor slots, and the Python fake kernel's and autograd's pieces. The
templates only loop and substitute.

Backward protocol (one fact, one place: the C++ template and the Python autograd both follow it):
``<op>_backward(Tensor?[] saved, Tensor?[] douts, SymInt[] shapes, int[] ranks, bool[] needs,
int row, <attrs>) -> Tensor[]``. There is one *slot* per tensor: the inputs in order (a list
input's tensors each), then the outputs. ``ranks[slot]`` is its rank (-1 for an absent optional
input) and ``shapes`` their dims, concatenated; ``saved[slot]`` the tensor when the backward body
reads it (as the spec says, only when a gradient that needs it is wanted; None otherwise);
``needs[slot]`` (input slots only) whether that gradient is wanted; ``row`` the forward's
dtype_format row. It returns the wanted gradients, in slot order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, assert_never

from ... import api, dtypes
from ... import shapes as lang
from ...model import Attr, Op
from ...views import OpView
from .facts import FLOAT_ATTR

AT_SCALAR = {
    "float32": "at::kFloat", "float64": "at::kDouble", "float16": "at::kHalf", "bfloat16": "at::kBFloat16",
    "int8": "at::kChar", "int16": "at::kShort", "int32": "at::kInt", "int64": "at::kLong",
    "uint8": "at::kByte", "bool": "at::kBool",
}
"""``at::ScalarType`` of each opgen dtype (:data:`opgen.dtypes.DTYPES`)."""

TORCH_DTYPE = {
    "float32": "torch.float32", "float64": "torch.float64", "float16": "torch.float16",
    "bfloat16": "torch.bfloat16", "int8": "torch.int8", "int16": "torch.int16", "int32": "torch.int32",
    "int64": "torch.int64", "uint8": "torch.uint8", "bool": "torch.bool",
}
"""The ``torch.dtype`` of each opgen dtype, as Python source."""

assert set(AT_SCALAR) == set(TORCH_DTYPE) == set(dtypes.BY_NAME)

_SCHEMA_TYPE = {
    "int": "SymInt", "float": "float", "bool": "bool", "str": "str",
    "list[int]": "SymInt[]", "list[float]": "float[]", "list[bool]": "bool[]", "list[str]": "str[]",
    "list[list[int]]": "SymInt[]", "list[list[float]]": "float[]",
}
"""Schema type of each attr type: ints are SymInts, so that ``torch.compile(dynamic=True)`` may
pass a symbolic int (an attr the shape rules read, such as topk's ``k``) without specialising.
A schema has no nested lists (no ``int[][]``): a list of lists travels flat, its row count and
each row's length before the row (``runtime.encode_rows``), decoded by the kernels
(``opgen::pt::rows``) and the fake kernel (``runtime.decode_rows``)."""

_CPP_PARAM = {
    "int": "int64_t", "float": "double", "bool": "bool", "str": "c10::string_view",
    "list[int]": "at::IntArrayRef", "list[float]": "at::ArrayRef<double>", "list[bool]": "c10::List<bool>",
    "list[str]": "c10::List<std::string>", "list[list[int]]": "at::IntArrayRef",
    "list[list[float]]": "at::ArrayRef<double>",
}
"""The C++ kernel's parameter type for each attr type (a SymInt arrives as int64_t on CPU)."""

_AG_PARAM = dict(_CPP_PARAM, **{"int": "c10::SymInt", "list[int]": "c10::SymIntArrayRef",
                                 "list[list[int]]": "c10::SymIntArrayRef"})
"""The C++ autograd kernel's parameter type for each attr type: ints stay SymInts (it runs while
torch.compile traces, where an int attr may be symbolic)."""

_AG_MEMBER = {
    "int": "c10::SymInt", "float": "double", "bool": "bool", "str": "std::string",
    "list[int]": "std::vector<c10::SymInt>", "list[float]": "std::vector<double>", "list[bool]": "c10::List<bool>",
    "list[str]": "c10::List<std::string>", "list[list[int]]": "std::vector<c10::SymInt>",
    "list[list[float]]": "std::vector<double>",
}
"""The type of the autograd node's member ``attr_<name>`` keeping an attr of each type for the
backward (it converts to the backward op's parameter, :data:`_AG_PARAM`)."""

_AG_SAVE = {
    "int": "{n}", "float": "{n}", "bool": "{n}", "str": "std::string({n})", "list[int]": "{n}.vec()",
    "list[float]": "{n}.vec()", "list[bool]": "{n}", "list[str]": "{n}", "list[list[int]]": "{n}.vec()",
    "list[list[float]]": "{n}.vec()",
}
"""The value the autograd kernel stores in the node's ``attr_<name>`` from its parameter ``<name>``
(:data:`_AG_PARAM`)."""

assert set(_AG_MEMBER) == set(_AG_SAVE) == set(_AG_PARAM)


def _schema_default(a: Attr) -> str:
    """`` =<default>`` in the schema, or "" where the schema language has no literal for it (a
    non-finite float, a bool or str list): the Python function passes every attr anyway."""
    if not a.has_default:
        return ""
    v = a.default
    t = a.type
    if t == "int":
        return f"={int(v)}"
    if t == "float":
        return f"={float(v)!r}" if math.isfinite(float(v)) else ""
    if t == "bool":
        return "=True" if v else "=False"
    if t == "str":
        return "=" + repr(str(v)) if "'" not in str(v) and "\\" not in str(v) else ""
    if t == "list[int]":
        return "=[" + ", ".join(str(int(x)) for x in v) + "]"
    if t == "list[float]":
        return "=[" + ", ".join(repr(float(x)) for x in v) + "]" if all(math.isfinite(float(x)) for x in v) else ""
    if t in ("list[bool]", "list[str]", "list[list[int]]", "list[list[float]]"):
        return ""  # a list of lists: the Python function always passes it, encoded
    raise AssertionError(t)  # pragma: no cover - ATTR_CPP lists every type


def _attr_assign(a: Attr) -> str:
    """C++ statement storing the kernel's argument ``a.name`` into the kernel layer's Attrs (float
    attrs as the doubles the schema passes: :data:`opgen.backends.torch.facts.FLOAT_ATTR`)."""
    t = a.type
    if t in ("int", "bool"):
        return f"attrs.{a.name} = {a.name};"
    if t == "float":
        return f"attrs.{a.name} = {a.name};"
    if t == "str":
        return f"attrs.{a.name} = std::string({a.name});"
    if t == "list[int]":
        return f"attrs.{a.name} = opgen::pt::to_vector<int64_t>({a.name});"
    if t == "list[float]":
        return f"attrs.{a.name} = opgen::pt::to_vector<{FLOAT_ATTR}>({a.name});"
    if t == "list[bool]":
        return f"attrs.{a.name} = opgen::pt::to_vector<bool>({a.name});"
    if t == "list[str]":
        return f"attrs.{a.name} = opgen::pt::to_vector<std::string>({a.name});"
    if t == "list[list[int]]":
        return f"attrs.{a.name} = opgen::pt::rows<int64_t>({a.name});"
    if t == "list[list[float]]":
        return f"attrs.{a.name} = opgen::pt::rows<{FLOAT_ATTR}>({a.name});"
    raise AssertionError(t)  # pragma: no cover


@dataclass(frozen=True)
class Row:
    """One dtype row of the operator: its index, C++ element types and the ``at::ScalarType`` tests.

    The operator's rows are the union of its devices' dtype_format rows (the ``CPU`` rows in order,
    then each ``GPU`` row the CPU lacks), so that a row index means one dtype combination on every
    device (the autograd node keeps it for the backward op, whichever device's kernel runs it).
    """

    index: int
    cpp_types: tuple[str, ...]
    condition: str
    """C++ test that the inputs (named as in the kernel) have this row's dtypes."""
    scalars: tuple[str, ...]
    """``at::ScalarType`` per column (inputs, then outputs)."""
    py_dtypes: tuple[str, ...]
    """``torch.dtype`` per column, as Python source."""
    devices: tuple[str, ...] = ("cpu",)
    """The devices (:mod:`opgen.devices` names) whose kernels have this row."""
    fw_args: str = ""
    """The kernel layer's ``forward`` arguments after ``attrs``: the views of the inputs (a
    ``writes: true`` input writable) and of the outputs (an aliased output a writable view of its
    input's local)."""


@dataclass(frozen=True)
class InputView:
    """One input as the templates see it: kind, slot expression (C++), view expressions."""

    name: str
    kind: str
    index: int
    differentiable: bool
    cpp_param: str
    unpack: str
    """C++ statement making the contiguous local ``<name>`` from the parameter ``<name>_arg``."""
    slot: str
    """C++ expression of the input's first slot in the backward op (see the module docstring)."""
    grad_view: str
    """C++ expression (in the autograd kernel's backward) of its gradient as a view of ``dout``
    (kernel.grad_views): a ``variable_list`` for a list input, a tensor otherwise; or ""."""
    ag_param: str
    """Its parameter in the C++ autograd kernel (``<name>_arg``)."""


@dataclass(frozen=True)
class TorchOp:
    """Every PyTorch-specific field of one op."""

    namespace: str
    schema: str
    backward_schema: str
    cpp_params: str
    backward_cpp_params: str
    inputs: tuple[InputView, ...]
    attr_assign: tuple[str, ...]
    rows: tuple[Row, ...]
    prelude: tuple[str, ...]
    """C++ statements: the inputs' opgen::sym shapes and the contracts."""
    return_type: str
    n_fixed_slots: int
    """Slots that do not depend on the list input's length (fixed inputs and outputs)."""
    out_slots: tuple[str, ...]
    n_slots_cpp: str
    """C++ expression of the number of slots in a forward call (``<list>_arg.size()`` counted in)."""
    dynamic: str
    has_backward_op: bool
    view_names: tuple[str, ...]
    """Inputs whose gradient is a view of ``dout`` (kernel.grad_views)."""
    dout_inputs: tuple[str, ...]
    """Inputs whose gradient the backward returns as ``dout`` itself when they have its shape
    (:func:`opgen.api.dout_grad_inputs`)."""
    """Whether a gradient needs the backward kernel (false when every gradient is a view)."""
    ag_params: str
    """The C++ autograd kernel's parameters (the inputs as ``<name>_arg``, then the attrs)."""
    ag_signature: str
    """The forward op's C++ signature as the autograd kernel calls it through the dispatcher."""
    ag_args: str
    """The autograd kernel's arguments of that call."""
    backward_signature: str
    """The backward op's C++ signature as the autograd kernel's backward calls it."""
    attr_members: tuple[str, ...]
    """The autograd node's member declarations, ``attr_<name>`` per attr."""
    attr_save: tuple[str, ...]
    """C++ statements (in the Autograd kernel) keeping each attr in its node member."""
    attr_load: tuple[str, ...]
    """C++ statements (in the node's ``apply``) binding each member to a local named as the attr."""
    saved_cpp: tuple[tuple[str, str], ...]
    """(tensor name, C++ condition over ``need_<input>``) for each tensor the backward reads."""
    py_params: str
    fake_params: str
    fake_attr_args: tuple[str, ...]
    """The attrs as the shape rules take them, in the fake kernel (a list of lists decoded)."""
    """The fake kernel's parameters: the inputs, then the attrs with the schema's defaults (the
    dispatcher leaves out arguments equal to their default)."""
    attr_names: tuple[str, ...]
    call_args: str
    """The Python call of ``torch.ops.<ns>.<op>`` from the function's parameters."""
    refused_args: str
    """Python tuple of (name, value, kind) per input, for ``runtime.refused`` after the
    dispatcher refuses a call."""
    rows_py: str
    """Python tuple of the rows' input dtypes (``torch.dtype`` source), for the fake kernel."""
    out_dtypes_py: tuple[str, ...]
    """Python expression per output of its dtype: an input's dtype or a fixed dtype."""
    made_outputs: tuple[int, ...] = ()
    """The outputs the operator returns (its own tensors; an output that aliases an input is that
    input, which the Python function returns itself), by index."""
    written: tuple[str, ...] = ()
    """The inputs the op writes in place (``Tensor(a!)`` in the schema), in order."""
    writeback: tuple[str, ...] = ()
    """C++ statements after the kernel: a written input that was not contiguous gets its copy back."""
    returns_py: str = ""
    """An op that writes an input: what the Python function returns from ``opgen_result`` (the
    operator's result) and the inputs ("None" for no outputs)."""
    refusal: str = ""
    """An op that writes an input: the error of a call that would need its gradient."""
    fake_return_py: str = ""
    """An op that writes an input: what its fake kernel returns (its own outputs, empty; None for none)."""
    write_check: tuple[str, ...] = ()
    """An op that writes an input: C++ statements at the top of each forward kernel (before anything
    is written) that refuse a written input no in-place write can serve (``opgen::pt::WriteCheck``:
    an inference tensor outside inference mode, internal overlap, overlap with another input)."""
    no_history: bool = False
    """The op has no differentiable output and writes no input: its Autograd kernel runs it below
    autograd and returns its outputs without history (no ``grad_fn``), where torch's fallback for an
    operator without one would give them a ``grad_fn`` that warns at backward."""


def _cpp_type(kind: str) -> str:
    """The C++ parameter type of an input of ``kind`` in the kernels."""
    if kind == "required":
        return "const at::Tensor &"
    if kind == "optional":
        return "const std::optional<at::Tensor> &"
    if kind == "dynamic":
        return "at::TensorList "
    raise AssertionError(kind)  # pragma: no cover


def _cpp_param(kind: str, name: str) -> str:
    return f"{_cpp_type(kind)}{name}_arg"


SCHEMA_RESERVED = frozenset({"kernel", "cls"})
"""Names an operator schema cannot give an argument: Inductor lowers an operator it has no
lowering for through ``FallbackKernel.create(cls, kernel, *args, **kwargs)`` with the schema's
names as keywords, so an argument ``kernel`` is "got multiple values for argument 'kernel'"."""


def schema_name(name: str) -> str:
    """The schema's name for input or attr ``name``: ``name``, or ``name_`` for a name in
    :data:`SCHEMA_RESERVED` (the Python function keeps the spec's name; the operator
    ``torch.ops.<pkg>.<op>`` takes the argument by position or as ``name_``)."""
    return f"{name}_" if name in SCHEMA_RESERVED else name


def torch_op(op: Op, ctx: OpView, namespace: str, device_views: Sequence[tuple[str, OpView]] = ()) -> TorchOp:
    """The PyTorch fields of ``op`` (``ctx``: its :func:`opgen.api.op_context`, the CPU's rows;
    ``device_views``: (device name, view) of each other device with rows, e.g. ``("cuda", <GPU
    rows' view>)``: their rows join the operator's, see :class:`Row`)."""
    inputs = list(op.inputs)
    dynamic = next((x.name for x in inputs if x.kind == "dynamic"), "")
    # an input the op writes in place is annotated Tensor(a!) (its own alias set each); the
    # operator returns the outputs of its own only (an aliased output is returned by the Python
    # function as the input itself): a mutable operator whose returns alias nothing is one that
    # torch.compile functionalizes (auto_functionalize) and opcheck accepts
    written = [x.name for x in op.written_inputs]
    alias_set = {n: chr(ord("a") + k) for k, n in enumerate(written)}
    made = [o for o in op.outputs if o.aliases is None]
    # ---- schema ------------------------------------------------------------------------
    args = []
    for x in inputs:
        if x.kind == "required" and x.name in alias_set:
            args.append(f"Tensor({alias_set[x.name]}!) {schema_name(x.name)}")
        elif x.kind == "required":
            args.append(f"Tensor {schema_name(x.name)}")
        elif x.kind == "optional":
            args.append(f"Tensor? {schema_name(x.name)}=None")
        elif x.kind == "dynamic":
            args.append(f"Tensor[] {schema_name(x.name)}")
        else:  # pragma: no cover - model.Input kinds
            raise AssertionError(x.kind)
    attr_args = [f"{_SCHEMA_TYPE[a.type]} {schema_name(a.name)}{_schema_default(a)}" for a in op.attrs]
    # a parameter without default after one with default is not allowed: keep defaults only at the end
    for i in range(len(attr_args) - 1, -1, -1):
        if "=" not in attr_args[i]:
            attr_args[:i] = [s.split("=")[0] for s in attr_args[:i]]
            break
    if len(made) == 1:
        rets = "Tensor"
    else:
        rets = "(" + ", ".join(f"Tensor {o.name}" for o in made) + ")"
    schema = f"{op.name}({', '.join(args + attr_args)}) -> {rets}"
    bw_attrs = [f"{_SCHEMA_TYPE[a.type]} {schema_name(a.name)}" for a in op.attrs]
    backward_schema = (f"{op.name}_backward(Tensor?[] saved, Tensor?[] douts, SymInt[] shapes, int[] ranks, "
                       f"bool[] needs, int row{''.join(', ' + s for s in bw_attrs)}) -> Tensor[]")
    # ---- C++ --------------------------------------------------------------------------
    attr_params = [f"{_CPP_PARAM[a.type]} {a.name}" for a in op.attrs]
    cpp_params = ", ".join([_cpp_param(x.kind, x.name) for x in inputs] + attr_params)
    backward_cpp_params = ", ".join(
        ["const c10::List<std::optional<at::Tensor>> &saved", "const c10::List<std::optional<at::Tensor>> &douts",
         "at::IntArrayRef shapes", "at::IntArrayRef ranks", "c10::List<bool> needs", "int64_t row"] + attr_params)
    views: list[InputView] = []
    seen_dynamic = False
    grad_views = _grad_views_cpp(op)
    for i, x in enumerate(inputs):
        if x.kind == "dynamic":
            unpack = f"const std::vector<at::Tensor> {x.name} = opgen::pt::contiguous({x.name}_arg);"
        else:  # a written input: itself when contiguous, else a copy written back after the kernel (writeback)
            unpack = f"const at::Tensor {x.name} = opgen::pt::contiguous({x.name}_arg);"
        slot = f"{i - 1} + n_dyn" if seen_dynamic else str(i)
        seen_dynamic = seen_dynamic or x.kind == "dynamic"
        views.append(InputView(x.name, x.kind, i, x.differentiable, _cpp_param(x.kind, x.name), unpack, slot,
                               grad_views.get(x.name, ""), _cpp_param(x.kind, x.name)))
    n_in_fixed = len(inputs) - (1 if dynamic else 0)
    out_slots = tuple(f"{n_in_fixed + j} + n_dyn" if dynamic else str(n_in_fixed + j) for j in range(len(op.outputs)))
    rows = []
    union: dict[tuple[str, ...], list[str]] = {}
    row_views = []
    for device, view in [("cpu", ctx), *device_views]:
        for r in view.rows:
            if r.dtype_names not in union:
                union[r.dtype_names] = []
                row_views.append(r)
            union[r.dtype_names].append(device)
    for index, r in enumerate(row_views):
        names = r.dtype_names
        conds = [f"opgen::pt::dtype_is({x.name}, {AT_SCALAR[names[i]]})" for i, x in enumerate(inputs)]
        t = r.cpp_types
        fw = [f"opgen::pt::{'in_list' if x.kind == 'dynamic' else 'out' if x.writes else 'in'}<{t[i]}>({x.name})"
              for i, x in enumerate(inputs)]
        fw += [f"opgen::pt::out<{t[len(inputs) + k]}>({o.aliases or o.name})" for k, o in enumerate(op.outputs)]
        rows.append(Row(index, tuple(r.cpp_types), " && ".join(conds) or "true",
                        tuple(AT_SCALAR[n] for n in names), tuple(TORCH_DTYPE[n] for n in names),
                        tuple(union[names]), ", ".join(fw)))
    prelude = tuple(_prelude(op))
    return_type = "at::Tensor" if len(made) == 1 else "void" if not made else \
        "std::tuple<" + ", ".join("at::Tensor" for _ in made) + ">"
    # ---- Python -----------------------------------------------------------------------
    call_args = ", ".join([x.name for x in inputs] + [f"_rt.encode_rows({a.name})" if a.is_nested else a.name
                                                      for a in op.attrs])
    ag_types = [_cpp_type(x.kind).strip() for x in inputs] + [_AG_PARAM[a.type] for a in op.attrs]
    ret = return_type
    bw_types = ["const c10::List<std::optional<at::Tensor>> &", "const c10::List<std::optional<at::Tensor>> &",
                "c10::SymIntArrayRef", "at::IntArrayRef", "c10::List<bool>", "int64_t"] + \
        [_AG_PARAM[a.type] for a in op.attrs]
    rows_py = "(" + "".join("(" + "".join(f"{d}, " for d in r.py_dtypes[:len(inputs)]) + "), " for r in rows) + ")"
    in_names = [x.name for x in inputs]
    out_dtypes = []
    for o in op.outputs:
        if o.dtype in in_names:
            out_dtypes.append(f"{o.dtype}[0].dtype" if o.dtype == dynamic else f"{o.dtype}.dtype")
        else:
            out_dtypes.append(TORCH_DTYPE[o.dtype])
    non_view_diff = [x for x in op.differentiable_inputs if x.name not in grad_views]
    return TorchOp(
        namespace=namespace,
        schema=schema,
        backward_schema=backward_schema,
        cpp_params=cpp_params,
        backward_cpp_params=backward_cpp_params,
        inputs=tuple(views),
        attr_assign=tuple(_attr_assign(a) for a in op.attrs),
        rows=tuple(rows),
        prelude=prelude,
        return_type=return_type,
        n_fixed_slots=n_in_fixed + len(op.outputs),
        out_slots=out_slots,
        dynamic=dynamic,
        n_slots_cpp=(f"{len(inputs) + len(op.outputs) - 1} + {dynamic}_arg.size()" if dynamic
                     else str(len(inputs) + len(op.outputs))),
        has_backward_op=op.has_backward and bool(non_view_diff),
        view_names=tuple(grad_views),
        dout_inputs=tuple(x.name for x in op.inputs if x.name in api.dout_grad_inputs(op) and not dynamic),
        ag_params=", ".join([_cpp_param(x.kind, x.name) for x in inputs]
                            + [f"{_AG_PARAM[a.type]} {a.name}" for a in op.attrs]),
        ag_signature=f"{ret}({', '.join(ag_types)})",
        ag_args=", ".join([f"{x.name}_arg" for x in inputs] + [a.name for a in op.attrs]),
        backward_signature=f"std::vector<at::Tensor>({', '.join(bw_types)})",
        attr_members=tuple(f"{_AG_MEMBER[a.type]} attr_{a.name}{{}};" for a in op.attrs),
        attr_save=tuple(f"node->attr_{a.name} = {_AG_SAVE[a.type].format(n=a.name)};" for a in op.attrs),
        attr_load=tuple(f"const {_AG_MEMBER[a.type]} &{a.name} = attr_{a.name};" for a in op.attrs),
        saved_cpp=tuple((s.name, s.condition or "true") for s in ctx.saved),
        py_params=ctx.py_params,
        fake_params=_fake_params(op, attr_args),
        attr_names=tuple(a.name for a in op.attrs),
        call_args=call_args,
        refused_args="(" + "".join(f'("{x.name}", {x.name}, "{x.kind}"), ' for x in inputs).rstrip(" ") + ")",
        fake_attr_args=tuple(f"_rt.decode_rows({a.name})" if a.is_nested else a.name for a in op.attrs),
        rows_py=rows_py,
        out_dtypes_py=tuple(out_dtypes),
        made_outputs=tuple(op.outputs.index(o) for o in made),
        written=tuple(written),
        writeback=tuple(f"if (!{n}.is_same({n}_arg)) {n}_arg.copy_({n});  // a non-contiguous input: its copy back"
                        for n in written),
        returns_py=_returns_py(op, made) if op.has_effects else "",
        refusal=refusal(op),
        fake_return_py=_fake_return_py(op, [op.outputs.index(o) for o in made], out_dtypes),
        write_check=_write_check(op),
        no_history=not ctx.grad_flows and not op.has_effects,
    )


def _write_check(op: Op) -> tuple[str, ...]:
    """The C++ of ``opgen::pt::WriteCheck`` over the arguments of an op that writes an input (none
    for another op): every input, written or read, then the check (opgen/torch.h says the rules)."""
    written = {x.name for x in op.written_inputs}
    if not written:
        return ()
    lines = [f'opgen::pt::WriteCheck writes("{op.name}", {"true" if op.elementwise is not None else "false"});']
    lines += [f'writes.{"written" if x.name in written else "read"}("{x.name}", {x.name}_arg);' for x in op.inputs]
    return (*lines, "writes.check();  // before anything is written: a refused call changes nothing")


def _fake_return_py(op: Op, made: list[int], dtypes: list[str]) -> str:
    """The fake kernel's return value of an op that writes an input: the outputs of its own
    (by index among the outputs) as empty tensors (``runtime.fake_output``), one, a tuple, or None."""
    empties = [f"_rt.fake_output({op.name!r}, {op.outputs[k].name!r}, shapes[{k}], {dtypes[k]}, device)"
               for k in made]
    if not empties:
        return "None"
    return empties[0] if len(empties) == 1 else "(" + "".join(e + ", " for e in empties) + ")"


def refusal(op: Op) -> str:
    """The error of a call of ``op``, which writes an input in place, that would need its gradient
    ("" for an op that writes nothing): PyTorch's autograd would not see the write, so the
    autograd kernel refuses when grad mode is on and an input requires grad."""
    written = [x.name for x in op.written_inputs]
    if not written:
        return ""
    return (f"{op.name}(): in-place op '{op.name}' cannot be differentiated: it writes "
            f"{', '.join(repr(n) for n in written)} in place and has no gradient, but an input requires grad; "
            "call it under torch.no_grad(), or on tensors that do not require grad")


def _returns_py(op: Op, made: list[Any]) -> str:
    """What the Python function of an op that writes an input returns: each output, the input
    itself for an aliased one, the operator's ``opgen_result`` (or its items) for the others."""
    outs = [o.aliases if o.aliases else "opgen_result" if len(made) == 1 else f"opgen_result[{made.index(o)}]"
            for o in op.outputs]
    if not outs:
        return "None"
    return outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"


def _fake_params(op: Op, attr_args: list[str]) -> str:
    """The fake kernel's parameters: the dispatcher leaves out trailing arguments equal to their
    schema default (None for an optional input), so those get the same default in Python; a
    parameter after them that the schema never leaves out gets ``None`` only to be valid Python."""
    params, defaulted = [], False
    for x in op.inputs:
        defaulted = defaulted or x.kind == "optional"
        params.append(x.name + ("=None" if defaulted else ""))
    for a, text in zip(op.attrs, attr_args):
        if "=" in text:
            params.append(f"{a.name}={api.py_literal(a, a.default)}")
            defaulted = True
        else:
            params.append(a.name + ("=None" if defaulted else ""))
    return ", ".join(params)


def _prelude(op: Op) -> list[str]:
    """C++ statements over the contiguous inputs: the ``opgen::sym`` shape (``opgen_s_<name>``)
    of each input a shape rule or contract reads, then the contracts (:func:`opgen.api.shape_prelude_cpp`)."""
    nodes = [o.shape.node for o in op.outputs] + [c.node for c in op.requires]
    lines = []
    for x in op.inputs:
        if not any(x.name in lang.tensors_used(n) for n in nodes):
            continue
        if x.kind == "dynamic":
            lines.append(f"const std::vector<opgen::sym::List> opgen_s_{x.name} = "
                         f"opgen::sym::from_shapes(opgen::pt::shapes_of({x.name}));")
        elif x.kind == "optional":
            lines.append(f"const opgen::sym::List opgen_s_{x.name} = {x.name}.defined() ? "
                         f"opgen::sym::from_shape(opgen::pt::shape_of({x.name})) : opgen::sym::List{{}};")
        else:
            lines.append(f"const opgen::sym::List opgen_s_{x.name} = "
                         f"opgen::sym::from_shape(opgen::pt::shape_of({x.name}));")
    return lines + api.shape_prelude_cpp(op, {x.name: f"{x.name}.defined()" for x in op.inputs})


def _grad_views_cpp(op: Op) -> dict[str, str]:
    """Per ``kernel.grad_views`` input, the C++ (in the autograd kernel's backward, over
    ``opgen/torch_autograd.h``, the slots ``shapes``/``ranks`` and the attrs as locals) of its
    gradient as views of ``dout``: the inverse of the output's shape rule, ``split_view``
    (``narrow``) or ``unreduce_view`` (``expand``)."""
    if op.kernel is None or not op.kernel.grad_views:
        return {}
    node = op.outputs[0].shape.node
    assert isinstance(node, lang.Call)  # checked (check._grad_view_problem)

    def cpp(n: lang.Node) -> str:
        if isinstance(n, lang.AttrRef):
            return f"opgen::pt::ag::concrete({n.name})"
        if isinstance(n, lang.Const) and isinstance(n.value, int):
            return str(int(n.value))
        if isinstance(n, lang.ListOf) and all(isinstance(e, lang.Const) for e in n.items):
            values = [str(int(e.value)) for e in n.items if isinstance(e, lang.Const)]
            return "std::vector<int64_t>{" + ", ".join(values) + "}"
        raise ValueError(f"op '{op.name}': a gradient view's geometry must be an attr or a literal, "
                         f"not {lang.to_python(n)}")

    kind = node.fn.grad_view_kind
    assert kind is not None  # checked (check._grad_view_problem)
    out = {}
    index = {x.name: i for i, x in enumerate(op.inputs)}
    dynamic = any(x.kind == "dynamic" for x in op.inputs)
    for name, _loc in op.kernel.grad_views:
        i = index[name]
        first = f"{i - 1} + n_dyn" if dynamic and i > next(j for j, x in enumerate(op.inputs) if x.kind == "dynamic") \
            else str(i)
        if kind == "split":
            n, pick = ("n_dyn", "") if op.inputs[i].kind == "dynamic" else ("1", "[0]")
            out[name] = f"opgen::pt::ag::split_view(dout, {cpp(node.args[1])}, shapes, ranks, {first}, {n}){pick}"
        elif kind == "unreduce":
            out[name] = f"opgen::pt::ag::unreduce_view(dout, {cpp(node.args[1])}, shapes, ranks, {first})"
        else:  # pragma: no cover - GradViewKind
            assert_never(kind)
    return out
