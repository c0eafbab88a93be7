"""Elementwise expressions, one of the small languages inside a spec (the other, shapes and
contracts, is :mod:`opgen.shapes`).

Parsed with Python's :mod:`ast` (``mode="eval"``) into a restricted subset, never evaluated.
An elementwise expression such as ``2 * x * dout`` is translated to a C++ expression over
scalars (compute type ``C``) and to a numpy expression over arrays.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Callable

# name -> (arity, C++ template, numpy template); {0}, {1}, ... are the translated arguments.
FUNCTIONS: dict[str, tuple[int, str, str]] = {
    "exp": (1, "opgen::math::exp({0})", "np.exp({0})"),
    "log": (1, "opgen::math::log({0})", "np.log({0})"),
    "sqrt": (1, "opgen::math::sqrt({0})", "np.sqrt({0})"),
    "rsqrt": (1, "opgen::math::rsqrt({0})", "(1 / np.sqrt({0}))"),
    "tanh": (1, "opgen::math::tanh({0})", "np.tanh({0})"),
    "sigmoid": (1, "opgen::math::sigmoid({0})", "(1 / (1 + np.exp(-({0}))))"),
    "abs": (1, "opgen::math::abs({0})", "np.abs({0})"),
    "erf": (1, "opgen::math::erf({0})", "_erf({0})"),
    "log1p": (1, "opgen::math::log1p({0})", "np.log1p({0})"),
    "expm1": (1, "opgen::math::expm1({0})", "np.expm1({0})"),
    "sign": (1, "opgen::math::sign({0})", "np.sign({0})"),
    "maximum": (2, "opgen::math::maximum({0}, {1})", "np.maximum({0}, {1})"),
    "minimum": (2, "opgen::math::minimum({0}, {1})", "np.minimum({0}, {1})"),
    "pow": (2, "opgen::math::pow({0}, {1})", "np.power({0}, {1})"),
}

MEMORY_BOUND_FUNCTIONS = frozenset({"abs", "sign", "maximum", "minimum"})
"""Functions that cost about one vector instruction: an expression that calls no other function
(and has no ``**``) is memory-bound (:attr:`Expr.memory_bound`)."""

_BINOPS: dict[type, str] = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_CMPOPS: dict[type, str] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
}


class ExprError(ValueError):
    """A malformed expression; ``col`` is the 1-based column inside the expression text."""

    def __init__(self, message: str, col: int = 1):
        super().__init__(message)
        self.col = col


@dataclass(frozen=True)
class Expr:
    """A parsed elementwise expression.

    Attributes:
        text: the source text.
        names: every name it uses, in first-use order.
        cpp: C++ expression over scalars; literals are cast to the compute type ``C``.
        numpy: numpy expression over arrays (``np`` in scope).
        memory_bound: only arithmetic, comparisons, ``if``/``else`` and the functions of
            :data:`MEMORY_BOUND_FUNCTIONS` (``x + y``, ``dout * (x > 0)``): a loop over it waits
            on memory, and the generated C++ runs it in the AVX2 copy
            (``opgen::kMemoryBoundIsa``, opgen/include/opgen/kernel.h, which gives the figures).
    """

    text: str
    names: tuple[str, ...]
    cpp: str
    numpy: str
    memory_bound: bool = False


MAX_EXPR_DEPTH = 100
"""Deepest nesting of an expression or shape rule (operators, calls, parentheses); a real one
needs about 10.  Deeper ones are diagnostics, never a RecursionError."""


def _shown(text: str, keep: int = 30) -> str:
    """``text`` as quoted in a diagnostic: whole when short, its two ends otherwise."""
    return repr(text) if len(text) <= 2 * keep + 5 else repr(f"{text[:keep]} ... {text[-keep:]}")


def _parse(text: str) -> ast.expr:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse expression {_shown(text.strip())}: {exc.msg}", exc.offset or 1) from None
    except (RecursionError, MemoryError):
        raise ExprError(f"expression {_shown(text.strip())} is nested more than {MAX_EXPR_DEPTH} levels "
                        "deep") from None
    stack: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    while stack:  # no recursion: the depth check itself must not overflow the stack
        node, depth = stack.pop()
        if depth > MAX_EXPR_DEPTH:
            raise ExprError(f"expression {_shown(text.strip())} is nested more than {MAX_EXPR_DEPTH} levels "
                            "deep", getattr(node, "col_offset", 0) + 1)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree.body


def parse_expr(text: str, known: Callable[[str], bool], attrs: Collection[str] = ()) -> Expr:
    """Parse an elementwise expression; ``known(name)`` says whether a name may be used, ``attrs``
    which names are (scalar) attrs.

    Semantics (the same in the C++ and the numpy translation): arithmetic is done in the compute
    type ``C`` (the output's element type): literals and attrs are cast to it, so ``exp(-n)`` with
    an int attr ``n`` is computed in floating point for a float output; a comparison used as a
    value is ``1`` or ``0`` of that type (``dout * (x > 0)``); ``a if c else b`` picks per
    element, ``c`` being a comparison or any value (true when non-zero).

    Raises:
        ExprError: on syntax outside the subset, unknown names or functions, wrong arity.
    """
    body = _parse(text)
    names: list[str] = []
    computes: list[str] = []  # the functions (and ``**``) that make it more than memory-bound

    def go(node: ast.expr) -> tuple[str, str]:
        col = getattr(node, "col_offset", 0) + 1
        if isinstance(node, ast.Name):
            if node.id in FUNCTIONS:
                raise ExprError(f"'{node.id}' is a function; call it as {node.id}(...)", col)
            if not known(node.id):
                raise ExprError(f"unknown name '{node.id}'", col)
            if node.id not in names:
                names.append(node.id)
            return (f"C({node.id})" if node.id in attrs else node.id), node.id
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(
            node.value, bool
        ):
            try:
                value = float(node.value)
            except OverflowError:
                value = math.inf
            if not math.isfinite(value):
                raise ExprError(f"number {_shown(ast.get_source_segment(text.strip(), node) or str(node.value), 12)}"
                                " is too large (beyond float64)", col)
            return f"C({value!r})", repr(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            c, n = go(node.operand)
            op = "-" if isinstance(node.op, ast.USub) else "+"
            return f"({op}{c})", f"({op}{n})"
        if isinstance(node, ast.BinOp):
            lc, ln = go(node.left)
            rc, rn = go(node.right)
            if isinstance(node.op, ast.Pow):
                computes.append("**")
                return f"opgen::math::pow({lc}, {rc})", f"np.power({ln}, {rn})"
            sym = _BINOPS.get(type(node.op))
            if sym is None:
                raise ExprError(f"operator '{type(node.op).__name__}' is not supported; use + - * / **", col)
            if sym == "/":  # integer division by zero raises an error instead of SIGFPE
                return f"opgen::math::div({lc}, {rc})", f"({ln} {sym} {rn})"
            return f"({lc} {sym} {rc})", f"({ln} {sym} {rn})"
        if isinstance(node, ast.Compare):
            # A comparison used as a value is 1 or 0 in the compute type, in both languages, so
            # that `(x > 0) - (x < 0)` or `-(x > 0)` mean the same in C++ and numpy.
            tc, tn = compare(node)
            return f"C{tc}", f"np.where({tn}, 1.0, 0.0)"
        if isinstance(node, ast.IfExp):
            # The condition is a comparison (kept boolean) or any value (true when non-zero).
            tc, tn = compare(node.test) if isinstance(node.test, ast.Compare) else go(node.test)
            ac, an = go(node.body)
            bc, bn = go(node.orelse)
            if "opgen::math::div(" in ac + bc:
                # An integer division by zero throws: evaluate only the chosen arm.
                return f"({tc} ? C({ac}) : C({bc}))", f"np.where({tn}, {an}, {bn})"
            # Both arms evaluated, then one picked: branchless (the loop vectorises to a blend,
            # where a branch on random signs mispredicts half the time).
            return f"opgen::select({tc}, C({ac}), C({bc}))", f"np.where({tn}, {an}, {bn})"
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.keywords:
                raise ExprError("only calls like f(a, b) of the built-in functions are supported", col)
            fn = FUNCTIONS.get(node.func.id)
            if fn is None:
                raise ExprError(
                    f"unknown function '{node.func.id}'; supported: {', '.join(sorted(FUNCTIONS))}", col
                )
            arity, ctpl, ntpl = fn
            if node.func.id not in MEMORY_BOUND_FUNCTIONS:
                computes.append(node.func.id)
            if len(node.args) != arity:
                raise ExprError(f"{node.func.id}() takes {arity} argument(s), got {len(node.args)}", col)
            parts = [go(a) for a in node.args]
            return ctpl.format(*[p[0] for p in parts]), ntpl.format(*[p[1] for p in parts])
        raise ExprError(f"unsupported syntax '{ast.unparse(node)}' in expression", col)

    def compare(node: ast.Compare) -> tuple[str, str]:
        col = node.col_offset + 1
        if len(node.ops) != 1:
            raise ExprError("chained comparisons are not supported; use one comparison", col)
        sym = _CMPOPS.get(type(node.ops[0]))
        if sym is None:
            raise ExprError("only < <= > >= == != comparisons are supported", col)
        lc, ln = go(node.left)
        rc, rn = go(node.comparators[0])
        return f"({lc} {sym} {rc})", f"({ln} {sym} {rn})"

    cpp, npy = go(body)
    return Expr(text.strip(), tuple(names), cpp, npy, memory_bound=not computes)
