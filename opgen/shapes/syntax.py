"""The shape language: typed syntax tree, parser and type checker.

A shape expression is written in a small subset of Python and parsed once, here, into a typed
tree of frozen nodes (their types: :mod:`opgen.shapes.nodes`).  Every consumer is generated
from that tree (:mod:`opgen.shapes.emit`): the Python meaning (``opgen test``'s sampler, the
numpy reference), the C++ shape inference of the ``Function<T>`` path and the aot
``<Func>InferShape``, and the docs' words.

Types: ``int``, ``bool``, ``str``, ``float`` (attrs only), ``list`` (a list of ints: a shape, a
slice of one, or a ``list[int]`` attr), ``tensor`` (an input; usable through ``.shape``,
``.rank``, or where a shape is expected) and ``tensors`` (a dynamic input).

The grammar (each form type-checked against the op's inputs and attrs):

* literals ``3``, ``True``, ``'mean'``; attr names; input names;
* ``x.shape``, ``x.rank``, ``s[i]``, ``s[a:b]`` (on shapes and list[int] attrs), ``len(s)``;
* ``+ - * // %`` on ints, ``+`` joining lists, ``list * int`` repeating one, unary ``-``;
* ``min(a, b, ...)``, ``max(a, b, ...)``;
* ``[d0, d1, ...]`` (a list of int expressions);
* comparisons ``== != < <= > >=`` (ints, floats; ``==``/``!=`` also on lists, strs, bools),
  ``and``, ``or``, ``not``; ``a if cond else b``;
* shape functions (:mod:`opgen.shapes.functions`): ``broadcast(x, y, ...)``,
  ``reduce(x, axis, keep_dims)``, ``matmul(a, b, transpose_a, transpose_b)``,
  ``concat(xs, axis)``, ``gather(x, indices, axis)``.

An output shape is an expression of type ``list``; a bare input name ``x`` means ``x.shape``.
A contract (``requires:``) is an expression of type ``bool``.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

from .emit import to_source
from .functions import FUNCTIONS
from .nodes import (
    Arith,
    AttrRef,
    Bound,
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
    walk,
)

MAX_DEPTH = 64
"""Deepest nesting of an expression; deeper ones are rejected (not a RecursionError)."""

INT64_MAX = 2**63 - 1


ATTR_TYPES: dict[str, Type] = {
    "int": Type.INT,
    "bool": Type.BOOL,
    "str": Type.STR,
    "float": Type.FLOAT,
    "list[int]": Type.LIST,
    "list[list[int]]": Type.ROWS,
}
"""Attr types a shape expression may use, and their language type (other list attrs may not)."""

ITERABLE = {Type.TENSORS: Type.TENSOR, Type.ROWS: Type.LIST, Type.LIST: Type.INT}
"""What ``all(... for v in s)`` / ``any(...)`` may iterate over, and the type of ``v``: the
tensors of a dynamic input, the rows of a ``list[list[int]]`` attr, the ints of a list."""


def _joined(errors: list[ShapeError]) -> ShapeError:
    """One error carrying all of ``errors`` (the leftmost first, the rest in ``others``)."""
    ordered = sorted(errors, key=lambda e: e.col)
    first = ordered[0]
    first.others = tuple(e for e in ordered[1:] if e is not first)
    return first


@dataclass(frozen=True)
class Scope:
    """The names an expression may use: inputs (name -> kind: required, optional, dynamic) and
    attrs (name -> attr type, e.g. ``"list[int]"``)."""

    inputs: Mapping[str, str]
    attrs: Mapping[str, str]


# ----------------------------------------------------------------------------- parsing

_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def _col(node: ast.AST) -> int:
    return int(getattr(node, "col_offset", 0)) + 1


def parse_text(text: str) -> ast.expr:
    """Python's parse of ``text`` in eval mode.

    Raises:
        ShapeError: a syntax error, or nesting deeper than :data:`MAX_DEPTH`.
    """
    stripped = text.strip()
    depth = 0
    deepest = 0
    for ch in stripped:  # bound the nesting before Python's parser recurses into it
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    if deepest > MAX_DEPTH:
        raise ShapeError(f"expression nested {deepest} deep; at most {MAX_DEPTH} levels are allowed")
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError as exc:
        raise ShapeError(f"cannot parse {stripped!r}: {exc.msg}", exc.offset or 1) from None
    except (RecursionError, MemoryError, ValueError):
        raise ShapeError("expression too deeply nested or too long") from None
    return tree.body


class _Parser:
    def __init__(self, scope: Scope):
        self.scope = scope
        self.depth = 0
        self.bound: dict[str, TensorRef | Bound] = {}  # loop variables of all()/any() in scope
        self.errors: list[ShapeError] = []  # errors the parse went on after (reported together)

    def run(self, tree: ast.expr) -> Node:
        """:meth:`go` on the whole expression, raising every error found (see ShapeError.all)."""
        try:
            node = self.go(tree)
        except ShapeError as exc:
            raise _joined(self.errors + [exc]) from None
        if self.errors:
            raise _joined(self.errors)
        return node

    # -- helpers
    def want(self, node: Node, *types: Type, what: str) -> Node:
        if node.type not in types:
            if node.type is Type.TENSOR and Type.LIST in types:
                return _shape_of(node)
            names = " or ".join(t.value for t in types)
            hint: tuple[str, ...] = ()
            if node.type is Type.TENSOR:
                hint = (f"use '{_text(node)}.shape' for its shape or '{_text(node)}.rank' for its rank",)
            elif node.type is Type.FLOAT and Type.INT in types:
                hint = ("float attrs can only be compared; shapes are ints",)
            raise ShapeError(f"{what} must be {_a(names)}, but '{_text(node)}' is {_a(node.type.value)}",
                             node.col, hint)
        return node

    def go(self, node: ast.expr) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ShapeError(f"expression nested deeper than {MAX_DEPTH} levels", _col(node))
        try:
            return self._go(node)
        finally:
            self.depth -= 1

    def _go(self, node: ast.expr) -> Node:
        col = _col(node)
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                return Const(v, Type.BOOL, col)
            if isinstance(v, int):
                if v > INT64_MAX:
                    raise ShapeError(f"integer {_short(v)} does not fit in int64", col)
                return Const(v, Type.INT, col)
            if isinstance(v, float):
                return Const(v, Type.FLOAT, col)
            if isinstance(v, str):
                return Const(v, Type.STR, col)
            raise ShapeError(f"unsupported literal {ast.unparse(node)!r}", col)
        if isinstance(node, ast.Name):
            return self.name(node.id, col)
        if isinstance(node, ast.Attribute):
            if node.attr not in ("shape", "rank"):
                raise ShapeError(f"unknown attribute '.{node.attr}'; inputs have '.shape' and '.rank'",
                                 col + len(ast.unparse(node.value)) + 1)
            base = self.go(node.value)
            if not isinstance(base, TensorRef) or base.type is not Type.TENSOR:
                raise ShapeError(f"'.{node.attr}' applies to an input, not to '{ast.unparse(node.value)}'"
                                 + (" (a dynamic input: a list of tensors)" if isinstance(base, TensorRef) else ""),
                                 col)
            return ShapeOf(base, col) if node.attr == "shape" else RankOf(base, col)
        if isinstance(node, ast.Subscript):
            base = self.go(node.value)
            if base.type is Type.ROWS and not isinstance(node.slice, ast.Slice):
                idx = self.want(self.go(node.slice), Type.INT, what="an index")
                return Index(base, idx, col, Type.LIST)
            base = self.want(base, Type.LIST, what="what is indexed" if base.type is not Type.ROWS
                             else "what is sliced (a list[list[int]] attr takes an index, not a slice)")
            if isinstance(node.slice, ast.Slice):
                if node.slice.step is not None:
                    raise ShapeError("slices with a step are not supported; write s[a:b]", _col(node.slice.step))
                lo = self.want(self.go(node.slice.lower), Type.INT, what="a slice bound") \
                    if node.slice.lower is not None else None
                hi = self.want(self.go(node.slice.upper), Type.INT, what="a slice bound") \
                    if node.slice.upper is not None else None
                return Slice(base, lo, hi, col)
            idx = self.want(self.go(node.slice), Type.INT, what="an index")
            return Index(base, idx, col)
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                operand = self.want(self.go(node.operand), Type.INT, Type.FLOAT, what="the operand of '-'")
                if isinstance(operand, Const) and isinstance(operand.value, (int, float)):
                    return Const(-operand.value, operand.type, col)
                if operand.type is Type.FLOAT:
                    raise ShapeError("float attrs can only be compared", col)
                return Neg(operand, col)
            if isinstance(node.op, ast.UAdd):
                return self.want(self.go(node.operand), Type.INT, what="the operand of '+'")
            if isinstance(node.op, ast.Not):
                return Not(self.want(self.go(node.operand), Type.BOOL, what="the operand of 'not'"), col)
            raise ShapeError("'~' is not supported", col)
        if isinstance(node, ast.BinOp):
            return self.binop(node, col)
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            return Logic(op, tuple(self.want(self.go(v), Type.BOOL, what=f"an operand of '{op}'")
                                   for v in node.values), col)
        if isinstance(node, ast.Compare):
            return self.compare(node, col)
        if isinstance(node, ast.IfExp):
            test = self.want(self.go(node.test), Type.BOOL, what="the condition of 'if'")
            a, b = _shape_of(self.go(node.body)), _shape_of(self.go(node.orelse))
            if a.type != b.type or a.type not in (Type.INT, Type.LIST, Type.BOOL):
                raise ShapeError(f"both branches of 'if' must be ints or both lists; got {a.type.value} and "
                                 f"{b.type.value}", col)
            return Cond(test, a, b, col, a.type)
        if isinstance(node, ast.List):
            return ListOf(tuple(self.want(self.go(e), Type.INT, what="a dimension") for e in node.elts), col)
        if isinstance(node, ast.Tuple):
            raise ShapeError("write a list of dims with brackets: [a, b]", col)
        if isinstance(node, ast.Call):
            return self.call(node, col)
        raise ShapeError(f"unsupported syntax '{ast.unparse(node)}' in a shape expression", col)

    def name(self, name: str, col: int) -> Node:
        s = self.scope
        var = self.bound.get(name)
        if var is not None:
            if isinstance(var, TensorRef):
                return TensorRef(name, var.type, col, loop=True)
            return Bound(name, var.type, col)
        if name in s.inputs:
            kind = s.inputs[name]
            return TensorRef(name, Type.TENSORS if kind == "dynamic" else Type.TENSOR, col, kind == "optional")
        if name in s.attrs:
            t = ATTR_TYPES.get(s.attrs[name])
            if t is None:
                raise ShapeError(f"attr '{name}' is {_a(s.attrs[name])}; shape expressions take int, float, bool, "
                                 "str, list[int] and list[list[int]] attrs", col)
            return AttrRef(name, t, col)
        if name in FUNCTIONS or name in ("len", "min", "max", "all", "any"):
            raise ShapeError(f"'{name}' is a function; call it as {name}(...)", col)
        from ..diagnostics import did_you_mean  # local: diagnostics is a leaf module

        notes = tuple(n.message for n in did_you_mean(name, list(s.inputs) + list(s.attrs)))
        raise ShapeError(f"unknown name '{name}'; expected an input or attr of the op", col, notes)

    def binop(self, node: ast.BinOp, col: int) -> Node:
        if isinstance(node.op, ast.Div):  # reported, then read as '//' so that the rest is checked too
            self.errors.append(ShapeError("'/' is true division; shapes are ints: use '//' (floor division)",
                                          _op_col(node), ("write e.g. x.shape[-1] // 2",)))
        op = "//" if isinstance(node.op, ast.Div) else _ARITH.get(type(node.op))
        if op is None:
            raise ShapeError(f"operator '{ast.unparse(node)}' is not supported; use + - * // %", col)
        left, right = _shape_of(self.go(node.left)), _shape_of(self.go(node.right))
        if op == "+" and left.type is Type.LIST:
            return Arith(op, left, self.want(right, Type.LIST, what="what is added to a list"), col, Type.LIST)
        if op == "*" and Type.LIST in (left.type, right.type):
            lst, n = (left, right) if left.type is Type.LIST else (right, left)
            return Arith(op, lst, self.want(n, Type.INT, what="a list's repeat count"), col, Type.LIST)
        left = self.want(left, Type.INT, what=f"the left operand of '{op}'")
        right = self.want(right, Type.INT, what=f"the right operand of '{op}'")
        if op in ("//", "%") and isinstance(right, Const) and right.value == 0:
            raise ShapeError("division by zero", right.col)
        return Arith(op, left, right, col, Type.INT)

    def compare(self, node: ast.Compare, col: int) -> Node:
        if len(node.ops) != 1:
            raise ShapeError("chained comparisons are not supported; join them with 'and'", col)
        op = _CMP.get(type(node.ops[0]))
        if op is None:
            raise ShapeError("only == != < <= > >= comparisons are supported", col)
        left, right = _shape_of(self.go(node.left)), _shape_of(self.go(node.comparators[0]))
        numeric = (Type.INT, Type.FLOAT)
        if left.type in numeric and right.type in numeric:
            return Compare(op, left, right, col)
        if left.type != right.type:
            raise ShapeError(f"cannot compare {_a(left.type.value)} with {_a(right.type.value)}: "
                             f"'{ast.unparse(node)}'", col)
        if left.type in (Type.ROWS, Type.TENSORS):
            raise ShapeError(f"{_a(left.type.value)} cannot be compared; compare its items with "
                             "all(... for v in s)", col)
        if op not in ("==", "!=") and left.type is not Type.INT:
            raise ShapeError(f"'{op}' compares ints and floats; {left.type.value}s take == and != only", col)
        return Compare(op, left, right, col)

    def call(self, node: ast.Call, col: int) -> Node:
        if not isinstance(node.func, ast.Name):
            raise ShapeError(f"only calls of named functions are supported, not '{ast.unparse(node.func)}'", col)
        fname = node.func.id
        if node.keywords:
            raise ShapeError(f"{fname}() takes positional arguments", _col(node.keywords[0].value))
        if fname == "len":
            if len(node.args) != 1:
                raise ShapeError("len() takes one argument", col)
            arg = self.go(node.args[0])
            if arg.type not in (Type.TENSORS, Type.ROWS):
                arg = self.want(arg, Type.LIST, what="the argument of len()")
            return Len(arg, col)
        if fname in ("all", "any"):
            return self.quant(fname, node, col)
        if fname in ("min", "max"):
            if len(node.args) < 2:
                raise ShapeError(f"{fname}() takes two or more ints", col)
            return MinMax(fname, tuple(self.want(self.go(a), Type.INT, what=f"an argument of {fname}()")
                                       for a in node.args), col)
        fn = FUNCTIONS.get(fname)
        if fn is None:
            from ..diagnostics import did_you_mean

            known = sorted(FUNCTIONS) + ["all", "any", "len", "max", "min"]
            notes = tuple(n.message for n in did_you_mean(fname, known))
            raise ShapeError(f"unknown function '{fname}'; shape functions are: {', '.join(known)}", col, notes)
        return fn.parse(node, col, self)

    def quant(self, fname: str, node: ast.Call, col: int) -> Node:
        """``all(cond for v in s)`` / ``any(...)``: one generator, one ``for``, no ``if``."""
        form = f"write {fname}(<condition> for <name> in <list>), e.g. {fname}(z.shape == x.shape for z in zs)"
        if len(node.args) != 1 or not isinstance(node.args[0], ast.GeneratorExp):
            raise ShapeError(f"{fname}() takes one generator: {form}", col)
        gen = node.args[0]
        if len(gen.generators) != 1:
            raise ShapeError(f"{fname}() takes one 'for': {form}", col)
        comp = gen.generators[0]
        if comp.ifs:
            raise ShapeError(f"'if' inside {fname}() is not supported; use 'or' in the condition", _col(comp.ifs[0]))
        if not isinstance(comp.target, ast.Name):
            raise ShapeError(f"the loop variable of {fname}() must be one name: {form}", _col(comp.target))
        var = comp.target.id
        if var in self.scope.inputs or var in self.scope.attrs or var in self.bound:
            raise ShapeError(f"loop variable '{var}' hides an input, attr or loop variable of that name; "
                             "pick another name", _col(comp.target))
        iterable = _shape_of(self.go(comp.iter))  # a tensor's dims: all(d > 0 for d in x)
        item = ITERABLE.get(iterable.type)
        if item is None:
            raise ShapeError(f"{fname}() iterates over a dynamic input (its tensors), a list[list[int]] attr (its "
                             f"rows) or a list (its ints), but '{_text(iterable)}' is {_a(iterable.type.value)}",
                             iterable.col)
        bound: TensorRef | Bound = (TensorRef(var, item, _col(comp.target), loop=True) if item is Type.TENSOR
                                    else Bound(var, item, _col(comp.target)))
        self.bound[var] = bound
        try:
            body = self.want(self.go(gen.elt), Type.BOOL, what=f"the condition of {fname}()")
        finally:
            del self.bound[var]
        return Quant(fname, bound, iterable, body, col)


def _shape_of(node: Node) -> Node:
    """An input where a list is meant stands for its shape (``x`` is ``x.shape``)."""
    return ShapeOf(node, node.col) if isinstance(node, TensorRef) and node.type is Type.TENSOR else node


def _op_col(node: ast.BinOp) -> int:
    return node.left.end_col_offset + 2 if node.left.end_col_offset is not None else _col(node)


def _a(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def _short(v: int) -> str:
    s = str(v)
    return s if len(s) <= 24 else s[:10] + "..." + s[-4:] + f" ({len(s)} digits)"


def _text(node: Node) -> str:
    return to_source(node)


def parse(text: str | int | list[object], scope: Scope) -> Node:
    """Parse and type-check one expression (a string, or a YAML list of dims / an int).

    Raises:
        ShapeError: anything outside the language or ill-typed, at the sub-expression's column.
    """
    parser = _Parser(scope)
    if isinstance(text, list):
        items = []
        for item in text:
            if isinstance(item, bool) or not isinstance(item, (int, str)):
                raise ShapeError(f"dimension {item!r} must be an int or an expression")
            node = parser.run(parse_text(item)) if isinstance(item, str) else parser.go(ast.Constant(item))
            items.append(parser.want(node, Type.INT, what="a dimension"))
        return ListOf(tuple(items), 1)
    if isinstance(text, bool) or not isinstance(text, str):
        raise ShapeError(f"expected an expression, got {text!r}")
    return parser.run(parse_text(text))


def parse_shape(text: str | list[object], scope: Scope) -> Node:
    """Parse an output shape (type ``list``; a bare input name means its shape).

    Raises:
        ShapeError: see :func:`parse`; also an expression that is not a list, or that uses an
            optional input (which may be None).
    """
    node = _shape_of(parse(text, scope))
    if node.type is Type.TENSORS and isinstance(node, TensorRef):
        raise ShapeError(f"input '{node.name}' is dynamic (a list of tensors), not one shape; "
                         f"use concat({node.name}, axis)", node.col)
    if node.type is not Type.LIST:
        hint = ("a scalar output has shape []",) if node.type is Type.INT else ()
        raise ShapeError(f"an output shape must be a list of dims, but this is {_a(node.type.value)}", node.col,
                         hint)
    for n in walk(node):
        if isinstance(n, TensorRef) and n.optional:
            raise ShapeError(f"input '{n.name}' is optional and may be None; an output shape cannot depend on it",
                             n.col)
    return node


def parse_condition(text: str, scope: Scope) -> Node:
    """Parse a contract (type ``bool``).

    Raises:
        ShapeError: see :func:`parse`; also an expression that is not a condition.
    """
    node = parse(text, scope)
    if node.type is not Type.BOOL:
        raise ShapeError(f"a contract must be a condition (e.g. 'x.rank >= 1'), but this is "
                         f"{_a(node.type.value)}", node.col)
    return node
