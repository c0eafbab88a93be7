"""Typed, frozen views of an op for templates: what every backend needs, framework-neutral.

:func:`opgen.api.op_context` builds an :class:`OpView` from a checked :class:`~opgen.model.Op`;
the kernel layer's templates (``kernel.h``, ``kernel_decl.h``, ``kernel.cc``) and ``reference.py``
read it alone, and each backend adds a small view of its own next to it
(``opgen.backends.mindspore.views.MsOpView``). Every decision and every index is computed when
the view is built; templates only loop over these fields and substitute them.

Nothing here names a framework: C++ types are those of the kernel layer (``opgen::In<float>``),
Python is that of the generated wrappers' neutral helpers (``opgen.runtime``, imported as ``_rt``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InputView:
    """One tensor input of an op."""

    name: str
    doc: str
    """Its doc, on one line."""
    index: int
    """Its position among the op's inputs."""
    differentiable: bool
    kind: str
    """``required``, ``optional`` or ``dynamic`` (a list of tensors)."""
    optional: bool
    dynamic: bool
    py_type: str
    """Its type in a docstring: ``Tensor``, ``Tensor or None``, ``list of Tensor``."""
    in_view: str
    """Its kernel-layer view type in a template: ``opgen::In<x_t>``, ``opgen::InList<xs_t>``."""
    out_view: str
    """Its gradient's view type: ``opgen::Out<x_t>``, ``opgen::OutList<xs_t>``."""
    tensor_index: int
    """Its position among the fixed (not dynamic) inputs; a dynamic input's tensors come after them."""
    grad_is_dout: bool
    """Its gradient is the output gradient itself (a required input of an elementwise op:
    :func:`opgen.api.grad_is_dout`)."""
    grad_view: bool
    """Its gradient is a view of the output gradient (``kernel.grad_views``)."""
    writes: bool = False
    """``writes: true``: the op writes it in place and does not return it (its kernel view is an ``opgen::Out``)."""
    written: bool = False
    """The op writes it in place: ``writes: true``, or an output aliases it."""
    aliased_by: str = ""
    """The output that is this input updated in place ("" for none)."""


@dataclass(frozen=True)
class OutputView:
    """One output of an op."""

    name: str
    doc: str
    index: int
    """Its position among the op's outputs."""
    column: int
    """Its column in a dtype row (inputs first, then outputs)."""
    grad_name: str
    """Name of its gradient in the backward body (``dout``)."""
    differentiable: bool
    shape_cpp: str
    """Its shape as an ``opgen::sym::List`` C++ expression over ``opgen_s_<input>`` and ``attrs``."""
    shape_text: str
    """Its shape rule as the spec writes it."""
    dtype_rule: str
    """Its dtype rule as the spec writes it: an input's name or a dtype name."""
    dtype_input: str
    """The input whose dtype it takes ("" when the rule names a dtype)."""
    dtype_input_dynamic: bool
    """Whether that input is a list of tensors (the output takes its first tensor's dtype)."""
    aliases: str = ""
    """The input this output is, updated in place ("" for an output of its own)."""


@dataclass(frozen=True)
class AttrView:
    """One attr of an op."""

    name: str
    type: str
    """Its spec type: ``int``, ``float``, ``bool``, ``str``, ``list[int]``..."""
    cpp_type: str
    py_type: str
    """Its Python annotation (``Sequence[int]`` for a list)."""
    has_default: bool
    py_default: str
    """Python literal of its default ("" without one)."""
    cpp_default: str
    """C++ literal of its default ("" without one)."""
    doc: str
    range_py: str
    """Python of its ``range`` (``[lo, hi]``) or ``None``."""
    choices_py: str | None
    """Python tuple of its ``choices``, or None."""
    is_list: bool
    item_type: str
    """The element type of a list attr (``int`` for ``list[int]``); its type otherwise."""
    is_nested: bool = False
    """Whether it is a list of lists (``list[list[int]]``, ``list[list[float]]``)."""
    leaf_type: str = ""
    """The scalar type of its values (``int`` for ``int``, ``list[int]``, ``list[list[int]]``)."""


@dataclass(frozen=True)
class RowView:
    """One dtype_format row of the op's target, with what the kernel layer instantiates."""

    index: int
    columns: tuple[str, ...]
    """The row's DataType names as the spec writes them (``float32_default``), inputs then outputs."""
    dtype_names: tuple[str, ...]
    """The element type name of each column (``float32``)."""
    cpp_types: tuple[str, ...]
    """The C++ element type of each column (``float``), inputs then outputs."""
    in_cpp_types: tuple[str, ...]
    """:attr:`cpp_types` of the inputs, in input order."""
    out_cpp_types: tuple[str, ...]
    """:attr:`cpp_types` of the outputs, in output order."""
    forward_params: str
    """Parameter types of ``forward`` for this row (its explicit instantiation)."""
    backward_params: str
    """Parameter types of ``backward`` for this row."""


@dataclass(frozen=True)
class BodyView:
    """A C++ body from the spec, indented for splicing, with the ``#line`` of its first line."""

    text: str
    line: str


@dataclass(frozen=True)
class BackwardBlock:
    """One block of the backward function: generated lines and/or a YAML body, under a guard."""

    guard: str
    """C++ condition the block runs under ("" for always): ``dx``, ``!dxs.empty()``."""
    lines: tuple[str, ...]
    """Generated C++ statements (elementwise gradients)."""
    yaml_text: str | None
    """The spec's backward body, indented (None for none)."""
    yaml_line: str | None
    """The ``#line`` of that body."""


