"""Typed Python signatures of the generated op functions, and shape rules in words.

Both the ``.pyi`` stubs (``templates/*.pyi.j2``) and the op reference pages (:mod:`opgen.opdoc`)
show the same signature; it is decided here once: a required input is a ``Tensor``, an optional
one ``Optional[Tensor] = None``, a dynamic one ``Sequence[Tensor]``; attrs carry their Python
type and default; an op with several outputs returns ``Tuple[Tensor, ...]`` of exact length.
"""

from __future__ import annotations

import ast
from typing import Any

from . import shapes as lang
from .api import PY_ATTR_TYPE, py_literal
from .model import Op, ShapeExpr

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
    """The return annotation: ``Tensor``, ``Tuple[Tensor, Tensor]`` for two outputs, ``None`` for
    an op without outputs (it writes an input in place)."""
    if not op.outputs:
        return "None"
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
                                      + ["layout: Sequence[int] = ...", "dynamic: bool = ..."]),
        "returns": returns(op),
        # the extension takes a dynamic input as a list and returns several outputs as a list
        "ext_params": ", ".join(_param_text(p, True) for p in params(op)).replace("Sequence[Tensor]", "List[Tensor]"),
        # an op without outputs: its extension function returns the tensors it wrote
        "ext_returns": "Tensor" if len(op.outputs) == 1 else "List[Tensor]",
        "doc": " ".join(op.doc.split()).replace("\\", "\\\\").replace('"""', '\\"\\"\\"').rstrip('"'),
    }


def shape_in_words(rule: ShapeExpr) -> str:
    """An output shape as a sentence fragment (Markdown), e.g. "`x.shape` and `y.shape` broadcast
    together (NumPy rules)" (:func:`opgen.shapes.to_words`)."""
    return lang.to_words(rule.node)
