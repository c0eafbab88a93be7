"""Evaluate a shape-language tree in Python: the generated Python expression
(:func:`opgen.shapes.emit.to_python`), compiled once per tree and run over :mod:`opgen.runtime.shapes` (ints).
``opgen test``'s sampler, ``opgen check`` and the tests use it; generated code embeds the same
expression text."""

from __future__ import annotations

from collections.abc import Mapping
from types import CodeType
from typing import Any

from ..runtime import shapes as shape_runtime
from .emit import to_python
from .nodes import Node

_CODE: dict[Node, CodeType] = {}


def evaluate(node: Node, env: Mapping[str, Any]) -> Any:
    """The value of ``node`` with inputs bound to shapes (a list of shapes for a dynamic input,
    None for an absent optional input) and attrs to values, by name in ``env``.

    Raises:
        opgen.runtime.shapes.ShapeError: (a ValueError) an index out of range, a division by zero, an
            int64 overflow; ValueError: a shape function's rule (e.g. shapes that do not broadcast).
        KeyError: a name missing from ``env``.
    """
    code = _CODE.get(node)
    if code is None:
        code = compile(to_python(node, lambda n: f"_env[{n!r}]"), "<shape expression>", "eval")
        _CODE[node] = code
    return eval(code, {"_rt": shape_runtime, "_env": env, "__builtins__": {}})  # noqa: S307 - our own code