@dataclass(frozen=True)
class SavedView:
    """A tensor the backward keeps from the forward: which one, where, when it is needed."""

    name: str
    slot: int
    """Its position among the saved tensors (a dynamic input, always last, takes one slot per tensor)."""
    condition: str
    """C++ condition over ``need_<input>`` flags under which it is kept."""
    dynamic: bool
    """Whether it is the dynamic input (one saved tensor per list element)."""
    is_input: bool
    """Whether it is an input (else an output)."""
    output_index: int
    """Its position among the outputs (-1 for an input)."""


@dataclass(frozen=True)
class ReferenceView:
    """A numpy reference function: its parameters and its (indented) body."""

    params: tuple[str, ...]
    body: str


@dataclass(frozen=True)
class OpView:
    """Everything framework-neutral the templates need about one op."""

    name: str
    class_name: str
    """CamelCase name (``scale_add`` -> ``ScaleAdd``)."""
    file: str
    """The spec file, as generated headers show it."""
    doc: str
    doc_py: str
    """The doc as a Python docstring body (escaped, indented four spaces)."""
    inputs: tuple[InputView, ...]
    outputs: tuple[OutputView, ...]
    attrs: tuple[AttrView, ...]
    in_names: tuple[str, ...]
    out_names: tuple[str, ...]
    attr_names: tuple[str, ...]
    kinds: tuple[str, ...]
    """Each input's kind, in order."""
    flexible: bool
    """Some input is optional or dynamic (the number of tensors per input varies: a *layout*)."""
    fixed_names: tuple[str, ...]
    """The inputs that are one tensor or none (not dynamic), in order."""
    dynamic: str | None
    """The dynamic input's name (at most one), or None."""
    diff_names: tuple[str, ...]
    """The differentiable inputs, in order."""
    diff_indices: tuple[int, ...]
    """Their positions among the inputs."""
    nondiff_names: tuple[str, ...]
    tparams: tuple[str, ...]
    """The kernel templates' type parameters (``x_t``), inputs then outputs."""
    rows: tuple[RowView, ...]
    """The dtype_format rows of the backend's target."""
    rows_text: str
    """The rows in words, for error messages: ``(x=float32, out=float32), ...``."""
    rows_cpp: str
    """:attr:`rows_text` as a C++ string literal."""
    attr_prelude: tuple[str, ...]
    """C++ statements naming each attr in a kernel body (``const float &alpha = attrs.alpha; (void)alpha;``)."""
    fw_lines: tuple[str, ...]
    """Generated forward statements (an elementwise op), else empty."""
    fw_body: BodyView | None
    """The spec's forward body (a kernel op), else None."""
    bw_blocks: tuple[BackwardBlock, ...]
    has_backward: bool
    all_grad_views: bool
    """Every differentiable input's gradient is a view of the output gradient: no backward kernel runs."""
    can_fail: bool
    """The kernel may raise an error no check before launch can catch (:func:`opgen.api.can_fail`)."""
    grad_flows: bool
    """A gradient reaches the inputs: some output is differentiable and the spec defines one."""
    saved: tuple[SavedView, ...]
    """What the backward keeps from the forward, in slot order."""
    saved_names: tuple[str, ...]
    """Their names, sorted."""
    reference: ReferenceView | None
    grad_reference: ReferenceView | None
    single_output: bool
    includes: tuple[str, ...]
    """``build.includes`` as ``#include`` arguments (``"x.h"`` or ``<x>``)."""
    shape_check_py: tuple[str, ...]
    """Python statements checking the contracts and computing output shapes (:func:`opgen.api.shape_check_py`)."""
    output_shapes_py: str
    """Python expression of the output shapes (:func:`opgen.api.output_shapes_py`)."""
    has_contracts: bool
    py_params: str
    """The Python function's parameters (inputs, then attrs with defaults; ``*`` where needed)."""
    call_args: str
    """A call forwarding :attr:`py_params`."""
    attr_key: str
    """Python expression of the cache key of the attr values (:func:`opgen.api.attr_key`)."""
    primitive_params: str
    """The attr parameters, each followed by ``, `` ("" for none)."""
    builtin: dict[str, str]
    """How generated Python spells each builtin it calls (``_builtins.len`` where an input shadows it)."""
    shadows_builtins: bool
    has_list_attr: bool
    has_effects: bool = False
    """The op writes an input in place (:attr:`opgen.model.Op.has_effects`): no gradient, kept and ordered in graphs."""
    written_names: tuple[str, ...] = ()
    """The inputs it writes in place, in order."""
    fw_roles: str = ""
    """The forward kernel's views' roles for checked mode's errors (``OPGEN_NAME_VIEWS_AS``, opgen/kernel.h), one
    character per input then output: ``w`` an input written in place, ``-`` another input, ``o`` an output."""
    bw_roles: str = ""
    """The backward kernel's: ``-`` for each input, output and output gradient, ``g`` for each input gradient."""
    no_outputs: bool = False
    """``outputs: []``: a call returns None."""
    float_attr_cpp: str = "float"
    """The C++ type of a float attr (and of a float list's items) in the kernel layer's ``Attrs``:
    ``float`` for MindSpore (AotExtra carries float32), ``double`` for PyTorch (its schema's
    ``float``); the bodies convert it to the row's compute type."""
