"""Typed Python signatures of the generated op functions, and shape rules in words.

Both the ``.pyi`` stubs (``templates/*.pyi.j2``) and the op reference pages (:mod:`opgen.opdoc`)
show the same signature; it is decided here once: a required input is a ``Tensor``, an optional
one ``Optional[Tensor] = None``, a dynamic one ``Sequence[Tensor]``; attrs carry their Python
type and default; an op with several outputs returns ``Tuple[Tensor, ...]`` of exact length.
"""

from __future__ import annotations

import ast
from typing import Any

from .api import PY_ATTR_TYPE, py_literal
from .exprs import RuleArg, ShapeRule
from .model import Op

TENSOR_ANNOTATION = {"required": "Tensor", "optional": "Optional[Tensor]", "dynamic": "Sequence[Tensor]"}
"""Annotation of a tensor input of each kind."""


def params(op: Op) -> list[dict[str, str]]:
    """The parameters of ``<op>(...)``: ``name``, ``annotation``, ``default`` ('' when none), in call order."""
    out = [
        {"name": x.name, "annotation": TENSOR_ANNOTATION[x.kind], "default": "None" if x.kind == "optional" else ""}
        for x in op.inputs
    ]
    out += [
        {"name": a.name, "annotation": PY_ATTR_TYPE[a.type],
         "default": py_literal(a, a.default) if a.has_default else ""}
        for a in op.attrs
    ]
    return out


def returns(op: Op) -> str:
    """The return annotation: ``Tensor``, or ``Tuple[Tensor, Tensor]`` for two outputs."""
    if len(op.outputs) == 1:
        return "Tensor"
    return "Tuple[" + ", ".join("Tensor" for _ in op.outputs) + "]"


def _param_text(p: dict[str, str], stub: bool) -> str:
    if not p["default"]:
        return f"{p['name']}: {p['annotation']}"
    default = p["default"]
    if stub:  # a stub shows a default that is a plain literal, else '...'
        try:
            ast.literal_eval(default)
        except (ValueError, SyntaxError):
            default = "..."
    return f"{p['name']}: {p['annotation']} = {default}"


def signature(op: Op, *, stub: bool = False) -> str:
    """``name(x: Tensor, alpha: float = 1.0) -> Tensor``; with ``stub``, a non-literal default is ``...``."""
    return f"{op.name}({', '.join(_param_text(p, stub) for p in params(op))}) -> {returns(op)}"


def stub_context(op: Op) -> dict[str, Any]:
    """Fields of one op for the ``.pyi`` templates."""
    return {
        "name": op.name,
        "params": ", ".join(_param_text(p, True) for p in params(op)),
        "primitive_params": ", ".join([_param_text(p, True) for p in params(op)[len(op.inputs):]]
                                      + ["layout: Sequence[int] = ..."]),
        "returns": returns(op),
        # the extension takes a dynamic input as a list and returns several outputs as a list
        "ext_params": ", ".join(_param_text(p, True) for p in params(op)).replace("Sequence[Tensor]", "List[Tensor]"),
        "ext_returns": "Tensor" if len(op.outputs) == 1 else "List[Tensor]",
        "doc": " ".join(op.doc.split()).replace("\\", "\\\\").replace('"""', '\\"\\"\\"').rstrip('"'),
    }


def _arg(arg: RuleArg) -> str:
    return f"attr `{arg.attr}`" if arg.attr is not None else f"`{arg.text}`"


def _when(arg: RuleArg, what: str) -> str:
    """``what`` qualified by a bool rule argument: always, never (''), or when an attr is true."""
    if arg.attr is not None:
        return f"{what} when attr `{arg.attr}` is true"
    return what if arg.literal else ""


def _axes(arg: RuleArg) -> str:
    if arg.attr is not None:
        return f"the axes in attr `{arg.attr}` (all axes when empty)"
    lit = arg.literal
    if isinstance(lit, tuple):
        if len(lit) == 1:
            return f"axis {lit[0]}"
        return "all axes" if not lit else "axes " + ", ".join(str(v) for v in lit)
    return f"axis {lit}"


def shape_in_words(rule: ShapeRule) -> str:
    """A shape rule as a sentence fragment (Markdown), e.g. "the NumPy broadcast of `x`, `y`"."""
    names = ", ".join(f"`{n}`" for n in rule.inputs)
    if rule.kind == "same":
        return f"the shape of {names}"
    if rule.kind == "broadcast":
        return f"the NumPy broadcast of the shapes of {names}"
    if rule.kind == "reduce":
        keep = _when(rule.arg("keep_dims"), "kept as size-1 dims")
        return f"the shape of {names} reduced over {_axes(rule.arg('axis'))}, reduced axes " + (
            keep + ", else dropped" if rule.arg("keep_dims").attr else (keep or "dropped"))
    if rule.kind == "matmul":
        a, b = rule.inputs[0], rule.inputs[1]
        notes = [n for n in (_when(rule.arg("transpose_a"), f"`{a}` transposed"),
                             _when(rule.arg("transpose_b"), f"`{b}` transposed")) if n]
        return f"the matrix product's (rows of `{a}`, columns of `{b}`)" + (
            " with " + " and ".join(notes) if notes else "")
    if rule.kind == "concat":
        return f"the tensors of {names} joined along the axis in {_arg(rule.arg('axis'))}"
    if rule.kind == "gather":
        x, idx = rule.inputs[0], rule.inputs[1]
        return (f"the shape of `{x}` with the dim on the axis in {_arg(rule.arg('axis'))} replaced by the shape of "
                f"`{idx}` (numpy.take)")
    return "[" + ", ".join(d.render("attr `{attr}`", "dim {axis} of `{input}`") for d in rule.dims) + "]"
