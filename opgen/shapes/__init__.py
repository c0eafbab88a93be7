"""The shape language of opgen specs: output shapes and input contracts.

Parsed once (:mod:`.syntax`) into a typed tree (its node types: :mod:`.nodes`); shape functions
live one per class in :mod:`.functions`; every rendering (Python, C++, words) is in :mod:`.emit`; :func:`evaluate`
runs the Python rendering.
"""

from .emit import optional_inputs, to_cpp, to_python, to_source, to_words
from .evaluate import evaluate
from .functions import FUNCTIONS, GradViewKind, NotApplicable, ShapeFunction
from .nodes import (
    Arith,
    AttrRef,
    Bound,
    Call,
    Compare,
    Cond,
    Const,
    Index,
    Len,
    ListOf,
    Logic,
    MinMax,
    Neg,
    Node,
    Not,
    Quant,
    RankOf,
    ShapeError,
    ShapeOf,
    Slice,
    TensorRef,
    Type,
    attrs_used,
    tensors_used,
    walk,
)
from .syntax import Scope, parse, parse_condition, parse_shape

__all__ = [
    "FUNCTIONS", "Arith", "AttrRef", "Bound", "Call", "Compare", "Cond", "Const", "GradViewKind", "Index", "Len",
    "ListOf", "Logic", "MinMax", "Neg", "Node", "Not", "NotApplicable", "Quant", "RankOf", "Scope", "ShapeError",
    "ShapeFunction", "ShapeOf", "Slice", "TensorRef", "Type", "attrs_used", "evaluate", "optional_inputs", "parse",
    "parse_condition", "parse_shape", "tensors_used", "to_cpp", "to_python", "to_source", "to_words", "walk",
]
