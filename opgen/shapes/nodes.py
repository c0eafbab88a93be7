"""The typed tree of the shape language: its node types, their :class:`Type`, and
:class:`ShapeError`.

:mod:`.syntax` parses text into these nodes; :mod:`.functions` (one class per shape function,
whose calls are :class:`Call` nodes) and :mod:`.emit` (every rendering) read them. This module
imports neither, so that all three sit above it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from .functions import ShapeFunction


class Type(enum.Enum):
    """The type of a shape-language expression."""

    INT = "int"
    BOOL = "bool"
    STR = "str"
    FLOAT = "float"
    LIST = "list[int]"
    ROWS = "list[list[int]]"
    TENSOR = "tensor"
    TENSORS = "list of tensors"


class ShapeError(ValueError):
    """A malformed shape expression; ``col`` is the 1-based column of the offending
    sub-expression inside the expression text, ``notes`` extra hints."""

    def __init__(self, message: str, col: int = 1, notes: tuple[str, ...] = ()):
        super().__init__(message)
        self.col = col
        self.notes = notes
        self.others: tuple[ShapeError, ...] = ()

    def all(self) -> tuple[ShapeError, ...]:
        """This error and the others found in the same expression, by column: a parse reports
        every error it can (a '/' where '//' is meant does not hide an unknown name)."""
        return tuple(sorted((self, *self.others), key=lambda e: e.col))


# ----------------------------------------------------------------------------- nodes


@dataclass(frozen=True)
class Const:
    """A literal int, bool, str or float."""

    value: int | bool | str | float
    type: Type
    col: int


@dataclass(frozen=True)
class AttrRef:
    """An attr's value."""

    name: str
    type: Type
    col: int


@dataclass(frozen=True)
class TensorRef:
    """An input (``tensor``) or a dynamic input (``tensors``); ``optional`` when it may be None;
    ``loop`` for the variable of ``all(... for z in zs)``, one tensor of a dynamic input (no
    input of the op: :func:`tensors_used` leaves it out)."""

    name: str
    type: Type
    col: int
    optional: bool = False
    loop: bool = False


@dataclass(frozen=True)
class Bound:
    """The variable of ``all(... for p in s)`` over a list (an int) or a ``list[list[int]]``
    attr (a list): one item of ``s``."""

    name: str
    type: Type
    col: int


@dataclass(frozen=True)
class ShapeOf:
    """``x.shape``: the input's shape (a list)."""

    tensor: TensorRef
    col: int
    type: Type = Type.LIST


@dataclass(frozen=True)
class RankOf:
    """``x.rank``: the input's number of dimensions."""

    tensor: TensorRef
    col: int
    type: Type = Type.INT


@dataclass(frozen=True)
class Index:
    """``s[i]`` of a list (negative ``i`` counts from the end): an int, or a list (a row) of a
    ``list[list[int]]`` attr."""

    base: Node
    index: Node
    col: int
    type: Type = Type.INT


@dataclass(frozen=True)
class Slice:
    """``s[lo:hi]`` of a list (Python's rules; either bound may be left out)."""

    base: Node
    lo: Node | None
    hi: Node | None
    col: int
    type: Type = Type.LIST


@dataclass(frozen=True)
class Len:
    """``len(s)``: the length of a list, or the number of tensors of a dynamic input."""

    arg: Node
    col: int
    type: Type = Type.INT


@dataclass(frozen=True)
class Arith:
    """``l op r`` with op one of ``+ - * // %`` on ints; ``+`` of lists; ``list * int``."""

    op: str
    left: Node
    right: Node
    col: int
    type: Type


@dataclass(frozen=True)
class Neg:
    """``-x`` of an int."""

    operand: Node
    col: int
    type: Type = Type.INT


@dataclass(frozen=True)
class MinMax:
    """``min(a, b, ...)`` or ``max(a, b, ...)`` of ints."""

    fn: str
    args: tuple[Node, ...]
    col: int
    type: Type = Type.INT


@dataclass(frozen=True)
class ListOf:
    """``[d0, d1, ...]``: a list of int expressions."""

    items: tuple[Node, ...]
    col: int
    type: Type = Type.LIST


@dataclass(frozen=True)
class Compare:
    """``l op r`` with op one of ``== != < <= > >=``."""

    op: str
    left: Node
    right: Node
    col: int
    type: Type = Type.BOOL


@dataclass(frozen=True)
class Logic:
    """``a and b and ...`` / ``a or b or ...``."""

    op: str
    args: tuple[Node, ...]
    col: int
    type: Type = Type.BOOL


@dataclass(frozen=True)
class Not:
    """``not c``."""

    operand: Node
    col: int
    type: Type = Type.BOOL


@dataclass(frozen=True)
class Cond:
    """``a if test else b``."""

    test: Node
    then: Node
    orelse: Node
    col: int
    type: Type


@dataclass(frozen=True)
class Quant:
    """``all(body for var in iterable)`` / ``any(...)``: ``body`` (a condition) for each item of
    ``iterable`` (:data:`opgen.shapes.syntax.ITERABLE`), bound to ``var`` (a loop :class:`TensorRef` or a
    :class:`Bound`). ``all`` of nothing is true, ``any`` of nothing false."""

    fn: str
    var: TensorRef | Bound
    iterable: Node
    body: Node
    col: int
    type: Type = Type.BOOL


@dataclass(frozen=True)
class Call:
    """A shape function call: ``broadcast(x, y)``, ``reduce(x, axis, keep_dims)``, ...
    ``args`` are in the function's parameter order, defaults filled in."""

    fn: ShapeFunction
    args: tuple[Node, ...]
    col: int
    type: Type = Type.LIST


Node = Union[Const, AttrRef, TensorRef, Bound, ShapeOf, RankOf, Index, Slice, Len, Arith, Neg, MinMax, ListOf,
             Compare, Logic, Not, Cond, Quant, Call]
"""Any node of the typed tree."""


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-expressions of ``node`` (for walks)."""
    if isinstance(node, (Const, AttrRef, TensorRef, Bound)):
        return ()
    if isinstance(node, (ShapeOf, RankOf)):
        return (node.tensor,)
    if isinstance(node, Index):
        return (node.base, node.index)
    if isinstance(node, Slice):
        return tuple(n for n in (node.base, node.lo, node.hi) if n is not None)
    if isinstance(node, (Len,)):
        return (node.arg,)
    if isinstance(node, (Arith, Compare)):
        return (node.left, node.right)
    if isinstance(node, (Neg, Not)):
        return (node.operand,)
    if isinstance(node, (MinMax, Logic, Call)):
        return node.args
    if isinstance(node, ListOf):
        return node.items
    if isinstance(node, Cond):
        return (node.test, node.then, node.orelse)
    if isinstance(node, Quant):
        return (node.iterable, node.body)
    raise AssertionError(f"unknown node {node!r}")


def walk(node: Node) -> list[Node]:
    """``node`` and every node below it, parents first."""
    out = [node]
    for c in children(node):
        out.extend(walk(c))
    return out


def tensors_used(node: Node) -> tuple[str, ...]:
    """Input names the expression refers to, in first-use order (loop variables are none)."""
    seen: list[str] = []
    for n in walk(node):
        if isinstance(n, TensorRef) and not n.loop and n.name not in seen:
            seen.append(n.name)
    return tuple(seen)


def attrs_used(node: Node) -> tuple[str, ...]:
    """Attr names the expression refers to, in first-use order."""
    seen: list[str] = []
    for n in walk(node):
        if isinstance(n, AttrRef) and n.name not in seen:
            seen.append(n.name)
    return tuple(seen)
